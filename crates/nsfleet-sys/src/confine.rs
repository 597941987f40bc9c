//! What a node's process gives up as it starts, after it has entered the node's
//! namespaces and before it execs: capabilities the node was not given (`capabilities`,
//! containerlab's `cap-drop`), the seccomp filter (see [`crate::seccomp`]), and with
//! `no-new-privileges`, the gain of any by exec. Each process of a node applies them
//! itself (its commands, what `restart` starts again, `nsfleet exec`): a process that
//! enters a user namespace gets every capability in it again, whatever its parent had.
//!
//! [`Restrictions::apply`] makes no allocation: it runs in a vfork child (see `spawn`).

use crate::check;
use std::io;

/// What a node's processes give up (told to `nsfleet exec` by the supervisor, as JSON).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Restrictions {
    /// The capabilities dropped, a bit per capability (CAP_CHOWN is bit 0): out of the
    /// bounding set, so that no exec gives them back, and gone at the next exec.
    pub drop_capabilities: u64,
    /// The seccomp filter.
    pub seccomp: Filter,
    /// no_new_privs: exec gains no privilege (setuid programs and file capabilities
    /// give none).
    pub no_new_privileges: bool,
}

/// A node's seccomp filter.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(from = "FilterText", into = "FilterText")]
pub enum Filter {
    #[default]
    None,
    /// Docker's default filter ([`crate::seccomp::filter`]).
    Docker,
    /// A profile of the node's own, compiled ([`crate::seccomp::intern`]).
    Profile(&'static [libc::sock_filter]),
}

impl PartialEq for Filter {
    fn eq(&self, o: &Filter) -> bool {
        match (self, o) {
            (Filter::Profile(a), Filter::Profile(b)) => std::ptr::eq(*a, *b),
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }
}

impl Eq for Filter {}

/// A [`Filter`] as JSON: a profile's program instruction by instruction, kept again in
/// the process that reads it.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
enum FilterText {
    None,
    Docker,
    Profile(Vec<(u16, u8, u8, u32)>),
}

impl From<Filter> for FilterText {
    fn from(f: Filter) -> FilterText {
        match f {
            Filter::None => FilterText::None,
            Filter::Docker => FilterText::Docker,
            Filter::Profile(p) => {
                FilterText::Profile(p.iter().map(|i| (i.code, i.jt, i.jf, i.k)).collect())
            }
        }
    }
}

impl From<FilterText> for Filter {
    fn from(f: FilterText) -> Filter {
        match f {
            FilterText::None => Filter::None,
            FilterText::Docker => Filter::Docker,
            FilterText::Profile(p) => Filter::Profile(crate::seccomp::intern(
                (p.into_iter())
                    .map(|(code, jt, jf, k)| libc::sock_filter { code, jt, jf, k })
                    .collect(),
            )),
        }
    }
}

/// `struct __user_cap_header_struct` and `__user_cap_data_struct` (linux/capability.h).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

impl Restrictions {
    /// Whether there is anything to give up.
    pub fn any(&self) -> bool {
        *self != Restrictions::default()
    }

    /// Gives them up, in the calling thread (a single-threaded process's, or a vfork
    /// child's). The filter first, while the caller still has CAP_SYS_ADMIN in its user
    /// namespace (which installing it without no_new_privs takes), and before any
    /// capability goes. Call [`crate::seccomp::filter`] before a vfork: it allocates once.
    pub fn apply(&self) -> io::Result<()> {
        match self.seccomp {
            Filter::None => {}
            Filter::Docker => crate::seccomp::install(crate::seccomp::filter())?,
            Filter::Profile(program) => crate::seccomp::install(program)?,
        }
        if self.drop_capabilities != 0 {
            drop_capabilities(self.drop_capabilities)?;
        }
        if self.no_new_privileges {
            // SAFETY: prctl(2) with integer arguments.
            check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })?;
        }
        Ok(())
    }
}

/// Drops `mask`'s capabilities from the calling thread's bounding, ambient and
/// inheritable sets: the next exec leaves it none of them (its permitted set is bounded
/// by the bounding set then). Its effective and permitted sets keep them until then, for
/// the steps between here and exec (set*id to an image's user takes CAP_SETUID even
/// where the node gives it up). Capabilities this kernel does not have are passed over.
fn drop_capabilities(mask: u64) -> io::Result<()> {
    for cap in 0..64 {
        if mask & (1 << cap) == 0 {
            continue;
        }
        // SAFETY: prctl(2) with integer arguments.
        match check(unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) }) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            r => r.map(drop)?,
        }
    }
    // SAFETY: prctl(2) with integer arguments; capget(2) and capset(2) on a header and
    // two data structs of this stack, as version 3 takes them.
    unsafe {
        let clear = libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong;
        libc::prctl(libc::PR_CAP_AMBIENT, clear, 0, 0, 0);
        let mut header = CapHeader {
            version: CAPABILITY_VERSION_3,
            pid: 0,
        };
        let mut data = [CapData::default(); 2];
        check(libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) as libc::c_int)?;
        for (i, d) in data.iter_mut().enumerate() {
            d.inheritable &= !((mask >> (32 * i)) as u32);
        }
        check(libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) as libc::c_int)?;
    }
    Ok(())
}

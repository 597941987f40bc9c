//! A confined node's seccomp filter: the system calls Docker's default profile refuses a
//! container that holds every capability over its own namespaces (as a node's root
//! does), refused with EPERM as Docker refuses them. What acts on the machine rather than
//! on a namespace: loading and unloading kernel modules, kexec, reboot, setting the
//! clocks, the kernel's keyrings, opening a file by handle (Docker's "shocker" escape),
//! swap, process accounting, the kernel log, userfaultfd and io_uring (the two a
//! kernel exploit starts from most), and calls of old ABIs. Most of them the user
//! namespace refuses already (the kernel asks for a capability in the host's); the
//! filter refuses them before the kernel's code for them runs at all.
//!
//! Everything a router does stays: mount, unshare and setns (its own namespaces, `ip
//! netns`), bpf and perf_event_open (which the kernel guards itself), ptrace.
//!
//! A node may have a profile of its own instead (Docker's format, read by
//! `nsfleet_topology::seccomp`): its rules, as [`Rule`]s, compiled by [`compile`] (the
//! encoding is `bpf.rs`'s) and kept once per distinct program by [`intern`].
//!
//! Only the machine's own ABI is allowed through: a 32-bit program (i386 on x86_64,
//! arm on aarch64) or x32's calls would reach the same kernel code under other numbers,
//! so they are refused whole. Nothing here may allocate once the filter is built: it is
//! installed in a vfork child (see `spawn`).

use crate::check;
use nsfleet_locks::{order, Mutex};
use std::io;
use std::sync::OnceLock;

/// The calls refused on every architecture, by libc's numbers for this one.
const REFUSED: &[libc::c_long] = &[
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_reboot,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_settimeofday,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_keyctl,
    libc::SYS_open_by_handle_at,
    libc::SYS_acct,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_syslog,
    libc::SYS_lookup_dcookie,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_nfsservctl,
];

/// And those only x86_64 has: port I/O, and calls of old ABIs.
#[cfg(target_arch = "x86_64")]
const REFUSED_HERE: &[libc::c_long] = &[
    libc::SYS_iopl,
    libc::SYS_ioperm,
    libc::SYS_uselib,
    libc::SYS_ustat,
    libc::SYS_sysfs,
    libc::SYS__sysctl,
];
#[cfg(target_arch = "aarch64")]
const REFUSED_HERE: &[libc::c_long] = &[];

/// The architecture the filter's numbers are for (linux/audit.h).
#[cfg(target_arch = "x86_64")]
const ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const ARCH: u32 = 0xc000_00b7;

/// x32's calls are x86_64's with this bit set, under x86_64's architecture.
#[cfg(target_arch = "x86_64")]
const X32_BIT: u32 = 0x4000_0000;
#[cfg(target_arch = "aarch64")]
const X32_BIT: u32 = 0;

mod bpf;
mod names;

pub use bpf::MAX_INSTRUCTIONS;

pub use nsfleet_values::{SeccompAction as Action, SeccompArg as ArgCmp, SeccompCmp as CmpOp};

/// The filter's return value for `action` (linux/seccomp.h).
fn ret(action: Action) -> u32 {
    match action {
        Action::KillProcess => 0x8000_0000,
        Action::KillThread => 0,
        Action::Trap => 0x0003_0000,
        Action::Errno(e) => 0x0005_0000 | e as u32,
        Action::Log => 0x7ffc_0000,
        Action::Allow => 0x7fff_0000,
    }
}

/// A call's action where every condition holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub nr: u32,
    pub action: Action,
    pub args: Vec<ArgCmp>,
}

/// The number of the system call `name` on this machine's architecture, if it has one.
pub fn number(name: &str) -> Option<u32> {
    (names::NAMES.binary_search_by(|(n, _)| n.cmp(&name)))
        .ok()
        .map(|i| names::NAMES[i].1)
}

/// This machine's architecture as seccomp profiles name it: libseccomp's name, and Go's,
/// which Docker's `includes` and `excludes` use.
#[cfg(target_arch = "x86_64")]
pub const ARCH_NAMES: &[&str] = &["SCMP_ARCH_X86_64", "amd64", "x86_64"];
#[cfg(target_arch = "aarch64")]
pub const ARCH_NAMES: &[&str] = &["SCMP_ARCH_AARCH64", "arm64", "aarch64"];

/// A filter of `rules` (a call's rules in the order they are tried: give each call's most
/// restrictive first), `default` for every other call of this machine's ABI but those
/// numbered above `enosys_above`, which get ENOSYS; the calls of another ABI refused with
/// EPERM, as by Docker's filter. Refused where the kernel would refuse it: longer than
/// [`MAX_INSTRUCTIONS`].
pub fn compile(
    default: Action,
    rules: &[Rule],
    enosys_above: Option<u32>,
) -> io::Result<Vec<libc::sock_filter>> {
    let eperm = Action::Errno(libc::EPERM as u16);
    let newer = enosys_above.map(|nr| (nr, Action::Errno(libc::ENOSYS as u16)));
    let program = bpf::compile(ARCH, X32_BIT, eperm, default, rules, newer);
    if program.len() > MAX_INSTRUCTIONS {
        return Err(io::Error::other(format!(
            "its filter would be {} instructions, over the kernel's {MAX_INSTRUCTIONS}",
            program.len()
        )));
    }
    Ok(program)
}

/// Docker's filter's program, built once.
pub fn filter() -> &'static [libc::sock_filter] {
    static PROGRAM: OnceLock<Vec<libc::sock_filter>> = OnceLock::new();
    PROGRAM.get_or_init(|| {
        let refused = (REFUSED.iter().chain(REFUSED_HERE)).map(|&nr| Rule {
            nr: nr as u32,
            action: Action::Errno(libc::EPERM as u16),
            args: Vec::new(),
        });
        compile(Action::Allow, &refused.collect::<Vec<_>>(), None).expect("Docker's filter fits")
    })
}

/// `program` kept for the rest of the process, once per distinct program: what a node's
/// [`crate::confine::Restrictions`] point at (they are copied into every spawn).
pub fn intern(program: Vec<libc::sock_filter>) -> &'static [libc::sock_filter] {
    /// Every program kept so far.
    static KEPT: Mutex<Vec<&'static [libc::sock_filter]>> =
        Mutex::new(order::SECCOMP_KEPT, Vec::new());
    let same = |a: &[libc::sock_filter]| {
        a.len() == program.len()
            && (a.iter().zip(&program))
                .all(|(x, y)| (x.code, x.jt, x.jf, x.k) == (y.code, y.jt, y.jf, y.k))
    };
    let mut kept = KEPT.lock();
    if let Some(p) = kept.iter().find(|p| same(p)) {
        return p;
    }
    let p: &'static [libc::sock_filter] = Vec::leak(program);
    kept.push(p);
    p
}

const SECCOMP_SET_MODE_FILTER: libc::c_uint = 1;

/// Installs `program` (from [`filter`]) on the calling thread and whatever it execs.
/// Needs CAP_SYS_ADMIN in the caller's user namespace, or no_new_privs. Makes no
/// allocation: safe in a vfork child.
pub fn install(program: &[libc::sock_filter]) -> io::Result<()> {
    let prog = libc::sock_fprog {
        len: program.len() as libc::c_ushort,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: seccomp(2) reads `prog` and the program it points to, both alive for the
    // call; the kernel copies them.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_SET_MODE_FILTER,
            0u32,
            &prog as *const libc::sock_fprog,
        )
    };
    check(rc as libc::c_int).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `call` gives in a child that installed `program` first.
    fn under(program: &'static [libc::sock_filter], call: fn() -> i64) -> (i64, i32) {
        let mut pipe = [0; 2];
        // SAFETY: pipe(2) into an array of two; fork(2) in a test, whose child only
        // makes system calls and _exits; read(2) into a local array.
        unsafe {
            assert_eq!(libc::pipe(pipe.as_mut_ptr()), 0);
            let pid = libc::fork();
            if pid == 0 {
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                let got = match install(program) {
                    Ok(()) => [call(), *libc::__errno_location() as i64],
                    Err(_) => [-2, 0],
                };
                libc::write(pipe[1], got.as_ptr().cast(), 16);
                libc::_exit(0);
            }
            let mut got = [0i64; 2];
            libc::read(pipe[0], got.as_mut_ptr().cast(), 16);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
            libc::close(pipe[0]);
            libc::close(pipe[1]);
            (got[0], got[1] as i32)
        }
    }

    #[test]
    fn dockers_filter_refuses_its_calls_and_no_other() {
        // SAFETY: system calls on no memory of ours.
        let keyctl = || unsafe { libc::syscall(libc::SYS_keyctl, 0, 0, 0, 0, 0) };
        let getpid = || unsafe { libc::syscall(libc::SYS_getpid) };
        assert_eq!(under(filter(), keyctl), (-1, libc::EPERM));
        assert!(under(filter(), getpid).0 > 0);
    }

    #[test]
    fn a_profiles_rules_decide_by_number_and_arguments() {
        let nr = |n: &str| number(n).unwrap();
        assert_eq!(number("getpid"), Some(libc::SYS_getpid as u32));
        assert_eq!(number("no_such_call"), None);
        let rules = [
            Rule {
                nr: nr("getppid"),
                action: Action::Errno(libc::EACCES as u16),
                args: Vec::new(),
            },
            Rule {
                nr: nr("kill"),
                action: Action::Errno(libc::EROFS as u16),
                args: vec![ArgCmp {
                    index: 1,
                    op: CmpOp::Eq,
                    value: 0,
                    value_two: 0,
                }],
            },
        ];
        let program = intern(compile(Action::Allow, &rules, None).unwrap());
        assert!(std::ptr::eq(
            program,
            intern(compile(Action::Allow, &rules, None).unwrap())
        ));
        // SAFETY: system calls on no memory of ours; kill with signal 0 sends nothing.
        let getppid = || unsafe { libc::syscall(libc::SYS_getppid) };
        let probe = || unsafe { libc::syscall(libc::SYS_kill, libc::getpid(), 0) };
        let term = || unsafe { libc::syscall(libc::SYS_kill, -999_999, libc::SIGCONT) };
        assert_eq!(under(program, getppid), (-1, libc::EACCES));
        assert_eq!(under(program, probe), (-1, libc::EROFS));
        assert_eq!(under(program, term), (-1, libc::ESRCH), "another signal");
    }

    #[test]
    fn an_allow_list_refuses_what_it_does_not_name() {
        let allowed = ["getpid", "write", "exit_group", "exit"];
        let rules: Vec<Rule> = (allowed.iter())
            .map(|n| Rule {
                nr: number(n).unwrap(),
                action: Action::Allow,
                args: Vec::new(),
            })
            .collect();
        let newest = rules.iter().map(|r| r.nr).max();
        let refused = Action::Errno(libc::EPERM as u16);
        let program = intern(compile(refused, &rules, newest).unwrap());
        // SAFETY: system calls on no memory of ours.
        let getpid = || unsafe { libc::syscall(libc::SYS_getpid) };
        let getppid = || unsafe { libc::syscall(libc::SYS_getppid) };
        assert!(under(program, getpid).0 > 0);
        assert_eq!(under(program, getppid), (-1, libc::EPERM));
        // Newer than every call named (exit_group, 231): ENOSYS, as runc gives it.
        let getrandom = || unsafe { libc::syscall(libc::SYS_getrandom, 0, 0, 0) };
        assert_eq!(under(program, getrandom), (-1, libc::ENOSYS));
    }
}

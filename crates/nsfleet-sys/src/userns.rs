//! User namespaces: a confined node's, made with its network namespace; telling whether a
//! namespace is owned by one; entering one as its root; and mounts seen through one's ids.
//!
//! A namespace belongs to the user namespace of the process that made it, for ever: a
//! network namespace whose root is to have CAP_NET_ADMIN over it and nothing over the
//! host must be made inside the user namespace, not moved there later.

use crate::check;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Ids `0..count` inside a user namespace are `first..first + count` outside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdRange {
    pub first: u32,
    pub count: u32,
}

impl IdRange {
    /// The lines /proc/PID/uid_map and gid_map take for it. A range from id 0 of a
    /// user's namespace is written as its root and the rest: the kernel takes a line only
    /// within one line of the parent's map, and a user's has their own id first and
    /// their subordinate ones after it.
    fn map_line(&self) -> String {
        match (self.first, self.count) {
            (0, 2..) => format!("0 0 1\n1 1 {}\n", self.count - 1),
            (first, count) => format!("0 {first} {count}\n"),
        }
    }
}

/// The stack of the child that only holds the new namespaces while the caller opens them.
const HOLDER_STACK: usize = 16 << 10;

/// What a holder ([`hold`]) does before it sleeps, and how it went.
struct HolderWork {
    /// A user namespace to enter first (as [`become_root_in`] does), or -1.
    enter: libc::c_int,
    /// Whether it then makes a new PID namespace for its children (none are made: the
    /// caller's next child, once it enters it, is its init).
    new_pid: bool,
    /// 1 once done, -1 if it failed; 0 until then.
    done: std::sync::atomic::AtomicI32,
}

/// The child of [`held`]: does its work, says so, and sleeps until it is killed. Only
/// syscalls, on its own stack: it shares the caller's memory.
extern "C" fn hold(arg: *mut libc::c_void) -> libc::c_int {
    use std::sync::atomic::Ordering;
    // SAFETY: `arg` is the caller's HolderWork, alive until the caller has killed us.
    let work = unsafe { &*(arg as *const HolderWork) };
    // SAFETY: setns(2) and unshare(2) on an integer and flags. On failure glibc writes
    // errno, an int in the calling thread's TLS, which this child shares: the caller may
    // then see a wrong errno for a call of its own in that instant; no memory is at risk.
    let rc = unsafe {
        let mut rc = 0;
        if work.enter >= 0 {
            rc = libc::setns(work.enter, libc::CLONE_NEWUSER);
        }
        if rc == 0 && work.new_pid {
            rc = libc::unshare(libc::CLONE_NEWPID);
        }
        rc
    };
    // Not errno: this child shares the caller's thread's memory, its errno included,
    // which the caller's thread may be using.
    work.done
        .store(if rc == 0 { 1 } else { -1 }, Ordering::Release);
    // SAFETY: futex(2) FUTEX_WAKE on the caller's atomic, which outlives us (see above).
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            work.done.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        )
    };
    loop {
        // SAFETY: pause(2) takes nothing.
        unsafe { libc::pause() };
    }
}

/// Runs `work` in a child clone(2)d with `flags` (sharing our memory, on a small stack,
/// and our descriptor table, so that nothing is copied), then `then` with a pidfd of it,
/// then kills and reaps it. What a namespace needs to be made in another user namespace:
/// a process there.
fn held<T>(
    flags: libc::c_int,
    work: HolderWork,
    then: impl FnOnce(BorrowedFd<'_>) -> io::Result<T>,
) -> io::Result<T> {
    use std::sync::atomic::Ordering;
    let mut stack = vec![0u8; HOLDER_STACK];
    let end = stack.as_mut_ptr_range().end as usize & !15;
    let arg = &work as *const HolderWork as *mut libc::c_void;
    // SAFETY: clone(2) through glibc's wrapper, running `hold` on `end`, the top of a
    // stack that outlives the child: it is killed and reaped below before `stack` and
    // `work` go. `hold` touches no memory but its stack and `work`'s atomic. No exit
    // signal: the supervisor's reaper of orphans (waitid without __WALL) never takes it;
    // it is reaped here with __WALL. The descriptor table shared: a copy costs a
    // reference per descriptor the supervisor holds (one per node and more), taken at
    // the clone and dropped at the kill (measured: 0.2 ms a node at 1,000 nodes).
    let shared = libc::CLONE_VM | libc::CLONE_FILES;
    let pid = unsafe { libc::clone(hold, end as *mut libc::c_void, shared | flags, arg) };
    if pid < 0 {
        return Err(refused(io::Error::last_os_error()));
    }
    let result = (|| {
        let pidfd = crate::pidfd_open(pid)?;
        let mut said = work.done.load(Ordering::Acquire);
        while said == 0 {
            // Woken by the child once it is done: a sleep of 20 µs between looks cost
            // 70 µs or more (the timer's slack) of the 0.2 ms a holder took.
            let most = libc::timespec {
                tv_sec: 0,
                tv_nsec: 1_000_000,
            };
            // SAFETY: futex(2) FUTEX_WAIT on our own atomic, which the child shares; it
            // returns at once if the value is no longer 0, and after `most` at worst.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    work.done.as_ptr(),
                    libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                    0,
                    &most as *const libc::timespec,
                )
            };
            said = work.done.load(Ordering::Acquire);
        }
        if said < 0 {
            return Err(io::Error::other(
                "entering a user namespace or making a PID namespace in it failed",
            ));
        }
        then(pidfd.as_fd())
    })();
    // SAFETY: kill(2) and waitpid(2) of our own child, with a valid status pointer.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, &mut 0, libc::__WALL);
    }
    drop(stack);
    result
}

/// A refusal of a new user namespace, said with the setting that refuses it.
fn refused(e: io::Error) -> io::Error {
    let why = match e.raw_os_error() {
        Some(libc::ENOSPC) => "user.max_user_namespaces is reached: the kernel refuses more user namespaces for this user (sysctl user.max_user_namespaces; or --privileged)",
        Some(libc::EPERM) => "the kernel refuses a new user namespace here (or --privileged)",
        _ => return e,
    };
    io::Error::new(e.kind(), format!("{why}: {e}"))
}

/// A new user namespace whose ids are `ids`, and a new network namespace it owns: the
/// pair a confined node is made of. Returns (user namespace, network namespace).
pub fn new_user_and_net(ids: IdRange) -> io::Result<(OwnedFd, OwnedFd)> {
    new_user_and_net_mapped(|pid| {
        std::fs::write(format!("/proc/{pid}/uid_map"), ids.map_line())?;
        std::fs::write(format!("/proc/{pid}/gid_map"), ids.map_line())
    })
}

/// As [`new_user_and_net`], the ids given by `map` with the pid (in /proc's PID
/// namespace) of a process in the new user namespace: a user, who may not write any
/// range, maps only their own id or has `newuidmap` write theirs (see
/// [`map_own_id`]).
pub fn new_user_and_net_mapped(
    map: impl FnOnce(i64) -> io::Result<()>,
) -> io::Result<(OwnedFd, OwnedFd)> {
    let work = HolderWork {
        enter: -1,
        new_pid: false,
        done: 0.into(),
    };
    held(libc::CLONE_NEWUSER | libc::CLONE_NEWNET, work, |pidfd| {
        // Our pid for it is of our PID namespace; /proc may be another's (the host's,
        // in a supervisor): the pidfd's says the host's.
        let pid = crate::host_pid_of(pidfd)
            .ok_or_else(|| io::Error::other("the holder of a new namespace has no pid"))?;
        map(pid)?;
        let user = namespace_of(pidfd, PIDFD_GET_USER_NAMESPACE)?;
        let net = namespace_of(pidfd, PIDFD_GET_NET_NAMESPACE)?;
        Ok((user, net))
    })
}

/// Maps the caller's own uid and gid, and no other, as root of the user namespace of
/// process `pid`: what the kernel lets any user do. Supplementary groups are then
/// refused in it (setgroups "deny"), as the kernel requires before an unprivileged
/// gid_map, so that no one drops a group that denies them a file.
pub fn map_own_id(pid: i64) -> io::Result<()> {
    let (uid, gid) = crate::real_ids();
    std::fs::write(format!("/proc/{pid}/setgroups"), "deny")?;
    std::fs::write(format!("/proc/{pid}/uid_map"), format!("0 {uid} 1\n"))?;
    std::fs::write(format!("/proc/{pid}/gid_map"), format!("0 {gid} 1\n"))
}

/// The ids of the calling process's user namespace as (inside, outside, count) lines of
/// /proc/self/uid_map (`gid` false) or gid_map: in the host's, `0 0 4294967295`.
pub fn own_map(gid: bool) -> io::Result<Vec<(u32, u32, u32)>> {
    let text = std::fs::read_to_string(if gid {
        "/proc/self/gid_map"
    } else {
        "/proc/self/uid_map"
    })?;
    Ok(parse_map(&text))
}

fn parse_map(text: &str) -> Vec<(u32, u32, u32)> {
    text.lines()
        .filter_map(|l| {
            let mut n = l.split_whitespace().map(|w| w.parse::<u32>().ok());
            Some((n.next()??, n.next()??, n.next()??))
        })
        .collect()
}

/// Whether the calling process is in the host's user namespace, the one every id is
/// mapped in: where a user is not root, and root is the machine's.
pub fn in_host_namespace() -> io::Result<bool> {
    Ok(own_map(false)? == [(0, 0, u32::MAX)])
}

/// Enters a user namespace made by [`new_user_and_net_mapped`] as its root, and its
/// network namespace, and gets mount, UTS and IPC namespaces of its own, which that user
/// namespace owns: the calling process is then root of a world of its own, as `unshare
/// -Urnm` makes it, every one of whose namespaces it may enter again (the host's it may
/// not). Mounts made below it propagate no further. Its cgroup namespace stays the
/// caller's: there a cgroup v2 subtree delegated to the user is seen whole, and groups
/// may be made and joined anywhere below it (a namespace of its own would confine them
/// to the caller's group). For a process of one thread (see [`become_root_in`]).
pub fn become_root_of(user: BorrowedFd<'_>, net: BorrowedFd<'_>) -> io::Result<()> {
    become_root_in(user)?;
    crate::setns_net(net)?;
    let own = libc::CLONE_NEWNS | libc::CLONE_NEWUTS | libc::CLONE_NEWIPC;
    // SAFETY: unshare(2) with flags, in a process of one thread.
    check(unsafe { libc::unshare(own) }).map(drop)
}

/// A new PID namespace owned by the user namespace `userns`, with no process yet: the
/// next child of a thread that enters it (setns CLONE_NEWPID) is its init. A confined
/// node's init must be that, for the node's root to mount its /proc; made by a holder
/// that enters the user namespace, where a thread of ours could not (a process of
/// threads may not enter one), and without forking a copy of our memory to do it.
pub fn new_pid_ns_in(userns: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let work = HolderWork {
        enter: userns.as_raw_fd(),
        new_pid: true,
        done: 0.into(),
    };
    held(0, work, |pidfd| {
        namespace_of(pidfd, PIDFD_GET_PID_FOR_CHILDREN_NAMESPACE)
    })
}

/// `PIDFD_GET_*_NAMESPACE` (linux/pidfd.h, Linux 6.11): a namespace of a pidfd's process.
const PIDFD_GET_NET_NAMESPACE: libc::c_ulong = 0xff04;
const PIDFD_GET_PID_FOR_CHILDREN_NAMESPACE: libc::c_ulong = 0xff06;
const PIDFD_GET_USER_NAMESPACE: libc::c_ulong = 0xff09;
const PIDFD_GET_CGROUP_NAMESPACE: libc::c_ulong = 0xff01;

/// The namespace `request` names of the process behind `pidfd`.
fn namespace_of(pidfd: BorrowedFd<'_>, request: libc::c_ulong) -> io::Result<OwnedFd> {
    // SAFETY: ioctl(2) on a borrowed pidfd; the request takes no argument and returns a
    // new descriptor, which is ours.
    let fd = check(unsafe { libc::ioctl(pidfd.as_raw_fd(), request, 0) })?;
    // SAFETY: a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `NS_GET_USERNS` (linux/nsfs.h): the user namespace that owns a namespace.
const NS_GET_USERNS: libc::c_ulong = 0xb701;

/// The user namespace that owns the namespace behind `ns`.
pub fn owner(ns: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // SAFETY: ioctl(2) on a descriptor borrowed for the call; NS_GET_USERNS takes no
    // argument and returns a new descriptor, which is ours.
    let fd = check(unsafe { libc::ioctl(ns.as_raw_fd(), NS_GET_USERNS, 0) })?;
    // SAFETY: a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The user namespace that owns the namespace behind `ns`, if it is another than the
/// calling process's own: a confined node's.
pub fn owner_if_other(ns: BorrowedFd<'_>) -> io::Result<Option<OwnedFd>> {
    unless_ours(owner(ns)?)
}

/// The user namespace of the process behind `pidfd`, if it is another than ours: the
/// node whose init it is, is confined.
pub fn of_process(pidfd: BorrowedFd<'_>) -> io::Result<Option<OwnedFd>> {
    unless_ours(namespace_of(pidfd, PIDFD_GET_USER_NAMESPACE)?)
}

/// The cgroup namespace of the process behind `pidfd`: a descriptor another process may
/// enter with no right to trace that one (entering through the pidfd would need it, and
/// a confined node's root has none over its init).
pub fn cgroup_ns_of(pidfd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    namespace_of(pidfd, PIDFD_GET_CGROUP_NAMESPACE)
}

/// `userns`, unless it is the calling process's own user namespace.
fn unless_ours(userns: OwnedFd) -> io::Result<Option<OwnedFd>> {
    let ours = std::fs::metadata("/proc/self/ns/user")?;
    let same = crate::inode_of(userns.as_fd())? == std::os::unix::fs::MetadataExt::ino(&ours);
    Ok((!same).then_some(userns))
}

/// Moves the calling process into the user namespace `ns` (by its descriptor, or a pidfd
/// of a process in it) as its root, with no supplementary group where the namespace lets
/// its root change them (a user's own one-id namespace, setgroups "deny", keeps the
/// user's: dropping one could open a file it denies them). Only for a process with
/// one thread that shares no filesystem information (a forked child): the kernel refuses
/// others. Straight to the kernel: glibc's set*id would signal threads of a parent whose
/// memory a vfork child shares.
pub fn become_root_in(ns: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: setns(2) on a borrowed descriptor, and set*id syscalls on integers and a
    // null group list.
    unsafe {
        check(libc::setns(ns.as_raw_fd(), libc::CLONE_NEWUSER))?;
        let none: *const libc::gid_t = std::ptr::null();
        // Root of the namespace now, with every capability in it: EPERM is "deny".
        let rc = libc::syscall(libc::SYS_setgroups, 0, none) as libc::c_int;
        if rc != 0 && *libc::__errno_location() != libc::EPERM {
            return Err(io::Error::last_os_error());
        }
        check(libc::syscall(libc::SYS_setresgid, 0, 0, 0) as libc::c_int)?;
        check(libc::syscall(libc::SYS_setresuid, 0, 0, 0) as libc::c_int)?;
    }
    Ok(())
}

/// `mount_setattr(2)`'s argument and flags (linux/mount.h), which libc does not name.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// Makes the detached mount `tree` (see [`crate::clone_tree`]) show its files' owners
/// through the ids of the user namespace `ns`: a file of uid 0 on disk is its root's.
/// An image's layers are kept on disk as the image says, and each fleet sees them as its
/// own ids, with no copy and no chown.
pub fn idmap_tree(tree: BorrowedFd<'_>, ns: BorrowedFd<'_>) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_IDMAP,
        attr_clr: 0,
        propagation: 0,
        userns_fd: ns.as_raw_fd() as u64,
    };
    // SAFETY: mount_setattr(2) on a borrowed descriptor with an empty path, and a
    // pointer to `attr` with its size.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        ) as libc::c_int
    })
    .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_from_a_users_root_is_written_as_their_root_and_the_rest() {
        let ids = |first, count| IdRange { first, count }.map_line();
        assert_eq!(ids(0x7000_0000, 65_536), "0 1879048192 65536\n");
        assert_eq!(ids(0, 1), "0 0 1\n");
        assert_eq!(ids(0, 65_536), "0 0 1\n1 1 65535\n");
        let map = "         0       1001          1\n         1     100000      65536\n";
        assert_eq!(parse_map(map), [(0, 1001, 1), (1, 100_000, 65_536)]);
    }

    #[test]
    fn a_new_user_namespace_owns_its_network_namespace_and_maps_its_root() {
        let ids = IdRange {
            first: 0x7fff_0000,
            count: 65_536,
        };
        let (user, net) = new_user_and_net(ids).unwrap();
        let owner = owner_if_other(net.as_fd())
            .unwrap()
            .expect("another user namespace");
        assert_eq!(
            crate::inode_of(owner.as_fd()).unwrap(),
            crate::inode_of(user.as_fd()).unwrap()
        );
    }
}

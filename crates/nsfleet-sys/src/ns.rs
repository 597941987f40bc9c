//! Network namespaces: create, enter, identify (inode, nsfs handle), explain refusals.

use crate::check;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// Moves the calling thread (only it: namespaces are per task) into a new network namespace.
pub fn unshare_net() -> io::Result<()> {
    // SAFETY: unshare(2) takes no pointers; CLONE_NEWNET affects only the calling thread.
    check(unsafe { libc::unshare(libc::CLONE_NEWNET) }).map(drop)
}

/// Moves the calling thread into the network namespace behind `fd`.
pub fn setns_net(fd: BorrowedFd<'_>) -> io::Result<()> {
    crate::world::setns(fd, libc::CLONE_NEWNET)
}

/// A descriptor for the calling thread's current network namespace. It holds a reference
/// to the namespace: the namespace lives at least as long as the descriptor.
pub fn current_netns() -> io::Result<OwnedFd> {
    open_cloexec(c"/proc/thread-self/ns/net")
}

fn open_cloexec(path: &std::ffi::CStr) -> io::Result<OwnedFd> {
    // SAFETY: path is NUL-terminated; the descriptor is checked and then owned.
    let fd = check(unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) })?;
    // SAFETY: fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The inode number of a namespace descriptor: the namespace's identity, as shown in
/// `/proc/PID/ns/net` (`net:[INODE]`).
pub fn inode_of(fd: BorrowedFd<'_>) -> io::Result<u64> {
    // SAFETY: stat is plain data filled by fstat(2).
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor and a valid out-pointer.
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st.st_ino)
}

/// Why the kernel refused a new network namespace, in the words of the limit that did it.
pub fn explain_new_namespace(e: io::Error) -> io::Error {
    let why = match e.raw_os_error() {
        Some(libc::ENOSPC) => "user.max_net_namespaces is reached: the kernel refuses more network namespaces for this user (sysctl user.max_net_namespaces)",
        Some(libc::ENOMEM) => "the kernel is out of memory for another namespace",
        Some(libc::EMFILE) | Some(libc::ENFILE) => "out of file descriptors (RLIMIT_NOFILE, or fs.file-max machine-wide)",
        Some(libc::EPERM) => "not permitted: creating network namespaces needs root (CAP_SYS_ADMIN)",
        _ => return e,
    };
    io::Error::new(e.kind(), format!("{why}: {e}"))
}

/// A weak reference to a namespace: its nsfs file handle (Linux 6.18+). Unlike the inode
/// number, which the kernel hands to the next namespace as soon as this one is gone, the
/// handle names this namespace only, and holding it keeps nothing alive.
#[derive(Clone, PartialEq, Eq)]
#[repr(C)]
pub struct NsHandle {
    bytes: u32,
    kind: i32,
    data: [u8; 24],
}

impl NsHandle {
    /// The namespace's inode number, which nsfs puts in its handles after the 64-bit
    /// namespace id and the type (`struct nsfs_file_handle`).
    pub fn inode(&self) -> Option<u64> {
        (self.bytes >= 16).then(|| u32::from_ne_bytes(self.data[12..16].try_into().unwrap()) as u64)
    }
}

/// The file handle of a namespace descriptor; `Unsupported` on kernels without nsfs handles.
pub fn ns_handle(ns: BorrowedFd<'_>) -> io::Result<NsHandle> {
    let mut h = NsHandle {
        bytes: 24,
        kind: 0,
        data: [0; 24],
    };
    let mut mount_id = 0;
    // SAFETY: `h` is a struct file_handle with room for `bytes` bytes of handle; the
    // kernel writes at most that much, and mount_id is a valid out-integer.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_name_to_handle_at,
            ns.as_raw_fd(),
            c"".as_ptr(),
            &mut h as *mut NsHandle,
            &mut mount_id as *mut libc::c_int,
            libc::AT_EMPTY_PATH,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(h)
}

/// Reopens the namespace behind `h`, or `None` once nothing holds it any more (ESTALE).
/// `nsfs` is any namespace descriptor: it names the filesystem the handle belongs to.
/// Not everywhere: this machine class's kernel (6.18.44-fc-v1252) answers ESTALE to a
/// caller in a PID namespace of its own (a fleet's supervisor) for a namespace that
/// only processes of other PID namespaces hold; where that matters, `None` is a
/// suspicion, not a proof (see nsfleet-core's reaper).
pub fn reopen_ns(nsfs: BorrowedFd<'_>, h: &NsHandle) -> io::Result<Option<OwnedFd>> {
    let mut h = h.clone();
    // SAFETY: `h` is a valid struct file_handle as name_to_handle_at filled it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_by_handle_at,
            nsfs.as_raw_fd(),
            &mut h as *mut NsHandle,
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::ESTALE) {
            Ok(None)
        } else {
            Err(e)
        };
    }
    // SAFETY: fresh descriptor owned by nobody else.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) }))
}

/// A path to the calling thread's network namespace that other threads can open. Ids
/// are read from /proc's own `thread-self` link: inside the supervisor's PID namespace
/// gettid() answers in that namespace, while /proc counts in the host's.
pub fn thread_netns_path() -> io::Result<std::path::PathBuf> {
    let me = std::fs::read_link("/proc/thread-self")?;
    Ok(std::path::Path::new("/proc").join(me).join("ns/net"))
}

/// The process's own network namespace (its main thread's), whichever thread asks.
pub fn open_process_netns() -> io::Result<OwnedFd> {
    open_cloexec(c"/proc/self/ns/net")
}

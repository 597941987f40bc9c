//! Files below a directory descriptor, the mount namespace of `exec`, descriptor tables,
//! and the file primitives std lacks: flock(2), device and FIFO nodes, extended attributes.

use crate::check;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Like `ip netns exec`: a private mount namespace with /sys remounted, so that
/// /sys/class/net shows the interfaces of the network namespace we just entered.
pub fn remount_sys_for_netns() -> io::Result<()> {
    unshare_mounts(0, libc::MS_SLAVE)?;
    remount_sys()
}

/// Moves the calling process (single-threaded) into a new mount namespace, and into new
/// namespaces of the types `also` names (`CLONE_NEWUTS`), with every mount given
/// `propagation`: `MS_SLAVE` (the host's new mounts still appear, ours never reach it) or
/// `MS_PRIVATE` (nothing crosses either way).
pub fn unshare_mounts(also: libc::c_int, propagation: libc::c_ulong) -> io::Result<()> {
    // SAFETY: unshare(2) with flags and mount(2) with static NUL-terminated strings.
    unsafe {
        check(libc::unshare(libc::CLONE_NEWNS | also))?;
        check(libc::mount(
            c"none".as_ptr(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | propagation,
            std::ptr::null(),
        ))?;
    }
    Ok(())
}

/// /sys mounted afresh, for the network namespace the caller is in now (sysfs shows the
/// interfaces of the namespace that mounts it).
pub fn remount_sys() -> io::Result<()> {
    crate::world::detach("/sys")?;
    crate::world::mount_fs("sysfs", "/sys", "")
}

/// Opens a directory (for `*at` calls below it).
pub fn open_dir(path: &std::ffi::CStr) -> io::Result<OwnedFd> {
    // SAFETY: path is NUL-terminated; the descriptor is checked and then owned.
    let fd = check(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens the file `path` below `dir` with `flags` (`O_RDONLY`, `O_WRONLY`).
fn open_at(dir: BorrowedFd<'_>, path: &str, flags: libc::c_int) -> io::Result<std::fs::File> {
    let c = CString::new(path).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: c is NUL-terminated and dir is a valid directory descriptor.
    let fd = check(unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags | libc::O_CLOEXEC) })?;
    // SAFETY: fresh descriptor owned from here on.
    Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Writes `data` to the file `path` below `dir` (which must exist), in one write: a
/// sysctl takes the value of one write whole.
pub fn write_at(dir: BorrowedFd<'_>, path: &str, data: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let n = open_at(dir, path, libc::O_WRONLY)?.write(data)?;
    if n != data.len() {
        return Err(io::Error::from(io::ErrorKind::WriteZero));
    }
    Ok(())
}

/// Reads the file `path` below `dir`, whole.
pub fn read_at(dir: BorrowedFd<'_>, path: &str) -> io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    open_at(dir, path, libc::O_RDONLY)?.read_to_string(&mut text)?;
    Ok(text)
}

/// Gives the calling thread a file-descriptor table of its own (a copy), then closes in
/// that copy every descriptor from `keep_below` up. The rest of the process keeps its table.
pub fn private_fd_table(keep_below: u32) -> io::Result<()> {
    // SAFETY: unshare(2) and close_range(2) take plain integers; after CLONE_FILES they act
    // on this thread's own copy of the table only, which nothing else in the process sees.
    unsafe {
        check(libc::unshare(libc::CLONE_FILES))?;
        if libc::syscall(libc::SYS_close_range, keep_below, u32::MAX, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A path as the C string a syscall takes (a path with a NUL byte is invalid input).
fn c_path(path: &std::path::Path) -> io::Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// What [`flock`] does to a file's lock: take it shared or exclusive, waiting for it or
/// failing at once with `ErrorKind::WouldBlock`, or let go of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlockOp {
    Shared,
    SharedNoWait,
    Exclusive,
    ExclusiveNoWait,
    Unlock,
}

/// flock(2): the lock belongs to the open file description, so a forked child that
/// inherits the descriptor shares it, and it goes when the last descriptor closes (a
/// process killed by SIGKILL lets go of it).
pub fn flock(fd: BorrowedFd<'_>, op: FlockOp) -> io::Result<()> {
    let operation = match op {
        FlockOp::Shared => libc::LOCK_SH,
        FlockOp::SharedNoWait => libc::LOCK_SH | libc::LOCK_NB,
        FlockOp::Exclusive => libc::LOCK_EX,
        FlockOp::ExclusiveNoWait => libc::LOCK_EX | libc::LOCK_NB,
        FlockOp::Unlock => libc::LOCK_UN,
    };
    // SAFETY: flock(2) on a descriptor the caller borrows for the call, with plain flags.
    check(unsafe { libc::flock(fd.as_raw_fd(), operation) })?;
    Ok(())
}

/// mknod(2) of a character device `major`/`minor` with permissions `perm` (an overlayfs
/// whiteout is the device 0/0). Fails if `path` exists; never follows a final symlink.
pub fn make_char_device(
    path: &std::path::Path,
    perm: u32,
    major: u32,
    minor: u32,
) -> io::Result<()> {
    let c = c_path(path)?;
    let dev = libc::makedev(major, minor);
    let mode = libc::S_IFCHR | (perm & 0o7777) as libc::mode_t;
    // SAFETY: c is NUL-terminated and outlives the call; mode and dev are plain integers.
    check(unsafe { libc::mknod(c.as_ptr(), mode, dev) })?;
    Ok(())
}

/// mknod(2) of a FIFO with permissions `perm`. Fails if `path` exists.
pub fn make_fifo(path: &std::path::Path, perm: u32) -> io::Result<()> {
    let c = c_path(path)?;
    let mode = libc::S_IFIFO | (perm & 0o7777) as libc::mode_t;
    // SAFETY: c is NUL-terminated and outlives the call; a FIFO takes no device number.
    check(unsafe { libc::mknod(c.as_ptr(), mode, 0) })?;
    Ok(())
}

/// lsetxattr(2): sets the extended attribute `name` of `path` itself (a symbolic link is
/// not followed).
pub fn lsetxattr(path: &std::path::Path, name: &str, value: &[u8]) -> io::Result<()> {
    let c = c_path(path)?;
    let n = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: both strings are NUL-terminated and value is a live slice of value.len()
    // bytes, all outliving the call.
    check(unsafe {
        libc::lsetxattr(
            c.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    })?;
    Ok(())
}

/// lgetxattr(2): the extended attribute `name` of `path` itself (a symbolic link is not
/// followed), read into a buffer of `max` bytes (ERANGE if the value is longer).
pub fn lgetxattr(path: &std::path::Path, name: &str, max: usize) -> io::Result<Vec<u8>> {
    let c = c_path(path)?;
    let n = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut buf = vec![0u8; max];
    // SAFETY: both strings are NUL-terminated; buf is a writable buffer of buf.len() bytes
    // that outlives the call, and the kernel writes at most that many.
    let len =
        unsafe { libc::lgetxattr(c.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if len < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(len as usize);
    Ok(buf)
}

/// llistxattr(2): the names of the extended attributes of `path` itself (a symbolic link
/// is not followed), those the caller may see (`trusted.*` only with CAP_SYS_ADMIN), in
/// the file system's order.
pub fn llistxattr(path: &std::path::Path) -> io::Result<Vec<std::ffi::OsString>> {
    use std::os::unix::ffi::OsStringExt;
    let c = c_path(path)?;
    loop {
        // SAFETY: c is NUL-terminated and outlives the call; a null buffer of size 0 asks
        // only for the size the list needs, and the kernel writes nothing.
        let need = unsafe { libc::llistxattr(c.as_ptr(), std::ptr::null_mut(), 0) };
        if need < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut buf = vec![0u8; need as usize];
        // SAFETY: buf is a writable buffer of buf.len() bytes that outlives the call, and
        // the kernel writes at most that many.
        let len = unsafe { libc::llistxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        if len < 0 {
            let e = io::Error::last_os_error();
            // An attribute was added between the two calls: ask for the size again.
            if e.raw_os_error() == Some(libc::ERANGE) {
                continue;
            }
            return Err(e);
        }
        buf.truncate(len as usize);
        let names = buf.split(|b| *b == 0).filter(|n| !n.is_empty());
        return Ok(names
            .map(|n| std::ffi::OsString::from_vec(n.to_vec()))
            .collect());
    }
}

/// Whether this process may open `path` for reading (and writing, with `write`), as its
/// effective ids and capabilities stand, without opening it: opening a device may do
/// something (a tape rewinds, a serial line raises DTR).
pub fn may_open(path: &std::path::Path, write: bool) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let p = CString::new(path.as_os_str().as_bytes())?;
    let mode = libc::R_OK | if write { libc::W_OK } else { 0 };
    // SAFETY: faccessat(2) on a NUL-terminated path that outlives the call.
    check(unsafe { libc::faccessat(libc::AT_FDCWD, p.as_ptr(), mode, libc::AT_EACCESS) }).map(drop)
}

/// Bytes an unprivileged writer may still put on the filesystem of the open file `fd`
/// (statfs(2)'s available blocks: root's reserve left out).
pub fn free_bytes(fd: BorrowedFd<'_>) -> io::Result<u64> {
    // SAFETY: fstatfs(2) on a borrowed descriptor, into a zeroed struct on our stack.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    check(unsafe { libc::fstatfs(fd.as_raw_fd(), &mut st) })?;
    Ok(st.f_bavail as u64 * st.f_bsize as u64)
}

//! Files below a directory descriptor, the mount namespace of `exec`, descriptor tables.

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

//! Named network namespaces, as `ip netns` keeps them: a file below /run/netns with the
//! namespace bind-mounted on it, which holds the namespace alive for as long as it is
//! mounted. Only the primitives: which names a fleet gives, and when they are journalled
//! and taken away, is the caller's.

use crate::check;
use std::ffi::CString;
use std::io;
use std::os::unix::fs::MetadataExt;

/// Where `ip netns` looks for named network namespaces.
pub const NETNS_DIR: &str = "/run/netns";

fn cstr(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// Makes [`NETNS_DIR`] a shared mount point of its own, as `ip netns add` does the first
/// time: a namespace mounted below it then reaches the mount namespaces that copy the
/// host's (and a node's world, which detaches it whole, takes none of them along).
pub fn prepare_netns_dir() -> io::Result<()> {
    std::fs::create_dir_all(NETNS_DIR)?;
    let dir = cstr(NETNS_DIR)?;
    let shared = || {
        // SAFETY: mount(2) changing propagation only; the strings are NUL-terminated.
        check(unsafe {
            libc::mount(
                c"none".as_ptr(),
                dir.as_ptr(),
                std::ptr::null(),
                libc::MS_SHARED | libc::MS_REC,
                std::ptr::null(),
            )
        })
    };
    match shared() {
        // Not a mount point yet: bind it on itself first, as iproute2 does.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            // SAFETY: a bind mount of a directory on itself; NUL-terminated strings.
            check(unsafe {
                libc::mount(
                    dir.as_ptr(),
                    dir.as_ptr(),
                    c"none".as_ptr(),
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                )
            })?;
            shared().map(drop)
        }
        r => r.map(drop),
    }
}

/// Names the calling thread's network namespace `name` (`/run/netns/NAME`). A name that
/// exists is refused (EEXIST): it is someone else's.
pub fn name_current_netns(name: &str) -> io::Result<()> {
    let path = format!("{NETNS_DIR}/{name}");
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)?;
    let (source, target) = (cstr("/proc/thread-self/ns/net")?, cstr(&path)?);
    // SAFETY: a bind mount between NUL-terminated paths.
    let bound = check(unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            c"none".as_ptr(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    });
    if let Err(e) = bound {
        let _ = std::fs::remove_file(&path);
        return Err(e);
    }
    Ok(())
}

/// The inode of the namespace named `name`, if that name holds one (an nsfs mount): the
/// identity a name is checked against before it is taken away.
pub fn named_netns_inode(name: &str) -> Option<u64> {
    let meta = std::fs::metadata(format!("{NETNS_DIR}/{name}")).ok()?;
    // An nsfs inode lives on the nsfs device; a plain file of the same name is not one.
    let nsfs = std::fs::metadata("/proc/self/ns/net").ok()?.dev();
    (meta.dev() == nsfs).then_some(meta.ino())
}

/// Takes the name `name` away if it still names the namespace of inode `inode`; returns
/// whether it did. A name that holds something else is left alone.
pub fn unname_netns(name: &str, inode: u64) -> io::Result<bool> {
    if named_netns_inode(name) != Some(inode) {
        return Ok(false);
    }
    let path = format!("{NETNS_DIR}/{name}");
    let target = cstr(&path)?;
    // SAFETY: umount2(2) on a NUL-terminated path.
    check(unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) })?;
    std::fs::remove_file(&path)?;
    Ok(true)
}

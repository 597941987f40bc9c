//! Waiting for descriptors to become readable.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

/// One pollfd per descriptor, waiting for it to become readable.
pub(crate) fn pollfds_in(fds: &[BorrowedFd<'_>]) -> Vec<libc::pollfd> {
    fds.iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect()
}

/// Waits until one of `fds` is readable; returns which are. `None` waits forever.
pub fn poll_readable(fds: &[BorrowedFd<'_>], timeout: Option<Duration>) -> io::Result<Vec<bool>> {
    let revents = poll(pollfds_in(fds), timeout)?;
    Ok(revents.iter().map(|r| *r != 0).collect())
}

/// Waits until one of `fds` has one of its events (`libc::POLLIN`, `libc::POLLOUT`);
/// returns each one's events (hang-ups and errors included). `None` waits forever.
pub fn poll_events(
    fds: &[(BorrowedFd<'_>, i16)],
    timeout: Option<Duration>,
) -> io::Result<Vec<i16>> {
    let pfds = (fds.iter())
        .map(|(fd, events)| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: *events,
            revents: 0,
        })
        .collect();
    poll(pfds, timeout)
}

fn poll(mut pfds: Vec<libc::pollfd>, timeout: Option<Duration>) -> io::Result<Vec<i16>> {
    let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
    loop {
        // SAFETY: pfds is a valid array of the length passed.
        let rc = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
        if rc >= 0 {
            return Ok(pfds.iter().map(|p| p.revents).collect());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

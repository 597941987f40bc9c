//! Pseudo-terminals: a pair opened, a command started on its terminal end as a session
//! leader with it as its controlling terminal (so that Ctrl-C, job control and window
//! sizes work in it as in any terminal), and the window size set from the other end.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A new pseudo-terminal: (the controlling end, the terminal end). Both close on exec.
pub fn open() -> io::Result<(OwnedFd, OwnedFd)> {
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty(3) writes two descriptors into the integers given; the name, the
    // termios and the window size may be null (none asked, defaults used).
    check(unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    })?;
    // SAFETY: both are descriptors openpty just opened, owned by nobody else.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    for fd in [&master, &slave] {
        // SAFETY: fcntl(2) on a descriptor we own, with integer arguments.
        check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) })?;
    }
    Ok((master, slave))
}

/// Sets the window size of the terminal `fd` is an end of; its foreground process group
/// gets SIGWINCH, as when a terminal window is resized.
pub fn set_size(fd: BorrowedFd, rows: u16, cols: u16) -> io::Result<()> {
    let size = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize, which lives across the call.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, &size) }).map(drop)
}

/// Makes `cmd` run on terminal end `slave`: its standard input, output and error, in a
/// session of its own whose controlling terminal it is.
pub fn run_on(cmd: &mut std::process::Command, slave: &OwnedFd) -> io::Result<()> {
    cmd.stdin(slave.try_clone()?)
        .stdout(slave.try_clone()?)
        .stderr(slave.try_clone()?);
    // SAFETY: setsid(2) and ioctl(2) on integers are async-signal-safe, as code between
    // fork and exec in a multi-threaded process must be. Standard input is the terminal
    // end by then (the Command's redirections are made before this runs).
    unsafe {
        cmd.pre_exec(|| {
            check(libc::setsid())?;
            check(libc::ioctl(0, libc::TIOCSCTTY, 0)).map(drop)
        })
    };
    Ok(())
}

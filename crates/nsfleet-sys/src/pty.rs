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

/// A new pseudo-terminal: (the controlling end, the terminal end). Both are opened close
/// on exec: a child another thread starts meanwhile must not inherit either (it would
/// keep the terminal from ever hanging up, and could type into it).
pub fn open() -> io::Result<(OwnedFd, OwnedFd)> {
    let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: posix_openpt(3) takes flags and returns a new descriptor, or -1.
    let master = check(unsafe { libc::posix_openpt(flags) })?;
    // SAFETY: a descriptor posix_openpt just opened, owned by nobody else.
    let master = unsafe { OwnedFd::from_raw_fd(master) };
    // SAFETY: grantpt(3) on the master we own, an integer argument.
    check(unsafe { libc::grantpt(master.as_raw_fd()) })?;
    // SAFETY: unlockpt(3) on the master we own, an integer argument.
    check(unsafe { libc::unlockpt(master.as_raw_fd()) })?;
    // TIOCGPTPEER (Linux 4.13) opens the terminal end from the master itself, with our
    // flags, rather than by its /dev/pts name: no window where it lacks O_CLOEXEC.
    // SAFETY: the ioctl takes the open flags as an integer and returns a new descriptor.
    let slave = check(unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCGPTPEER, flags) })?;
    // SAFETY: a descriptor the ioctl just opened, owned by nobody else.
    Ok((master, unsafe { OwnedFd::from_raw_fd(slave) }))
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

/// Makes the terminal's end `fd` non-blocking: a writer that must not wait for a shell
/// that stopped reading (a paste larger than the terminal's buffer, while the shell's
/// own output waits to be read by the same writer).
pub fn set_nonblocking(fd: BorrowedFd) -> io::Result<()> {
    // SAFETY: fcntl(2) F_GETFL and F_SETFL on a descriptor we borrow, integer arguments.
    let flags = check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    // SAFETY: as above.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) }).map(drop)
}

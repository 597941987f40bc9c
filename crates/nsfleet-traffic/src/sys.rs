//! The syscalls the traffic engine makes, each wrapped once with the reason it is sound.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub use nsfleet_sys::packet::{attach_filter, bind_packet, packet_socket, set_rcvbuf, setsockopt};

pub fn mmap_shared(fd: &OwnedFd, len: usize) -> io::Result<*mut u8> {
    // SAFETY: a new shared mapping of the socket's ring; nothing else aliases it yet.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}

pub fn munmap(p: *mut u8, len: usize) {
    // SAFETY: called once, by the owner of a mapping made by `mmap_shared` with this length.
    unsafe { libc::munmap(p.cast(), len) };
}

/// `sendto(fd, NULL, 0, 0)`: tells a TX ring's kernel side to send what is ready, and waits.
pub fn send_empty(fd: RawFd) -> io::Result<()> {
    // SAFETY: a zero-length send with no buffer and no address.
    let r = unsafe { libc::sendto(fd, std::ptr::null(), 0, 0, std::ptr::null(), 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Pins the calling thread to one CPU.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it; pid 0 is this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        check(libc::sched_setaffinity(
            0,
            size_of::<libc::cpu_set_t>(),
            &set,
        ))
        .map(drop)
    }
}

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;

/// The head of `union bpf_attr` as BPF_PROG_LOAD reads it.
#[repr(C)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
}

/// `union bpf_attr` as BPF_PROG_TEST_RUN reads it.
#[repr(C)]
#[derive(Default)]
struct TestRun {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    /// Explicit, so that it is zero: the kernel refuses non-zero bytes past the last field.
    _pad: u32,
}

/// `struct xdp_md`, the context a test run starts from.
#[repr(C)]
#[derive(Default)]
struct XdpMd {
    data: u32,
    data_end: u32,
    data_meta: u32,
    ingress_ifindex: u32,
    rx_queue_index: u32,
    egress_ifindex: u32,
}

fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, fully initialised prefix of union bpf_attr for `cmd`, of the
    // size passed; every pointer inside it points to memory that outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            (attr as *mut T).cast::<libc::c_void>(),
            size_of::<T>(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r)
}

/// Loads an XDP program made of `insns` (struct bpf_insn, 8 bytes each).
pub fn bpf_load_xdp(insns: &[u64]) -> io::Result<OwnedFd> {
    let license = b"GPL\0";
    let mut attr = ProgLoad {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 0,
        log_size: 0,
        log_buf: 0,
        kern_version: 0,
        prog_flags: 0,
    };
    let fd = bpf(BPF_PROG_LOAD, &mut attr)?;
    // SAFETY: BPF_PROG_LOAD returned a new descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Runs `prog` over `repeat` live copies of `frame` "received" on `ifindex` (in the calling
/// thread's namespace), `batch` frames at a time.
pub fn bpf_xdp_live(
    prog: RawFd,
    frame: &[u8],
    ifindex: u32,
    repeat: u32,
    batch: u32,
) -> io::Result<()> {
    let mut ctx = XdpMd {
        data_end: frame.len() as u32,
        ingress_ifindex: ifindex,
        ..Default::default()
    };
    let mut attr = TestRun {
        prog_fd: prog as u32,
        data_size_in: frame.len() as u32,
        data_in: frame.as_ptr() as u64,
        repeat,
        ctx_size_in: size_of::<XdpMd>() as u32,
        ctx_in: (&mut ctx as *mut XdpMd) as u64,
        flags: BPF_F_TEST_XDP_LIVE_FRAMES,
        batch_size: batch,
        ..Default::default()
    };
    bpf(BPF_PROG_TEST_RUN, &mut attr).map(drop)
}

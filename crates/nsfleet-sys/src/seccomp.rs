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
//! Only the machine's own ABI is allowed through: a 32-bit program (i386 on x86_64,
//! arm on aarch64) or x32's calls would reach the same kernel code under other numbers,
//! so they are refused whole. Nothing here may allocate once the filter is built: it is
//! installed in a vfork child (see `spawn`).

use crate::check;
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

// linux/filter.h, linux/seccomp.h.
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_RET_K: u16 = 0x06;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const SECCOMP_SET_MODE_FILTER: libc::c_uint = 1;
/// Offsets in `struct seccomp_data`.
const NR: u32 = 0;
const ARCH_AT: u32 = 4;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The filter's program, built once: its architecture checked, then its call number
/// against each refused one.
pub fn filter() -> &'static [libc::sock_filter] {
    static PROGRAM: OnceLock<Vec<libc::sock_filter>> = OnceLock::new();
    PROGRAM.get_or_init(|| {
        let refuse = stmt(BPF_RET_K, SECCOMP_RET_ERRNO | libc::EPERM as u32);
        let refused: Vec<libc::c_long> = REFUSED.iter().chain(REFUSED_HERE).copied().collect();
        let n = refused.len();
        let mut p = vec![
            stmt(BPF_LD_W_ABS, ARCH_AT),
            // Another ABI: to the last instruction, which refuses.
            jump(BPF_JEQ_K, ARCH, 0, (n + 3) as u8),
            stmt(BPF_LD_W_ABS, NR),
        ];
        match X32_BIT {
            0 => p.push(jump(BPF_JEQ_K, u32::MAX, 0, 0)),
            bit => p.push(jump(BPF_JGE_K, bit, (n + 1) as u8, 0)),
        }
        for (i, nr) in refused.iter().enumerate() {
            // Matched: over the rest and the allow, to the refusal.
            p.push(jump(BPF_JEQ_K, *nr as u32, (n - i) as u8, 0));
        }
        p.push(stmt(BPF_RET_K, SECCOMP_RET_ALLOW));
        p.push(refuse);
        p
    })
}

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

    #[test]
    fn every_refusal_jumps_to_the_last_instruction() {
        let p = filter();
        let last = p.len() - 1;
        assert_eq!(p[last].code, BPF_RET_K);
        assert_eq!(p[last].k, SECCOMP_RET_ERRNO | libc::EPERM as u32);
        assert_eq!(p[last - 1].k, SECCOMP_RET_ALLOW);
        assert_eq!(1 + p[1].jf as usize + 1, last, "another ABI");
        let n = REFUSED.len() + REFUSED_HERE.len();
        for (i, ins) in p.iter().enumerate().skip(4).take(n) {
            assert_eq!(i + 1 + ins.jt as usize, last, "call {}", ins.k);
        }
        if X32_BIT != 0 {
            assert_eq!(3 + 1 + p[3].jt as usize, last, "x32");
        }
    }
}

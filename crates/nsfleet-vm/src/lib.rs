//! nsfleet-vm: the kernel lab. Boots another kernel under QEMU with the host's root
//! filesystem shared read-only (9p) under a writable overlay in the guest's memory, so
//! that the host's nsfleet and tools run inside unchanged; runs one command there as
//! root, streams its output, and returns its exit status.
//!
//! The guest starts from a small initramfs made here ([`cpio`]): busybox (Debian's
//! static one), the kernel's modules nsfleet needs ([`kernel::MODULES`]), `init.sh` and
//! the command. Nothing is written on the host but that initramfs, in a folder of its
//! own removed afterwards (Ctrl-C included). This crate never touches the host's network.

pub mod cpio;
pub mod debian;
pub mod kernel;

use anyhow::{bail, Context};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub use kernel::Kernel;

const INIT: &str = include_str!("init.sh");
/// Where the guest's busybox comes from (Debian's busybox-static).
const BUSYBOX: &str = "/bin/busybox";
/// The exit status init.sh reports when the guest could not be set up.
const SETUP_FAILED: i32 = 250;
/// The signals that end a run.
const STOP: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

pub struct VmArgs {
    pub kernel: Kernel,
    pub cpus: u32,
    pub mem_mib: u32,
    pub timeout: Duration,
    pub command: Vec<String>,
}

/// Boots the guest, runs the command, and returns its exit status.
pub fn run(a: &VmArgs) -> anyhow::Result<i32> {
    which("qemu-system-x86_64", "apt-get install qemu-system-x86")?;
    if !is_static(Path::new(BUSYBOX)) {
        bail!("the guest's first process is busybox, and {BUSYBOX} is not a static one: apt-get install busybox-static");
    }
    if let Some(lacks) = a.kernel.lacks.as_ref().filter(|l| !l.is_empty()) {
        eprintln!(
            "nsfleet: vm: kernel {} lacks {}: what needs them will fail in the guest",
            a.kernel.release,
            lacks.join(", ")
        );
    }
    // Ctrl-C and SIGTERM are taken here (and so blocked in QEMU, which inherits the
    // mask): the guest is stopped and this run's folder removed.
    let _held = nsfleet_sys::SignalsHeld::new(&STOP)?;
    let dir = Scratch::new()?;
    let initrd = dir.0.join("initrd.cpio");
    std::fs::write(&initrd, initramfs(&a.kernel, &a.command)?)?;
    let kvm = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok();
    let accels: &[&str] = if kvm { &["kvm", "tcg"] } else { &["tcg"] };
    let (mut k, mut retried) = (0, false);
    while let Some(accel) = accels.get(k) {
        match boot(a, &initrd, accel)? {
            Booted::Exit(code) if code == SETUP_FAILED => bail!("the guest could not be set up (above)"),
            Booted::Exit(code) => return Ok(code),
            Booted::AccelFailed(why) if k + 1 < accels.len() => {
                eprintln!("nsfleet: vm: KVM does not run this guest here ({why}); using TCG (emulation)");
            }
            Booted::AccelFailed(why) => bail!("QEMU failed: {why}"),
            Booted::NoReport { started: true } => bail!("the guest stopped without reporting the command's status (a kernel panic, or the command powered it off)"),
            // Before the command ran: nothing of it happened, so it may be tried again.
            // Seen once in some hundred TCG boots on this machine class, silently.
            Booted::NoReport { started: false } if !retried => {
                retried = true;
                eprintln!("nsfleet: vm: the guest stopped before the command started; booting it once more");
                continue;
            }
            Booted::NoReport { started: false } => bail!("the guest stopped twice before the command started (a kernel panic?)"),
        }
        k += 1;
    }
    bail!("QEMU could not run the guest")
}

enum Booted {
    Exit(i32),
    AccelFailed(String),
    /// QEMU ended without the guest's report; `started`: after init said the command
    /// was starting.
    NoReport {
        started: bool,
    },
}

/// The line init.sh prints just before the command runs (the serial console ends lines
/// with CR LF); taken out of the output.
const STARTING: &[u8] = b"nsfleet-vm: command starting\r\n";

/// One boot with accelerator `accel`, the guest's console on our standard output.
fn boot(a: &VmArgs, initrd: &Path, accel: &str) -> anyhow::Result<Booted> {
    let mut qemu = Command::new("qemu-system-x86_64");
    qemu.args(["-accel", accel, "-cpu", "max", "-smp", &a.cpus.to_string()])
        .args(["-m", &format!("{}M", a.mem_mib)])
        .arg("-kernel")
        .arg(&a.kernel.image)
        .arg("-initrd")
        .arg(initrd)
        .args([
            "-append",
            "console=ttyS0 quiet loglevel=1 panic=-1 rdinit=/init",
        ])
        .args([
            "-nic", "none", "-display", "none", "-monitor", "none", "-serial", "stdio",
        ])
        .args(["-no-reboot", "-nodefaults"])
        .args([
            "-virtfs",
            "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap",
        ])
        .args(["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = qemu.spawn().context("starting qemu-system-x86_64")?;
    let console = child.stdout.take().expect("piped");
    let started = std::thread::spawn(move || forward(console));
    let mut stderr = child.stderr.take().expect("piped");
    let said = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + a.timeout;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "the guest did not finish within {} s: QEMU was killed (--timeout)",
                a.timeout.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let said = said.join().unwrap_or_default();
    let started = started.join().unwrap_or(true);
    let code = status.code().unwrap_or(0);
    if code % 2 == 1 {
        return Ok(Booted::Exit(code / 2));
    }
    // QEMU's own complaint (KVM refusing the guest, a bad option): its first line.
    match said.lines().map(str::trim).find(|l| !l.is_empty()) {
        Some(first) => Ok(Booted::AccelFailed(first.to_string())),
        None => Ok(Booted::NoReport { started }),
    }
}

/// Copies the guest's console to our standard output as it comes, without the line that
/// says the command is starting; returns whether that line came.
fn forward(mut console: impl Read) -> bool {
    use std::io::Write;
    let (mut started, mut held) = (false, Vec::new());
    let mut buf = [0u8; 4096];
    let mut out = std::io::stdout();
    while let Ok(n) = console.read(&mut buf) {
        if n == 0 {
            break;
        }
        if started {
            let _ = out.write_all(&buf[..n]).and_then(|()| out.flush());
            continue;
        }
        // Until the marker: the kernel's and init's lines, held to find it whole.
        held.extend_from_slice(&buf[..n]);
        if let Some(at) = held.windows(STARTING.len()).position(|w| w == STARTING) {
            started = true;
            let _ = out.write_all(&held[..at]);
            let _ = out.write_all(&held[at + STARTING.len()..]);
            let _ = out.flush();
            held.clear();
        }
    }
    let _ = out.write_all(&held);
    let _ = out.flush();
    started
}

/// The guest's initramfs: busybox, init, the modules in load order, the command.
fn initramfs(k: &Kernel, command: &[String]) -> anyhow::Result<Vec<u8>> {
    let mut c = cpio::Cpio::default();
    for d in ["bin", "modules", "dev", "proc", "sys", "tmp"] {
        c.dir(d);
    }
    c.file("bin/busybox", 0o755, &std::fs::read(BUSYBOX)?);
    c.file("init", 0o755, INIT.as_bytes());
    let mut order = String::new();
    for (name, file) in k.module_files() {
        let ext = if file.extension().is_some_and(|e| e == "xz") {
            "ko.xz"
        } else {
            "ko"
        };
        c.file(
            &format!("modules/{name}.{ext}"),
            0o644,
            &std::fs::read(&file)?,
        );
        order.push_str(&name);
        order.push('\n');
    }
    c.file("modules/order", 0o644, order.as_bytes());
    c.file("command", 0o644, command_script(command).as_bytes());
    Ok(c.finish())
}

/// A shell script that runs `argv` in the current folder (as the host had it), with a
/// full PATH.
fn command_script(argv: &[String]) -> String {
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|_| "/".into());
    let words: Vec<String> = argv.iter().map(|w| quote(w)).collect();
    format!(
        "cd {} 2>/dev/null || cd /\nexport PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root\nexec {}\n",
        quote(&cwd),
        words.join(" ")
    )
}

/// `s` in single quotes for sh.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn which(program: &str, install: &str) -> anyhow::Result<()> {
    if nsfleet_topology::software::which(program).is_none() {
        bail!("{program} is not installed: {install}");
    }
    Ok(())
}

/// Whether `path` is a statically linked ELF program (it has no PT_INTERP header).
fn is_static(path: &Path) -> bool {
    let Ok(b) = std::fs::read(path) else {
        return false;
    };
    b.starts_with(b"\x7fELF") && !b.windows(16).any(|w| w.starts_with(b"/lib64/ld-linux"))
}

/// A folder of this run's own, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> anyhow::Result<Scratch> {
        let dir = std::env::temp_dir().join(format!("nsfleet-vm-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_quoted_for_the_guests_shell() {
        let s = command_script(&["sh".into(), "-c".into(), "echo 'it''s' $HOME".into()]);
        assert!(
            s.contains("exec 'sh' '-c' 'echo '\\''it'\\'''\\''s'\\'' $HOME'"),
            "{s}"
        );
    }
}

//! nsfleet-vm: the kernel lab. Boots another kernel under QEMU with the host's root
//! filesystem shared read-only (9p) under a writable overlay in the guest's memory, so
//! that the host's nsfleet and tools run inside unchanged; runs one command there as
//! root, streams its output, and returns its exit status.
//!
//! The guest starts from a small initramfs made here ([`cpio`]): busybox (Debian's
//! static one), the kernel's modules nsfleet needs ([`kernel::MODULES`]), `init.sh` and
//! the command. On the host, a run writes only into a folder of its own, removed
//! afterwards (Ctrl-C included): the initramfs and the share where the guest reports
//! the command's status; and, from inside the guest, into the folders given as
//! `--rwdir`. This crate never touches the host's network.
//!
//! Hosts differ in their KVM, so a guest under KVM has [`SIGN_OF_LIFE`] to show one
//! before it is booted under TCG instead, and what was learnt is kept ([`accel`]).
//! Ctrl-C and SIGTERM end a run in any phase ([`stop`]); the folders of a run killed
//! outright are swept by the next one ([`scratch`]).

pub mod accel;
pub mod cache;
pub mod cpio;
pub mod debian;
pub mod kernel;
pub mod scratch;
pub mod spec;
pub mod stop;

use anyhow::{bail, Context};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use accel::Accel;
pub use kernel::Kernel;
pub use spec::Spec;
pub use stop::{Interrupted, Stop};

use accel::{Verdict, Verdicts};
use scratch::Scratch;

const INIT: &str = include_str!("init.sh");
/// Where the guest's busybox comes from (Debian's busybox-static).
const BUSYBOX: &str = "/bin/busybox";
const QEMU: &str = "qemu-system-x86_64";
/// How long a guest under KVM may take to show a sign of life (init's marker, a console
/// byte) before it is taken for a KVM that hangs. Measured here (README, the kernel lab):
/// init speaks 4.7-5.5 s after QEMU starts under TCG (median 5.0 of 5), which KVM only
/// shortens; twice that leaves room for a loaded machine, and costs a host whose KVM
/// hangs this much, once.
pub const SIGN_OF_LIFE: Duration = Duration::from_secs(10);

pub struct VmArgs {
    pub kernel: Kernel,
    pub cpus: u32,
    pub mem_mib: u32,
    pub timeout: Duration,
    /// Host folders the guest may write, mounted at their own paths (9p).
    pub rwdirs: Vec<PathBuf>,
    /// Kernel parameters added to the guest's command line.
    pub append: Vec<String>,
    pub command: Vec<String>,
    pub accel: Accel,
}

/// Removes what killed runs left (see [`scratch`]) and says so, at the start of a run
/// (`nsfleet clean --all` calls [`scratch::sweep_all`] and says it its own way).
fn sweep() {
    for r in scratch::sweep_all() {
        eprintln!("nsfleet: vm: removed {} (its run was killed)", r.display());
    }
}

/// Boots the guest, runs the command, and returns its exit status; [`Interrupted`] if
/// `stop` took a signal first.
pub fn run(a: &VmArgs, stop: &Stop) -> anyhow::Result<i32> {
    which(QEMU, "apt-get install qemu-system-x86")?;
    if !is_static(Path::new(BUSYBOX)) {
        bail!("the guest's first process is busybox, and {BUSYBOX} is not a static one: apt-get install busybox-static");
    }
    let rwdirs = (a.rwdirs.iter())
        .map(|d| {
            std::fs::canonicalize(d)
                .ok()
                .filter(|c| c.is_dir())
                .with_context(|| format!("--rwdir {}: not a folder", d.display()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let cannot = a.kernel.cannot_start();
    if !cannot.is_empty() {
        bail!(
            "kernel {} cannot boot into the host's filesystem: it lacks {} (Debian's cloud kernels do; take the generic one)",
            a.kernel.release,
            listed(&cannot)
        );
    }
    if let Some(lacks) = a.kernel.lacks.as_ref().filter(|l| !l.is_empty()) {
        eprintln!(
            "nsfleet: vm: kernel {} lacks {}: what needs them will fail in the guest",
            a.kernel.release,
            listed(lacks)
        );
    }
    sweep();
    stop.check()?;
    let dir = Scratch::for_run()?;
    let initrd = dir.path().join("initrd.cpio");
    std::fs::write(&initrd, initramfs(&a.kernel, &rwdirs, &a.command)?)?;
    stop.check()?;
    let share = dir.path().join("share");
    std::fs::create_dir(&share)?;
    let guest = Guest {
        args: a,
        initrd: &initrd,
        share: &share,
        life: &dir.path().join("life"),
        rwdirs: &rwdirs,
        stop,
    };
    guest.boot_with(a.accel)
}

/// `CONFIG_A (what), CONFIG_B (what)`.
/// `CONFIG_A (what), CONFIG_B (what)`.
fn listed(options: &[&kernel::Needed]) -> String {
    let names: Vec<String> = options.iter().map(|n| n.to_string()).collect();
    names.join(", ")
}

enum Booted {
    Exit(i32),
    /// init.sh could not set the guest up, and says why.
    SetupFailed(String),
    /// QEMU refused the accelerator (its first line on stderr).
    AccelFailed(String),
    /// No sign of life within [`SIGN_OF_LIFE`]: QEMU was killed.
    NoLife,
    /// QEMU ended without the guest's report; `started`: after init said the command
    /// was starting.
    NoReport {
        started: bool,
    },
}

impl Booted {
    /// Whether the guest's init ran: the accelerator runs guests.
    fn lived(&self) -> bool {
        matches!(
            self,
            Booted::Exit(_) | Booted::SetupFailed(_) | Booted::NoReport { started: true }
        )
    }
}

/// What one boot needs.
struct Guest<'a> {
    args: &'a VmArgs,
    initrd: &'a Path,
    /// This run's writable share, where init.sh writes `status`.
    share: &'a Path,
    /// The guest's second serial port, where init.sh says it is alive.
    life: &'a Path,
    rwdirs: &'a [PathBuf],
    stop: &'a Stop,
}

/// A 9p share of `path` named `tag` (read-only or not); `security_model=none`: files are
/// made as QEMU's user, and the guest's root may write only where that user may.
fn virtfs(path: &Path, tag: &str, readonly: bool) -> String {
    let ro = if readonly { ",readonly=on" } else { "" };
    format!(
        "local,path={},mount_tag={tag},security_model=none,multidevs=remap{ro}",
        escaped(path)
    )
}

/// A path in a QEMU option's value, where a comma is written twice.
fn escaped(path: &Path) -> String {
    path.display().to_string().replace(',', ",,")
}

impl Guest<'_> {
    /// Boots under `accel`: the verdict's accelerator for `auto`, with KVM's fallback
    /// to TCG (said in one line, and kept as the verdict).
    fn boot_with(&self, accel: Accel) -> anyhow::Result<i32> {
        let verdicts = Verdicts::here(QEMU);
        let mut now = match (accel, verdicts.read()) {
            (Accel::Auto, Some(Verdict::Tcg(why))) => {
                eprintln!(
                    "nsfleet: vm: booting under TCG (emulation): KVM did not run a guest on this host: {why} (kept in {}; --accel kvm tries it again)",
                    verdicts.location()
                );
                Accel::Tcg
            }
            (a, _) => a,
        };
        // Why KVM failed; kept as the verdict only once the same guest lives under TCG,
        // which shows that the guest and QEMU's other options were not the cause.
        let mut kvm_failed: Option<String> = None;
        let mut retried = false;
        loop {
            let booted = self.boot(now)?;
            if booted.lived() {
                match (now, kvm_failed.take()) {
                    (Accel::Tcg, Some(why)) => verdicts.keep(&Verdict::Tcg(why)),
                    (Accel::Tcg, None) => {}
                    _ => verdicts.keep(&Verdict::Kvm),
                }
            }
            let failed = match &booted {
                Booted::NoLife => Some(format!(
                    "the guest showed no sign of life within {} s",
                    SIGN_OF_LIFE.as_secs()
                )),
                Booted::AccelFailed(why) if now != Accel::Tcg => Some(why.clone()),
                _ => None,
            };
            if let Some(why) = failed {
                if now == Accel::Kvm {
                    bail!("KVM does not run this guest here: {why}; --accel auto or tcg boots it under TCG (emulation)");
                }
                eprintln!("nsfleet: vm: KVM does not run this guest here: {why}; booting it under TCG (emulation) instead");
                kvm_failed = Some(why);
                now = Accel::Tcg;
                continue;
            }
            match booted {
                Booted::Exit(code) => return Ok(code),
                Booted::SetupFailed(why) => bail!("the guest could not be set up: {why}"),
                Booted::AccelFailed(why) => bail!("QEMU failed: {why}"),
                Booted::NoLife => unreachable!("a failed accelerator, handled above"),
                Booted::NoReport { started: true } => bail!("the guest stopped without reporting the command's status (a kernel panic, or the command powered it off)"),
                // Before the command ran: nothing of it happened, so it may be tried
                // again. Seen once in some hundred TCG boots on this machine class,
                // silently.
                Booted::NoReport { started: false } if !retried => {
                    retried = true;
                    eprintln!("nsfleet: vm: the guest stopped before the command started; booting it once more");
                }
                Booted::NoReport { started: false } => bail!("the guest stopped twice before the command started (a kernel panic?)"),
            }
        }
    }

    /// QEMU's command line for one boot under `accel`.
    fn qemu(&self, accel: Accel) -> Command {
        let a = self.args;
        let mut append = String::from("console=ttyS0 quiet loglevel=1 panic=-1 rdinit=/init");
        for p in &a.append {
            append.push(' ');
            append.push_str(p);
        }
        let mut qemu = Command::new(QEMU);
        qemu.args(["-accel", accel.qemu_name(), "-cpu", "max"])
            .args(["-smp", &a.cpus.to_string()])
            .args(["-m", &format!("{}M", a.mem_mib)])
            .arg("-kernel")
            .arg(&a.kernel.image)
            .arg("-initrd")
            .arg(self.initrd)
            .arg("-append")
            .arg(append)
            .args(["-nic", "none", "-display", "none", "-monitor", "none"])
            .args(["-serial", "stdio", "-chardev"])
            .arg(format!("file,id=life,path={}", escaped(self.life)))
            .args(["-serial", "chardev:life", "-no-reboot", "-nodefaults"])
            .arg("-virtfs")
            .arg(virtfs(Path::new("/"), "host", true))
            .arg("-virtfs")
            .arg(virtfs(self.share, "run", false));
        for (i, d) in self.rwdirs.iter().enumerate() {
            qemu.arg("-virtfs").arg(virtfs(d, &format!("rw{i}"), false));
        }
        qemu.args(["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        nsfleet_sys::die_with_spawner(&mut qemu);
        qemu
    }

    /// One boot with `accel`, the guest's console on our standard output. Under KVM, a
    /// guest with no sign of life within [`SIGN_OF_LIFE`] is killed.
    fn boot(&self, accel: Accel) -> anyhow::Result<Booted> {
        let status = self.share.join("status");
        let _ = std::fs::remove_file(&status);
        let _ = std::fs::remove_file(self.life);
        self.stop.check()?;
        let mut child = self
            .qemu(accel)
            .spawn()
            .context("starting qemu-system-x86_64")?;
        let helper = match self.stop.helper(child.id()) {
            Ok(h) => h,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(anyhow::Error::new(e).context("watching QEMU (pidfd_open)"));
            }
        };
        let spoke = Arc::new(AtomicBool::new(false));
        let console = child.stdout.take().expect("piped");
        let forwarded = {
            let spoke = spoke.clone();
            std::thread::spawn(move || forward(console, &spoke))
        };
        let mut stderr = child.stderr.take().expect("piped");
        let said = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        let started = Instant::now();
        let deadline = started + self.args.timeout;
        let mut watchdog = (accel != Accel::Tcg).then_some(started + SIGN_OF_LIFE);
        let ended = loop {
            match child.try_wait() {
                Ok(Some(_)) => break None,
                Ok(None) => {}
                Err(e) => break Some(Err(anyhow::Error::new(e).context("waiting for QEMU"))),
            }
            if let Some(sig) = self.stop.signal() {
                break Some(Err(Interrupted(sig).into()));
            }
            if watchdog.is_some() && self.alive(&spoke, &status) {
                watchdog = None;
            }
            if watchdog.is_some_and(|w| Instant::now() > w) {
                break Some(Ok(Booted::NoLife));
            }
            if Instant::now() > deadline {
                break Some(Err(anyhow::anyhow!(
                    "the guest did not finish within {} s: QEMU was killed (--timeout)",
                    self.args.timeout.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if ended.is_some() {
            let _ = child.kill();
        }
        let _ = child.wait();
        drop(helper);
        let said = said.join().unwrap_or_default();
        let complaint = forwarded.join().unwrap_or_default();
        if let Some(ended) = ended {
            return ended;
        }
        // The signal's thread kills QEMU at once: its end may be seen first.
        self.stop.check()?;
        let report = std::fs::read_to_string(&status).unwrap_or_default();
        Ok(outcome(report.trim(), complaint, &said))
    }

    /// Whether the guest has shown a sign of life: init's marker on the second serial
    /// port, a byte on the console, or the status init.sh writes.
    fn alive(&self, spoke: &AtomicBool, status: &Path) -> bool {
        spoke.load(Ordering::Relaxed)
            || std::fs::metadata(self.life).is_ok_and(|m| m.len() > 0)
            || status.exists()
    }
}

/// What a boot came to, from the status init.sh wrote (`started`, `exit N`, `setup:
/// WHY`, or nothing), the last line init.sh complained with on the console, and what
/// QEMU said on its stderr.
fn outcome(report: &str, complaint: Option<String>, said: &str) -> Booted {
    if let Some(code) = report.strip_prefix("exit ") {
        if let Ok(code) = code.parse() {
            return Booted::Exit(code);
        }
    }
    if let Some(why) = report.strip_prefix("setup: ") {
        return Booted::SetupFailed(why.to_string());
    }
    if report == "started" {
        return Booted::NoReport { started: true };
    }
    // init.sh stopped the guest before it could write the status: it said why.
    if let Some(why) = complaint {
        return Booted::SetupFailed(why);
    }
    // QEMU's own complaint (KVM refusing the guest, a bad option): its first line.
    match said.lines().map(str::trim).find(|l| !l.is_empty()) {
        Some(first) => Booted::AccelFailed(first.to_string()),
        None => Booted::NoReport { started: false },
    }
}

/// What init.sh says on the console starts so (the command's own lines may too, but
/// they are only looked at when the command never ran).
const COMPLAINT: &str = "nsfleet vm: ";

/// Copies the guest's console to our standard output as it comes; returns the last line
/// in which init.sh complained, without its prefix.
fn forward(mut console: impl Read, spoke: &AtomicBool) -> Option<String> {
    use std::io::Write;
    let mut buf = [0u8; 4096];
    let mut out = std::io::stdout();
    let (mut line, mut complaint) = (Vec::new(), None);
    while let Ok(n) = console.read(&mut buf) {
        if n == 0 {
            break;
        }
        spoke.store(true, Ordering::Relaxed);
        let _ = out.write_all(&buf[..n]).and_then(|()| out.flush());
        for &b in &buf[..n] {
            if b != b'\n' {
                line.push(b);
                continue;
            }
            let text = String::from_utf8_lossy(&line);
            if let Some(why) = text.trim_end().strip_prefix(COMPLAINT) {
                complaint = Some(why.to_string());
            }
            line.clear();
        }
    }
    complaint
}

/// The guest's initramfs: busybox, init, the modules in load order, the command, and
/// the `--rwdir` folders to mount (`TAG PATH` per line).
fn initramfs(k: &Kernel, rwdirs: &[PathBuf], command: &[String]) -> anyhow::Result<Vec<u8>> {
    let mut c = cpio::Cpio::default();
    for d in ["bin", "modules", "dev", "proc", "sys", "tmp"] {
        c.dir(d);
    }
    c.file("bin/busybox", 0o755, &std::fs::read(BUSYBOX)?);
    c.file("init", 0o755, INIT.as_bytes());
    let mut order = String::new();
    for (name, file) in k.module_files()? {
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
    // Seen in the guest as /boot/config-R, where tools (and nsfleet bench) look for it.
    if let Some(config) = &k.config {
        c.file("config", 0o644, &std::fs::read(config)?);
    }
    let mut mounts = String::new();
    for (i, d) in rwdirs.iter().enumerate() {
        mounts.push_str(&format!("rw{i} {}\n", d.display()));
    }
    c.file("rwdirs", 0o644, mounts.as_bytes());
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
    if nsfleet_sys::host::which(program).is_none() {
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

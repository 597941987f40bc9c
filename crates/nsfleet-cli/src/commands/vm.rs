//! `nsfleet vm`: run a command on another kernel, under QEMU.

use super::args::within;
use clap::Args;

/// Run a command on another kernel, booted under QEMU
///
/// Run a command on another kernel: boot it under QEMU with this machine's root
/// filesystem read-only inside (a writable scratch over it, in the guest's memory), so
/// that nsfleet and the host's tools run there unchanged; the command's output comes
/// here and its exit status is nsfleet's.
///
/// KVM when it works, TCG (emulation) otherwise, saying which: a guest that shows no
/// sign of life under KVM within 10 s is killed and booted again under TCG, and the
/// verdict is kept (~/.cache/nsfleet/accel, per host kernel and QEMU version) so that
/// the next run goes to TCG at once; --accel (or NSFLEET_VM_ACCEL) overrides it.
/// Ctrl-C or SIGTERM in any phase stops QEMU, removes the run's folder and exits
/// with 128+signal; QEMU dies with nsfleet even after a SIGKILL, and the folder of a
/// killed run is removed by the next run (or `nsfleet clean --all`). The kernel's modules
/// come from --modules or from beside the image (`boot/vmlinuz-R`, `lib/modules/R`);
/// the kernel options nsfleet needs that its config lacks are listed before the
/// command runs. Needs qemu-system-x86 and busybox-static.
///
///   nsfleet vm --debian 6.12 -- uname -r
///   nsfleet vm --debian 6.1 --rwdir /tmp/out -- nsfleet bench teardown -o /tmp/out/t.json
///   nsfleet vm --debian 6.12-rt --append rcu_nocbs=0-1 -- nsfleet bench routers --quick
///   nsfleet vm --kernel ~/linux/arch/x86/boot/bzImage --modules /tmp/mods/lib/modules/6.13.0 -- ./test.sh
#[derive(Args)]
#[command(verbatim_doc_comment)]
#[command(group = clap::ArgGroup::new("image").required(true).args(["kernel", "debian"]))]
pub struct VmCommand {
    /// The kernel image (a bzImage), or `host`: the running kernel's, where this
    /// machine keeps it (/boot/vmlinuz-R, /lib/modules/R/vmlinuz).
    #[arg(long, value_name = "BZIMAGE")]
    kernel: Option<std::path::PathBuf>,
    /// Debian's newest kernel of this version (6.1, 6.12, 6.12.107, 6.1.0-47; -rt for
    /// PREEMPT_RT), fetched once into ~/.cache/nsfleet/kernels.
    #[arg(long, value_name = "VERSION")]
    debian: Option<String>,
    /// The kernel's modules (a lib/modules/RELEASE folder).
    #[arg(long, value_name = "DIR")]
    modules: Option<std::path::PathBuf>,
    /// Virtual CPUs.
    #[arg(long, default_value_t = 2, value_parser = within::<1, 64>)]
    cpus: u64,
    /// Memory, in MiB.
    #[arg(long, default_value_t = 2048, value_parser = within::<256, 65536>)]
    mem: u64,
    /// Kill the guest after this many seconds.
    #[arg(long, default_value_t = 600, value_parser = within::<1, 86_400>)]
    timeout: u64,
    /// A host folder the guest may write, at the same path (everything else it
    /// writes is lost when it stops). Repeatable.
    #[arg(long, value_name = "DIR")]
    rwdir: Vec<std::path::PathBuf>,
    /// A kernel parameter for the guest (`rcu_nocbs=0-1`...). Repeatable.
    #[arg(long, value_name = "PARAM", allow_hyphen_values = true)]
    append: Vec<String>,
    /// The accelerator: `auto` (the verdict kept for this host, else KVM with the
    /// fallback to TCG), `kvm` (no fallback), `tcg`. Default: $NSFLEET_VM_ACCEL, else auto.
    #[arg(long, value_name = "kvm|tcg|auto", value_parser = accel)]
    accel: Option<nsfleet_vm::Accel>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

impl VmCommand {
    /// `nsfleet vm`: the guest's exit status becomes ours; a signal's, 128+signal.
    pub fn run(self) -> anyhow::Result<()> {
        use nsfleet_vm::Spec;
        let spec = match (self.kernel, self.debian) {
            (Some(k), _) if k.as_os_str() == "host" => Spec::Host,
            (Some(k), _) => Spec::Image(k),
            (None, Some(d)) => Spec::Debian(d),
            (None, None) => unreachable!("clap requires one"),
        };
        let accel = nsfleet_vm::Accel::chosen(self.accel)?;
        let stop = nsfleet_vm::Stop::watch()?;
        let code = nsfleet_vm::run(
            &nsfleet_vm::VmArgs {
                kernel: spec.kernel(self.modules.as_deref(), &stop)?,
                cpus: self.cpus as u32,
                mem_mib: self.mem as u32,
                timeout: std::time::Duration::from_secs(self.timeout),
                rwdirs: self.rwdir,
                append: self.append,
                command: self.command,
                accel,
            },
            &stop,
        )?;
        std::process::exit(code)
    }
}

fn accel(s: &str) -> Result<nsfleet_vm::Accel, String> {
    s.parse().map_err(|e: anyhow::Error| e.to_string())
}

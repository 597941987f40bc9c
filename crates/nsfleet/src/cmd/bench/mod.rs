//! `nsfleet bench`: nsfleet and its peers measured in the same run, reported as medians
//! and ratios. Benchmarks, not tests: nothing here asserts a time.

mod create;
mod routers;

pub use create::{create, CreateArgs};
pub use routers::{routers, RoutersArgs};

use anyhow::bail;
use std::process::Command;

/// Runs this very binary's `up` and `down` against a private run directory.
pub(super) struct Cli {
    run_dir: std::path::PathBuf,
    exe: std::path::PathBuf,
    /// A fleet is up that nobody has taken down yet (the guard's `Drop` does then).
    up: bool,
}

pub(super) struct UpResult {
    pub cli: Cli,
    pub rss: f64,
    /// The supervisor's (user, system) CPU seconds so far.
    pub cpu: (f64, f64),
    pub kernel_bytes: f64,
}

impl Cli {
    pub(super) fn new() -> anyhow::Result<Self> {
        let run_dir = std::env::temp_dir().join(format!("nsfleet-bench-{}", std::process::id()));
        std::fs::create_dir_all(&run_dir)?;
        Ok(Cli {
            run_dir,
            exe: std::env::current_exe()?,
            up: false,
        })
    }

    fn run(&self, args: &[&str]) -> anyhow::Result<serde_json::Value> {
        let out = Command::new(&self.exe)
            .args(args)
            .env("NSFLEET_RUN_DIR", &self.run_dir)
            .output()?;
        if !out.status.success() {
            bail!(
                "nsfleet {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(serde_json::from_slice(&out.stdout)?)
    }

    /// `nsfleet up` of a fleet of `count` bare nodes.
    pub(super) fn up(self, count: u64, workers: usize) -> anyhow::Result<UpResult> {
        let body = format!("[[node]]\nname = \"n{{i}}\"\ncount = {count}\n");
        self.up_with(&body, workers)
    }

    /// `nsfleet up` of a fleet named "bench" whose tables (after `[fleet]`) are `body`.
    pub(super) fn up_with(mut self, body: &str, workers: usize) -> anyhow::Result<UpResult> {
        let file = self.run_dir.join("bench.toml");
        std::fs::write(&file, format!("[fleet]\nname = \"bench\"\n{body}"))?;
        let v = self.run(&[
            "up",
            file.to_str().unwrap_or_default(),
            "--json",
            "--workers",
            &workers.to_string(),
        ])?;
        self.up = true;
        let pid = v["pid"].as_i64().unwrap_or(0);
        Ok(UpResult {
            cli: self,
            rss: rss_of(pid),
            cpu: cpu_of(pid),
            kernel_bytes: v["kernel_mem_bytes"].as_f64().unwrap_or(0.0),
        })
    }

    /// `nsfleet down`, to full reclamation; returns its JSON report.
    pub(super) fn down(&mut self) -> anyhow::Result<serde_json::Value> {
        self.up = false;
        self.run(&["down", "bench", "--json"])
    }
}

impl Drop for Cli {
    fn drop(&mut self) {
        if self.up {
            let _ = self.down();
        }
        let _ = std::fs::remove_dir_all(&self.run_dir);
    }
}

pub(super) fn note(json: bool, s: &str) {
    if !json {
        eprintln!("  {s}");
    }
}

pub(super) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

pub(super) fn rss_of(pid: i64) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))?
                .split_whitespace()
                .nth(1)?
                .parse::<f64>()
                .ok()
        })
        .map_or(0.0, |kb| kb * 1024.0)
}

pub(super) fn which(cmd: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(cmd).is_file()))
}

/// What a result depends on: kernel, CPUs, memory.
pub(super) fn machine() -> serde_json::Value {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    serde_json::json!({
        "kernel": read("/proc/sys/kernel/osrelease"),
        "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "mem_total_kb": read("/proc/meminfo").lines().next().and_then(|l| l.split_whitespace().nth(1).map(String::from)),
    })
}

/// A process's (user, system) CPU seconds, from /proc/PID/stat.
pub(super) fn cpu_of(pid: i64) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let f: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let field = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / hz;
    (field(11), field(12))
}

//! `nsfleet vm`: a Debian kernel fetched and booted under QEMU, a command run inside on the
//! host's filesystem with its output and exit status; netem, which this machine's kernel
//! lacks, tested for real in the guest; and what cannot be booted, refused with nothing
//! left behind. Each boot takes seconds (TCG where KVM does not work).

mod harness;

use harness::*;

/// One guest at a time: each uses both cores, and each test checks that no QEMU is left.
static ONE_GUEST: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `nsfleet vm --debian 6.12 ARGS`, the kernel cached in this test's folder.
fn vm(env: &Env, args: &[&str]) -> std::process::Output {
    env.cmd(&[&["vm", "--debian", "6.12", "--timeout", "300"], args].concat())
        .env("XDG_CACHE_HOME", env.files.join("cache"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// Leftovers of any `nsfleet vm` run: QEMU processes and initramfs folders.
fn leftovers() -> Vec<String> {
    let mut left: Vec<String> = (std::fs::read_dir(std::env::temp_dir()).unwrap().flatten())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("nsfleet-vm-"))
        .collect();
    for p in std::fs::read_dir("/proc").unwrap().flatten() {
        if std::fs::read_to_string(p.path().join("comm"))
            .is_ok_and(|c| c.starts_with("qemu-system"))
        {
            left.push(format!("qemu pid {}", p.file_name().to_string_lossy()));
        }
    }
    left
}

#[test]
fn a_debian_kernel_runs_a_command_and_netem_delays_pings() {
    let _one = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("vm");
    let nsfleet = env!("CARGO_BIN_EXE_nsfleet");
    let out = vm(&env, &["--", "sh", "-c", "uname -r; id -u; exit 7"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{text}{err}");
    assert!(text.contains("6.12."), "the guest's kernel: {text}");
    assert!(
        text.lines().any(|l| l.trim() == "0"),
        "root in the guest: {text}"
    );

    // netem, for real: 20 ms each way on a veth pair made by this nsfleet in the guest.
    let topo = env.file(
        "nm.toml",
        "[fleet]\nname = \"nm\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = { at = \"a:eth0\", addrs = [\"10.0.0.1/24\"] }\nb = { at = \"b:eth0\", addrs = [\"10.0.0.2/24\"] }\nimpair = { delay = \"20ms\" }\n",
    );
    let script = format!(
        "export NSFLEET_RUN_DIR=/run/nsf; {nsfleet} up {} >/dev/null 2>&1 || exit 3; {nsfleet} exec nm a -- ping -c 5 -i 0.2 10.0.0.2; rc=$?; {nsfleet} down nm >/dev/null; exit $rc",
        topo.display()
    );
    let out = vm(&env, &["--", "sh", "-c", &script]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rtt = (text.lines())
        .find_map(|l| l.split("rtt min/avg/max/mdev = ").nth(1))
        .and_then(|r| r.split('/').next())
        .and_then(|m| m.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no rtt in {text}"));
    // 20 ms each way; emulation adds to it, never takes away.
    assert!((40.0..80.0).contains(&rtt), "minimum RTT {rtt} ms");
    assert!(leftovers().is_empty(), "{:?}", leftovers());
}

#[test]
fn what_cannot_be_booted_is_refused_and_nothing_is_left() {
    let _one = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("vmbad");
    let not_kernel = env.file("bzImage", "#!/bin/sh\necho not a kernel\n");
    let modules = env.files.join("lib/modules/5.10.0-test");
    std::fs::create_dir_all(&modules).unwrap();
    let nsfleet = |args: &[&str]| {
        env.cmd(args)
            .env("XDG_CACHE_HOME", env.files.join("cache"))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let cases: [(Vec<&str>, &str); 3] = [
        (
            vec!["vm", "--kernel", not_kernel.to_str().unwrap(), "--", "true"],
            "not a kernel image",
        ),
        (
            vec!["vm", "--kernel", "/no/such/bzImage", "--", "true"],
            "cannot read the kernel",
        ),
        (
            vec!["vm", "--debian", "9.99", "--", "true"],
            "have no kernel 9.99",
        ),
    ];
    for (args, expected) in cases {
        let out = nsfleet(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains(expected),
            "{args:?}: expected {expected:?} in {err}"
        );
    }
    // Modules of another kernel, and a guest that hangs.
    let out = vm(
        &env,
        &["--modules", modules.to_str().unwrap(), "--", "true"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("these are modules of \"5.10.0-test\""),
        "{err}"
    );
    let out = env
        .cmd(&[
            "vm",
            "--debian",
            "6.12",
            "--timeout",
            "3",
            "--",
            "sleep",
            "600",
        ])
        .env("XDG_CACHE_HOME", env.files.join("cache"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("did not finish within 3 s"), "{err}");
    assert!(leftovers().is_empty(), "{:?}", leftovers());
    let cache = env.files.join("cache/nsfleet/kernels");
    let partial: Vec<_> = (std::fs::read_dir(&cache).unwrap().flatten())
        .filter(|e| e.file_name().to_string_lossy().contains(".partial"))
        .collect();
    assert!(partial.is_empty(), "no half-written cache entry");
}

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

/// [`vm`], which must succeed: what the guest printed.
fn vm_ok(env: &Env, args: &[&str]) -> String {
    let out = vm(env, args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}{err}");
    text
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
    let text = vm_ok(&env, &["--", "sh", "-c", &script]);
    let rtt = (text.lines())
        .find_map(|l| l.split("rtt min/avg/max/mdev = ").nth(1))
        .and_then(|r| r.split('/').next())
        .and_then(|m| m.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no rtt in {text}"));
    // 20 ms each way; emulation adds to it, never takes away.
    assert!((40.0..80.0).contains(&rtt), "minimum RTT {rtt} ms");
    assert!(leftovers().is_empty(), "{:?}", leftovers());
}

/// Six pairs of nodes, each joined by a link with one impairment (`p` by none).
fn impaired_pairs() -> String {
    let links = [
        ("j", "delay = \"10ms\", jitter = \"5ms\""),
        ("l", "loss = \"20%\""),
        ("d", "duplicate = \"50%\""),
        ("c", "corrupt = \"50%\""),
        ("r", "rate = \"1mbit\""),
        ("p", ""),
        ("o", "delay = \"10ms\", reorder = \"50%\""),
    ];
    let mut t = String::from("[fleet]\nname = \"im\"\n");
    for (k, (n, impair)) in links.iter().enumerate() {
        let net = k + 1;
        t += &format!("[[node]]\nname = \"{n}1\"\n[[node]]\nname = \"{n}2\"\n[[link]]\n");
        t += &format!("a = {{ at = \"{n}1:eth0\", addrs = [\"10.{net}.0.1/24\"] }}\n");
        t += &format!("b = {{ at = \"{n}2:eth0\", addrs = [\"10.{net}.0.2/24\"] }}\n");
        if !impair.is_empty() {
            t += &format!("impair = {{ {impair} }}\n");
        }
    }
    t
}

/// The number just before `key` in `line` (`45.3` of `"..., 45.3% packet loss"`).
fn number_before(line: &str, key: &str) -> f64 {
    let head = line.split(key).next().unwrap_or("");
    let word = head.rsplit([' ', ',']).next().unwrap_or("");
    word.trim_end_matches('%')
        .parse()
        .unwrap_or_else(|_| panic!("{key:?} in {line:?}"))
}

#[test]
fn every_netem_impairment_shows_in_pings_inside_a_guest() {
    let _one = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("vmimpair");
    let nsfleet = env!("CARGO_BIN_EXE_nsfleet");
    let topo = env.file("im.toml", &impaired_pairs());
    // Every ping has a deadline: corrupted replies confuse ping's clock.
    let ping = |node: &str, args: &str, to: &str, pick: &str| {
        format!("echo \"{node} $({nsfleet} exec im {node} -- ping -q {args} -w 20 {to} 2>/dev/null | {pick})\"\n")
    };
    let mut script = format!(
        "export NSFLEET_RUN_DIR=/run/nsf\n{nsfleet} up {} >/dev/null 2>&1 || exit 3\n",
        topo.display()
    );
    script += &ping("j1", "-c 30 -i 0.05", "10.1.0.2", "tail -1");
    // On the lossy links, neighbour discovery first: ARP lost three times in a row leaves
    // the neighbour failed for a while, and every ping of the count unanswered.
    for (node, to) in [("l1", "10.2.0.2"), ("c1", "10.4.0.2")] {
        script += &format!("{nsfleet} exec im {node} -- ping -c 1 -w 30 {to} >/dev/null 2>&1\n");
    }
    script += &ping("l1", "-c 300 -i 0.01 -W 1", "10.2.0.2", "grep loss");
    script += &format!(
        "echo \"d1 $({nsfleet} exec im d1 -- ping -c 40 -i 0.02 -w 20 10.3.0.2 | grep -c DUP)\"\n"
    );
    script += &ping("c1", "-c 200 -i 0.01 -W 1", "10.4.0.2", "grep loss");
    script += &ping("r1", "-f -c 200 -s 1400", "10.5.0.2", "grep loss");
    script += &ping("p1", "-f -c 200 -s 1400", "10.6.0.2", "grep loss");
    script += &format!("echo \"o1 $({nsfleet} exec im o1 -- ping -c 100 -i 0.002 -w 20 10.7.0.2 | grep -o 'icmp_seq=[0-9]*' | cut -d= -f2 | tr '\\n' ' ')\"\n");
    script += &format!("{nsfleet} down im >/dev/null\n");
    let file = env.file("im.sh", &script);
    let text = vm_ok(&env, &["--", "sh", file.to_str().unwrap()]);
    let line = |node: &str| -> String {
        (text.lines())
            .find_map(|l| l.strip_prefix(&format!("{node} ")))
            .unwrap_or_else(|| panic!("no {node} in {text}"))
            .to_string()
    };
    // Jitter: 10 ms each way, +-5 ms: RTTs spread, none below 10 ms.
    let rtt: Vec<f64> = (line("j1").split(" = ").nth(1).unwrap_or(""))
        .split(['/', ' '])
        .filter_map(|x| x.parse().ok())
        .collect();
    assert!(
        rtt.len() >= 4 && rtt[0] >= 9.0 && rtt[3] >= 1.0,
        "min/avg/max/mdev {rtt:?}"
    );
    // Loss: 20% each way is 36% of round trips; 300 of them keep it well within 20-60%.
    let loss = number_before(&line("l1"), " packet loss");
    assert!((20.0..60.0).contains(&loss), "loss {loss}%");
    // Duplicates: ping counts the replies it gets twice.
    let dups: u64 = line("d1").trim().parse().unwrap();
    assert!(dups >= 5, "{dups} duplicates");
    // Corruption: a flipped bit fails a checksum, and the packet is lost.
    let corrupt = number_before(&line("c1"), " packet loss");
    assert!(corrupt >= 10.0, "corrupt: {corrupt}% lost");
    // Rate: 200 packets of 1,442 bytes at 1 Mbit/s take 2.3 s; unlimited, far less.
    let (limited, free) = (
        number_before(&line("r1"), "ms"),
        number_before(&line("p1"), "ms"),
    );
    assert!(
        limited >= 2000.0 && limited > 1.5 * free,
        "1mbit {limited} ms, unlimited {free} ms"
    );
    // Reorder: half the packets go at once, ahead of those held 10 ms.
    let seqs: Vec<u64> = line("o1")
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    let ahead = seqs.windows(2).filter(|w| w[1] < w[0]).count();
    assert!(seqs.len() >= 50 && ahead >= 1, "replies in order {seqs:?}");
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

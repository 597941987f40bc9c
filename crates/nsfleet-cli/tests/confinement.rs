//! Confined nodes: a node that runs software is root in a user namespace of its own and
//! an id of its fleet's range on the host. It does what a router does in its own
//! namespaces, and what would reach the host or another node gets the kernel's refusal;
//! `--privileged` is the host's root, as before.

mod harness;

use harness::*;
use std::time::Duration;

/// nsfleet's block of ids (nsfleet-supervisor's `ids::BLOCK`).
const BLOCK: std::ops::Range<u64> = 0x7000_0000..0x7FFE_0000;

/// A fleet of two nodes that run a daemon, linked, with addresses.
fn two_nodes(name: &str) -> String {
    format!(
        "[fleet]\nname = \"{name}\"\n[[node]]\nname = \"n{{i}}\"\ncount = 2\ncommands = [\"exec sleep 1000\"]\n[[link]]\na = {{ at = \"n1:eth0\", addrs = [\"10.61.0.1/24\"] }}\nb = {{ at = \"n2:eth0\", addrs = [\"10.61.0.2/24\"] }}\n"
    )
}

/// The first line of /proc/self/uid_map in `node`: (inside, outside, count).
fn uid_map(env: &Env, fleet: &str, node: &str) -> (u64, u64, u64) {
    let map = env.ok(&["exec", fleet, node, "--", "cat", "/proc/self/uid_map"]);
    let f: Vec<u64> = (map.split_whitespace())
        .map(|v| v.parse().unwrap())
        .collect();
    (f[0], f[1], f[2])
}

/// What `line` says in `node` (stdout and stderr), whatever its status.
fn says(env: &Env, fleet: &str, node: &str, line: &str) -> String {
    let out = env.run(&["exec", fleet, node, "--", "sh", "-c", line]);
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_node_is_root_at_home_and_an_id_of_its_fleet_on_the_host() {
    let env = Env::new("confine-ids");
    let f = env.up(&two_nodes("cfi"));
    let run = |node: &str, line: &str| env.ok(&["exec", "cfi", node, "--", "sh", "-c", line]);
    // Root inside, with every capability over its own namespaces.
    assert_eq!(run("n1", "id -u; id -g"), "0\n0\n");
    let (inside, first, count) = uid_map(&env, "cfi", "n1");
    assert_eq!((inside, count), (0, 65_536));
    assert!(BLOCK.contains(&first), "{first}");
    // Both nodes of the fleet share its range; on the host, their processes are that id.
    assert_eq!(uid_map(&env, "cfi", "n2").1, first);
    let inits = inits_of(f.pid());
    assert_eq!(inits.len(), 2);
    for pid in inits {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
        assert!(
            uid.split_whitespace()
                .skip(1)
                .all(|u| u == first.to_string()),
            "{uid}"
        );
    }
    // Another fleet gets another range.
    let g = env.up(&two_nodes("cfj"));
    let other = uid_map(&env, "cfj", "n1").1;
    assert!(BLOCK.contains(&other) && (other + 65_536 <= first || first + 65_536 <= other));
    drop(g);
    // The range comes back when the fleet goes, however it goes: the same name takes
    // the same range again, after a down and after a kill -9 of its supervisor.
    drop(f);
    let f = env.up(&two_nodes("cfi"));
    assert_eq!(uid_map(&env, "cfi", "n1").1, first);
    let pid = f.pid();
    signal(pid, libc::SIGKILL);
    wait_gone(pid);
    env.ok(&["clean", "cfi"]);
    std::mem::forget(f);
    let f = env.up(&two_nodes("cfi"));
    assert_eq!(uid_map(&env, "cfi", "n1").1, first);
    drop(f);
}

#[test]
fn a_confined_node_does_what_a_router_does_in_its_own_namespaces() {
    let env = Env::new("confine-can");
    let _f = env.up(&two_nodes("cfc"));
    let run = |line: &str| env.ok(&["exec", "cfc", "n1", "--", "sh", "-c", line]);
    run("ip link add v0 type veth peer name v1 && ip link set v0 up && ip addr add 10.62.0.1/24 dev v0");
    run("ip route add 10.63.0.0/24 via 10.61.0.2");
    run("echo 1 > /proc/sys/net/ipv4/ip_forward && sysctl -qw net.ipv6.conf.all.forwarding=1");
    run("tc qdisc add dev v0 root tbf rate 1mbit burst 32kbit latency 400ms");
    run("nft add table inet confined && nft list tables | grep -q confined");
    run("iptables -A INPUT -s 10.99.0.0/24 -j DROP && iptables -S INPUT | grep -q 10.99.0.0");
    run("mkdir -p /run/m && mount -t tmpfs none /run/m && touch /run/m/x && umount /run/m");
    run("ip netns add inner && ip netns exec inner ip link show lo && ip netns del inner");
    assert!(run("ping -c1 -W2 10.61.0.2").contains("1 received"));
    // Its own devices: /dev/net/tun (for a tap, as Open vSwitch's netdev datapath makes).
    run("ip tuntap add dev tap0 mode tap && ip link show tap0");
}

#[test]
fn what_would_reach_the_host_or_another_node_gets_the_kernels_refusal() {
    let env = Env::new("confine-cannot");
    let f = env.up(&two_nodes("cfn"));
    let other = env.up(&two_nodes("cfo"));
    let says = |line: &str| says(&env, "cfn", "n1", line);
    // The kernel's own refusals, each.
    assert!(says("mknod /tmp/cfn-blk b 7 0").contains("Operation not permitted"));
    assert!(!std::path::Path::new("/tmp/cfn-blk").exists());
    assert!(says("mkdir -p /run/dbg && mount -t debugfs none /run/dbg").contains("denied"));
    let sysctl = "/proc/sys/kernel/printk_ratelimit";
    let before = std::fs::read_to_string(sysctl).unwrap();
    // Read-only, as Docker makes /proc/sys (the user namespace's own refusal, below it,
    // is seen where that is lifted: see the test of Docker's surface).
    assert!(says(&format!("echo 7 > {sysctl}")).contains("Read-only file system"));
    assert_eq!(std::fs::read_to_string(sysctl).unwrap(), before);
    // Another node's processes, and another fleet's, are not there to signal or trace:
    // not even their pids (each node has a PID namespace of its own).
    let theirs = inits_of(other.pid())[0];
    let sup = f.pid();
    for pid in [theirs, sup] {
        let out = says(&format!("kill -0 {pid}; echo status $?"));
        assert!(out.contains("status 1"), "{pid}: {out}");
    }
    // The host's abstract sockets (its own fleet's id range is held by one) are the
    // host's network namespace's: the node has its own.
    let first = uid_map(&env, "cfn", "n1").1;
    let abstract_connect = format!(
        "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('\\0nsfleet-ids-{first}')\" 2>&1 | tail -1"
    );
    assert!(
        says(&abstract_connect).contains("Connection refused"),
        "{}",
        says(&abstract_connect)
    );
    // A file the host's root owns is not the node's root's.
    let secret = env.file("secret", "host only\n");
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let out = says(&format!("cat {}", secret.display()));
    assert!(out.contains("Permission denied"), "{out}");
    drop(other);
    drop(f);
}

#[test]
fn a_node_that_starts_nothing_is_confined_when_it_asks() {
    let env = Env::new("confine-asked");
    let text = "[fleet]\nname = \"cfa\"\n[[node]]\nname = \"bare\"\n[[node]]\nname = \"shell\"\nconfined = true\n";
    let f = env.up(text);
    // A bare node is the host's network namespace entered by the host's root; one that
    // asks is confined as a node that runs software, for whatever `exec` runs there.
    assert_eq!(uid_map(&env, "cfa", "bare"), (0, 0, 4_294_967_295));
    let (inside, first, _) = uid_map(&env, "cfa", "shell");
    assert!(inside == 0 && BLOCK.contains(&first), "{first}");
    assert!(says(&env, "cfa", "shell", "mknod /tmp/cfa-blk b 7 0").contains("not permitted"));
    drop(f);
    // Not with privileged = true: refused at its line, before anything exists.
    let both = env.file(
        "cfb.toml",
        "[fleet]\nname = \"cfb\"\n[defaults]\nprivileged = true\n[[node]]\nname = \"n1\"\nconfined = true\n",
    );
    let args = ["up", both.to_str().unwrap()];
    env.refused(
        "confined and privileged",
        &args,
        &both,
        7,
        "a node is confined or privileged, not both",
    );
}

#[test]
fn exec_passes_its_callers_signals_on_to_the_command() {
    let env = Env::new("confine-signals");
    let _f = env.up("[fleet]\nname = \"cfs\"\n[[node]]\nname = \"n1\"\nconfined = true\n");
    // Mininet's popenpoll ends its pings with send_signal(SIGINT) to what popen started:
    // `nsfleet exec`, which waits for the command in the node's PID namespace.
    let mut exec = env.spawn(&["exec", "cfs", "n1", "--", "sleep", "100"]);
    let pid = exec.id() as i32;
    let catches_int = || {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let caught = status.lines().find_map(|l| l.strip_prefix("SigCgt:\t"));
        let mask = caught
            .and_then(|m| u64::from_str_radix(m, 16).ok())
            .unwrap_or(0);
        (mask & (1 << (libc::SIGINT - 1)) != 0)
            .then_some(())
            .ok_or("not yet")
    };
    wait_until("exec's handlers", Duration::from_secs(10), catches_int);
    signal(pid, libc::SIGINT);
    let status = exec.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGINT), "{status:?}");
}

#[test]
fn privileged_nodes_are_the_hosts_root_as_before() {
    let env = Env::new("confine-priv");
    let file = env.file("cfp.toml", &two_nodes("cfp"));
    env.ok(&["up", "--privileged", file.to_str().unwrap()]);
    let f = Fleet {
        env: &env,
        name: "cfp".into(),
    };
    assert_eq!(uid_map(&env, "cfp", "n1"), (0, 0, 4_294_967_295));
    let caps = says(&env, "cfp", "n1", "grep CapEff /proc/self/status");
    assert!(
        caps.contains("000001fffeffffff") || caps.contains("000001ffffffffff"),
        "{caps}"
    );
    wait_until("n1's init", Duration::from_secs(5), || {
        (inits_of(f.pid()).len() == 2)
            .then_some(())
            .ok_or("not yet")
    });
    drop(f);
}

#[test]
fn a_privileged_node_is_said_at_its_line_and_is_the_hosts_root() {
    let env = Env::new("confine-node");
    let text = "[fleet]\nname = \"cfq\"\n[[node]]\nname = \"n1\"\ncommands = [\"exec sleep 1000\"]\n[[node]]\nname = \"p1\"\nprivileged = true\ncommands = [\"exec sleep 1000\"]\n";
    let file = env.file("cfq.toml", text);
    let out = env.run(&["up", file.to_str().unwrap()]);
    let f = Fleet {
        env: &env,
        name: "cfq".into(),
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let at = format!("{}:8:", file.display());
    assert!(
        err.contains(&at) && err.contains("privileged: this node runs as the host's root"),
        "{err}"
    );
    assert_eq!(err.matches("privileged: this node").count(), 1, "{err}");
    assert_eq!(uid_map(&env, "cfq", "p1"), (0, 0, 4_294_967_295));
    assert!(BLOCK.contains(&uid_map(&env, "cfq", "n1").1));
    // containerlab's `privileged: true`, the same.
    let lab = env.file(
        "cfr.clab.yml",
        "name: cfr\ntopology:\n  nodes:\n    c1:\n      kind: linux\n      cmd: sleep 1000\n    p1:\n      kind: linux\n      privileged: true\n      cmd: sleep 1000\n",
    );
    let out = env.run(&["deploy", "-t", lab.to_str().unwrap(), "--host-software"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains(&format!("{}:9:", lab.display())), "{err}");
    assert_eq!(uid_map(&env, "cfr", "p1"), (0, 0, 4_294_967_295));
    assert!(BLOCK.contains(&uid_map(&env, "cfr", "c1").1));
    env.ok(&["destroy", "-t", lab.to_str().unwrap()]);
    drop(f);
}

#[test]
fn apply_cannot_give_software_to_a_node_made_without_and_says_how() {
    let env = Env::new("confine-apply");
    let base = "[fleet]\nname = \"cfa\"\n[[node]]\nname = \"n1\"\ncommands = [\"exec sleep 1000\"]\n[[node]]\nname = \"bare\"\n";
    let f = env.up(base);
    let changed = env.file(
        "changed.toml",
        &base.replace(
            "name = \"bare\"\n",
            "name = \"bare\"\ncommands = [\"exec sleep 1000\"]\n",
        ),
    );
    let out = env.run(&["apply", changed.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("node bare would run software") && err.contains("Remove it in one apply"),
        "{err}"
    );
    // Nothing changed: it still runs nothing.
    let status = env.status("cfa");
    let bare = (status["nodes"].as_array().unwrap().iter())
        .find(|n| n["name"] == "bare")
        .unwrap();
    assert!(bare["processes"].as_array().unwrap().is_empty(), "{bare}");
    // Nor can a confined node become privileged: its namespaces are its user namespace's.
    let privileged = env.file(
        "privileged.toml",
        &base.replace("name = \"n1\"\n", "name = \"n1\"\nprivileged = true\n"),
    );
    let out = env.run(&["apply", privileged.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("node n1 would be privileged, and it was made confined"),
        "{err}"
    );
    let (_, outside, _) = uid_map(&env, "cfa", "n1");
    assert!(BLOCK.contains(&outside), "still confined: {outside}");
    drop(f);
}

/// A field of /proc/self/status as `line` in `node` sees it (its value, trimmed).
fn status_field(env: &Env, fleet: &str, node: &str, field: &str) -> String {
    let status = env.ok(&["exec", fleet, node, "--", "cat", "/proc/self/status"]);
    (status.lines())
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {status}"))
        .trim()
        .to_string()
}

/// The errno of `keyctl(KEYCTL_GET_KEYRING_ID, ...)` (a call Docker's filter refuses),
/// or 0, in `node`.
fn keyctl_errno(env: &Env, fleet: &str, node: &str) -> String {
    let script = "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nnr = os.uname().machine == 'aarch64' and 219 or 250\nprint(0 if libc.syscall(nr, 0, -3, 0) >= 0 else ctypes.get_errno())";
    env.ok(&["exec", fleet, node, "--", "python3", "-c", script])
        .trim()
        .to_string()
}

#[test]
fn a_node_gives_up_what_docker_takes_and_the_way_out_is_explicit() {
    let env = Env::new("confine-docker");
    // A device of the host's only its root may open, at a path a host-software node sees.
    let dev = env.files.join("null0");
    let made = std::process::Command::new("mknod")
        .args(["-m", "600", dev.to_str().unwrap(), "c", "1", "3"])
        .status()
        .unwrap();
    assert!(made.success());
    let dev = dev.display();
    let text = format!(
        "[fleet]\nname = \"cfd\"\n[[node]]\nname = \"d\"\ncommands = [\"grep -E '^(CapBnd|Seccomp):' /proc/self/status > /run/s && mv /run/s /run/started; exec sleep 1000\"]\n\
         [[node]]\nname = \"capped\"\ncommands = [\"grep -E '^(CapBnd|Seccomp):' /proc/self/status > /run/s && mv /run/s /run/started; exec sleep 1000\"]\ncapabilities = [\"-NET_RAW\", \"-SYS_MODULE\"]\ndevices = [\"{dev}\"]\n\
         [[node]]\nname = \"open\"\ncommands = [\"exec sleep 1000\"]\nsecurity_opt = [\"seccomp=unconfined\", \"systempaths=unconfined\", \"no-new-privileges\"]\n"
    );
    let _f = env.up(&text);
    let in_node = |node: &str, line: &str| says(&env, "cfd", node, line);
    // What a node's command saw as it started: written whole (renamed into place) by a
    // command that `up` started but need not have seen run (CI once read it empty).
    let started_in = |node: &str| {
        wait_until("the command's first line", Duration::from_secs(10), || {
            let out = env.run(&["exec", "cfd", node, "--", "cat", "/run/started"]);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if out.status.success() && !text.is_empty() {
                Ok(text)
            } else {
                Err(String::from_utf8_lossy(&out.stderr).into_owned())
            }
        })
    };
    // By default: Docker's seccomp filter, on the node's commands and on exec alike, and
    // every capability over its own namespaces.
    let started = started_in("d");
    assert!(started.contains("Seccomp:\t2"), "{started}");
    assert_eq!(status_field(&env, "cfd", "d", "Seccomp"), "2");
    assert_eq!(
        status_field(&env, "cfd", "d", "CapBnd"),
        format!("{:016x}", nsfleet_values::ALL_CAPABILITIES)
    );
    assert_eq!(keyctl_errno(&env, "cfd", "d"), libc::EPERM.to_string());
    // Docker's /dev, not the host's, for a node that runs the host's software too.
    let devs = in_node("d", "ls /dev");
    for d in [
        "null", "zero", "full", "random", "urandom", "tty", "pts", "shm", "ptmx", "fd",
    ] {
        assert!(devs.lines().any(|l| l == d), "{d} not in {devs}");
    }
    assert!(!devs.lines().any(|l| l == "kmsg" || l == "mem"), "{devs}");
    // Docker's masked and read-only paths; the node's own sysctls stay writable, and it
    // may still mount a proc and sysfs of its own (`ip netns exec` does).
    let masked = in_node("d", "ls /sys/firmware | wc -l; wc -c < /proc/timer_list");
    assert_eq!(masked.split_whitespace().collect::<Vec<_>>(), ["0", "0"]);
    assert!(in_node("d", "echo 1 > /proc/sys/kernel/printk_ratelimit").contains("Read-only"));
    in_node("d", "echo 1 > /proc/sys/net/ipv4/ip_forward");
    assert_eq!(in_node("d", "cat /proc/sys/net/ipv4/ip_forward"), "1\n");
    let inner = in_node(
        "d",
        "ip netns add i1 && ip netns exec i1 ls /sys/class/net; ip netns del i1",
    );
    assert_eq!(inner, "lo\n");
    // `capabilities` drops what it lists with `-`, for good: from the bounding set of
    // its commands and of exec.
    let kept = nsfleet_values::ALL_CAPABILITIES & !(1 << 13 | 1 << 16);
    let started = started_in("capped");
    assert!(
        started.contains(&format!("CapBnd:\t{kept:016x}")),
        "{started}"
    );
    assert_eq!(
        status_field(&env, "cfd", "capped", "CapEff"),
        format!("{kept:016x}")
    );
    assert!(in_node("capped", "ping -c1 -W1 127.0.0.1").contains("not permitted"));
    // `devices`: the host's device, made for the node (the host's file is its root's).
    assert!(in_node("d", &format!("echo x > {dev}")).contains("denied"));
    assert_eq!(
        in_node("capped", &format!("echo x > {dev} && echo written")),
        "written\n"
    );
    // The way out, each explicit.
    assert_eq!(status_field(&env, "cfd", "open", "Seccomp"), "0");
    assert_eq!(status_field(&env, "cfd", "open", "NoNewPrivs"), "1");
    assert_ne!(in_node("open", "ls /sys/firmware | wc -l"), "0\n");
    let sysctl = "/proc/sys/kernel/printk_ratelimit";
    let before = std::fs::read_to_string(sysctl).unwrap();
    assert!(in_node("open", &format!("echo 7 > {sysctl}")).contains("Permission denied"));
    assert_eq!(std::fs::read_to_string(sysctl).unwrap(), before);
}

/// A seccomp profile of Docker's format, written by the test: a call refused with the
/// errno it names, on the node's commands and on `exec` alike; a rule on an argument's
/// value; a rule that excludes a node holding a capability, which applies once the node
/// drops it; and a call the profile does not name, allowed as its default says.
#[test]
fn a_seccomp_profile_of_ones_own_decides_each_call() {
    let env = Env::new("confine-profile");
    env.file(
        "profile.json",
        r#"{
  "defaultAction": "SCMP_ACT_ALLOW",
  "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"],
  "syscalls": [
    {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13},
    {"names": ["kill"], "action": "SCMP_ACT_ERRNO", "errnoRet": 30,
     "args": [{"index": 1, "value": 0, "op": "SCMP_CMP_EQ"}]},
    {"names": ["sethostname"], "action": "SCMP_ACT_ERRNO", "errnoRet": 95,
     "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
    {"names": ["s390_runtime_instr"], "action": "SCMP_ACT_ERRNO",
     "includes": {"arches": ["s390x"]}}
  ]
}"#,
    );
    let text = "[fleet]\nname = \"cfp\"\n[defaults]\nsecurity_opt = [\"seccomp=profile.json\"]\n\
         [[node]]\nname = \"p\"\ncommands = [\"mkdir /run/made 2> /run/w; mv /run/w /run/why; exec sleep 1000\"]\n\
         [[node]]\nname = \"nocap\"\ncommands = [\"exec sleep 1000\"]\ncapabilities = [\"-SYS_ADMIN\"]\n";
    let _f = env.up(text);
    let in_node = |node: &str, line: &str| says(&env, "cfp", node, line);
    assert_eq!(status_field(&env, "cfp", "p", "Seccomp"), "2");
    let why = wait_until("the command's mkdir", Duration::from_secs(10), || {
        let out = env.run(&["exec", "cfp", "p", "--", "cat", "/run/why"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        match out.status.success() && !text.is_empty() {
            true => Ok(text),
            false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        }
    });
    assert!(why.contains("Permission denied"), "{why}");
    assert!(in_node("p", "mkdir /tmp/x").contains("Permission denied"));
    assert!(in_node("p", "kill -0 1").contains("Read-only file system"));
    assert_eq!(in_node("p", "kill -CONT 1 && echo sent"), "sent\n");
    // Excluded where the node holds CAP_SYS_ADMIN; where it dropped it, the rule applies
    // before the kernel's own refusal.
    assert_eq!(in_node("p", "hostname p2 && hostname"), "p2\n");
    let refused = in_node(
        "nocap",
        "python3 -c 'import socket; socket.sethostname(\"n2\")'",
    );
    assert!(refused.contains("Operation not supported"), "{refused}");
    // Not named: the default, and Docker's filter is not there (its keyctl refusal).
    assert_ne!(keyctl_errno(&env, "cfp", "p"), libc::EPERM.to_string());
}

#[test]
fn a_capability_option_or_device_that_cannot_be_is_refused_at_its_line() {
    let env = Env::new("confine-bad");
    let cases = [
        (
            "capabilities = [\"-NET_ADMINN\"]",
            "\"NET_ADMINN\" is not a capability",
        ),
        (
            "security_opt = [\"seccomp=no-such-profile.json\"]",
            "reading the profile no-such-profile.json: No such file or directory",
        ),
        (
            "security_opt = [\"seccomp=notify.json\"]",
            "notify.json: syscalls[0] (mkdir...): SCMP_ACT_NOTIFY: nsfleet does not trace",
        ),
        (
            "security_opt = [\"seccomp=broken.json\"]",
            "broken.json:2:1: EOF while parsing a value",
        ),
        (
            "security_opt = [\"userns=host\"]",
            "expected seccomp=unconfined",
        ),
        (
            "devices = [\"/dev/nsfleet-no-such\"]",
            "No such file or directory",
        ),
        ("devices = [\"/etc/hostname\"]", "is not a device file"),
        (
            "devices = [\"/dev/null:/dev/other\"]",
            "gets a device at the host's path",
        ),
        (
            "devices = [\"/dev/null:/dev/null:rx\"]",
            "expected r, w and m",
        ),
    ];
    env.file(
        "notify.json",
        r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_NOTIFY"}]}"#,
    );
    env.file("broken.json", "{\"defaultAction\": \"SCMP_ACT_ALLOW\",\n");
    for (i, (line, expected)) in cases.iter().enumerate() {
        let text = format!(
            "[fleet]\nname = \"cfb{i}\"\n[[node]]\nname = \"a\"\ncommands = [\"exec sleep 1\"]\n{line}\n"
        );
        let file = env.file(&format!("cfb{i}.toml"), &text);
        env.refused(line, &["up", file.to_str().unwrap()], &file, 6, expected);
    }
    // containerlab's keys, the same checks at their lines.
    let lab = env.file(
        "cfb.clab.yml",
        "name: cfbl\ntopology:\n  nodes:\n    c1:\n      kind: linux\n      cmd: sleep 1\n      cap-drop: [NET_BOGUS]\n",
    );
    let args = ["deploy", "-t", lab.to_str().unwrap(), "--host-software"];
    env.refused(
        "cap-drop",
        &args,
        &lab,
        7,
        "cap-drop: \"NET_BOGUS\" is not a capability",
    );
}

//! containerlab topology files run as they are: FRR routers with hosts behind them, a
//! linux lab with exec lines and a bridge, the extended link forms, containerlab's
//! inheritance (defaults < kinds < groups < nodes), the management network, the familiar
//! verbs (deploy, inspect, destroy), and bad files refused with file:line and nothing made.
//!
//! Every lab has a name of this test process's own and a management subnet no other
//! test uses: labs of tests running side by side never meet on the host.

mod harness;

use harness::*;
use std::time::{Duration, Instant};

/// A lab name unique to this process and test.
fn lab(tag: &str) -> String {
    format!("t{}{tag}", std::process::id() % 100_000)
}

/// Deploys `text` as FILE.clab.yml, its nodes running the host's software (the images
/// these labs name are not in the test's image store: tests/images.rs runs images);
/// returns the lab's guard and the file's path.
fn deploy<'a>(env: &'a Env, name: &str, text: &str) -> (Fleet<'a>, String) {
    let file = env.file(&format!("{name}.clab.yml"), text);
    let file = file.to_str().unwrap().to_string();
    let guard = Fleet {
        env,
        name: name.to_string(),
    };
    env.ok(&["deploy", "--host-software", "-t", &file]);
    (guard, file)
}

/// Runs `cmd` in a node until it succeeds, or fails the test after `within`.
fn until_ok(env: &Env, lab: &str, node: &str, cmd: &[&str], within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        let mut args = vec!["exec", lab, node, "--"];
        args.extend(cmd);
        let out = env.run(&args);
        if out.status.success() {
            return String::from_utf8_lossy(&out.stdout).into_owned();
        }
        assert!(
            Instant::now() < deadline,
            "{node}: {cmd:?} still fails after {within:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn host_has_link(name: &str) -> bool {
    std::path::Path::new(&format!("/sys/class/net/{name}")).exists()
}

/// `destroy -t` takes the lab down to nothing: every namespace reclaimed, the host's end
/// of the management network gone.
fn destroy(env: &Env, guard: Fleet<'_>, file: &str, host_iface: &str) {
    let nodes = env.status(&guard.name)["nodes"].as_array().unwrap().len();
    let out = env.ok(&["destroy", "-t", file]);
    std::mem::forget(guard);
    assert!(
        out.contains(&format!("reclaimed {nodes} of {nodes} namespaces")),
        "{out}"
    );
    assert!(
        !host_has_link(host_iface),
        "{host_iface} is gone from the host"
    );
    assert!(env.fleet_dirs().is_empty());
}

const OSPF: &str = "frr defaults traditional
interface lo
 ip address 10.10.10.{N}/32
interface eth1
 ip address {A}
 ip ospf network point-to-point
 ip ospf hello-interval 1
 ip ospf dead-interval 4
interface eth2
 ip address {B}
 ip ospf network point-to-point
 ip ospf hello-interval 1
 ip ospf dead-interval 4
router ospf
 ospf router-id 10.10.10.{N}
 network 10.10.10.{N}/32 area 0
 network 192.168.0.0/16 area 0
";

#[test]
fn frr_routers_converge_and_a_host_pings_a_host_across_them() {
    let env = Env::new("clabfrr");
    let name = lab("frr");
    // r1 - r2 - r3 in a line; h1 behind r1, h3 behind r3.
    let conf =
        |n: &str, a: &str, b: &str| OSPF.replace("{N}", n).replace("{A}", a).replace("{B}", b);
    env.file("r1.conf", &conf("1", "192.168.1.1/24", "192.168.11.1/24"));
    env.file("r2.conf", &conf("2", "192.168.1.2/24", "192.168.2.1/24"));
    env.file("r3.conf", &conf("3", "192.168.2.2/24", "192.168.13.1/24"));
    let host = |net: &str| {
        format!("      exec:\n        - ip addr add 192.168.{net}.2/24 dev eth1\n        - ip route add 192.168.0.0/16 via 192.168.{net}.1\n")
    };
    let text = format!(
        "name: {name}
mgmt:
  ipv4-subnet: 172.31.71.0/24
topology:
  kinds:
    frr:
      image: quay.io/frrouting/frr:10.5.1
  nodes:
    r1: {{kind: frr, startup-config: r1.conf}}
    r2: {{kind: frr, startup-config: r2.conf}}
    r3: {{kind: frr, startup-config: r3.conf}}
    h1:
      kind: linux
{}    h3:
      kind: linux
{}  links:
    - endpoints: [r1:eth1, r2:eth1]
    - endpoints: [r2:eth2, r3:eth1]
    - endpoints: [h1:eth1, r1:eth2]
    - endpoints: [h3:eth1, r3:eth2]
",
        host("11"),
        host("13")
    );
    let (guard, file) = deploy(&env, &name, &text);
    let ping = ["ping", "-c1", "-W1", "192.168.13.2"];
    until_ok(&env, &name, "h1", &ping, Duration::from_secs(60));
    let neighbours = env.ok(&[
        "exec",
        &name,
        "r2",
        "--",
        "vtysh",
        "-c",
        "show ip ospf neighbor",
    ]);
    assert_eq!(neighbours.matches("Full").count(), 2, "{neighbours}");
    // containerlab's save: a running change saved in the node, and copied out.
    env.ok(&[
        "exec",
        &name,
        "r2",
        "--",
        "vtysh",
        "-c",
        "conf t",
        "-c",
        "router ospf",
        "-c",
        "ospf router-id 10.9.9.9",
    ]);
    let saved_dir = env.file("r2.conf", &conf("2", "192.168.1.2/24", "192.168.2.1/24"));
    let saved_dir = saved_dir.parent().unwrap().join("saved");
    let out = env.ok(&[
        "save",
        "-t",
        &file,
        "--node-filter",
        "r2,h1",
        "--copy",
        saved_dir.to_str().unwrap(),
    ]);
    assert!(
        out.contains(&format!("clab-{name}-r2: saved")) && out.contains("nothing to save"),
        "{out}"
    );
    let inside = env.ok(&["exec", &name, "r2", "--", "cat", "/etc/frr/frr.conf"]);
    assert!(inside.contains("ospf router-id 10.9.9.9"), "{inside}");
    let copied = std::fs::read_to_string(saved_dir.join("r2/frr.conf")).unwrap();
    assert_eq!(copied, inside);
    // The management network, as containerlab builds it: eth0 from .2 in file order,
    // reachable from the host, names in the fleet's /etc/hosts.
    let inspect = env.ok(&["inspect", "-t", &file]);
    for (node, addr) in [("r1", "172.31.71.2"), ("h3", "172.31.71.6")] {
        let row = inspect
            .lines()
            .find(|l| l.contains(&format!("clab-{name}-{node} ")))
            .unwrap();
        assert!(row.contains(addr) && row.contains("running"), "{inspect}");
    }
    assert!(
        inspect.contains("quay.io/frrouting/frr:10.5.1"),
        "{inspect}"
    );
    let ping_host = std::process::Command::new("ping")
        .args(["-c1", "-W2", "172.31.71.4"])
        .output()
        .unwrap();
    assert!(
        ping_host.status.success(),
        "the host reaches r3 on the management network"
    );
    let hosts = env.ok(&["exec", &name, "h1", "--", "cat", "/etc/hosts"]);
    assert!(
        hosts.contains(&format!("172.31.71.3\tr2 clab-{name}-r2")),
        "{hosts}"
    );
    assert_eq!(
        env.ok(&["exec", &name, "r3", "--", "hostname"]).trim(),
        "r3"
    );
    let json: serde_json::Value =
        serde_json::from_str(&env.ok(&["inspect", "-t", &file, "--json"])).unwrap();
    assert_eq!(json[&name].as_array().unwrap().len(), 5, "{json}");
    assert_eq!(json[&name][0]["kind"], "frr");
    destroy(&env, guard, &file, &format!("clab-{}", &fnv_hex(&name)));
}

/// The host interface name nsfleet gives a lab's management network.
fn fnv_hex(s: &str) -> String {
    let h = s.bytes().fold(0x811c9dc5u32, |h, b| {
        (h ^ b as u32).wrapping_mul(0x01000193)
    });
    format!("{h:08x}")
}

#[test]
fn a_linux_lab_runs_its_exec_lines_in_order_and_wires_a_bridge() {
    let env = Env::new("clablinux");
    let name = lab("lin");
    env.file("motd", "hello from the host\n");
    let text = format!(
        "name: {name}
prefix: \"\"
mgmt:
  ipv4-subnet: 172.31.72.0/24
  bridge: {name}m
topology:
  nodes:
    sw:
      kind: bridge
    a:
      kind: linux
      image: alpine:3
      env: {{GREETING: hi}}
      binds:
        - motd:/tmp/motd:ro
      exec:
        - ip addr add 10.9.0.1/24 dev eth1
        - false
        - sh -c 'echo $GREETING $CLAB_INTFS > /tmp/said'
    b:
      kind: linux
      exec:
        - ip addr add 10.9.0.2/24 dev eth1
  links:
    - endpoints: [a:eth1, sw:a-port]
    - endpoints: [b:eth1, sw:b-port]
"
    );
    let (guard, file) = deploy(&env, &name, &text);
    until_ok(
        &env,
        &name,
        "a",
        &["ping", "-c1", "-W1", "10.9.0.2"],
        Duration::from_secs(20),
    );
    // Lines after a failing one still run, with the node's environment; the failure is
    // in the node's log.
    let said = until_ok(
        &env,
        &name,
        "a",
        &["cat", "/tmp/said"],
        Duration::from_secs(10),
    );
    assert_eq!(said.trim(), "hi 1");
    // A container's environment: the file's and containerlab's variables, nsfleet's names,
    // and no NSFLEET_INDEX, which a containerlab node has no number for.
    let vars = env.ok(&["exec", &name, "a", "--", "env"]);
    assert!(vars.lines().any(|l| l == "GREETING=hi"), "{vars}");
    assert!(vars.lines().any(|l| l == "HOSTNAME=a"), "{vars}");
    assert!(
        vars.lines().any(|l| l == format!("NSFLEET_FLEET={name}")),
        "{vars}"
    );
    assert!(
        !vars.contains("NSFLEET_INDEX") && !vars.contains("NSFLEET_RUN_DIR"),
        "{vars}"
    );
    let log = std::fs::read_to_string(env.run_dir.join(&name).join("logs/a.log")).unwrap();
    assert!(
        log.contains("exec: false") && log.contains("exec failed with status 1"),
        "{log}"
    );
    // A read-only bind: the host's file, seen in the node only.
    assert_eq!(
        env.ok(&["exec", &name, "a", "--", "cat", "/tmp/motd"]),
        "hello from the host\n"
    );
    let write = env.run(&["exec", &name, "a", "--", "sh", "-c", "echo x > /tmp/motd"]);
    assert!(!write.status.success(), "the bind is read-only");
    assert!(
        !std::path::Path::new("/tmp/motd").exists()
            || std::fs::read_to_string("/tmp/motd").unwrap_or_default() != "hello from the host\n"
    );
    // A second lab on the same management subnet is refused before anything exists: the
    // host would route the subnet to one of them only.
    let other = env.file("other.clab.yml", &format!("name: {name}2\nmgmt: {{ipv4-subnet: 172.31.72.0/24}}\ntopology:\n  nodes:\n    z: {{kind: linux}}\n"));
    let out = env.run(&["deploy", "-t", other.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("already routes 172.31.72.0/24"),
        "{err}"
    );
    assert_eq!(env.fleet_dirs(), vec![name.clone()]);
    // prefix: "" names the containers after the nodes.
    let inspect = env.ok(&["inspect", "--name", &name]);
    assert!(inspect.lines().any(|l| l.starts_with("│ a ")), "{inspect}");
    assert!(
        !inspect.contains(" sw "),
        "a bridge is not a container: {inspect}"
    );
    destroy(&env, guard, &file, &format!("{name}m"));
}

#[test]
fn the_management_switch_snoops_and_queries_and_neighbours_still_find_each_other() {
    let env = Env::new("clabmld");
    let name = lab("mld");
    let net = format!("{name}n");
    let text = format!(
        "name: {name}
mgmt: {{network: {net}, ipv4-subnet: 172.31.73.0/24, ipv6-subnet: fd31:73::/64}}
topology:
  nodes:
    a: {{kind: linux}}
    b: {{kind: linux}}
    c: {{kind: linux}}
"
    );
    let (guard, _file) = deploy(&env, &name, &text);
    let bridge = |knob: &str| {
        let path = format!("/sys/class/net/br0/bridge/multicast_{knob}");
        env.ok(&["exec", &name, &net, "--", "cat", &path])
    };
    assert_eq!(bridge("snooping").trim(), "1");
    assert_eq!(bridge("querier").trim(), "1");
    // Neighbour discovery asks the target's solicited-node group, which the switch now
    // sends only to the ports that reported it: c's.
    let c6 = "fd31:73::4";
    let ping6 = ["ping", "-6", "-c1", "-W1", c6];
    until_ok(&env, &name, "a", &ping6, Duration::from_secs(10));
    // IPv4's ARP is broadcast, as before.
    let ping4 = ["ping", "-c1", "-W1", "172.31.73.4"];
    until_ok(&env, &name, "b", &ping4, Duration::from_secs(10));
    drop(guard);
}

#[test]
fn inheritance_and_extended_links_are_containerlab_s() {
    let env = Env::new("clabext");
    let name = lab("ext");
    let hif = format!("{name}h");
    let text = format!(
        "name: {name}
mgmt:
  ipv4-subnet: 172.31.73.0/24
  ipv6-subnet: 3fff:172:31:73::/64
topology:
  defaults:
    kind: linux
    env: {{LEVEL: defaults, FROM_DEFAULTS: d}}
    exec: [\"sh -c 'echo defaults >> /tmp/order'\"]
  kinds:
    linux:
      image: debian:12
      env-files: [vars.env]
      env: {{LEVEL: kind}}
      labels: {{team: net}}
  groups:
    edge:
      env: {{LEVEL: group}}
      exec: [\"sh -c 'echo group >> /tmp/order'\"]
  nodes:
    x:
      group: edge
      mgmt-ipv4: 172.31.73.50
      env: {{OWN: x}}
      exec: [\"sh -c 'echo node >> /tmp/order'\"]
    y:
      image: alpine:3
  links:
    - type: veth
      mtu: 1400
      endpoints:
        - {{node: x, interface: e1, mac: \"02:00:00:00:00:01\"}}
        - {{node: y, interface: e1}}
    - type: host
      endpoint: {{node: y, interface: uplink}}
      host-interface: {hif}
    - type: mgmt-net
      endpoint: {{node: x, interface: m1}}
      host-interface: x-m1
"
    );
    // An env file beside the topology file: its variables under `env`'s.
    env.file(
        "vars.env",
        "# env-files\nLEVEL=file\nexport FROM_FILE='f $x'\n",
    );
    let (guard, file) = deploy(&env, &name, &text);
    let env_of = |node: &str, var: &str| {
        env.ok(&[
            "exec",
            &name,
            node,
            "--",
            "sh",
            "-c",
            &format!("echo ${var}"),
        ])
        .trim()
        .to_string()
    };
    assert_eq!(env_of("x", "LEVEL"), "group");
    assert_eq!(env_of("x", "FROM_DEFAULTS"), "d");
    assert_eq!(env_of("x", "OWN"), "x");
    assert_eq!(env_of("y", "LEVEL"), "kind");
    assert_eq!(env_of("x", "FROM_FILE"), "f $x");
    assert_eq!(env_of("x", "CLAB_LABEL_TEAM"), "net");
    // exec lines are appended, defaults first.
    let order = until_ok(
        &env,
        &name,
        "x",
        &[
            "sh",
            "-c",
            "test $(wc -l < /tmp/order) = 3 && cat /tmp/order",
        ],
        Duration::from_secs(10),
    );
    assert_eq!(order, "defaults\ngroup\nnode\n");
    let link = env.ok(&[
        "exec",
        &name,
        "x",
        "--",
        "cat",
        "/sys/class/net/e1/mtu",
        "/sys/class/net/e1/address",
    ]);
    assert_eq!(link, "1400\n02:00:00:00:00:01\n");
    let mtu = std::fs::read_to_string(format!("/sys/class/net/{hif}/mtu")).unwrap();
    assert_eq!(mtu.trim(), "9500", "host links get containerlab's MTU");
    let json: serde_json::Value =
        serde_json::from_str(&env.ok(&["inspect", "-t", &file, "--json"])).unwrap();
    let x = &json[&name][0];
    assert_eq!(
        (x["image"].as_str(), x["ipv4_address"].as_str()),
        (Some("debian:12"), Some("172.31.73.50/24")),
        "{json}"
    );
    assert_eq!(json[&name][1]["ipv4_address"], "172.31.73.2/24", "{json}");
    assert_eq!(x["ipv6_address"], "3fff:172:31:73::2/64", "{json}");
    // A mgmt-net end is a port of the management network: x reaches y's eth0 through it.
    env.ok(&[
        "exec",
        &name,
        "x",
        "--",
        "ip",
        "addr",
        "add",
        "172.31.73.99/32",
        "dev",
        "m1",
    ]);
    env.ok(&[
        "exec", &name, "x", "--", "ip", "link", "set", "eth0", "down",
    ]);
    until_ok(
        &env,
        &name,
        "x",
        &["ping", "-c1", "-W1", "-I", "m1", "172.31.73.2"],
        Duration::from_secs(10),
    );
    destroy(&env, guard, &file, &hif);
    assert!(!host_has_link(&hif));
}

/// (what, file text, line, message): each refused with FILE:LINE and nothing created.
/// Bad containerlab files are in tests/corpus (`*.clab.yml`), refused by `up`; `deploy`
/// reads them the same way.
#[test]
fn a_bad_containerlab_file_given_to_deploy_gets_its_line_and_creates_nothing() {
    let env = Env::new("clabbad");
    let f = env.file(
        "missing-node.clab.yml",
        "name: x\ntopology:\n  nodes:\n    a: {kind: linux}\n  links:\n    - endpoints: [a:eth1, b:eth1]\n",
    );
    let args = ["deploy", "-t", f.to_str().unwrap()];
    env.refused("deploy", &args, &f, 6, "there is no node \"b\"");
    // An env file's bad line is named, at the env-files entry that reads it.
    env.file("bad.env", "A=1\nnot a variable\n");
    let f = env.file(
        "bad-env.clab.yml",
        "name: x\ntopology:\n  nodes:\n    a:\n      kind: linux\n      env-files: [missing.env, bad.env]\n",
    );
    let args = ["deploy", "-t", f.to_str().unwrap()];
    env.refused("env-files", &args, &f, 6, "missing.env");
    let f = env.file(
        "bad-env2.clab.yml",
        "name: x\ntopology:\n  nodes:\n    a:\n      kind: linux\n      env-files:\n        - bad.env\n",
    );
    let args = ["deploy", "-t", f.to_str().unwrap()];
    env.refused(
        "env-file line",
        &args,
        &f,
        7,
        "bad.env, line 2: expected KEY=VALUE",
    );
}

#[test]
fn keys_nsfleet_does_not_apply_are_warned_about_with_their_line() {
    let env = Env::new("clabwarn");
    let name = lab("warn");
    // Any name, with --format clab.
    let f = env.file(
        "lab.yaml.txt",
        &format!("name: {name}\nmgmt: {{ipv4-subnet: 172.31.74.0/24}}\ntopology:\n  nodes:\n    a:\n      kind: linux\n      position: 10,20\n      colour: blue\n"),
    );
    let dry = env.ok(&["up", "--format", "clab", "--dry-run", f.to_str().unwrap()]);
    assert!(
        dry.contains("is valid") && env.fleet_dirs().is_empty(),
        "{dry}"
    );
    let guard = Fleet {
        env: &env,
        name: name.clone(),
    };
    let out = env.run(&["up", "--format", "clab", f.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let at =
        |line: usize, what: &str| format!("nsfleet: warning: {}:{line}:7: {what}", f.display());
    assert!(err.contains(&at(7, "`position` is not applied")), "{err}");
    assert!(err.contains(&at(8, "unknown node key `colour`")), "{err}");
    drop(guard);
}

/// Whether this kernel makes dummy devices (its module may be missing), asked in a
/// namespace of the question's own.
fn kernel_has_dummy() -> bool {
    std::process::Command::new("unshare")
        .args(["-n", "ip", "link", "add", "d0", "type", "dummy"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A `type: dummy` link is a dummy device on its node, with containerlab's MTU, where the
/// kernel can make one; where it cannot, the file is refused at the link's line before
/// anything exists (tests/vm.rs makes one in a Debian kernel).
#[test]
fn a_dummy_link_is_a_dummy_device_or_refused_at_its_line_where_the_kernel_has_none() {
    let env = Env::new("clabdummy");
    let name = lab("dum");
    let text = format!(
        "name: {name}
topology:
  nodes:
    r1: {{kind: linux}}
  links:
    - type: dummy
      endpoint: {{node: r1, interface: dum0}}
"
    );
    if !kernel_has_dummy() {
        let f = env.file(&format!("{name}.clab.yml"), &text);
        let args = ["deploy", "--host-software", "-t", f.to_str().unwrap()];
        env.refused("dummy", &args, &f, 6, "cannot make dummy devices");
        return;
    }
    let (guard, file) = deploy(&env, &name, &text);
    let dev = env.ok(&[
        "exec", &name, "r1", "--", "ip", "-d", "link", "show", "dum0",
    ]);
    assert!(dev.contains("dummy") && dev.contains("mtu 9500"), "{dev}");
    env.ok(&["destroy", "-t", &file]);
    std::mem::forget(guard);
}

/// A namespace the test names itself (`ip netns add`), deleted even if the test fails.
struct OwnNetns(String);

impl Drop for OwnNetns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.0])
            .status();
    }
}

fn named(name: &str) -> bool {
    std::path::Path::new(&format!("/run/netns/{name}")).exists()
}

/// `deploy --netns-names` names each node's namespace as containerlab does, for `ip netns
/// exec`; the names go with `destroy`, and with `clean` after the supervisor was killed
/// (a name holds its namespace alive); a name someone else holds is refused before
/// anything is made, and left as it is.
#[test]
fn named_namespaces_go_with_the_lab_and_with_clean_and_someone_elses_are_left_alone() {
    let env = Env::new("clabnetns");
    let name = lab("ns");
    let text = format!(
        "name: {name}
mgmt:
  ipv4-subnet: 172.31.75.0/24
  ipv6-subnet: 3fff:172:31:75::/64
topology:
  nodes:
    a: {{kind: linux}}
    b: {{kind: linux}}
  links:
    - endpoints: [a:eth1, b:eth1]
"
    );
    let file = env.file(&format!("{name}.clab.yml"), &text);
    let file = file.to_str().unwrap();
    let deploy = ["deploy", "--host-software", "--netns-names", "-t", file];
    let (a, b) = (format!("clab-{name}-a"), format!("clab-{name}-b"));

    let theirs = OwnNetns(b.clone());
    assert!(std::process::Command::new("ip")
        .args(["netns", "add", &b])
        .status()
        .unwrap()
        .success());
    let err = env.fails(&deploy, "another lab's or tool's namespaces");
    assert!(err.contains(&b) && !err.contains(&a), "{err}");
    assert!(env.fleet_dirs().is_empty() && named(&b) && !named(&a));
    drop(theirs);

    let guard = Fleet {
        env: &env,
        name: name.clone(),
    };
    let guard_env = &env;
    guard_env.ok(&deploy);
    let link = std::process::Command::new("ip")
        .args(["netns", "exec", &a, "cat", "/sys/class/net/eth1/mtu"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&link.stdout), "9500\n");
    let held = netns_held_by(guard.pid());
    guard_env.ok(&["destroy", "-t", file]);
    assert!(!named(&a) && !named(&b));
    assert_eq!(still_alive(&held), 0, "destroy waits for every namespace");

    // Killed: the names hold the namespaces until `clean` takes them away.
    guard_env.ok(&deploy);
    let sup = guard.pid();
    let held = netns_held_by(sup);
    signal(sup, libc::SIGKILL);
    wait_gone(sup);
    assert!(named(&a) && named(&b));
    let out = guard_env.ok(&["clean", &name]);
    assert!(out.contains(&format!("/run/netns/{a}")), "{out}");
    assert!(!named(&a) && !named(&b));
    std::mem::forget(guard);
    wait_until(
        "the namespaces to be freed once their names are gone",
        Duration::from_secs(20),
        || match still_alive(&held) {
            0 => Ok(()),
            n => Err(n),
        },
    );
}

/// A containerlab file that is a Go template is rendered as containerlab renders it: with
/// the variables of the file beside it named after it, or of `--vars`; a template error
/// is refused at its line before anything exists.
#[test]
fn a_go_templated_file_is_rendered_with_its_variables() {
    let env = Env::new("clabtmpl");
    let name = lab("tmpl");
    let text = "name: {{ .lab }}
mgmt:
  ipv4-subnet: 172.31.76.0/24
  ipv6-subnet: 3fff:172:31:76::/64
topology:
  nodes:
{{- range $i := seq 1 .count }}
    n{{ $i }}: {kind: linux, env: {SLOT: \"{{ mul $i 10 }}\"}}
{{- end }}
";
    let file = env.file("t.clab.yml", text);
    env.file("t.clab_vars.yml", &format!("lab: {name}\ncount: 3\n"));
    let other = env.file("more.yml", "count: 2\n");
    let file = file.to_str().unwrap();
    let guard = Fleet {
        env: &env,
        name: name.clone(),
    };
    env.ok(&["deploy", "--host-software", "-t", file]);
    assert_eq!(
        env.status(&name)["nodes"].as_array().unwrap().len(),
        4,
        "3 nodes and the management switch"
    );
    let slot = env.ok(&["exec", &name, "n3", "--", "sh", "-c", "echo $SLOT"]);
    assert_eq!(slot.trim(), "30");
    env.ok(&["destroy", "-t", file]);
    // --vars instead of the file beside it: its count, and no lab name (a template error).
    let vars = [
        "deploy",
        "--host-software",
        "--vars",
        other.to_str().unwrap(),
        "-t",
        file,
    ];
    let err = env.fails(&vars, "t.clab.yml:1:");
    assert!(err.contains("lab name"), "{err}");
    std::mem::forget(guard);
    let bad = env.file("bad.clab.yml", "name: x\ntopology:\n  nodes: {{ if }}\n");
    let args = ["deploy", "-t", bad.to_str().unwrap()];
    env.refused("template", &args, &bad, 3, "Go template:");
}

/// `startup-delay`: the node's processes (its exec lines too) start that many seconds
/// after the lab is up, as containerlab starts the container that much later.
#[test]
fn startup_delay_holds_a_node_s_processes_back() {
    let env = Env::new("clabdelay");
    let name = lab("dly");
    let text = format!(
        "name: {name}
topology:
  nodes:
    a:
      kind: linux
      startup-delay: 4
      exec: [\"touch /tmp/started\"]
"
    );
    let (guard, file) = deploy(&env, &name, &text);
    let early = env.run(&["exec", &name, "a", "--", "test", "-e", "/tmp/started"]);
    assert!(!early.status.success(), "exec lines ran before the delay");
    until_ok(
        &env,
        &name,
        "a",
        &["test", "-e", "/tmp/started"],
        Duration::from_secs(30),
    );
    env.ok(&["destroy", "-t", &file]);
    std::mem::forget(guard);
}

/// A `type: vxlan` link is a VXLAN device in the node made from the host's namespace: its
/// packets leave as the host routes them, here to another node reached through a host
/// link (the far machine of a real lab), and it never appears among the host's links.
#[test]
fn a_vxlan_link_tunnels_through_the_host_to_its_remote() {
    let env = Env::new("clabvx");
    let name = lab("vx");
    let hif = format!("{name}h");
    let text = format!(
        "name: {name}
mgmt: {{ipv4-subnet: 172.31.77.0/24, ipv6-subnet: \"3fff:172:31:77::/64\"}}
topology:
  nodes:
    a:
      kind: linux
      exec: [\"ip addr add 192.168.77.1/24 dev vx1\"]
    c:
      kind: linux
      exec:
        - ip addr add 10.77.0.2/24 dev up1
        - ip link add vx1 type vxlan id 77 remote 10.77.0.1 dstport 14789 dev up1
        - ip addr add 192.168.77.2/24 dev vx1
        - ip link set vx1 up
  links:
    - type: vxlan
      endpoint: {{node: a, interface: vx1}}
      remote: 10.77.0.2
      vni: 77
    - type: host
      endpoint: {{node: c, interface: up1}}
      host-interface: {hif}
"
    );
    let (guard, file) = deploy(&env, &name, &text);
    let dev = env.ok(&["exec", &name, "a", "--", "ip", "-d", "link", "show", "vx1"]);
    assert!(
        dev.contains("vxlan id 77 remote 10.77.0.2") && dev.contains("dstport 14789"),
        "{dev}"
    );
    assert!(
        !host_has_link("vx1"),
        "the tunnel is the node's, not the host's"
    );
    // The host's end of c's link carries the far side's underlay address.
    let added = std::process::Command::new("ip")
        .args(["addr", "add", "10.77.0.1/24", "dev", &hif])
        .status()
        .unwrap();
    assert!(added.success());
    until_ok(
        &env,
        &name,
        "a",
        &["ping", "-c1", "-W1", "192.168.77.2"],
        Duration::from_secs(20),
    );
    destroy(&env, guard, &file, &hif);
}

/// Whether the host has the fleet's nf_tables table (`nft` is the independent observer).
fn has_nft_table(lab: &str) -> bool {
    std::process::Command::new("nft")
        .args(["list", "table", "inet", &format!("nsfleet-{lab}")])
        .output()
        .unwrap()
        .status
        .success()
}

/// A port no program of the host listens on now.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn ports_are_published_through_a_table_of_the_lab_s_own_which_goes_with_it() {
    let env = Env::new("clabports");
    let name = lab("pt");
    let port = free_port();
    let text = format!(
        "name: {name}
mgmt: {{ipv4-subnet: 172.31.78.0/24}}
topology:
  nodes:
    web:
      kind: linux
      ports: [\"{port}:80\"]
      exec: [\"python3 -m http.server 80 --bind 172.31.78.2 --directory /etc/nsfleet-no-such\"]
"
    );
    let file = env.file(&format!("{name}.clab.yml"), &text);
    let file = file.to_str().unwrap().to_string();
    let deploy = ["deploy", "--host-software", "-t", &file];

    // A port the host listens on is refused before anything exists.
    let theirs = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let err = env.fails(&deploy, "is taken");
    assert!(
        err.contains(&format!("{name}.clab.yml:7")) && err.contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
    assert!(env.fleet_dirs().is_empty() && !has_nft_table(&name));
    drop(theirs);

    let guard = Fleet {
        env: &env,
        name: name.clone(),
    };
    env.ok(&deploy);
    assert!(has_nft_table(&name));
    // python's server answers 404 for a folder it cannot list: the node answered.
    let reply = http_get_until_ok(port, Duration::from_secs(20));
    assert!(reply.starts_with("HTTP/1.0 404"), "{reply}");
    env.ok(&["destroy", "-t", &file]);
    assert!(!has_nft_table(&name), "destroy removes the table");

    // Killed: the kernel removes the table with the supervisor's socket.
    env.ok(&deploy);
    let sup = guard.pid();
    signal(sup, libc::SIGKILL);
    wait_gone(sup);
    // The kernel removes an owned table when its socket is released, which it was seen
    // to finish a moment after the process is gone.
    let deadline = Instant::now() + Duration::from_secs(10);
    while has_nft_table(&name) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!has_nft_table(&name), "the table went with the supervisor");
    env.ok(&["clean", &name]);
    std::mem::forget(guard);
}

#[test]
fn apply_takes_a_published_port_away_with_its_table_and_gives_it_back() {
    let env = Env::new("clabportsapply");
    let name = lab("pa");
    let port = free_port();
    let text = format!(
        "name: {name}
mgmt: {{ipv4-subnet: 172.31.76.0/24}}
topology:
  nodes:
    web:
      kind: linux
      ports: [\"{port}:80\"]
      exec: [\"python3 -m http.server 80 --bind 172.31.76.2 --directory /etc/nsfleet-no-such\"]
"
    );
    let (_guard, file) = deploy(&env, &name, &text);
    assert!(has_nft_table(&name));
    // The only node that published a port no longer does: its chains and the table go.
    let without = env.file(
        "without.clab.yml",
        &text.replace(&format!("      ports: [\"{port}:80\"]\n"), ""),
    );
    env.ok(&["apply", without.to_str().unwrap(), "--name", &name]);
    assert!(!has_nft_table(&name), "the table went with the last port");
    // And back: the table is made again, and the port answers.
    env.ok(&["apply", &file, "--name", &name]);
    assert!(has_nft_table(&name));
    let reply = http_get_until_ok(port, Duration::from_secs(20));
    assert!(reply.starts_with("HTTP/1.0 404"), "{reply}");
    // The node's address changes and its ports do not: they follow it there.
    let moved = env.file(
        "moved.clab.yml",
        &text
            .replace(
                "      kind: linux\n",
                "      kind: linux\n      mgmt-ipv4: 172.31.76.9\n",
            )
            .replace("172.31.76.2 ", "172.31.76.9 "),
    );
    env.ok(&["apply", moved.to_str().unwrap(), "--name", &name]);
    let reply = http_get_until_ok(port, Duration::from_secs(20));
    assert!(reply.starts_with("HTTP/1.0 404"), "{reply}");
    env.ok(&["destroy", "-t", &file]);
    assert!(!has_nft_table(&name), "destroy removes the table");
}

#[test]
fn exec_with_labels_runs_each_command_on_the_matching_nodes_as_containerlab_does() {
    let env = Env::new("clabexec");
    let name = lab("ex");
    let text = format!(
        "name: {name}
mgmt: {{ipv4-subnet: 172.31.79.0/24}}
topology:
  kinds:
    linux: {{labels: {{role: edge}}}}
  nodes:
    a: {{kind: linux}}
    b: {{kind: linux, labels: {{role: core}}}}
    c: {{kind: linux, group: spine}}
"
    );
    let (guard, file) = deploy(&env, &name, &text);
    let out = env.ok(&[
        "exec",
        "-t",
        &file,
        "--label",
        "role=edge",
        "--cmd",
        "hostname",
        "--cmd",
        "sh -c 'echo $CLAB_LABEL_ROLE; exit 3'",
        "-f",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ran = v.as_object().unwrap();
    let (a, c) = (format!("clab-{name}-a"), format!("clab-{name}-c"));
    assert_eq!(ran.keys().collect::<Vec<_>>(), [&a, &c], "{out}");
    assert_eq!(v[&a][0]["stdout"], "a\n");
    assert_eq!(v[&c][1]["return-code"], 3);
    assert_eq!(v[&c][1]["stdout"], "edge\n");
    assert_eq!(v[&c][1]["cmd"][0], "sh");

    // containerlab's own labels, without -t: every lab.
    let out = env.ok(&[
        "exec",
        "--label",
        "clab-node-group=spine",
        "--label",
        &format!("containerlab={name}"),
        "--cmd",
        "hostname",
    ]);
    assert!(
        out.contains(&format!("clab-{name}-c: hostname\nc\n")) && !out.contains("-a:"),
        "{out}"
    );
    env.fails(
        &["exec", "-t", &file, "--label", "role=none", "--cmd", "true"],
        "matches no node",
    );
    env.fails(
        &["exec", "-t", &file, "--label", "=x", "--cmd", "true"],
        "expected KEY=VALUE or KEY",
    );
    env.ok(&["destroy", "-t", &file]);
    std::mem::forget(guard);
}

#[test]
fn tools_make_veths_by_hand_and_impair_interfaces_as_containerlab_s_do() {
    let env = Env::new("clabtools");
    let name = lab("tl");
    let text = format!(
        "name: {name}
mgmt: {{ipv4-subnet: 172.31.80.0/24}}
topology:
  nodes:
    a: {{kind: linux}}
    b: {{kind: linux}}
    br: {{kind: bridge}}
"
    );
    let (guard, file) = deploy(&env, &name, &text);
    let c = |n: &str| format!("clab-{name}-{n}");
    let hostend = format!("{name}v");
    env.ok(&[
        "tools",
        "veth",
        "create",
        "-a",
        &format!("{}:eth5", c("a")),
        "-b",
        &format!("{}:eth5", c("b")),
        "--mtu",
        "1400",
    ]);
    env.ok(&[
        "tools",
        "veth",
        "create",
        "-a",
        &format!("{}:eth6", c("a")),
        "-b",
        "bridge:br:p1",
    ]);
    env.ok(&[
        "tools",
        "veth",
        "create",
        "-a",
        &format!("{}:eth6", c("b")),
        "-b",
        "bridge:br:p2",
    ]);
    env.ok(&[
        "tools",
        "veth",
        "create",
        "-a",
        &format!("{}:eth7", c("a")),
        "-b",
        &format!("host:{hostend}"),
    ]);
    assert!(host_has_link(&hostend));
    let mtu = env.ok(&["exec", &name, "b", "--", "cat", "/sys/class/net/eth5/mtu"]);
    assert_eq!(mtu, "1400\n");
    for (n, x) in [("a", 1), ("b", 2)] {
        for (dev, net) in [("eth5", 5), ("eth6", 6)] {
            env.ok(&[
                "exec",
                &name,
                n,
                "--",
                "ip",
                "addr",
                "add",
                &format!("10.{net}.0.{x}/24"),
                "dev",
                dev,
            ]);
        }
    }
    until_ok(
        &env,
        &name,
        "a",
        &["ping", "-c1", "-W1", "10.5.0.2"],
        Duration::from_secs(10),
    );
    until_ok(
        &env,
        &name,
        "a",
        &["ping", "-c1", "-W1", "10.6.0.2"],
        Duration::from_secs(10),
    );
    env.fails(
        &[
            "tools",
            "veth",
            "create",
            "-a",
            &format!("{}:eth5", c("a")),
            "-b",
            &format!("{}:eth9", c("b")),
        ],
        "eth5 exists already",
    );
    env.fails(
        &[
            "tools",
            "veth",
            "create",
            "-a",
            &format!("{}:eth8", c("a")),
            "-b",
            "bridge:docker0:x1",
        ],
        "adds no port to it",
    );

    let node = c("a");
    env.ok(&[
        "tools", "netem", "set", "-n", &node, "-i", "eth0", "--rate", "1000",
    ]);
    let shown: serde_json::Value =
        serde_json::from_str(&env.ok(&["tools", "netem", "show", "-n", &node, "-f", "json"]))
            .unwrap();
    assert_eq!(shown[&node][0]["interface"], "eth0", "{shown}");
    assert_eq!(shown[&node][0]["rate"], 1000, "{shown}");
    env.ok(&["tools", "netem", "reset", "-n", &node, "-i", "eth0"]);
    let shown: serde_json::Value =
        serde_json::from_str(&env.ok(&["tools", "netem", "show", "-n", &node, "-f", "json"]))
            .unwrap();
    assert_eq!(shown[&node], serde_json::json!([]), "{shown}");
    env.fails(
        &["tools", "netem", "show", "-n", "clab-nosuch-x"],
        "no such container",
    );
    env.fails(
        &[
            "tools", "vxlan", "create", "--remote", "10.0.0.1", "--id", "10", "--link", "x",
        ],
        "type: vxlan",
    );

    // The host's end goes with its node.
    destroy(&env, guard, &file, &hostend);
}

#[test]
fn an_ovs_bridge_is_a_bridge_of_the_labs_own_open_vswitch() {
    let env = Env::new("clabovs");
    let name = lab("ov");
    let text = format!(
        "name: {name}
mgmt: {{ipv4-subnet: 172.31.81.0/24}}
topology:
  nodes:
    ovsbr1: {{kind: ovs-bridge}}
    a: {{kind: linux, exec: [ip addr add 10.9.1.1/24 dev eth1]}}
    b: {{kind: linux, exec: [ip addr add 10.9.1.2/24 dev eth1]}}
    c: {{kind: linux}}
  links:
    - endpoints: [a:eth1, ovsbr1:ovsp1]
    - endpoints: [b:eth1, ovsbr1:ovsp2]
"
    );
    let (guard, file) = deploy(&env, &name, &text);
    until_ok(
        &env,
        &name,
        "a",
        &["ping", "-c1", "-W1", "10.9.1.2"],
        Duration::from_secs(20),
    );
    // A bridge of the lab's own Open vSwitch, its ports as the file names them; the
    // host's Open vSwitch (if it runs one) is not asked.
    let ports = env.ok(&[
        "exec",
        &name,
        "ovsbr1",
        "--",
        "ovs-vsctl",
        "list-ports",
        "ovsbr1",
    ]);
    assert_eq!(
        ports.split_whitespace().collect::<Vec<_>>(),
        ["ovsp1", "ovsp2"]
    );
    // A veth made by hand with an end `ovs-bridge:NAME:IF` is a port of that bridge, as
    // in containerlab; a port name the bridge has is refused, and the pair is undone.
    let c = format!("clab-{name}-c");
    let made = ["tools", "veth", "create", "-a", &format!("{c}:eth1")];
    env.ok(&[&made[..], &["-b", "ovs-bridge:ovsbr1:ovsp3"]].concat());
    env.ok(&[
        "exec",
        &name,
        "c",
        "--",
        "ip",
        "addr",
        "add",
        "10.9.1.3/24",
        "dev",
        "eth1",
    ]);
    until_ok(
        &env,
        &name,
        "c",
        &["ping", "-c1", "-W1", "10.9.1.1"],
        Duration::from_secs(20),
    );
    env.ok(&["exec", &name, "c", "--", "ip", "link", "del", "eth1"]);
    env.fails(
        &[&made[..], &["-b", "ovs-bridge:ovsbr1:ovsp3"]].concat(),
        "a port named ovsp3 already exists on bridge ovsbr1",
    );
    let left = env.ok(&["exec", &name, "c", "--", "ip", "-br", "link"]);
    assert!(!left.contains("eth1"), "the refused pair stayed: {left}");
    env.ok(&["destroy", "-t", &file]);
    std::mem::forget(guard);
}

/// `healthcheck` as containerlab's: `deploy --wait healthy` returns once each node's check
/// has passed (here, once its exec line has made the file the check looks for); a check
/// that keeps failing ends the wait with its output and leaves the lab up.
#[test]
fn deploy_waits_for_health_checks_and_says_which_failed() {
    let env = Env::new("clabhealth");
    let name = lab("hl");
    let text = format!(
        "name: {name}
mgmt: {{ipv4-subnet: 172.31.91.0/24}}
topology:
  nodes:
    a:
      kind: linux
      exec: [\"sh -c 'sleep 2; touch /tmp/ready'\"]
      healthcheck:
        test: [CMD-SHELL, \"test -e /tmp/ready\"]
        interval: 1
        retries: 30
    b:
      kind: linux
"
    );
    let file = env.file(&format!("{name}.clab.yml"), &text);
    let file = file.to_str().unwrap().to_string();
    let guard = Fleet {
        env: &env,
        name: name.clone(),
    };
    let out = env.ok(&[
        "deploy",
        "--host-software",
        "-t",
        &file,
        "--wait",
        "healthy",
    ]);
    assert!(
        out.contains(&format!("fleet \"{name}\" is healthy")),
        "{out}"
    );
    env.ok(&["exec", &name, "a", "--", "test", "-e", "/tmp/ready"]);
    // The checks ran in the node, as its processes do, and went.
    let log = env.run_dir.join(&name).join("logs/a.health.log");
    assert!(log.exists(), "{}", log.display());
    let mut events = env.events(&name);
    env.ok(&["wait", &name, "healthy"]);
    events.wait_for("the wait's event", Duration::from_secs(10), |e| {
        e["event"] == "ready" && e["condition"] == "healthy" && e["met"] == true
    });
    drop(events);
    let out = env.ok(&["destroy", "-t", &file]);
    std::mem::forget(guard);
    assert!(out.contains("reclaimed 3 of 3 namespaces"), "{out}");

    // The same lab again at once, its check now failing: `destroy` returned with the
    // host link gone too (the kernel deletes it a moment after it says the namespaces
    // are reclaimed, later still after `events` watched), so name and subnet are free.
    let sick = text
        .replace("test -e /tmp/ready", "echo no such thing; exit 3")
        .replace("retries: 30", "retries: 2");
    let file = env.file(&format!("{name}.clab.yml"), &sick);
    let file = file.to_str().unwrap().to_string();
    let guard = Fleet {
        env: &env,
        name: name.clone(),
    };
    let err = env.fails(
        &[
            "deploy",
            "--host-software",
            "-t",
            &file,
            "--wait",
            "healthy",
        ],
        &format!("fleet \"{name}\" is not healthy after"),
    );
    assert!(
        err.contains("a: unhealthy: its health check `/bin/sh -c echo no such thing; exit 3` failed 2 times in a row (the last: exited with status 3)"),
        "{err}"
    );
    assert!(err.contains("no such thing"), "{err}");
    assert!(err.contains("the fleet is left up to look into"), "{err}");
    let out = env.ok(&["destroy", "-t", &file]);
    std::mem::forget(guard);
    assert!(out.contains("reclaimed 3 of 3 namespaces"), "{out}");
    assert!(env.fleet_dirs().is_empty());
}

/// A `healthcheck` containerlab would refuse is refused at its line, before anything
/// exists.
#[test]
fn a_bad_healthcheck_is_refused_at_its_line() {
    let env = Env::new("clabhealthbad");
    let name = lab("hb");
    let f = env.file(
        &format!("{name}.clab.yml"),
        &format!("name: {name}\ntopology:\n  nodes:\n    a:\n      kind: linux\n      healthcheck:\n        test: [CMD-SHELL]\n"),
    );
    let args = ["deploy", "--host-software", "-t", f.to_str().unwrap()];
    env.refused(
        "healthcheck-test",
        &args,
        &f,
        7,
        "healthcheck: test: expected [CMD-SHELL, \"a shell line\"]",
    );
    let f = env.file(
        &format!("{name}.clab.yml"),
        &format!("name: {name}\ntopology:\n  nodes:\n    a:\n      kind: linux\n      healthcheck:\n        test: [CMD, \"true\"]\n        interval: 0\n"),
    );
    let args = ["deploy", "--host-software", "-t", f.to_str().unwrap()];
    env.refused(
        "healthcheck-interval",
        &args,
        &f,
        8,
        "healthcheck: interval: expected whole seconds from 1 to 86400",
    );
}

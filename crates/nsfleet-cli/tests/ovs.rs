//! Open vSwitch switches (`[[switch]] kind = "ovs"`): Debian's openvswitch-switch run once
//! per fleet inside a node of its own, its switches' ports in that node's namespace, forwarding on the userspace datapath here (this kernel has no
//! openvswitch module), driven by a real OpenFlow controller on the host, and leaving
//! nothing behind, an Open vSwitch of the host's own least of all.

mod harness;

use harness::*;
use std::time::Duration;

/// Three hosts on one OVS switch, the third port numbered by the file.
fn three_hosts(fleet: &str, switch_keys: &str) -> String {
    let links: String = (1..=3)
        .map(|i| format!("[[link]]\na = \"h{i}:eth0\"\nb = \"s1\"\n"))
        .collect();
    format!(
        "[fleet]\nname = \"{fleet}\"\n[[node]]\nname = \"h{{i}}\"\ncount = 3\n[[switch]]\nname = \"s1\"\nkind = \"ovs\"\npool = \"10.0.0.0/24\"\ndpid = \"0000000000000001\"\nport_numbers = {{ \"s1-p3\" = 9 }}\n{switch_keys}{links}"
    )
}

/// Processes whose command is one of Open vSwitch's daemons, with their network namespace.
fn ovs_daemons() -> Vec<(i32, String)> {
    let pids = std::fs::read_dir("/proc").unwrap().flatten();
    pids.filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|p| {
            let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).ok()?;
            let ns = std::fs::read_link(format!("/proc/{p}/ns/net")).ok()?;
            comm.starts_with("ovs")
                .then(|| (p, format!("{} {}", comm.trim(), ns.display())))
        })
        .collect()
}

/// What the fleet's Open vSwitch runs, by its namespace.
fn daemons_of(fleet: &Fleet<'_>) -> Vec<(i32, String)> {
    let (inodes, _) = fleet.footprint();
    ovs_daemons()
        .into_iter()
        .filter(|(_, d)| inodes.iter().any(|i| d.ends_with(&format!("[{i}]"))))
        .collect()
}

/// 4 MB sent by TCP from `from` to h3 (10.0.0.3) of fleet `fleet`, across its switch.
fn tcp_across(env: &Env, fleet: &str, from: &str) {
    let server = "import socket;s=socket.socket();s.bind(('0.0.0.0',5201));s.listen();c,_=s.accept();n=0\nwhile True:\n d=c.recv(65536)\n if not d: break\n n+=len(d)\nprint(n)";
    let mut got = env
        .cmd(&[
            "exec", fleet, "h3", "--", "timeout", "20", "python3", "-c", server,
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let client = "import socket,time\nfor _ in range(50):\n try:\n  s=socket.create_connection(('10.0.0.3',5201),timeout=5);break\n except OSError: time.sleep(0.1)\ns.sendall(b'x'*4000000);s.close()";
    env.ok(&[
        "exec", fleet, from, "--", "timeout", "20", "python3", "-c", client,
    ]);
    let mut out = String::new();
    std::io::Read::read_to_string(got.stdout.as_mut().unwrap(), &mut out).unwrap();
    got.wait().unwrap();
    assert_eq!(out.trim(), "4000000", "the bytes sent across the switch");
}

#[test]
fn without_tso_the_hosts_sum_their_own_checksums_and_tcp_still_crosses() {
    let env = Env::new("ovs-lean");
    let text =
        three_hosts("ovl", "").replace("name = \"ovl\"\n", "name = \"ovl\"\novs_tso = false\n");
    let _fleet = env.up(&text);
    let config = env.ok(&[
        "exec",
        "ovl",
        "s1",
        "--",
        "ovs-vsctl",
        "get",
        "Open_vSwitch",
        ".",
        "other_config",
    ]);
    assert!(!config.contains("userspace-tso-enable"), "{config}");
    let offloads = env.ok(&["exec", "ovl", "h1", "--", "ethtool", "-k", "eth0"]);
    assert!(offloads.contains("tx-checksumming: off"), "{offloads}");
    tcp_across(&env, "ovl", "h1");
    // A host behind a Linux bridge trunked to the switch: the bridge's end sums for it.
    let trunked = format!(
        "{text}[[node]]\nname = \"h4\"\n[[switch]]\nname = \"b1\"\n[[link]]\na = \"s1\"\nb = \"b1\"\n[[link]]\na = {{ at = \"h4:eth0\", addrs = [\"10.0.0.44/24\"] }}\nb = \"b1\"\n"
    );
    env.ok(&["apply", env.file("trunk.toml", &trunked).to_str().unwrap()]);
    tcp_across(&env, "ovl", "h4");
}

#[test]
fn an_ovs_switch_forwards_tcp_numbers_ports_in_file_order_and_leaves_nothing() {
    let env = Env::new("ovs-basic");
    let daemons;
    {
        let fleet = env.up(&three_hosts("ovb", ""));
        // `up` returned with the switch forwarding: the first ping is answered.
        env.ok(&["exec", "ovb", "h1", "--", "ping", "-c1", "-W2", "10.0.0.3"]);
        // TCP across the userspace datapath (which needs its TSO support, see ovs.rs).
        tcp_across(&env, "ovb", "h1");
        // Ports numbered in the file's order, s1-p3 as the file says.
        let ports = env.ok(&[
            "exec",
            "ovb",
            "s1",
            "--",
            "ovs-ofctl",
            "dump-ports-desc",
            "s1",
        ]);
        for want in [" 1(s1-p1)", " 2(s1-p2)", " 9(s1-p3)"] {
            assert!(ports.contains(want), "{want} in {ports}");
        }
        let show = env.ok(&[
            "exec",
            "ovb",
            "s1",
            "--",
            "ovs-vsctl",
            "get",
            "bridge",
            "s1",
            "datapath_type",
            "other_config:datapath-id",
        ]);
        assert!(
            show.contains("netdev") && show.contains("0000000000000001"),
            "{show}"
        );
        // Its daemons run in the switch's namespace, nowhere else.
        daemons = daemons_of(&fleet);
        let names: Vec<&str> = daemons
            .iter()
            .map(|(_, d)| d.split(' ').next().unwrap())
            .collect();
        assert!(
            names.contains(&"ovsdb-server") && names.contains(&"ovs-vswitchd"),
            "{daemons:?}"
        );
        let status = env.ok(&["status", "ovb"]);
        assert!(
            status.contains("Open vSwitch bridge s1, 3 ports"),
            "{status}"
        );
    }
    // `down` took them along, and the run folder.
    for (pid, what) in &daemons {
        assert!(!alive(*pid), "{what} (pid {pid}) outlived the fleet");
    }
    assert!(env.fleet_dirs().is_empty(), "{:?}", env.fleet_dirs());
}

/// A free TCP port on the host's loopback, for a controller.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Open vSwitch's test controller (Mininet's `Controller`) on the host, ended with the
/// guard.
struct Controller(std::process::Child);

impl Controller {
    fn start(env: &Env, port: u16) -> Controller {
        let ctl = env.files.join("testcontroller.ctl");
        let child = std::process::Command::new("ovs-testcontroller")
            .arg(format!("--unixctl={}", ctl.display()))
            .arg(format!("ptcp:{port}:127.0.0.1"))
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("ovs-testcontroller (apt-get install openvswitch-testcontroller)");
        Controller(child)
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_controller_on_the_host_drives_the_switch_and_its_end_leaves_the_fail_mode() {
    let env = Env::new("ovs-controller");
    let port = free_port();
    let keys = format!(
        "fail_mode = \"secure\"\nprotocols = [\"OpenFlow10\", \"OpenFlow13\"]\ncontroller = [\"tcp:127.0.0.1:{port}\"]\n"
    );
    let _fleet = env.up(&three_hosts("ovc", &keys));
    let mut events = env.events("ovc");
    let controller_is = |state: &'static str| {
        let target = format!("tcp:127.0.0.1:{port}");
        move |e: &serde_json::Value| {
            e["event"] == "controller"
                && e["node"] == "s1"
                && e["controller"] == target.as_str()
                && e["state"] == state
        }
    };
    // Secure, no controller yet: nothing forwards, and `status` says why.
    let out = env.run(&["exec", "ovc", "h1", "--", "ping", "-c1", "-W1", "10.0.0.2"]);
    assert!(
        !out.status.success(),
        "a secure switch without a controller forwarded"
    );
    let said = format!("controller tcp:127.0.0.1:{port}: ");
    wait_until(
        "status says the switch is not connected",
        Duration::from_secs(10),
        || {
            let s = env.ok(&["status", "ovc"]);
            let refused = format!("{said}not connected (Connection refused");
            s.contains(&refused).then_some(()).ok_or(s)
        },
    );
    let controller = Controller::start(&env, port);
    // The switch retries with backoff: it connects within seconds.
    wait_until(
        "h1 reaches h2 through the controller's flows",
        Duration::from_secs(30),
        || {
            let out = env.run(&["exec", "ovc", "h1", "--", "ping", "-c1", "-W1", "10.0.0.2"]);
            out.status.success().then_some(()).ok_or(out.status)
        },
    );
    let status = env.ok(&["status", "ovc"]);
    assert!(status.contains(&format!("{said}connected")), "{status}");
    let flows = env.ok(&["exec", "ovc", "s1", "--", "ovs-ofctl", "dump-flows", "s1"]);
    assert!(
        flows.contains("icmp") && flows.contains("actions=output:"),
        "the controller's flows: {flows}"
    );
    events.wait_for(
        "the event of the controller connected",
        Duration::from_secs(10),
        controller_is("connected"),
    );
    // The controller goes: the switch stays in its fail mode, its flows kept.
    drop(controller);
    events.wait_for(
        "the event of the controller gone",
        Duration::from_secs(10),
        controller_is("disconnected"),
    );
    let mode = env.ok(&[
        "exec",
        "ovc",
        "s1",
        "--",
        "ovs-vsctl",
        "get-fail-mode",
        "s1",
    ]);
    assert_eq!(mode.trim(), "secure");
    env.ok(&["exec", "ovc", "h1", "--", "ping", "-c1", "-W2", "10.0.0.2"]);
    // The switch retries: unreachable now, and said once however often it retries.
    let unreachable = events.wait_for(
        "the event of the controller unreachable",
        Duration::from_secs(20),
        controller_is("unreachable"),
    );
    assert!(
        unreachable["reason"]
            .as_str()
            .is_some_and(|r| r.contains("refused")),
        "{unreachable}"
    );
    let states: Vec<&serde_json::Value> = (events.seen.iter())
        .filter(|e| e["event"] == "controller")
        .map(|e| &e["state"])
        .collect();
    assert!(
        states.windows(2).all(|w| w[0] != w[1]),
        "each event a change: {states:?}"
    );
}

/// A script, run in a mount namespace of its own where Open vSwitch's folders are
/// empty, that plays the host's own Open vSwitch (bridge `hostbr`, its vswitchd in a
/// network namespace of its own) while an nsfleet fleet with an OVS switch comes and goes,
/// and checks that neither sees the other.
const HOST_OVS: &str = r#"
set -eu
mount --make-rprivate /
for d in /run /etc/openvswitch /var/log/openvswitch /var/lib/openvswitch; do
    mkdir -p "$d"; mount -t tmpfs tmpfs "$d"
done
mkdir -p /run/openvswitch
ovsdb-tool create /etc/openvswitch/conf.db /usr/share/openvswitch/vswitch.ovsschema
ovsdb-server --remote=punix:/run/openvswitch/db.sock --pidfile --detach --no-chdir --log-file
ovs-vsctl --no-wait init -- add-br hostbr -- set bridge hostbr datapath_type=netdev
unshare -n ovs-vswitchd --pidfile --detach --no-chdir --log-file
stop() { for p in /run/openvswitch/*.pid; do kill "$(cat "$p")" 2>/dev/null || true; done; }
trap stop EXIT
db=$(stat -c %i /run/openvswitch/db.sock)
"$NSFLEET" up "$TOPOLOGY" >/dev/null
echo "host: $(ovs-vsctl list-br | tr '\n' ' ')"
echo "fleet: $("$NSFLEET" exec ovh s1 -- ovs-vsctl list-br | tr '\n' ' ')"
"$NSFLEET" down ovh >/dev/null
echo "after: $(ovs-vsctl list-br | tr '\n' ' ')"
[ "$(stat -c %i /run/openvswitch/db.sock)" = "$db" ] && echo "same socket"
"#;

#[test]
fn an_open_vswitch_of_the_host_is_neither_seen_nor_touched() {
    let env = Env::new("ovs-host");
    let topology = env.file("ovh.toml", &three_hosts("ovh", ""));
    let vars = [
        ("NSFLEET_RUN_DIR", env.run_dir.as_path()),
        ("TOPOLOGY", &topology),
    ];
    let text = in_own_mount_namespace(HOST_OVS, &vars);
    for want in [
        "host: hostbr \n",
        "fleet: s1 \n",
        "after: hostbr \n",
        "same socket",
    ] {
        assert!(text.contains(want), "{want:?} in {text}");
    }
    assert!(env.fleet_dirs().is_empty(), "{:?}", env.fleet_dirs());
}

#[test]
fn apply_adds_a_host_on_the_next_port_number_and_it_forwards_at_once() {
    let env = Env::new("ovs-apply");
    let _fleet = env.up(&three_hosts("ova", ""));
    let more = three_hosts("ova", "").replace("count = 3", "count = 4")
        + "[[link]]\na = \"h4:eth0\"\nb = \"s1\"\n";
    let file = env.file("ova-4.toml", &more);
    env.ok(&["apply", file.to_str().unwrap()]);
    env.ok(&["exec", "ova", "h4", "--", "ping", "-c1", "-W2", "10.0.0.1"]);
    let ports = env.ok(&[
        "exec",
        "ova",
        "s1",
        "--",
        "ovs-ofctl",
        "dump-ports-desc",
        "s1",
    ]);
    assert!(
        ports.contains(" 10(s1-p4)"),
        "one more than the largest: {ports}"
    );
}

#[test]
fn apply_changes_a_switch_s_ports_in_place_and_a_port_linked_anew_forwards() {
    let env = Env::new("ovs-relink");
    let _fleet = env.up(&three_hosts("ovl", ""));
    let s1 = |args: &[&str]| env.ok(&[&["exec", "ovl", "s1", "--"][..], args].concat());
    let row = || s1(&["ovs-vsctl", "get", "Bridge", "s1", "_uuid"]);
    let made = row();
    // Port s1-p3 (OpenFlow 9) now leads to h4: its veth is made anew, and its row too;
    // the bridge and its other ports stay.
    let h4 = three_hosts("ovl", "")
        .replace("count = 3", "count = 4")
        .replace("a = \"h3:eth0\"", "a = \"h4:eth0\"");
    let file = env.file("ovl-4.toml", &h4);
    env.ok(&["apply", file.to_str().unwrap()]);
    assert_eq!(row(), made);
    let ports = s1(&["ovs-ofctl", "dump-ports-desc", "s1"]);
    assert!(ports.contains(" 9(s1-p3)"), "{ports}");
    env.ok(&["exec", "ovl", "h4", "--", "ping", "-c1", "-W2", "10.0.0.1"]);
}

#[test]
fn a_controller_can_be_a_node_of_the_fleet_at_its_own_address() {
    let env = Env::new("ovs-node-controller");
    let keys = "fail_mode = \"secure\"\ncontroller = [\"tcp:10.9.9.1:6653\"]\n";
    // The controller's node: Open vSwitch's test controller on every address it has.
    let ctl = "[[node]]\nname = \"ctl\"\ncommands = [\"exec ovs-testcontroller --unixctl=/run/tc.ctl ptcp:6653\"]\n[[node]]\nname = \"peer\"\n[[link]]\na = { at = \"ctl:eth0\", addrs = [\"10.9.9.1/30\"] }\nb = { at = \"peer:eth0\", addrs = [\"10.9.9.2/30\"] }\n";
    let _fleet = env.up(&(three_hosts("ovn", keys) + ctl));
    wait_until(
        "h1 reaches h2 through the node's controller",
        Duration::from_secs(30),
        || {
            let out = env.run(&["exec", "ovn", "h1", "--", "ping", "-c1", "-W1", "10.0.0.2"]);
            out.status.success().then_some(()).ok_or(out.status)
        },
    );
    // The switch's controller is the file's, as Open vSwitch shows it.
    let target = env.ok(&[
        "exec",
        "ovn",
        "s1",
        "--",
        "ovs-vsctl",
        "get-controller",
        "s1",
    ]);
    assert_eq!(target.trim(), "tcp:10.9.9.1:6653");
}

#[test]
fn kill_9_of_the_supervisor_takes_every_open_vswitch_daemon_along() {
    let env = Env::new("ovs-kill");
    let fleet = env.up(&three_hosts("ovk", "controller = [\"tcp:127.0.0.1:9\"]\n"));
    let daemons = daemons_of(&fleet);
    assert_eq!(daemons.len(), 2, "{daemons:?}");
    let sup = fleet.pid();
    let namespaces = netns_held_by(sup);
    signal(sup, libc::SIGKILL);
    wait_gone(sup);
    drop(fleet); // its guard cleans the folder of the dead fleet
    for (pid, what) in &daemons {
        wait_until(what, Duration::from_secs(10), || {
            (!alive(*pid)).then_some(()).ok_or(pid)
        });
    }
    // The kernel frees a dead owner's namespaces a moment after it is gone.
    wait_freed(&namespaces);
    assert!(env.fleet_dirs().is_empty(), "{:?}", env.fleet_dirs());
}

/// `up FILE` in a mount namespace of its own, once the shell command `mount` has run
/// there: its standard error, exit code and how long it took. (`up`'s program,
/// arguments and environment, run by unshare; Env::cmd's SIGINT reset does not matter
/// here.)
fn up_after(env: &Env, file: &std::path::Path, mount: &str) -> (String, Option<i32>, Duration) {
    let up = env.cmd(&["up", file.to_str().unwrap()]);
    let mut c = std::process::Command::new("unshare");
    c.args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(format!("{mount} && exec \"$0\" \"$@\""))
        .arg(up.get_program())
        .args(up.get_args());
    for (k, v) in up.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    let started = std::time::Instant::now();
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (err, out.status.code(), started.elapsed())
}

#[test]
fn a_switch_whose_open_vswitch_cannot_start_is_said_at_once_with_its_log() {
    let env = Env::new("ovs-nostart");
    let file = env.file("ovf.toml", &three_hosts("ovf", ""));
    // Open vSwitch's schema hidden: the switch's ovsdb-tool fails, and its start line ends.
    let (err, code, took) = up_after(&env, &file, "mount -t tmpfs none /usr/share/openvswitch");
    assert_eq!(code, Some(1), "{err}");
    // At once, not after the 20 s that ovs-vswitchd gets to take its ports.
    assert!(took < Duration::from_secs(15), "{err}");
    assert!(err.contains("start line ended (exit status 1)"), "{err}");
    assert!(
        err.contains("vswitch.ovsschema"),
        "the log's own words: {err}"
    );
    assert!(env.fleet_dirs().is_empty(), "{:?}", env.fleet_dirs());
}

#[test]
fn bridges_waited_for_by_an_ovs_vswitchd_that_cannot_start_are_said_at_once() {
    let env = Env::new("ovs-novswitchd");
    // Two switches: their bridges are made in two transactions, and the first is waited
    // for until ovs-vswitchd has taken it.
    let two = "[fleet]\nname = \"ovn\"\n[[node]]\nname = \"h1\"\n[[switch]]\nname = \"s1\"\nkind = \"ovs\"\n[[switch]]\nname = \"s2\"\nkind = \"ovs\"\n[[link]]\na = \"h1:eth0\"\nb = \"s1\"\n[[link]]\na = \"s1\"\nb = \"s2\"\n";
    let file = env.file("ovn.toml", two);
    // ovs-vswitchd's program replaced by one that fails (Debian's /usr/sbin/ovs-vswitchd
    // leads to it): the database is made and served, and the start line's last step ends.
    let fails = env.file(
        "ovs-vswitchd",
        "#!/bin/sh\necho 'ovs-vswitchd: replaced by a test' >&2\nexit 3\n",
    );
    std::fs::set_permissions(&fails, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let program = std::fs::canonicalize("/usr/sbin/ovs-vswitchd").unwrap();
    let mount = format!("mount --bind {} {}", fails.display(), program.display());
    let (err, code, took) = up_after(&env, &file, &mount);
    assert_eq!(code, Some(1), "{err}");
    assert!(took < Duration::from_secs(15), "{err}");
    // Said by the wait for the first transaction, not by a switch's own wait.
    let said = "the fleet's Open vSwitch's start line ended (exit status 3)";
    assert!(err.contains(said), "{err}");
    assert!(
        err.contains("replaced by a test"),
        "the log's own words: {err}"
    );
    assert!(env.fleet_dirs().is_empty(), "{:?}", env.fleet_dirs());
}

#[test]
fn apply_removing_switches_leaves_no_bridge_or_port_in_the_fleets_open_vswitch() {
    let env = Env::new("ovs-remove");
    let switch = |s: &str| format!("[[switch]]\nname = \"{s}\"\nkind = \"ovs\"\n");
    let head = format!(
        "[fleet]\nname = \"ovr\"\n[[node]]\nname = \"h1\"\n{}[[link]]\na = \"h1:eth0\"\nb = \"s1\"\n",
        switch("s1")
    );
    // s2 and s3 go together, with the link between them: neither end's namespace goes
    // (both are the fleet's Open vSwitch node's), so its veths are deleted one by one.
    let more = format!(
        "{head}{}{}[[link]]\na = \"s1\"\nb = \"s2\"\n[[link]]\na = \"s2\"\nb = \"s3\"\n",
        switch("s2"),
        switch("s3")
    );
    let _fleet = env.up(&more);
    let links = || env.ok(&["exec", "ovr", "s1", "--", "ip", "-o", "link"]);
    assert!(links().contains("s3-p1"), "{}", links());
    let fewer = env.file("ovr-1.toml", &head);
    env.ok(&["apply", fewer.to_str().unwrap()]);
    let bridges = env.ok(&["exec", "ovr", "s1", "--", "ovs-vsctl", "list-br"]);
    assert_eq!(bridges.trim(), "s1", "{bridges}");
    let left = links();
    for gone in ["s1-p2", "s2-", "s3-"] {
        assert!(!left.contains(gone), "{gone} in {left}");
    }
    assert!(left.contains("s1-p1"), "{left}");
}

#[test]
fn apply_replacing_a_switch_by_one_whose_ports_have_its_port_names_forwards() {
    let env = Env::new("ovs-rename");
    let fleet = |s: &str| {
        let link = |h: u32| {
            format!("[[link]]\na = {{ at = \"h{h}:eth0\", addrs = [\"10.0.0.{h}/24\"] }}\nb = \"{s}:px{h}\"\n")
        };
        format!(
            "[fleet]\nname = \"ovn\"\n[[node]]\nname = \"h{{i}}\"\ncount = 2\n[[switch]]\nname = \"{s}\"\nkind = \"ovs\"\n{}{}",
            link(1),
            link(2)
        )
    };
    let _fleet = env.up(&fleet("s1"));
    // s1 goes once the change is done; its ports' names are s2's already.
    for (s, file) in [("s2", "ovn-2.toml"), ("s1", "ovn-1.toml")] {
        let file = env.file(file, &fleet(s));
        env.ok(&["apply", file.to_str().unwrap()]);
        env.ok(&["exec", "ovn", "h1", "--", "ping", "-c1", "-W2", "10.0.0.2"]);
        let bridges = env.ok(&["exec", "ovn", s, "--", "ovs-vsctl", "list-br"]);
        assert_eq!(bridges.trim(), s, "{bridges}");
        let ports = env.ok(&["exec", "ovn", s, "--", "ovs-vsctl", "list-ports", s]);
        assert_eq!(ports.split_whitespace().collect::<Vec<_>>(), ["px1", "px2"]);
    }
}

#[test]
fn apply_changing_only_a_switch_s_settings_changes_its_bridge_in_place() {
    let env = Env::new("ovs-settings");
    let _fleet = env.up(&three_hosts("ovt", "fail_mode = \"standalone\"\n"));
    let s1 = |args: &[&str]| env.ok(&[&["exec", "ovt", "s1", "--"][..], args].concat());
    let row = || s1(&["ovs-vsctl", "get", "Bridge", "s1", "_uuid"]);
    let made = row();
    // The same ports, other settings: the bridge is changed in place, as `ovs-vsctl
    // set-fail-mode` changes it (a bridge made again would be a new row, its ports
    // closed and opened again).
    for (mode, dpid) in [
        ("secure", "00000000000000a1"),
        ("standalone", "0000000000000001"),
    ] {
        let text = three_hosts("ovt", &format!("fail_mode = \"{mode}\"\n"))
            .replace("0000000000000001", dpid);
        let file = env.file(&format!("ovt-{mode}.toml"), &text);
        env.ok(&["apply", file.to_str().unwrap()]);
        assert_eq!(s1(&["ovs-vsctl", "get-fail-mode", "s1"]).trim(), mode);
        assert!(s1(&["ovs-ofctl", "show", "s1"]).contains(&format!("dpid:{dpid}")));
        assert_eq!(row(), made);
    }
    env.ok(&["exec", "ovt", "h1", "--", "ping", "-c1", "-W2", "10.0.0.3"]);
}

#[test]
fn a_database_that_has_ended_is_said_at_once_and_down_reclaims_all() {
    let env = Env::new("ovs-deaddb");
    let one = "[fleet]\nname = \"ovd\"\n[[node]]\nname = \"h1\"\n[[switch]]\nname = \"s1\"\nkind = \"ovs\"\n[[link]]\na = \"h1:eth0\"\nb = \"s1\"\n";
    let two = format!(
        "{one}[[switch]]\nname = \"s2\"\nkind = \"ovs\"\n[[link]]\na = \"s1\"\nb = \"s2\"\n"
    );
    let fleet = env.up(&two);
    let daemons = daemons_of(&fleet);
    let db = daemons.iter().find(|(_, d)| d.starts_with("ovsdb-server "));
    let (db, _) = db.unwrap_or_else(|| panic!("no ovsdb-server in {daemons:?}"));
    signal(*db, libc::SIGKILL);
    wait_gone(*db);
    // Said as what it is, not after each wait's bound ("Alarm clock" from ovs-vsctl).
    let file = env.file("ovd-1.toml", one);
    env.fails(
        &["apply", file.to_str().unwrap()],
        "its ovsdb-server has ended",
    );
    let namespaces = netns_held_by(fleet.pid());
    env.ok(&["down", "ovd"]);
    std::mem::forget(fleet);
    wait_freed(&namespaces);
    assert!(env.fleet_dirs().is_empty(), "{:?}", env.fleet_dirs());
}

#[test]
fn a_switch_port_s_link_events_are_told_once_as_the_switch_s() {
    let env = Env::new("ovs-events");
    let two = "[fleet]\nname = \"ove\"\n[[node]]\nname = \"h1\"\n[[switch]]\nname = \"s1\"\nkind = \"ovs\"\n[[switch]]\nname = \"s2\"\nkind = \"ovs\"\n[[link]]\na = \"h1:eth0\"\nb = \"s1\"\n[[link]]\na = \"s1\"\nb = \"s2\"\n";
    let fleet = env.up(two);
    let mut watch = env.events("ove");
    // Its far end down: the switch's port loses its carrier.
    env.ok(&["link", "ove", "h1:eth0", "down"]);
    let port = |e: &serde_json::Value| e["event"] == "link" && e["iface"] == "s1-p1";
    watch.wait_for("s1-p1 no-carrier", Duration::from_secs(20), port);
    drop(fleet);
    let events = watch.finish();
    let told: Vec<&serde_json::Value> = events.iter().filter(|e| port(e)).collect();
    // One namespace holds every switch's ports: heard there once, and told as s1's, not
    // as s2's or the Open vSwitch node's.
    assert!(told.iter().all(|e| e["node"] == "s1"), "{told:?}");
    let no_carrier = told.iter().filter(|e| e["state"] == "no-carrier").count();
    assert_eq!(no_carrier, 1, "{told:?}");
}

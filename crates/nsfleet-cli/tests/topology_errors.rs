//! Bad topology files: each gets one clear line naming file:line:column, and nothing is
//! created (no run folder, no supervisor).

mod harness;

use harness::*;

const CASES: &[(&str, &str, usize, &str)] = &[
    ("syntax", "[fleet]\nname = \"x\"\n[[node]\nname = \"a\"\n", 3, "expected `]`"),
    ("no-fleet", "[[node]]\nname = \"a\"\n", 1, "missing field `fleet`"),
    ("typo-field", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\ncomands = [\"x\"]\n", 5, "unknown field `comands`"),
    ("bad-fleet-name", "[fleet]\nname = \"a/b\"\n[[node]]\nname = \"a\"\n", 2, "fleet name"),
    ("no-nodes", "[fleet]\nname = \"x\"\n", 1, "at least one [[node]]"),
    ("dup-node", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"a\"\n", 6, "already used by the node or switch at line 4"),
    ("dup-generated", "[fleet]\nname = \"x\"\n[[node]]\nname = \"h3\"\n[[node]]\nname = \"h{i}\"\ncount = 5\n", 6, "\"h3\" is already used"),
    ("template-no-count", "[fleet]\nname = \"x\"\n[[node]]\nname = \"h{i}\"\n", 4, "needs `count"),
    ("count-no-template", "[fleet]\nname = \"x\"\n[[node]]\nname = \"h\"\ncount = 3\n", 4, "exactly one `{i}`"),
    ("zero-count", "[fleet]\nname = \"x\"\n[[node]]\nname = \"h{i}\"\ncount = 0\n", 5, "expected a count from 1"),
    ("absurd-count", "[fleet]\nname = \"x\"\n[[node]]\nname = \"h{i}\"\ncount = 99999999\n", 5, "expected a count from 1"),
    ("long-name", "[fleet]\nname = \"x\"\n[[node]]\nname = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"\n", 4, "1 to 64 characters"),
    ("shell-chars", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a;rm\"\n", 4, "may contain only"),
    ("not-net-sysctl", "[fleet]\nname = \"x\"\n[defaults]\nsysctls = { \"kernel.pid_max\" = 1 }\n[[node]]\nname = \"a\"\n", 4, "under `net.`"),
    ("host-only-sysctl", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nsysctls = { \"net.core.rmem_max\" = 1 }\n", 5, "not per network namespace"),
    ("unknown-sysctl", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nsysctls = { \"net.ipv4.no_such_knob\" = 1 }\n", 5, "no such sysctl"),
    ("sysctl-table-value", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nsysctls = { \"net.ipv4.ip_forward\" = [1] }\n", 5, "expected a string, an integer or a boolean"),
    ("link-missing-node", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = \"a:eth0\"\nb = \"zz:eth0\"\n", 7, "no node or switch named \"zz\""),
    ("long-ifname", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = \"a:eth0123456789abc\"\nb = \"b:eth0\"\n", 7, "1 to 15 letters"),
    ("ifname-slash", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = \"a:et/h0\"\nb = \"b:eth0\"\n", 7, "interface name"),
    ("no-ifname", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = \"a\"\nb = \"b:eth0\"\n", 7, "needs an interface name"),
    ("same-ifname", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = \"a:eth0\"\nb = \"b:eth0\"\n[[link]]\na = \"a:eth0\"\nb = \"b:eth1\"\n", 10, "already has an interface"),
    ("bad-addr", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = { at = \"a:eth0\", addrs = [\"10.0.0.300/24\"] }\nb = \"b:eth0\"\n", 8, "expected an address with a prefix"),
    ("dup-addr", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = { at = \"a:eth0\", addrs = [\"10.0.0.1/24\"] }\nb = { at = \"b:eth0\", addrs = [\"10.0.0.1/24\"] }\n", 7, "already given"),
    ("bad-mtu", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = \"a:eth0\"\nb = \"b:eth0\"\nmtu = 10\n", 10, "MTU from 68"),
    ("bad-mac", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = { at = \"a:eth0\", mac = \"01:00:00:00:00:01\" }\nb = \"b:eth0\"\n", 8, "unicast MAC"),
    ("bad-impair", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = \"a:eth0\"\nb = \"b:eth0\"\nimpair = { delay = \"soon\" }\n", 10, "expected a duration"),
    ("unknown-impair", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = \"a:eth0\"\nb = \"b:eth0\"\nimpair = { lag = \"1ms\" }\n", 10, "unknown impairment"),
    ("route-no-dev", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nroutes = [\"10.1.0.0/24 dev eth9\"]\n", 5, "no interface \"eth9\""),
    ("bad-route", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nroutes = [\"to the moon\"]\n", 5, "expected a route like"),
    ("unknown-generator", "[fleet]\nname = \"x\"\n[[generate]]\nkind = \"blob\"\ncount = 3\n", 4, "unknown generator kind"),
    ("pool-too-small", "[fleet]\nname = \"x\"\n[[generate]]\nkind = \"star\"\ncount = 300\npool = \"10.0.0.0/24\"\n", 3, "254 host addresses"),
    ("mesh-too-big", "[fleet]\nname = \"x\"\n[[generate]]\nkind = \"mesh\"\ncount = 1000\n", 3, "at most 200"),
    ("tree-no-depth", "[fleet]\nname = \"x\"\n[[generate]]\nkind = \"tree\"\nfanout = 2\n", 3, "needs `depth`"),
    ("host-link-group", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a{i}\"\ncount = 2\nhost_link = { iface = \"m\", host_iface = \"nsf-m\" }\n", 6, "belongs to one node"),
    ("switch-node-clash", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[switch]]\nname = \"a\"\n", 6, "already used by the node or switch"),
    ("overlapping-pools", "[fleet]\nname = \"x\"\n[[switch]]\nname = \"s1\"\npool = \"10.0.0.0/16\"\n[[switch]]\nname = \"s2\"\npool = \"10.0.3.0/24\"\n[[node]]\nname = \"a\"\n", 8, "overlaps pool 10.0.0.0/16 (line 5)"),
    ("link-pool-overlap", "[fleet]\nname = \"x\"\n[[generate]]\nkind = \"star\"\ncount = 3\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = \"a:eth0\"\nb = \"b:eth0\"\npool = \"10.0.9.0/30\"\n", 13, "overlaps pool 10.0.0.0/16 (line 3)"),
    ("empty-command", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\ncommands = [\"  \"]\n", 5, "non-empty shell command"),
    ("unknown-placeholder", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\ncommands = [\"echo {nmae}\"]\n", 5, "unknown placeholder {nmae}"),
    ("placeholder-no-address", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a{i}\"\ncount = 2\ncommands = [\"ping {addr.eth9}\"]\n", 6, "node a1 has no IPv4 address on \"eth9\""),
    ("generated-placeholder", "[fleet]\nname = \"x\"\n[[generate]]\nkind = \"line\"\ncount = 2\nnode = { hostname = \"{name}-{colour}\" }\n", 6, "unknown placeholder {colour}"),
    ("file-source-missing", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\ndirs = [\"/etc/frr\"]\nfiles = { \"/etc/frr/a.conf\" = \"nope/{name}.conf\" }\n", 6, "nope/a.conf: No such file"),
    ("file-outside-dirs", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nfiles = { \"/etc/foo.conf\" = { content = \"x\" } }\n", 5, "must be inside one of the node's private `dirs`"),
    ("file-bad-source", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nfiles = { \"/run/x\" = 3 }\n", 5, "expected a source path"),
    ("hosts-file", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nfiles = { \"/etc/hosts\" = { content = \"x\" } }\n", 5, "/etc/hosts is the fleet's"),
    ("dir-system", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\ndirs = [\"/etc\"]\n", 5, "would hide the system"),
    ("file-is-dir", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\ndirs = [\"/run/x\"]\nfiles = { \"/run/x\" = { content = \"x\" } }\n", 6, "one of the node's private directories"),
    ("dir-relative", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\ndirs = [\"etc/frr\"]\n", 5, "expected an absolute path"),
    ("dir-root", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\ndirs = [\"/\"]\n", 5, "other than `/`"),
    ("dir-proc", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\ndirs = [\"/proc\"]\n", 5, "/proc is the kernel's"),
    ("dir-sys", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\ndirs = [\"/sys/kernel\"]\n", 5, "/sys is the kernel's"),
    ("dir-dev", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\ndirs_from_host = [\"/dev\"]\n", 5, "/dev is the kernel's"),
    ("dir-dotdot", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\ndirs = [\"/etc/../proc\"]\n", 5, "without `.`, `..`"),
    ("dir-missing", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\ndirs = [\"/no/such/dir\"]\n", 5, "the host has no such directory"),
    ("copy-missing", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\ndirs_from_host = [\"/no/such/dir\"]\n", 5, "no directory /no/such/dir to copy"),
    ("bad-hostname", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nhostname = \"my host {name}\"\n", 5, "hostname \"my host a\" (node a): expected 1 to 64"),
    ("generated-sysctl", "[fleet]\nname = \"x\"\n[[generate]]\nkind = \"line\"\ncount = 2\nnode = { sysctls = { \"net.core.rmem_max\" = 1 } }\n", 6, "not per network namespace"),
    ("copy-too-big", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\ndirs_from_host = [\"/usr/lib\"]\n", 5, "every node gets a copy of it in memory"),
    ("unknown-kind", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nkind = \"junos\"\n", 5, "unknown kind \"junos\""),
    ("frr-no-config", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nkind = \"frr\"\n", 5, "needs `config`"),
    ("frr-bad-daemon", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nkind = \"frr\"\nconfig = \"/dev/null\"\ndaemons = [\"ospfv9d\"]\n", 7, "unknown FRR daemon"),
    ("config-without-kind", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nconfig = \"a.conf\"\n", 5, "set `kind` too"),
    ("bad-restart", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\ncommands = [\"true\"]\nrestart = \"always\"\n", 6, "expected \"no\" or \"on-failure\""),
    ("bad-loopback", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nloopback = \"lo0\"\n", 5, "expected an address pool"),
    ("ifname-all", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = \"a:all\"\nb = \"b:eth0\"\n", 7, "nor \"all\" or \"default\""),
    ("ifname-default", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = \"a:default\"\nb = \"b:eth0\"\n", 7, "nor \"all\" or \"default\""),
    ("multicast-addr", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = { at = \"a:eth0\", addrs = [\"224.0.0.5/24\"] }\nb = \"b:eth0\"\n", 7, "is a multicast address"),
    ("unspecified-addr", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = { at = \"a:eth0\", addrs = [\"0.0.0.0/24\"] }\nb = \"b:eth0\"\n", 7, "is an unspecified address"),
    ("v6-multicast-addr", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = { at = \"a:eth0\", addrs = [\"ff02::5/64\"] }\nb = \"b:eth0\"\n", 7, "is a multicast address"),
    ("ipv6-low-mtu", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = { at = \"a:eth0\", mtu = 1000, addrs = [\"fd00::1/64\"] }\nb = \"b:eth0\"\n", 7, "IPv6 needs an MTU of at least 1280"),
    ("pool6-with-v4", "[fleet]\nname = \"x\"\n[[switch]]\nname = \"s\"\npool6 = \"10.0.0.0/24\"\n[[node]]\nname = \"a\"\n", 5, "pool6: expected an IPv6 prefix"),
    ("pool-with-v6", "[fleet]\nname = \"x\"\n[[switch]]\nname = \"s\"\npool = \"fd00::/64\"\n[[node]]\nname = \"a\"\n", 5, "pool: expected an IPv4 prefix"),
    ("dup-route", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nroutes = [\"10.9.0.0/16 dev eth0\", \"10.9.0.0/16 dev eth0\"]\n[[node]]\nname = \"b\"\n[[link]]\na = \"a:eth0\"\nb = \"b:eth0\"\n", 5, "already has a route to 10.9.0.0/16"),
    ("two-defaults", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nroutes = [\"default via 10.1.0.2\", \"default via 10.1.0.3\"]\n[[node]]\nname = \"b\"\n[[link]]\na = { at = \"a:eth0\", addrs = [\"10.1.0.1/29\"] }\nb = { at = \"b:eth0\", addrs = [\"10.1.0.2/29\"] }\n", 5, "already has a route to 0.0.0.0/0"),
    ("gateway-unreachable", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nroutes = [\"10.9.0.0/16 via 192.168.7.1\"]\n[[node]]\nname = \"b\"\n[[link]]\na = { at = \"a:eth0\", addrs = [\"10.1.0.1/30\"] }\nb = \"b:eth0\"\n", 5, "expected a gateway on a connected subnet"),
    ("gateway-other-dev", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nroutes = [\"10.9.0.0/16 via 10.1.0.2 dev eth1\"]\n[[node]]\nname = \"b\"\n[[node]]\nname = \"c\"\n[[link]]\na = { at = \"a:eth0\", addrs = [\"10.1.0.1/30\"] }\nb = \"b:eth0\"\n[[link]]\na = \"a:eth1\"\nb = \"c:eth0\"\n", 5, "is on no subnet of that interface"),
    ("link-local-gw-no-dev", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nroutes = [\"default via fe80::1\"]\n", 5, "needs `dev IFACE` too"),
    ("sysctl-banana", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nsysctls = { \"net.ipv4.ip_forward\" = \"banana\" }\n", 5, "the kernel refuses this value (Invalid argument"),
    ("sysctl-out-of-range", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nsysctls = { \"net.ipv4.tcp_ecn\" = 5 }\n", 5, "the kernel refuses this value"),
    ("sysctl-bad-range", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nsysctls = { \"net.ipv4.ip_local_port_range\" = \"1 0\" }\n", 5, "the kernel refuses this value"),
    ("sysctl-missing", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nsysctls = { \"net.ipv4.no_such_knob\" = 1 }\n", 5, "no such sysctl on this kernel"),
    ("sysctl-no-such-iface", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nsysctls = { \"net.ipv4.conf.eth7.rp_filter\" = 0 }\n[[node]]\nname = \"b\"\n[[link]]\na = \"a:eth0\"\nb = \"b:eth0\"\n", 5, "a sysctl of interface eth7, which node a does not have (it has: eth0)"),
    ("dup-mac-on-switch", "[fleet]\nname = \"x\"\n[[switch]]\nname = \"s\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = { at = \"a:eth0\", mac = \"02:00:00:00:00:01\" }\nb = \"s\"\n[[link]]\na = { at = \"b:eth0\", mac = \"02:00:00:00:00:01\" }\nb = \"s\"\n", 12, "MAC address 02:00:00:00:00:01 is already on this switch (line 9)"),
    ("small-loopback", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a{i}\"\ncount = 3\nloopback = \"10.9.0.0/31\"\n", 6, "has 2 addresses; the group has 3 nodes"),
];

#[test]
fn every_bad_file_gets_its_line_and_creates_nothing() {
    let env = Env::new("badfiles");
    for (tag, text, line, expected) in CASES {
        let f = env.file(&format!("{tag}.toml"), text);
        env.refused(tag, &["up", f.to_str().unwrap()], &f, *line, expected);
    }
    let missing = env.run(&["up", "/no/such/file.toml"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read the topology file"));
}

#[test]
fn a_template_file_with_a_bad_placeholder_is_named_with_its_own_line() {
    let env = Env::new("badtemplate");
    env.file(
        "r.conf",
        "hostname {name}\nrouter-id {addr.lo}\nbad {colour}\n",
    );
    let f = env.file(
        "t.toml",
        "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nloopback = \"10.9.0.1/32\"\ndirs = [\"/etc/frr\"]\nfiles = { \"/etc/frr/r.conf\" = \"r.conf\" }\n",
    );
    let out = env.run(&["up", f.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let at = format!(
        "{}:3:5: unknown placeholder {{colour}}",
        env.files.join("r.conf").display()
    );
    assert!(err.contains(&at), "expected {at} in {err}");
    assert!(env.fleet_dirs().is_empty());
}

#[test]
fn a_kind_whose_software_is_missing_says_what_to_install() {
    let env = Env::new("nosoftware");
    env.file("b.conf", "router id 1.1.1.1;\n");
    let f = env.file(
        "b.toml",
        "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nkind = \"bird\"\nconfig = \"b.conf\"\n",
    );
    let out = env
        .cmd(&["up", f.to_str().unwrap()])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(":5:") && err.contains("apt-get install bird2"),
        "{err}"
    );
    assert!(env.fleet_dirs().is_empty());
}

#[test]
fn the_built_in_default_and_every_example_validate() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let files = std::fs::read_dir(root).unwrap().flatten();
    for e in files.filter(|e| e.path().extension().is_some_and(|x| x == "toml")) {
        let text = std::fs::read_to_string(e.path()).unwrap();
        nsfleet::topology::read(&e.path().display().to_string(), &text)
            .and_then(nsfleet::subsys::probe::validate)
            .unwrap();
    }
    nsfleet::topology::read("default", nsfleet::topology::DEFAULT_FLEET)
        .and_then(nsfleet::subsys::probe::validate)
        .unwrap();
}

#[test]
fn what_is_not_a_topology_file_is_refused_without_reading_it() {
    let env = Env::new("notafile");
    let fifo = env.files.join("fifo.toml");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path; mkfifo(3) creates the FIFO or fails.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // Past the limit, and sparse: refused by its size, before a byte is read.
    let big = env.files.join("big.toml");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(nsfleet::topology::MAX_TOPOLOGY_BYTES + 1)
        .unwrap();
    let cases = [
        ("/dev/zero", "not a device"),
        (fifo.to_str().unwrap(), "not a FIFO"),
        (env.files.to_str().unwrap(), "not a directory"),
        (big.to_str().unwrap(), "over 16 MiB"),
    ];
    for (path, expected) in cases {
        // A FIFO opened for reading would block: a test that hangs here has read it.
        let out = env.run(&["up", path]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{path}: {err}");
        assert!(
            err.contains(path) && err.contains(expected),
            "{path}: {err}"
        );
        assert!(env.fleet_dirs().is_empty(), "{path}: nothing created");
    }
    let bytes = b"[fleet]\nname = \"x\"\n[[node]]\nname = \"a\xff\"\n";
    let bad = env.files.join("latin1.toml");
    std::fs::write(&bad, bytes).unwrap();
    env.refused(
        "invalid UTF-8",
        &["up", bad.to_str().unwrap()],
        &bad,
        4,
        "expected UTF-8 text",
    );
}

/// The corpus of hostile files in tests/corpus: each says on its first line where it is
/// refused and how (`# refused at line N: MESSAGE`), and `up` must agree, creating nothing.
#[test]
fn the_hostile_corpus_is_refused_line_by_line_and_creates_nothing() {
    let env = Env::new("corpus");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let head = text.lines().next().unwrap_or_default();
        let (line, message) = head
            .strip_prefix("# refused at line ")
            .and_then(|r| r.split_once(": "))
            .unwrap_or_else(|| panic!("{}: no `# refused at line N: MESSAGE` header", f.display()));
        let tag = f.file_name().unwrap().to_string_lossy();
        let line: usize = line.parse().unwrap();
        env.refused(&tag, &["up", f.to_str().unwrap()], f, line, message);
    }
    assert!(files.len() >= 50, "{} files in the corpus", files.len());
}

#[test]
fn every_error_of_a_stage_is_reported_at_once_in_the_files_order() {
    let env = Env::new("allerrors");
    let f = env.file(
        "many.toml",
        "[fleet]\nname = \"x\"\n[[node]]\nname = \"a b\"\n[[node]]\nname = \"c\"\nrestart = \"always\"\ncommands = [\"true\"]\n[[node]]\nname = \"-d\"\n",
    );
    let out = env.run(&["up", f.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let at: Vec<String> = (err.lines())
        .filter_map(|l| l.split(&format!("{}:", f.display())).nth(1))
        .map(|r| r.split(':').next().unwrap().to_string())
        .collect();
    assert_eq!(at, ["4", "7", "10"], "{err}");
    assert!(env.fleet_dirs().is_empty());
}

//! Bad topology files: each gets one clear line naming file:line:column, and nothing is
//! created (no run folder, no supervisor).

mod harness;

use harness::*;

#[test]
fn a_file_that_does_not_exist_is_named() {
    let env = Env::new("nofile");
    let missing = env.run(&["up", "/no/such/file.toml"]);
    assert_eq!(missing.status.code(), Some(1));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(
        err.contains("/no/such/file.toml: cannot read the topology file"),
        "{err}"
    );
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
    let files = (std::fs::read_dir(&root).unwrap().flatten())
        .chain(std::fs::read_dir(root.join("scenarios")).unwrap().flatten());
    for e in files.filter(|e| e.path().extension().is_some_and(|x| x == "toml")) {
        let text = std::fs::read_to_string(e.path()).unwrap();
        if text.contains("\n[scenario]\n") {
            // A scenario, not a topology (nsfleet-scenario's tests read those).
            continue;
        }
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
    let before = netns_count();
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
    assert!(files.len() >= 150, "{} files in the corpus", files.len());
    // Other tests of this binary probe the kernel in scratch namespaces of their own,
    // which live for a moment: wait them out.
    wait_until(
        "no namespace left behind",
        std::time::Duration::from_secs(20),
        || match netns_count() {
            n if n <= before => Ok(()),
            n => Err(format!("{n} namespaces in use, {before} before the corpus")),
        },
    );
}

/// The lines `err` names in `file`, in order.
fn lines_named(err: &str, file: &std::path::Path) -> Vec<String> {
    (err.lines())
        .filter_map(|l| l.split(&format!("{}:", file.display())).nth(1))
        .map(|r| r.split(':').next().unwrap().to_string())
        .collect()
}

#[test]
fn every_error_of_a_file_is_reported_at_once_in_the_files_order() {
    let env = Env::new("allerrors");
    let cases = [
        // Names: a node's bad name stops what refers to names, not its neighbours' checks.
        (
            "names.toml",
            "[fleet]\nname = \"x\"\n[[node]]\nname = \"a b\"\n[[node]]\nname = \"c\"\nrestart = \"always\"\ncommands = [\"true\"]\n[[node]]\nname = \"-d\"\n",
            vec!["4", "7", "10"],
        ),
        // Across stages: a node's configuration, then its links.
        (
            "stages.toml",
            "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nrestart = \"always\"\ncommands = [\"true\"]\n[[node]]\nname = \"b\"\n[[link]]\na = \"a:eth0\"\nb = \"b:eth0\"\nmtu = 10\n[[link]]\na = { at = \"a:eth1\", addrs = [\"224.0.0.9/24\"] }\nb = \"b:eth1\"\n",
            vec!["5", "12", "14"],
        ),
        // What the kernel refuses: each sysctl.
        (
            "kernel.toml",
            "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nsysctls = { \"net.ipv4.ip_forward\" = \"banana\" }\n[[node]]\nname = \"b\"\nsysctls = { \"net.core.rmem_max\" = 1, \"net.ipv4.tcp_ecn\" = 7 }\n",
            vec!["5", "8", "8"],
        ),
    ];
    for (name, text, lines) in cases {
        let f = env.file(name, text);
        let out = env.run(&["up", f.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert_eq!(lines_named(&err, &f), lines, "{name}: {err}");
        assert!(env.fleet_dirs().is_empty(), "{name}: nothing created");
    }
}

#[test]
fn two_vxlan_devices_of_one_vni_in_a_node_are_refused_before_anything_exists() {
    let env = Env::new("vnitwin");
    // The kernel would refuse the second (EEXIST) while the fleet is wired, half-way.
    let f = env.file(
        "twin.toml",
        "[fleet]\nname = \"kplace\"\n[[node]]\nname = \"a\"\n[[vxlan]]\nat = \"a:vx0\"\nvni = 70\nremote = \"10.70.0.2\"\n[[vxlan]]\nat = \"a:vx1\"\nvni = 70\nremote = \"10.70.0.3\"\n",
    );
    let args = ["up", f.to_str().unwrap()];
    let expected = "a already has a VXLAN device of VNI 70 on UDP port 4789 (vx0, line 5)";
    env.refused("vni twice", &args, &f, 9, expected);
}

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
    ("dup-node", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"a\"\n", 6, "already used by the node at line 4"),
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
    ("empty-command", "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\ncommands = [\"  \"]\n", 5, "non-empty shell command"),
];

#[test]
fn every_bad_file_gets_its_line_and_creates_nothing() {
    let env = Env::new("badfiles");
    for (tag, text, line, expected) in CASES {
        let f = env.file(&format!("{tag}.toml"), text);
        let out = env.run(&["up", f.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{tag}: {err}");
        let loc = format!("{}:{line}:", f.display());
        assert!(err.contains(&loc), "{tag}: expected {loc} in {err}");
        assert!(
            err.contains(expected),
            "{tag}: expected {expected:?} in {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{tag}: one line: {err}");
        assert!(env.fleet_dirs().is_empty(), "{tag}: nothing created");
    }
    let missing = env.run(&["up", "/no/such/file.toml"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read the topology file"));
}

#[test]
fn the_built_in_default_and_every_example_validate() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    for e in std::fs::read_dir(root).unwrap().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap();
        nsfleet::topology::parse(&e.path().display().to_string(), &text).unwrap();
    }
    nsfleet::topology::parse("default", nsfleet::topology::DEFAULT_FLEET).unwrap();
}

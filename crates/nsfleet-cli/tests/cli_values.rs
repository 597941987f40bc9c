//! Every numeric option of every subcommand, given malformed and out-of-range values: the
//! parser refuses each with a usage error (exit 2) that names the option and the range,
//! before anything runs; nothing panics (exit 101). Needs neither root nor a fleet.

mod harness;

use harness::*;

/// (the command before the option, the option, its lowest valid value).
const OPTIONS: &[(&[&str], &str, u64)] = &[
    (&["up"], "--workers", 1),
    (&["up"], "--max-unreclaimed", 1),
    (&["deploy"], "--workers", 1),
    (
        &["gen", "nofleet", "--dev", "a:eth0", "--dst", "10.0.0.1"],
        "--threads",
        1,
    ),
    (&["bench", "create"], "--count", 1),
    (&["bench", "create"], "--shell-count", 0),
    (&["bench", "create"], "--runs", 1),
    (&["bench", "create"], "--workers", 1),
    (&["bench", "teardown"], "--count", 1),
    (&["bench", "churn"], "--cycles", 1),
    (&["bench", "churn"], "--batch", 1),
    (&["bench", "churn"], "--bound", 1),
    (&["bench", "routers"], "--count", 1),
    (&["bench", "routers"], "--steps", 1),
    (&["bench", "routers"], "--script-count", 0),
    (&["bench", "routers"], "--mininet-count", 0),
    (&["bench", "daemons"], "--count", 1),
    (&["bench", "daemons"], "--timeout", 1),
    (&["bench", "clab"], "--count", 1),
    (&["bench", "clab"], "--timeout", 1),
    (&["bench", "cable"], "--count", 1),
    (&["bench", "apply"], "--sizes", 1),
    (&["bench", "apply"], "--adds", 1),
    (&["bench", "setns"], "--calls", 1),
    (&["bench", "setns"], "--alive", 1),
    (&["bench", "setns"], "--process-calls", 0),
    (&["bench", "traffic"], "--loop-packets", 1),
    (&["capture", "nofleet", "a:eth0"], "-c", 1),
    (&["capture", "nofleet", "a:eth0"], "-s", 64),
    (&["stats", "nofleet"], "--limit", 1),
];

fn refused(env: &Env, args: &[&str], what: &str) {
    let out = env.run(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{what}: {args:?}: {err}");
    assert!(err.contains("invalid value"), "{what}: {args:?}: {err}");
}

#[test]
fn every_numeric_option_refuses_malformed_and_out_of_range_values() {
    let env = Env::new("cliranges");
    let huge = "99999999999999999999999";
    for (command, option, lowest) in OPTIONS {
        let mut bad = vec!["abc", "-5", "1.5", "", " ", huge, "0x10"];
        if *lowest == 1 {
            bad.push("0");
        }
        for value in bad {
            let given = format!("{option}={value}");
            let args: Vec<&str> = command.iter().copied().chain([given.as_str()]).collect();
            refused(&env, &args, option);
        }
        // One above the highest the parser allows, as its own message says.
        let mut args: Vec<&str> = command.to_vec();
        let probe = format!("{option}={huge}");
        args.push(&probe);
        let err = String::from_utf8_lossy(&env.run(&args).stderr).into_owned();
        if let Some(high) = (err.split(" to ").nth(1))
            .and_then(|r| r.split(',').next())
            .and_then(|h| h.parse::<u64>().ok())
        {
            let over = format!("{option}={}", high + 1);
            let args: Vec<&str> = command.iter().copied().chain([over.as_str()]).collect();
            refused(&env, &args, option);
        }
    }
    for value in ["0", "-1", "abc", "1e9", "nan", "inf"] {
        let given = format!("--seconds={value}");
        refused(&env, &["bench", "traffic", &given], "--seconds");
        let given = format!("--interval={value}");
        refused(&env, &["stats", "nofleet", &given], "--interval");
    }
    assert!(env.fleet_dirs().is_empty(), "nothing ran");
}

/// Values checked after parsing (by the traffic engine, the topology reader) fail with
/// an error, never a panic, whatever they are.
#[test]
fn no_value_makes_a_command_panic() {
    let env = Env::new("clinopanic");
    let gen = ["gen", "nofleet", "--dev", "a:eth0", "--dst"];
    for args in [
        vec!["up", "/nonexistent.toml"],
        vec!["up", ""],
        vec!["apply", "/nonexistent.toml", "--dry-run"],
        vec!["exec", "nofleet", "a", "--", "true"],
        vec!["link", "nofleet", "a", "down"],
        vec!["link", "nofleet", ":", "down"],
        vec!["node", "nofleet", "a", "explode"],
        vec!["impair", "nofleet", "a:eth0", "--delay", "-5ms"],
        vec!["impair", "nofleet", "a:eth0", "--loss", "250%"],
        [&gen[..], &["999.1.1.1"]].concat(),
        [&gen[..], &["10.0.0.1", "--rate", "-1mbit"]].concat(),
        [&gen[..], &["10.0.0.1", "--duration", "forever"]].concat(),
        [
            &gen[..],
            &["10.0.0.1", "--count", "99999999999999999999999"],
        ]
        .concat(),
        vec!["down", "nofleet"],
        vec!["status", "nofleet"],
        vec!["report", "/nonexistent.json"],
        vec!["capture", "nofleet", "a:eth0", "tcp", "port", "x"],
        vec!["capture", "nofleet", ":"],
        vec!["stats", "nofleet", "a:"],
        vec!["bench", "compare", "/nonexistent", "/nonexistent"],
        vec!["bench", "compare", "a", "b", "--threshold", "-10%"],
    ] {
        let out = env.run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(101), "{args:?} panicked: {err}");
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

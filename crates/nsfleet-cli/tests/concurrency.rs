//! nsfleet commands racing each other: two fleets coming up at once, `down` while `up` is
//! still creating, and `exec` into a fleet that is being torn down. Each ends with nothing
//! left behind and every command answering (none hangs).

mod harness;

use harness::*;
use std::time::{Duration, Instant};

fn bare(name: &str, count: u32) -> String {
    format!("[fleet]\nname = \"{name}\"\n[[node]]\nname = \"n{{i}}\"\ncount = {count}\n")
}

/// Waits for a child with a deadline; a hung nsfleet fails the test instead of wedging it.
fn finish(mut child: std::process::Child, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} did not finish");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn two_fleets_come_up_in_parallel() {
    let env = Env::new("parallel");
    let a = env.file("pa.toml", &bare("pa", 500));
    let b = env.file("pb.toml", &bare("pb", 500));
    let ua = env.spawn(&["up", a.to_str().unwrap()]);
    let ub = env.spawn(&["up", b.to_str().unwrap()]);
    let (sa, sb) = (finish(ua, "up pa"), finish(ub, "up pb"));
    // Guards from here on, whatever the outcome, so that both are taken down.
    let _ga = Fleet {
        env: &env,
        name: "pa".into(),
    };
    let _gb = Fleet {
        env: &env,
        name: "pb".into(),
    };
    assert!(sa.success() && sb.success(), "{sa} {sb}");
    assert_eq!(env.status("pa")["nodes"].as_array().unwrap().len(), 500);
    assert_eq!(env.status("pb")["nodes"].as_array().unwrap().len(), 500);
}

#[test]
fn down_while_up_is_still_creating_takes_the_whole_fleet_down() {
    let env = Env::new("downup");
    let file = env.file("du.toml", &bare("du", 2000));
    let up = env.spawn(&["up", file.to_str().unwrap()]);
    // Until the supervisor has its socket, down has nothing to talk to: retry until it
    // answers, as a user would.
    let deadline = Instant::now() + Duration::from_secs(60);
    let down = loop {
        let out = env.run(&["down", "du"]);
        if out.status.success() || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // up either finished first (the fleet was then taken down) or was cancelled: either
    // way it ends, and the fleet is gone.
    finish(up, "up du");
    assert!(
        down.status.success(),
        "{}",
        String::from_utf8_lossy(&down.stderr)
    );
    let text = String::from_utf8_lossy(&down.stdout);
    assert!(
        text.contains("reclaimed 2000 of 2000"),
        "every node went: {text}"
    );
    assert!(
        env.fleet_dirs().is_empty(),
        "left behind: {:?}",
        env.fleet_dirs()
    );
}

#[test]
fn exec_into_a_fleet_being_torn_down_fails_cleanly_or_runs() {
    let env = Env::new("execdown");
    let f = env.up(&bare("ed", 1500));
    let down = env.spawn(&["down", "ed"]);
    for i in (1..=1500).rev().step_by(100) {
        let out = env.run(&["exec", "ed", &format!("n{i}"), "--", "true"]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        // Ran before its node went, or a clear error: no node, or no fleet any more.
        assert!(
            out.status.success() || err.contains("no node") || err.contains("fleet"),
            "n{i}: {err}"
        );
    }
    assert!(finish(down, "down ed").success());
    std::mem::forget(f); // down already took it
    assert!(
        env.fleet_dirs().is_empty(),
        "left behind: {:?}",
        env.fleet_dirs()
    );
}

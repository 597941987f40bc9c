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
    use nsfleet::control::{Client, Reply, Request};
    let env = Env::new("downup");
    let file = env.file("du.toml", &bare("du", 2000));
    let up = env.spawn(&["up", file.to_str().unwrap()]);
    // Taken down (or cleaned up after) even if the test fails half-way.
    let guard = Fleet {
        env: &env,
        name: "du".into(),
    };
    // The down request goes as soon as the supervisor has its socket, which it opens
    // before it creates the first node.
    let socket = nsfleet::rundir::RunDir::new(&env.run_dir).socket("du");
    let mut client = wait_until("du's supervisor to listen", Duration::from_secs(60), || {
        Client::connect(&socket).map_err(|e| e.to_string())
    });
    client.send(&Request::Down { wait: true }).unwrap();
    // The race happened: the request was in while the supervisor was still creating (it
    // says "starting" only until the last node is made). Whichever way a run without this
    // check went, its assertions held: it could not tell a down during creation from one
    // after it.
    // (`workers`: the supervisor's own answer, not the run folder's record.)
    let s = env.status("du");
    assert!(
        s["state"] == "starting" && s["workers"].as_u64() > Some(0),
        "creation was over before the down request went, nothing raced (a bigger fleet?): {s}"
    );
    client.set_timeout(Some(Duration::from_secs(300)));
    let mut reclaimed = None;
    while let Some(reply) = client.next_reply().unwrap() {
        match reply {
            Reply::Reclaimed {
                nodes,
                reclaimed: r,
                ..
            } => {
                reclaimed = Some((nodes, r));
                break;
            }
            Reply::Error { message, .. } => panic!("down: {message}"),
            _ => {}
        }
    }
    assert_eq!(reclaimed, Some((2000, 2000)), "every node went");
    // up saw its fleet ready (the down waited for the creation), and ends.
    finish(up, "up du");
    std::mem::forget(guard);
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
    let mut down = env.spawn(&["down", "ed"]);
    // Exec until the fleet is gone, so that some exec meets it half torn down (its nodes
    // unpublished, its supervisor still answering): whatever the timing, every outcome
    // below is acceptable, so only this record shows that the case was exercised.
    let mut outcomes = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    for i in (1..=1500).rev().step_by(100).cycle() {
        let out = env.run(&["exec", "ed", &format!("n{i}"), "--", "true"]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        // Ran before its node went, or a clear error: no node, or no fleet any more.
        assert!(
            out.status.success() || err.contains("no node") || err.contains("fleet"),
            "n{i}: {err}"
        );
        outcomes.push(if out.status.success() {
            format!("n{i}: ran")
        } else {
            format!("n{i}: {}", err.trim())
        });
        if down.try_wait().unwrap().is_some() || Instant::now() > deadline {
            break;
        }
    }
    assert!(
        (outcomes.iter()).any(|o| o.contains("has no node") || o.contains("being torn down")),
        "no exec met the fleet half torn down: {outcomes:#?}"
    );
    assert!(finish(down, "down ed").success());
    std::mem::forget(f); // down already took it
    assert!(
        env.fleet_dirs().is_empty(),
        "left behind: {:?}",
        env.fleet_dirs()
    );
}

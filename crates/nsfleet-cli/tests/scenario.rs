//! Scenarios on a live fleet: faults made and expectations checked on the real kernel,
//! verdicts as exit statuses, JSON and JUnit XML, recovery timed from the fault, bad
//! files refused at their place before anything changes, and what a run changed put back
//! however it ends.

mod harness;

use harness::*;
use serde_json::Value;
use std::time::Duration;

/// Three routers in a line: r1 —(10.2.0.0/30)— r2 —(10.2.0.4/30)— r3.
const LINE: &str =
    "[fleet]\nname = \"NAME\"\n[[generate]]\nkind = \"line\"\ncount = 3\npool = \"10.2.0.0/16\"\n";

fn line(name: &str) -> String {
    LINE.replace("NAME", name)
}

/// Whether the end NODE:IFACE is up, and its impairment, as `nsfleet link` says.
fn end(env: &Env, fleet: &str, target: &str) -> (bool, Value) {
    let v: Value = serde_json::from_str(&env.ok(&["link", fleet, target, "--json"])).unwrap();
    (v["end"]["up"].as_bool().unwrap(), v["impair"].clone())
}

/// The JUnit file parses as XML (Python's parser: what CI systems' reporters read it with
/// is no laxer).
fn well_formed(file: &std::path::Path) {
    let check = "import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); assert r.tag == 'testsuites', r.tag";
    let out = std::process::Command::new("python3")
        .args(["-c", check])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn code(out: &std::process::Output) -> Option<i32> {
    out.status.code()
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_scenario_pulls_a_cable_times_the_recovery_and_puts_everything_back() {
    let env = Env::new("scenario-story");
    let _fleet = env.up(&line("sc1"));
    let sc = env.file(
        "story.toml",
        r#"[scenario]
name = "a cable is pulled"

[[step]]
name = "r1 reaches r2"
expect = "ping r1 10.2.0.2"
within = 5

[[step]]
do = "link r2:eth0 down"

[[step]]
name = "traffic stops"
expect = "no ping r1 10.2.0.2"
within = 5

[[step]]
expect = "no route r2 10.2.0.0/30"
within = 5

[[step]]
do = "impair r3:eth0 --rate 10mbit"

[[step]]
expect = "exec r3 -- ip -o link show eth0"
output = "state UP"

[[step]]
expect = "no route r* 10.9.0.0/16"
within = 5

[[step]]
expect = "loss r3 10.2.0.5 < 5%"
window = 1

[[step]]
expect = "exec r3 -- sh -c 'sleep 3 & echo ok'"
output = "ok"
"#,
    );
    let junit = env.files.join("report.xml");
    let out = env.run(&[
        "scenario",
        "run",
        sc.to_str().unwrap(),
        "--fleet",
        "sc1",
        "--json",
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["scenario"].as_str(), v["ok"].as_bool()),
        (Some("a cable is pulled"), Some(true)),
        "{v}"
    );
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 9);
    // What a command leaves running in the node is not waited for.
    assert!(steps[8]["took_s"].as_f64().unwrap() < 2.0, "{}", steps[8]);
    assert!(
        steps[7]["seen"]
            .as_str()
            .unwrap()
            .starts_with("0.0% of 50 echoes to 10.2.0.5 lost"),
        "{}",
        steps[7]
    );
    for s in steps {
        assert!(
            s["ok"].as_bool().unwrap() && s["started_at"].is_number() && s["took_s"].is_number(),
            "{s}"
        );
    }
    // The recovery of each expectation after the fault, timed from the fault.
    assert_eq!(steps[2]["fault"], "link r2:eth0 down", "{}", steps[2]);
    assert!(
        steps[2]["since_fault_s"].as_f64().unwrap() < 5.0,
        "{}",
        steps[2]
    );
    assert!(
        steps[0].get("since_fault_s").is_none(),
        "no fault before: {}",
        steps[0]
    );
    assert!(
        steps[3]["seen"]
            .as_str()
            .unwrap()
            .contains("no route to 10.2.0.0/30"),
        "{}",
        steps[3]
    );
    // On a pattern: each node's time.
    assert_eq!(
        steps[6]["nodes"].as_object().map(|n| n.len()),
        Some(3),
        "each router's time: {}",
        steps[6]
    );
    assert!(
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e.to_string().contains("r2")),
        "the fleet's events are kept: {}",
        v["events"]
    );
    assert!(
        v["restored"]
            .to_string()
            .contains("cable r2:eth0 plugged back"),
        "{v}"
    );
    // JUnit: a case per expectation, none failed.
    let x = std::fs::read_to_string(&junit).unwrap();
    assert!(
        x.contains("<testsuite name=\"a cable is pulled\" tests=\"7\" failures=\"0\""),
        "{x}"
    );
    assert!(x.contains("name=\"step 3: traffic stops\""), "{x}");
    well_formed(&junit);
    // Everything the run changed is back.
    assert_eq!(end(&env, "sc1", "r2:eth0"), (true, Value::Null));
    assert_eq!(end(&env, "sc1", "r3:eth0"), (true, Value::Null));
}

#[test]
fn an_expectation_that_does_not_hold_fails_the_run_and_says_what_was_seen() {
    let env = Env::new("scenario-fail");
    let _fleet = env.up(&line("sc2"));
    let sc = env.file(
        "fail.toml",
        "[scenario]\nname = \"wrong\"\n[[step]]\ndo = \"link r1:eth0 down\"\n[[step]]\nname = \"still reachable\"\nexpect = \"ping r1 10.2.0.2\"\nwithin = 1\n[[step]]\nexpect = \"exec r2 -- true\"\n",
    );
    let junit = env.files.join("fail.xml");
    let out = env.run(&[
        "scenario",
        "run",
        sc.to_str().unwrap(),
        "--fleet",
        "sc2",
        "--junit",
        junit.to_str().unwrap(),
    ]);
    let said = text(&out);
    assert_eq!(code(&out), Some(1), "{said}");
    assert!(
        said.contains("FAILED") && said.contains("no answer from 10.2.0.2"),
        "{said}"
    );
    // A failed expectation does not stop the story: the next step ran and held.
    assert!(said.contains("1 of 2 expectations held"), "{said}");
    let x = std::fs::read_to_string(&junit).unwrap();
    assert!(
        x.contains("failures=\"1\"")
            && x.contains("<failure message=\"not true after 1s: no answer from 10.2.0.2"),
        "{x}"
    );
    well_formed(&junit);
    assert!(
        end(&env, "sc2", "r1:eth0").0,
        "put back after a failed run too"
    );
}

#[test]
fn a_scenario_naming_what_the_fleet_lacks_is_refused_at_its_place_before_any_step() {
    let env = Env::new("scenario-refused");
    let _fleet = env.up(&line("sc3"));
    let sc = env.file(
        "bad.toml",
        "[scenario]\nname = \"bad\"\n[[step]]\ndo = \"link r2:eth0 down\"\n[[step]]\ndo = \"link r9:eth0 down\"\n[[step]]\nexpect = \"ping r1 10.2.0.300\"\n[[step]]\nexpect = \"ping r1 10.2.0.2\"\nwithin = 7200\n",
    );
    let file = sc.to_str().unwrap();
    let out = env.run(&["scenario", "run", file, "--fleet", "sc3"]);
    let said = text(&out);
    assert_eq!(code(&out), Some(2), "{said}");
    assert!(
        said.contains(&format!("{file}:8:19: expected an IPv4 or IPv6 address")),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "{file}:11:10: within: expected seconds above 0 and at most 3600"
        )),
        "{said}"
    );
    // The file reads; the fleet lacks r9: refused before the first step.
    let sc = env.file("lacks.toml", "[scenario]\nname = \"lacks\"\n[[step]]\ndo = \"link r2:eth0 down\"\n[[step]]\ndo = \"link r9:eth0 down\"\n");
    let out = env.run(&[
        "scenario",
        "run",
        sc.to_str().unwrap(),
        "--fleet",
        "sc3",
        "--json",
    ]);
    assert_eq!(code(&out), Some(2), "{}", text(&out));
    let e: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(
        (e["error"]["line"].as_u64(), e["error"]["column"].as_u64()),
        (Some(6), Some(7)),
        "{e}"
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("fleet \"sc3\" has no node \"r9\" (it has r1, r2, r3)"),
        "{e}"
    );
    assert!(end(&env, "sc3", "r2:eth0").0, "nothing changed");
    let out = env.run(&["scenario", "run", sc.to_str().unwrap(), "--fleet", "nosuch"]);
    assert_eq!(code(&out), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("no fleet named \"nosuch\""),
        "{}",
        text(&out)
    );
}

#[test]
fn a_signal_stops_a_scenario_which_says_what_it_changed_and_puts_it_back() {
    let env = Env::new("scenario-signal");
    let _fleet = env.up(&line("sc4"));
    let sc = env.file(
        "long.toml",
        "[scenario]\nname = \"long\"\n[[step]]\ndo = \"link r2:eth1 down\"\n[[step]]\ndo = \"impair r1:eth0 --rate 10mbit\"\n[[step]]\ndo = \"sleep 60\"\n",
    );
    for (sig, restore) in [(libc::SIGTERM, true), (libc::SIGINT, false)] {
        let mut args = vec!["scenario", "run", sc.to_str().unwrap(), "--fleet", "sc4"];
        if !restore {
            args.push("--no-restore");
        }
        let child = env
            .cmd(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        wait_until(
            "the scenario to impair r1:eth0",
            Duration::from_secs(20),
            || match end(&env, "sc4", "r1:eth0").1 {
                Value::Null => Err("not yet"),
                _ => Ok(()),
            },
        );
        signal(child.id() as i32, sig);
        let out = child.wait_with_output().unwrap();
        let said = text(&out);
        assert_eq!(code(&out), Some(1), "{said}");
        assert!(said.contains("STOPPED"), "{said}");
        match restore {
            true => {
                assert!(
                    said.contains("put back: ") && said.contains("cable r2:eth1 plugged back"),
                    "{said}"
                );
                assert_eq!(end(&env, "sc4", "r2:eth1"), (true, Value::Null));
                assert_eq!(end(&env, "sc4", "r1:eth0"), (true, Value::Null));
            }
            false => {
                assert!(said.contains("left in place (--no-restore): cable r2:eth1 pulled, impairment of r1:eth0 changed"), "{said}");
                assert!(!end(&env, "sc4", "r2:eth1").0);
            }
        }
    }
}

#[test]
fn a_scenario_brings_its_own_lab_up_repeats_with_a_seed_and_takes_it_down() {
    let env = Env::new("scenario-topology");
    let topo = env.file("sc5.toml", &line("sc5"));
    let sc = env.file(
        "random.toml",
        "[scenario]\nname = \"random cable\"\nseed = 7\n[[step]]\ndo = \"link random(r2:eth*) down\"\n[[step]]\nexpect = \"exec r2 -- sh -c 'ip -o link | grep -c \\\"state DOWN\\\"'\"\noutput = \"(?m)^1$\"\n",
    );
    let out = env.run(&[
        "scenario",
        "run",
        sc.to_str().unwrap(),
        "--topology",
        topo.to_str().unwrap(),
        "--repeat",
        "3",
        "--json",
    ]);
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    // The same seed, the same choices, run after run.
    let chosen: Vec<&str> = runs
        .iter()
        .map(|r| r["steps"][0]["text"].as_str().unwrap())
        .collect();
    assert!(
        chosen
            .iter()
            .all(|c| *c == chosen[0] && c.starts_with("link r2:eth")),
        "{chosen:?}"
    );
    let t = &v["times"][0];
    assert_eq!(
        (t["held"].as_u64(), t["of"].as_u64()),
        (Some(3), Some(3)),
        "{t}"
    );
    assert!(
        t["took_s"]["median"].is_number() && t["since_fault_s"]["max"].is_number(),
        "{t}"
    );
    assert!(
        env.fleet_dirs().is_empty(),
        "the lab it brought up is down: {:?}",
        env.fleet_dirs()
    );
}

#[test]
fn a_partition_cuts_the_links_between_its_groups_heal_plugs_them_and_apply_grows_the_lab() {
    let env = Env::new("scenario-partition");
    let _fleet = env.up(&line("sc6"));
    env.file("grown.toml", &line("sc6").replace("count = 3", "count = 4"));
    let sc = env.file(
        "split.toml",
        r#"[scenario]
name = "split and grow"

[[step]]
do = "partition r1 r2,r3"

[[step]]
expect = "no ping r1 10.2.0.2"
within = 5

[[step]]
do = "heal"

[[step]]
expect = "ping r1 10.2.0.2"
within = 5

[[step]]
do = "apply grown.toml"

[[step]]
name = "the node the file adds"
expect = "route r4 10.2.0.8/30"
within = 5
"#,
    );
    let out = env.run(&[
        "scenario",
        "run",
        sc.to_str().unwrap(),
        "--fleet",
        "sc6",
        "--json",
    ]);
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps[0]["seen"], "1 cables pulled: r1:eth0", "{}", steps[0]);
    assert_eq!(steps[2]["seen"], "1 cables plugged back", "{}", steps[2]);
    assert_eq!(
        steps[3]["fault"], "heal",
        "timed from the repair: {}",
        steps[3]
    );
    assert!(
        steps[4]["seen"].as_str().unwrap().ends_with("changes made"),
        "{}",
        steps[4]
    );
    // An apply is not undone: said, not hidden.
    assert_eq!(
        v["left_in_place"],
        serde_json::json!(["grown.toml applied (not undone: apply the lab's own file)"]),
        "{v}"
    );
    assert_eq!(env.status("sc6")["nodes"].as_array().map(Vec::len), Some(4));
    assert!(end(&env, "sc6", "r1:eth0").0);
    // The same steps in YAML, as beside a containerlab lab.
    let yml = env.file(
        "split.clab-scenario.yml",
        "scenario:\n  name: split in yaml\nstep:\n  - do: partition r4 r1,r2,r3\n  - expect: no ping r3 10.2.0.10\n    within: 5\n",
    );
    let out = env.run(&["scenario", "run", yml.to_str().unwrap(), "--fleet", "sc6"]);
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("put back: cable r4:eth0 plugged back"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_signal_stops_a_wait_step_at_once_not_at_its_end() {
    let env = Env::new("scenario-wait");
    let _fleet = env.up(
        "[fleet]\nname = \"sc7\"\n[[node]]\nname = \"w\"\ncommands = [\"exec sleep 600\"]\nhealthcheck = { test = \"false\", interval = 1, retries = 1000 }\n",
    );
    let sc = env.file(
        "never.toml",
        "[scenario]\nname = \"never healthy\"\n[[step]]\ndo = \"wait healthy --timeout 300\"\n",
    );
    let child = (env.cmd(&["scenario", "run", sc.to_str().unwrap(), "--fleet", "sc7"]))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let signalled = std::time::Instant::now();
    signal(child.id() as i32, libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    let said = text(&out);
    assert_eq!(code(&out), Some(1), "{said}");
    assert!(
        said.contains("STOPPED") && said.contains("wait healthy"),
        "{said}"
    );
    assert!(
        signalled.elapsed() < Duration::from_secs(5),
        "stopped {:?} after the signal",
        signalled.elapsed()
    );
    // A node paused then stopped is started again (not resumed); a failed step ends the
    // repeats, since the next run would start from a fleet this one changed.
    let sc = env.file(
        "pause-stop.toml",
        "[scenario]\nname = \"ps\"\n[[step]]\ndo = \"node w pause\"\n[[step]]\ndo = \"node w stop\"\n[[step]]\ndo = \"wait healthy --timeout 1\"\n",
    );
    let out = env.run(&[
        "scenario",
        "run",
        sc.to_str().unwrap(),
        "--fleet",
        "sc7",
        "--repeat",
        "3",
        "--json",
    ]);
    assert_eq!(code(&out), Some(1), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["runs"].as_array().map(Vec::len), Some(1), "{v}");
    assert!(
        v["stopped"].as_str().unwrap().starts_with("step 3 failed"),
        "{v}"
    );
    assert_eq!(v["restored"], serde_json::json!(["node w started"]), "{v}");
    assert!(
        env.status("sc7").to_string().contains("running"),
        "{}",
        env.status("sc7")
    );
}

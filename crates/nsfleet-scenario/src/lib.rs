//! Scenarios: faults on a timeline and expectations with verdicts, run against a live
//! fleet (`nsfleet scenario run FILE --fleet NAME`). A file of ordered steps, each a live
//! verb (`link r1:eth1 down`, `impair`, `node`, `wait`, `sleep`, `partition`, `heal`,
//! `apply`) or an expectation retried until it holds (`ping`, `route`, `exec`, `loss`),
//! is read ([`file`], [`step`]), checked against the fleet before its first step
//! ([`check`]), run ([`run`], [`probe`]) and recorded ([`record`]): a live timeline, JSON,
//! JUnit XML, recovery times after each fault, and over `--repeat` runs their median and
//! range.
//!
//! It reaches the fleet only as the other commands do, through nsfleet-client and the
//! supervisor's control socket; it never enters a namespace itself. Whatever it changes it
//! writes down first, and puts back unless told not to, however the run ends (a failed
//! step, Ctrl-C, SIGTERM, SIGHUP); only SIGKILL leaves its faults in place.

pub mod check;
pub mod file;
pub mod probe;
pub mod record;
pub mod run;
pub mod step;

use anyhow::Context;
use nsfleet::sys::signals;
use nsfleet_client::FleetRef;
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The exit statuses: every expectation held; one did not (or a step failed, or the run
/// was stopped); the file or the fleet was refused before anything was done.
pub const HELD: i32 = 0;
pub const FAILED: i32 = 1;
pub const REFUSED: i32 = 2;

/// The signals that stop a run (after which it puts back what it changed).
const STOPPING: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// `nsfleet scenario run`'s arguments.
pub struct RunArgs {
    pub file: PathBuf,
    /// The fleet; with `topology`, the name to bring it up as (else the file's).
    pub fleet: Option<String>,
    pub run_dir: PathBuf,
    pub json: bool,
    pub junit: Option<PathBuf>,
    pub repeat: usize,
    /// Bring this lab up first, and take it down after.
    pub topology: Option<PathBuf>,
    pub seed: Option<u64>,
    pub restore: bool,
    pub software: nsfleet::topology::Software,
    pub images: PathBuf,
}

/// Runs a scenario file: its exit status ([`HELD`], [`FAILED`], [`REFUSED`]), its record
/// printed. An error is one that left the fleet as it was.
pub fn run(a: RunArgs) -> anyhow::Result<i32> {
    // Before any thread: every thread made after this one keeps them blocked too, and
    // the run takes them at its pauses.
    let _held = signals::SignalsHeld::new(&STOPPING).context("holding signals")?;
    let sc = match file::read(&a.file) {
        Ok(sc) => sc,
        Err(e) => return Ok(refused(anyhow::Error::new(e), a.json)),
    };
    let Some(name) = fleet_name(&a)? else {
        return Ok(refused(
            anyhow::anyhow!("give the fleet: --fleet NAME, or --topology FILE to bring one up"),
            a.json,
        ));
    };
    let fleet = FleetRef {
        name,
        run_dir: a.run_dir.clone(),
    };
    if let Some(topo) = &a.topology {
        up(&a, topo, &fleet)?;
    }
    let verdict = checked_run(&a, &sc, &fleet);
    if a.topology.is_some() {
        if let Err(e) = nsfleet_client::down::down_quietly(&fleet) {
            eprintln!("nsfleet: taking fleet {:?} down: {e:#}", fleet.name);
        }
    }
    drain_signals();
    verdict
}

/// Takes the stopping signals that came after the run had stopped already (a second
/// Ctrl-C while it put things back): the run has said how it ended, and its exit status
/// is its verdict's, not the signal's, once they are no longer held.
fn drain_signals() {
    while let Ok(Some(_)) = signals::take_signal(&STOPPING, Duration::ZERO) {}
}

/// The fleet's name: `--fleet`, or with `--topology`, its file's.
fn fleet_name(a: &RunArgs) -> anyhow::Result<Option<String>> {
    match (&a.fleet, &a.topology) {
        (Some(n), _) => Ok(Some(n.clone())),
        (None, Some(t)) => Ok(Some(
            nsfleet::topology::read_file(t, None)?.name().to_string(),
        )),
        (None, None) => Ok(None),
    }
}

/// `--topology`: the lab brought up by `nsfleet up`, owned by this process (it goes with
/// us, however we end). A command of its own, so that its record stays off our standard
/// output, which is the scenario's; its progress and errors go to our standard error.
fn up(a: &RunArgs, topo: &std::path::Path, fleet: &FleetRef) -> anyhow::Result<()> {
    use std::process::{Command, Stdio};
    let me = std::env::current_exe().context("finding the nsfleet program")?;
    let mut up = Command::new(me);
    up.arg("up")
        .arg(topo)
        .args(["--name", &fleet.name, "--json"]);
    up.args(["--owner", &std::process::id().to_string()])
        .arg("--image-store")
        .arg(&a.images);
    if a.software == nsfleet::topology::Software::Host {
        up.arg("--host-software");
    }
    let status = (up
        .env("NSFLEET_RUN_DIR", &a.run_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null()))
    .status()
    .context("running nsfleet up")?;
    if !status.success() {
        anyhow::bail!(
            "{}: the lab did not come up (nsfleet up said why above)",
            topo.display()
        );
    }
    Ok(())
}

/// The scenario checked against the fleet, then run as many times as asked.
fn checked_run(a: &RunArgs, sc: &file::Scenario, fleet: &FleetRef) -> anyhow::Result<i32> {
    let shape = match check::Shape::of(fleet) {
        Ok(s) => s,
        Err(e) => return Ok(refused(e, a.json)),
    };
    if let Err(e) = check::check(sc, &fleet.name, &shape) {
        return Ok(refused(anyhow::Error::new(e), a.json));
    }
    let seed = a.seed.or(sc.seed).unwrap_or(1);
    let opts = run::Options {
        fleet: fleet.clone(),
        seed,
        software: a.software,
        images: a.images.clone(),
    };
    let events = Events::watch(fleet);
    let mut screen = Screen::new(a.json);
    let mut runs = Vec::new();
    let mut restored = Vec::new();
    for k in 0..a.repeat {
        screen.run_begins(sc, fleet, k, a.repeat);
        // The shape the check read, for the first run; a later one asks again (an
        // `apply` of the run before may have changed it).
        let now = match k {
            0 => shape.clone(),
            _ => check::Shape::of(fleet)?,
        };
        let mut outcome = run::run(sc, &opts, now, &mut screen);
        let last = k + 1 == a.repeat || outcome.stopped.is_some();
        let left = outcome.undo.left();
        // Between runs, always: each run starts from the same fleet.
        if a.restore || !last {
            let (done, failed) = outcome.undo.restore(fleet);
            screen.restored(&done, &failed);
            restored = done;
        } else {
            screen.left(&left);
            restored = Vec::new();
        }
        runs.push(outcome);
        // A run stopped (a failed step, a signal) ends the repeats: the next would start
        // from a fleet it did not leave as it found it.
        if last {
            break;
        }
    }
    let events = events.stop();
    let ok = runs.len() == a.repeat && runs.iter().all(run::Outcome::ok);
    let times = record::times(&runs);
    if let Some(path) = &a.junit {
        std::fs::write(path, record::junit(&sc.name, &runs, &events))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if a.json {
        let mut v = json!({
            "scenario": sc.name,
            "fleet": fleet.name,
            "ok": ok,
            "seed": seed,
            "events": events,
        });
        let last = runs
            .last()
            .map(|r| record::run_json(r, &restored))
            .unwrap_or_default();
        for key in ["steps", "stopped", "left_in_place", "restored"] {
            v[key] = last[key].clone();
        }
        if a.repeat > 1 {
            v["runs"] = runs.iter().map(|r| record::run_json(r, &[])).collect();
            v["times"] = serde_json::to_value(&times)?;
        }
        println!("{v}");
    } else {
        screen.verdict(sc, &runs, &times, a.repeat);
    }
    Ok(if ok { HELD } else { FAILED })
}

/// `nsfleet scenario expect`'s arguments: one expectation, as a scenario's step has it.
pub struct ExpectArgs {
    pub fleet: FleetRef,
    pub text: String,
    pub within: Duration,
    pub output: Option<String>,
    pub window: Duration,
    pub json: bool,
}

/// One expectation checked until it holds or `within` has passed, as a scenario's step
/// is (what Python's `fleet.expect_ping(...)` calls): its exit status, its result printed.
pub fn expect(a: ExpectArgs) -> anyhow::Result<i32> {
    let _held = signals::SignalsHeld::new(&STOPPING).context("holding signals")?;
    let e = match step::expect(&a.text) {
        Ok(e) => e,
        Err(r) => {
            let e = anyhow::anyhow!(
                "expectation {:?}, at character {}: {}",
                a.text,
                r.at + 1,
                r.message
            );
            return Ok(refused(e, a.json));
        }
    };
    let output = match a.output.as_deref().map(regex::Regex::new).transpose() {
        Ok(o) => o,
        Err(err) => {
            return Ok(refused(
                anyhow::anyhow!("--output: not a regular expression: {err}"),
                a.json,
            ))
        }
    };
    if a.window.is_zero() || a.window > probe::MOST_WINDOW {
        let most = probe::MOST_WINDOW.as_secs();
        let e = anyhow::anyhow!("--window: expected seconds above 0 and at most {most}");
        return Ok(refused(e, a.json));
    }
    let shape = match check::Shape::of(&a.fleet) {
        Ok(s) => s,
        Err(err) => return Ok(refused(err, a.json)),
    };
    if let Some(problem) = check::expectation(&a.fleet.name, &shape, &e) {
        return Ok(refused(anyhow::anyhow!("{problem}"), a.json));
    }
    let how = probe::How {
        within: a.within,
        output: output.as_ref(),
        window: a.window,
    };
    let mut screen = Screen::new(true);
    let start = Instant::now();
    let seen = probe::expect(&a.fleet, &shape, &e, &how, start, &mut screen);
    let took_s = start.elapsed().as_secs_f64();
    if a.json {
        let v = json!({
            "fleet": a.fleet.name, "expect": a.text, "ok": seen.ok, "took_s": took_s,
            "held_after_s": seen.ok.then_some(seen.after_s), "seen": seen.said, "nodes": seen.nodes,
        });
        println!("{v}");
    } else {
        let word = if seen.ok { "held" } else { "FAILED" };
        println!("{}: {word} after {took_s:.3}s: {}", a.text, seen.said);
    }
    drain_signals();
    Ok(if seen.ok { HELD } else { FAILED })
}

/// A refusal said (as JSON with `json`): nothing was done.
fn refused(e: anyhow::Error, json: bool) -> i32 {
    nsfleet_client::errors::report(&e, json);
    REFUSED
}

/// The fleet's events during the run, kept with its record.
struct Events {
    kept: Arc<Mutex<Vec<Value>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Events {
    /// Watching from now on; nothing (an empty record) when the fleet cannot be watched.
    fn watch(fleet: &FleetRef) -> Events {
        let kept = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (k, s, f) = (kept.clone(), stop.clone(), fleet.clone());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            use nsfleet::control::{Reply, Request};
            let Ok(mut c) = f.connect() else {
                let _ = ready_tx.send(());
                return;
            };
            let watching = matches!(c.call(&Request::Events), Ok(Reply::Watching));
            let _ = ready_tx.send(());
            if !watching {
                return;
            }
            // Short reads, to see `stop`; a line cut by one is finished by the next.
            c.set_timeout(Some(Duration::from_millis(200)));
            while !s.load(std::sync::atomic::Ordering::Relaxed) {
                match c.next_as::<Value>() {
                    Ok(Some(e)) => k.lock().expect("events lock").push(e),
                    Ok(None) => break,
                    Err(_) => continue,
                }
            }
        });
        // From here on nothing is missed.
        let _ = ready_rx.recv_timeout(Duration::from_secs(10));
        Events {
            kept,
            stop,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> Vec<Value> {
        // Events of the last step's end may still be on their way.
        std::thread::sleep(Duration::from_millis(100));
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        std::mem::take(&mut self.kept.lock().expect("events lock"))
    }
}

/// The run as people see it (on stdout, or on stderr when stdout is JSON), and the
/// signals that stop it.
struct Screen {
    out: Box<dyn Write>,
    /// A terminal: the step under way is shown until it ends, then its line replaces it.
    live: bool,
    /// When the run began, for the step under way's time.
    began: Instant,
    /// The signal that stopped the run, once one has.
    signal: Option<libc::c_int>,
}

impl Screen {
    fn new(json: bool) -> Screen {
        use std::io::IsTerminal;
        let (out, live): (Box<dyn Write>, bool) = match json {
            true => (Box::new(std::io::stderr()), std::io::stderr().is_terminal()),
            false => (Box::new(std::io::stdout()), std::io::stdout().is_terminal()),
        };
        Screen {
            out,
            live,
            began: Instant::now(),
            signal: None,
        }
    }

    /// A line, in place of the step under way's on a terminal.
    fn say(&mut self, s: &str) {
        let clear = if self.live { "\r\x1b[K" } else { "" };
        let _ = writeln!(self.out, "{clear}{s}");
        let _ = self.out.flush();
    }

    fn run_begins(&mut self, sc: &file::Scenario, fleet: &FleetRef, k: usize, of: usize) {
        let run = if of > 1 {
            format!(", run {} of {of}", k + 1)
        } else {
            String::new()
        };
        self.say(&format!(
            "scenario {:?} on fleet {:?}{run}",
            sc.name, fleet.name
        ));
        self.say(&record::timeline_head());
    }

    fn restored(&mut self, done: &[String], failed: &[String]) {
        if !done.is_empty() {
            self.say(&format!("put back: {}", done.join(", ")));
        }
        for f in failed {
            self.say(&format!("NOT put back: {f}"));
        }
    }

    fn left(&mut self, left: &[String]) {
        if !left.is_empty() {
            self.say(&format!(
                "left in place (--no-restore): {}",
                left.join(", ")
            ));
        }
    }

    fn verdict(
        &mut self,
        sc: &file::Scenario,
        runs: &[run::Outcome],
        times: &[record::Times],
        repeat: usize,
    ) {
        if repeat > 1 {
            self.say(&format!(
                "over {} runs:\n{}",
                runs.len(),
                record::times_text(times).trim_end()
            ));
        }
        let expectations = runs
            .iter()
            .flat_map(|r| &r.steps)
            .filter(|s| s.kind == "expect");
        let (held, all) = expectations.fold((0, 0), |(h, a), s| (h + usize::from(s.ok), a + 1));
        let stopped = runs.iter().find_map(|r| r.stopped.clone());
        let tail = stopped.map_or(String::new(), |s| format!("; {s}"));
        let word = if runs.iter().all(run::Outcome::ok) && runs.len() == repeat {
            "PASSED"
        } else {
            "FAILED"
        };
        self.say(&format!(
            "scenario {:?} {word}: {held} of {all} expectations held{tail}",
            sc.name
        ));
    }
}

impl run::Watch for Screen {
    fn began(&mut self, _index: usize, step: &file::Step) {
        if self.live {
            let at = self.began.elapsed().as_secs_f64();
            let _ = write!(self.out, "{at:>8.3}s  ...     {}", step.text);
            let _ = self.out.flush();
        }
    }

    fn ended(&mut self, r: &run::StepRecord) {
        let line = record::timeline_line(r);
        self.say(&line);
    }

    fn pause(&mut self, d: Duration) -> bool {
        if self.signal.is_some() {
            return false;
        }
        let until = Instant::now() + d;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match signals::take_signal(&STOPPING, left) {
                Ok(Some(sig)) => {
                    self.signal = Some(sig);
                    self.say(&format!(
                        "stopped by signal {sig}: what the run changed is said below"
                    ));
                    return false;
                }
                _ if left.is_zero() || Instant::now() >= until => return true,
                _ => {}
            }
        }
    }
}

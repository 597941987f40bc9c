//! `nsfleet scenario`: faults on a timeline with verdicts (`run`), and one expectation
//! checked as a scenario's step is (`expect`).

use super::args::{duration, ImageArgs};
use clap::{Args, Subcommand};
use nsfleet_client as cmd;
use nsfleet_scenario as scenario;
use std::path::PathBuf;
use std::time::Duration;

/// Faults on a timeline, with verdicts a CI system reads
///
/// A scenario file (TOML; YAML when it ends in .yml or .yaml) is a story told to a live
/// fleet: ordered steps, each either a fault or change (`do`) or an expectation
/// (`expect`) retried until it holds or its `within` has passed. The whole file is
/// checked against the fleet before its first step; whatever the run changes is put
/// back when it ends (`--no-restore` keeps it), on Ctrl-C, SIGTERM and SIGHUP too. See
/// docs/scenarios.md, and examples/scenarios/core-link-fails.toml for this one whole.
///
///   [scenario]
///   name = "a core link fails"
///
///   [[step]]
///   do = "wait converged --timeout 60"
///
///   [[step]]
///   do = "link r13:eth2 down"        # as typed after `nsfleet link FLEET`
///
///   [[step]]
///   name = "every router routes around it"
///   expect = "no route r* 10.0.0.88/30"
///   within = 30
///
/// do: link NODE:IFACE down|up; impair NODE:IFACE --delay 50ms --loss 1% ... | --clear;
/// node NODE stop|start|restart|pause|resume; wait started|healthy|converged [--timeout S];
/// sleep S; partition A B (node names or patterns with commas: every link between the
/// groups pulled); heal; apply FILE. NODE:IFACE may be random(PATTERN:PATTERN), chosen
/// by the seed.
///
/// expect: ping NODE ADDRESS; no ping NODE ADDRESS; route NODE PREFIX [via ADDRESS];
/// no route NODE PREFIX; exec NODE -- CMD... (exit 0; `output = "REGEX"` to match);
/// loss NODE ADDRESS < PERCENT (over `window`, 5 s unless said). NODE may be a pattern
/// (r*): every node that matches must hold it. Each step may have `name`, and `at`
/// (seconds since the run began: not before then).
#[derive(Subcommand)]
#[command(verbatim_doc_comment)]
pub enum ScenarioCommand {
    Run(RunCommand),
    Expect(ExpectCommand),
}

/// Run a scenario file against a live fleet
///
/// Prints a timeline as it goes (each step: when it began, its verdict, how long it
/// took, and for an expectation after a change of the fleet, a fault or its repair, how
/// long after that change it came true),
/// then the verdict. Exits 0 when every expectation held, 1 when one did not (or a
/// step failed, or a signal stopped the run), 2 when the file or the fleet is refused,
/// each refusal at its FILE:LINE:COLUMN, before anything is done.
///
///   nsfleet scenario run fail-core.toml --fleet grid
///   nsfleet scenario run fail-core.toml --topology grid.toml      # up first, down after
///   nsfleet scenario run fail-core.toml --fleet grid --repeat 10  # times as median and range
///   nsfleet scenario run fail-core.toml --fleet grid --junit report.xml --json > run.json
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub struct RunCommand {
    /// The scenario file.
    file: PathBuf,
    /// The running fleet to run it on (with --topology: the name to bring that up as).
    #[arg(long, required_unless_present = "topology")]
    fleet: Option<String>,
    /// Bring this topology up first (owned by this run: it goes when the run ends,
    /// however it ends) and take it down after.
    #[arg(long, value_name = "FILE")]
    topology: Option<PathBuf>,
    /// Run the scenario N times (what it changed put back between runs); each
    /// expectation's time to hold is then given as median and range.
    #[arg(long, default_value = "1", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    repeat: u32,
    /// The seed of random(...) choices [default: the file's `seed`, else 1].
    #[arg(long)]
    seed: Option<u64>,
    /// Put back what the run changed when it ends, however it ends (the default).
    #[arg(long, overrides_with = "no_restore")]
    restore: bool,
    /// Leave what the run changed (pulled cables, impairments, stopped nodes) in place,
    /// and say what it is.
    #[arg(long, overrides_with = "restore")]
    no_restore: bool,
    /// Write JUnit XML here: a test case per expectation, a failure with what was seen,
    /// the fleet's events as the suite's output.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Print the record as one JSON object: {"scenario", "fleet", "ok", "seed", "steps":
    /// [{"index", "name", "kind", "text", "started_at", "took_s", "ok", "seen",
    /// "since_fault_s", "fault", "nodes"}], "events", "stopped", "left_in_place",
    /// "restored"}, with "runs" and "times" over --repeat; the timeline goes to stderr.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    images: ImageArgs,
}

/// Check one expectation until it holds, as a scenario's step does
///
/// Exits 0 once it holds, 1 when `--within` passes first, 2 when it cannot be read or
/// names what the fleet lacks.
///
///   nsfleet scenario expect grid 'ping r1 10.255.0.25' --within 10
///   nsfleet scenario expect grid 'no route r* 10.0.0.88/30' --within 30 --json
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub struct ExpectCommand {
    /// The fleet.
    fleet: String,
    /// The expectation, as a scenario's `expect` (quoted as one argument).
    expectation: String,
    /// Seconds it has to come true.
    #[arg(long, value_parser = duration, default_value = "10")]
    within: Duration,
    /// For exec: a regular expression the output must match.
    #[arg(long)]
    output: Option<String>,
    /// For loss: how long its probes run each time it is tried.
    #[arg(long, value_parser = duration, default_value = "5")]
    window: Duration,
    /// The result as one JSON object: {"fleet", "expect", "ok", "took_s",
    /// "held_after_s", "seen", "nodes"}.
    #[arg(long)]
    json: bool,
}

impl ScenarioCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let code = match self {
            ScenarioCommand::Run(c) => {
                let RunCommand {
                    file,
                    fleet,
                    topology,
                    repeat,
                    seed,
                    restore: _,
                    no_restore,
                    junit,
                    json,
                    images,
                } = c;
                scenario::run(scenario::RunArgs {
                    file,
                    fleet,
                    run_dir,
                    json,
                    junit,
                    repeat: repeat as usize,
                    topology,
                    seed,
                    restore: !no_restore,
                    software: images.software(),
                    images: images.store(),
                })?
            }
            ScenarioCommand::Expect(c) => {
                let ExpectCommand {
                    fleet,
                    expectation,
                    within,
                    output,
                    window,
                    json,
                } = c;
                scenario::expect(scenario::ExpectArgs {
                    fleet: cmd::FleetRef {
                        name: fleet,
                        run_dir,
                    },
                    text: expectation,
                    within,
                    output,
                    window,
                    json,
                })?
            }
        };
        std::process::exit(code)
    }
}

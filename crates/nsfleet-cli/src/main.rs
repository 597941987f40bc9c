//! The `nsfleet` command. It only parses arguments and calls the `nsfleet` library; every
//! behaviour lives there. Each command's arguments are a module of `commands`.

mod commands;
#[cfg(test)]
mod guide_check;

use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser};
use commands::Command;
use std::path::PathBuf;

const ABOUT: &str = "Fleets of Linux network namespaces at kernel speed.

A fleet is a set of nodes (network namespaces) described by a TOML topology file, owned by
one supervisor process: nothing of the fleet outlives it. Run as root, or as any user: a
user's fleets live in a user namespace of their own (docs/rootless.md).";

const AFTER: &str = "Examples:
  nsfleet up                         # the built-in default fleet (100 fake routers)
  nsfleet up examples/hosts.toml     # a fleet from a topology file
  nsfleet deploy -t lab.clab.yml     # a containerlab topology, without Docker
  nsfleet status                     # every fleet; `--json` for machines
  nsfleet exec default r1 -- ip addr # a command inside node r1
  nsfleet down default               # tear down, wait for the kernel to reclaim
  nsfleet bench create --count 2000  # nsfleet against raw unshare and a shell loop
  nsfleet image pull alpine:3.20     # an image from its registry into nsfleet's image store
  nsfleet image load alpine.tar      # a `docker save` archive into the same store

Errors name the topology file's place as FILE:LINE:COLUMN. With --json, any command's
errors go to stderr as JSON, one {\"error\": {\"message\", \"file\", \"line\", \"column\"}} object
per error (file null when the error is about no file, line and column null when it is
about no place in it).";

#[derive(Parser)]
#[command(name = "nsfleet", version, about = ABOUT, after_help = AFTER)]
struct Cli {
    /// Folder for fleets' control sockets, records and logs [default: /run/nsfleet as
    /// root; $XDG_RUNTIME_DIR/nsfleet as a user, or /tmp/nsfleet-UID without a session]
    #[arg(long, global = true, env = "NSFLEET_RUN_DIR")]
    run_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

fn main() {
    let matches = Cli::command().get_matches();
    let json = asks_json(&matches);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // `nsfleet status | head` ends quietly, as Unix tools do. The supervisor that `up`
    // forks ignores SIGPIPE again, for itself and its holders: they must outlive any reader
    // that goes away.
    nsfleet::sys::die_on_sigpipe();
    let run_dir = cli.run_dir.unwrap_or_else(nsfleet::rundir::default_root);
    // Every command that makes, reads or reaches a fleet trusts the run directory: it is
    // checked once, here (the bench, the report and the image store keep to folders of
    // their own; completions and man pages reach no fleet).
    let trusts = !matches!(
        cli.command,
        Command::Bench(_)
            | Command::Report(_)
            | Command::Vm(_)
            | Command::Mn(_)
            | Command::Image(_)
            | Command::Completions(_)
            | Command::Manpage(_)
    );
    if trusts {
        if let Err(e) = nsfleet::rundir::RunDir::new(&run_dir).check() {
            nsfleet_client::errors::report(&e, json);
            std::process::exit(1);
        }
    }
    let result = match cli.command {
        Command::Up(c) => c.run(run_dir),
        Command::Deploy(c) => c.run(run_dir),
        Command::Destroy(c) => c.run(run_dir),
        Command::Inspect(c) => c.run(run_dir),
        Command::Save(c) => c.run(run_dir),
        Command::Down(c) => c.run(run_dir),
        Command::Status(c) => c.run(run_dir),
        Command::Exec(c) => c.run(run_dir),
        Command::Tools(c) => c.run(run_dir),
        Command::Impair(c) => c.run(run_dir),
        Command::Gen(c) => c.run(run_dir),
        Command::Apply(c) => c.run(run_dir),
        Command::Capture(c) => c.run(run_dir),
        Command::Stats(c) => c.run(run_dir),
        Command::Graph(c) => c.run(run_dir),
        Command::Serve(c) => c.run(run_dir),
        Command::Events(c) => c.run(run_dir),
        Command::Wait(c) => c.run(run_dir),
        Command::Node(c) => c.run(run_dir),
        Command::Scenario(c) => c.run(run_dir),
        Command::Link(c) => c.run(run_dir),
        Command::Clean(c) => c.run(run_dir),
        Command::Kube(c) => c.run(run_dir),
        Command::Bench(c) => c.run(),
        Command::Report(c) => c.run(),
        Command::Vm(c) => c.run(),
        Command::Mn(c) => c.run(),
        Command::Image(c) => c.run(),
        Command::Completions(c) => c.run(Cli::command()),
        Command::Manpage(c) => c.run(Cli::command()),
        Command::Netlab(c) => c.run(run_dir),
        Command::StandIn(c) => c.run(run_dir),
    };
    if let Err(e) = result {
        // A signal's end is said plainly (its message alone, whatever phase it cut
        // short), with the exit status a shell gives a command the signal killed.
        let (e, code) = match e.downcast::<nsfleet_vm::Interrupted>() {
            Ok(stopped) => {
                let code = stopped.exit_code();
                (anyhow::Error::new(stopped), code)
            }
            Err(e) => (e, 1),
        };
        nsfleet_client::errors::report(&e, json);
        std::process::exit(code);
    }
}

/// Whether the command given (a subcommand's, at any depth) has `--json`: its errors
/// are then said as JSON too. Every command's flag is the field `json: bool`, whose
/// clap id is "json".
fn asks_json(m: &ArgMatches) -> bool {
    match m.subcommand() {
        Some((_, sub)) => asks_json(sub),
        None => matches!(m.try_get_one::<bool>("json"), Ok(Some(true))),
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// Every command `--help` shows, at any depth, as `nsfleet kube image`, but clap's own
    /// `help`.
    fn shown(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
        for sub in cmd.get_subcommands() {
            if sub.is_hide_set() || sub.get_name() == "help" {
                continue;
            }
            let path = format!("{path} {}", sub.get_name());
            shown(sub, &path, out);
            out.push((path, sub.clone()));
        }
    }

    #[test]
    fn clap_accepts_the_definition() {
        Cli::command().debug_assert();
    }

    #[test]
    fn help_lists_one_line_per_command() {
        // Wide enough that nothing wraps: each line is as long as its text.
        let mut cli = Cli::command().term_width(1000);
        let help = cli.render_help().to_string();
        let list: Vec<&str> = (help.lines())
            .skip_while(|l| *l != "Commands:")
            .skip(1)
            .take_while(|l| !l.is_empty())
            .collect();
        let names: Vec<&str> = (cli.get_subcommands())
            .filter(|c| !c.is_hide_set())
            .map(|c| c.get_name())
            .collect();
        assert_eq!(list.len(), names.len(), "a line per command:\n{help}");
        for (line, name) in list.iter().zip(names) {
            assert!(line.trim_start().starts_with(name), "{name}: {line}");
            assert!(line.chars().count() < 100, "{name}'s line is long: {line}");
        }
    }

    #[test]
    fn every_command_has_a_summary_and_keeps_its_long_help() {
        let mut commands = Vec::new();
        shown(&Cli::command(), "nsfleet", &mut commands);
        assert!(commands.len() > 40, "{}", commands.len());
        for (path, cmd) in commands {
            let about = cmd.get_about().map(|a| a.to_string()).unwrap_or_default();
            assert!(!about.is_empty(), "{path} has no summary");
            assert!(
                !about.contains('\n'),
                "{path}'s summary is not one line: {about}"
            );
            assert!(
                about.chars().count() <= 72,
                "{path}'s summary is long: {about}"
            );
            assert!(!about.ends_with('.'), "{path}'s summary ends with a period");
            let long = cmd.get_long_about().map(|a| a.to_string());
            let long = long.unwrap_or(about.clone());
            assert!(long.len() >= about.len(), "{path}'s long help is shorter");
        }
    }
}

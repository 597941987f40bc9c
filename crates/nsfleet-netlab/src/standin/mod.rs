//! Stand-ins for the commands netlab runs (`containerlab`, `docker`, `sudo`), answered by
//! nsfleet for one `nsfleet netlab` run: each file answers one tool's subcommands, from
//! the lab's fleets and the run folder, exactly as far as netlab's use of them goes.
//! A subcommand (or an option) a file does not answer is an error that names it and exits
//! non-zero: a stand-in never pretends to have done what it did not.
//!
//! Nothing here is installed anywhere: `nsfleet netlab` puts three small scripts that
//! call `nsfleet stand-in TOOL` on netlab's PATH, in a folder of the run's own.

pub mod containerlab;
pub mod docker;
pub mod sudo;

use anyhow::bail;
use std::path::PathBuf;

/// The tools stood in for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    Containerlab,
    Docker,
    Sudo,
}

impl Tool {
    pub const ALL: [Tool; 3] = [Tool::Containerlab, Tool::Docker, Tool::Sudo];

    pub fn name(self) -> &'static str {
        match self {
            Tool::Containerlab => "containerlab",
            Tool::Docker => "docker",
            Tool::Sudo => "sudo",
        }
    }
}

/// What a stand-in needs: where the fleets are.
pub struct StandInArgs {
    pub tool: Tool,
    pub args: Vec<String>,
    pub run_dir: PathBuf,
}

/// Answers one command line; returns its exit status.
pub fn answer(a: StandInArgs) -> anyhow::Result<i32> {
    match a.tool {
        Tool::Containerlab => containerlab::answer(&a.args, a.run_dir),
        Tool::Docker => docker::answer(&a.args, a.run_dir),
        Tool::Sudo => sudo::answer(&a.args, a.run_dir),
    }
}

/// The error for what a stand-in does not answer.
pub(crate) fn unanswered(tool: Tool, args: &[String]) -> anyhow::Result<i32> {
    bail!(
        "nsfleet stands in for {} here (`nsfleet netlab`) and does not answer `{} {}`",
        tool.name(),
        tool.name(),
        args.join(" ")
    )
}

/// Options as given: each flag, with its value if it takes one.
pub(crate) type Options = Vec<(String, Option<String>)>;

/// Splits `args` into the options before the first operand (`-x`, `--x`, `--x=v`, and
/// `--x v` for the options in `with_value`) and the rest; an option not in `known` is
/// refused by name.
pub(crate) fn options<'a>(
    tool: Tool,
    args: &'a [String],
    known: &[&str],
    with_value: &[&str],
) -> anyhow::Result<(Options, &'a [String])> {
    let mut opts = Vec::new();
    let mut i = 0;
    while i < args.len() && args[i].starts_with('-') && args[i] != "-" {
        let (flag, inline) = match args[i].split_once('=') {
            Some((f, v)) => (f.to_string(), Some(v.to_string())),
            None => (args[i].clone(), None),
        };
        // Combined short flags (`-it`): each on its own.
        let flags: Vec<String> = match flag.strip_prefix('-') {
            Some(short) if !short.starts_with('-') && short.len() > 1 && inline.is_none() => {
                short.chars().map(|c| format!("-{c}")).collect()
            }
            _ => vec![flag],
        };
        for f in flags {
            if !known.contains(&f.as_str()) {
                bail!(
                    "nsfleet stands in for {} here (`nsfleet netlab`) and does not take option {f}",
                    tool.name()
                );
            }
            let value = match (inline.clone(), with_value.contains(&f.as_str())) {
                (Some(v), _) => Some(v),
                (None, true) => {
                    i += 1;
                    match args.get(i) {
                        Some(v) => Some(v.clone()),
                        None => bail!("{} {f}: expected a value", tool.name()),
                    }
                }
                (None, false) => None,
            };
            opts.push((f, value));
        }
        i += 1;
    }
    Ok((opts, &args[i..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn options_stop_at_the_first_operand_and_unknown_ones_are_named() {
        let args = strings(&["-it", "--format", "json", "c1", "-x"]);
        let (opts, rest) = options(
            Tool::Docker,
            &args,
            &["-i", "-t", "--format"],
            &["--format"],
        )
        .unwrap();
        let names: Vec<&str> = opts.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(names, ["-i", "-t", "--format"]);
        assert_eq!(opts[2].1.as_deref(), Some("json"));
        assert_eq!(rest, ["c1", "-x"]);
        let e = options(Tool::Docker, &strings(&["-u", "x"]), &["-i"], &[]).unwrap_err();
        assert!(e.to_string().contains("does not take option -u"), "{e}");
    }
}

//! `nsfleet completions SHELL`: the shell's completion script for nsfleet, written by
//! clap_complete from the same definition of the commands as `--help`.

use clap::{Args, ValueEnum};
use clap_complete::Shell;

/// Print a shell's completion script for nsfleet (bash, zsh or fish)
///
/// The script goes to standard output; put it where the shell looks for it:
///
///   nsfleet completions bash > /etc/bash_completion.d/nsfleet
///       (or ~/.local/share/bash-completion/completions/nsfleet, for one user)
///   nsfleet completions zsh > /usr/local/share/zsh/site-functions/_nsfleet
///       (or any folder of $fpath; the file's name is _nsfleet)
///   nsfleet completions fish > ~/.config/fish/completions/nsfleet.fish
///
/// A new shell completes nsfleet's commands, their options and their values.
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub struct CompletionsCommand {
    /// The shell.
    shell: CompletionShell,
}

/// The shells completed: those `--help` says where to put the script for.
#[derive(Clone, Copy, ValueEnum)]
enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

impl CompletionsCommand {
    /// Writes the script for `cli`, nsfleet's whole command, to standard output.
    pub fn run(self, cli: clap::Command) -> anyhow::Result<()> {
        script(self.shell, cli, &mut std::io::stdout().lock());
        Ok(())
    }
}

/// The completion script of `cli` for `shell`, without the commands `--help` hides.
fn script(shell: CompletionShell, cli: clap::Command, out: &mut dyn std::io::Write) {
    let shell = match shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    let mut cli = shown(cli);
    let name = cli.get_name().to_string();
    clap_complete::generate(shell, &mut cli, name, out);
}

/// `cmd` without its hidden commands, at any depth. clap_complete completes hidden
/// commands too, and clap cannot take a command away: a command that has hidden ones is
/// made again with what completion reads of it (its name, help, arguments and groups,
/// and the commands it shows).
fn shown(cmd: clap::Command) -> clap::Command {
    if !cmd.get_subcommands().any(|s| s.is_hide_set()) {
        return cmd.mut_subcommands(shown);
    }
    let mut again = clap::Command::new(kept(cmd.get_name()))
        .args(cmd.get_arguments().cloned())
        .groups(cmd.get_groups().cloned())
        .subcommands(
            (cmd.get_subcommands())
                .filter(|s| !s.is_hide_set())
                .map(|s| shown(s.clone())),
        )
        .subcommand_required(cmd.is_subcommand_required_set());
    if let Some(v) = cmd.get_version() {
        again = again.version(kept(v));
    }
    if let Some(a) = cmd.get_about() {
        again = again.about(a.clone());
    }
    if let Some(a) = cmd.get_long_about() {
        again = again.long_about(a.clone());
    }
    again
}

/// `s` for as long as the process runs: clap keeps a command's name and version as
/// `&'static str` (without its `string` feature). A few bytes, once, in a process that
/// prints a script and ends.
fn kept(s: &str) -> &'static str {
    Box::leak(s.into())
}

#[cfg(test)]
mod tests {
    use super::{script, CompletionShell};
    use clap::CommandFactory;

    #[test]
    fn scripts_name_the_commands_and_not_the_hidden_ones() {
        for shell in [
            CompletionShell::Bash,
            CompletionShell::Zsh,
            CompletionShell::Fish,
        ] {
            let mut out = Vec::new();
            script(shell, crate::Cli::command(), &mut out);
            let text = String::from_utf8(out).unwrap();
            assert!(text.contains("deploy"), "{text}");
            for hidden in ["stand-in", "up-part", "apply-part"] {
                assert!(!text.contains(hidden), "a hidden command: {hidden}");
            }
            // A command below another is completed too.
            assert!(text.contains("prune"), "image prune");
        }
    }

    /// Each script parses in its own shell (`-n`: read, not run). The shells are the
    /// suite's (.ci/run installs them).
    #[test]
    fn scripts_parse_in_their_shells() {
        let shells = [
            (CompletionShell::Bash, "bash"),
            (CompletionShell::Zsh, "zsh"),
            (CompletionShell::Fish, "fish"),
        ];
        for (shell, program) in shells {
            let mut text = Vec::new();
            script(shell, crate::Cli::command(), &mut text);
            let file = std::env::temp_dir().join(format!(
                "nsfleet-completions-{}.{program}",
                std::process::id()
            ));
            std::fs::write(&file, &text).unwrap();
            let out = std::process::Command::new(program)
                .arg("-n")
                .arg(&file)
                .output();
            std::fs::remove_file(&file).unwrap();
            let out = out.unwrap_or_else(|e| panic!("{program} (apt-get install {program}): {e}"));
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success() && err.is_empty(),
                "{program} -n: {err}"
            );
        }
    }
}

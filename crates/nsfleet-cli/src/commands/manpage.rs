//! `nsfleet manpage DIR`: nsfleet's manual as man pages, written by clap_mangen from the
//! same definition of the commands as `--help`.

use anyhow::Context;
use clap::Args;
use std::path::{Path, PathBuf};

/// Write nsfleet's man pages into a folder
///
/// Writes nsfleet.1, and nsfleet-CMD.1 for each command (nsfleet-CMD-SUB.1 for the
/// commands of `image`, `kube`, `bench` and `tools`), into DIR, made if it does not
/// exist; prints each file it wrote. Hidden commands get no page.
///
///   nsfleet manpage /usr/local/share/man/man1 && mandb
///   nsfleet manpage man && man -l man/nsfleet-up.1
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub struct ManpageCommand {
    /// The folder to write the pages into.
    dir: PathBuf,
}

impl ManpageCommand {
    /// Writes the pages of `cli`, nsfleet's whole command.
    pub fn run(self, cli: clap::Command) -> anyhow::Result<()> {
        for page in write(cli, &self.dir)? {
            println!("{}", page.display());
        }
        Ok(())
    }
}

/// Writes a page for `cli` and one for each of its commands that `--help` shows, at any
/// depth, into `dir` (made if need be); returns the files written.
fn write(cli: clap::Command, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot make the folder {}", dir.display()))?;
    // Built, each command knows its full name (`nsfleet-kube-image`); clap's own `help`
    // command is not one of nsfleet's.
    let mut cli = cli.disable_help_subcommand(true);
    cli.build();
    let mut written = Vec::new();
    page(&cli, dir, &mut written)?;
    Ok(written)
}

fn page(cmd: &clap::Command, dir: &Path, written: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let man = clap_mangen::Man::new(cmd.clone());
    let path = dir.join(man.get_filename());
    let mut text = Vec::new();
    man.render(&mut text)?;
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    written.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        page(sub, dir, written)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn pages_for_shown_commands_at_any_depth() {
        let dir = std::env::temp_dir().join(format!("nsfleet-manpage-{}", std::process::id()));
        let written = super::write(crate::Cli::command(), &dir.join("man"));
        let exists = |f: &str| dir.join("man").join(f).exists();
        let seen = (
            exists("nsfleet.1"),
            exists("nsfleet-up.1"),
            exists("nsfleet-kube-image.1"),
            exists("nsfleet-stand-in.1"),
            exists("nsfleet-help.1"),
        );
        // Into a folder that cannot be made: a regular file stands in its way.
        std::fs::write(dir.join("file"), "").unwrap();
        let refused = super::write(crate::Cli::command(), &dir.join("file/man"));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(written.unwrap().len() > 40);
        assert_eq!(seen, (true, true, true, false, false));
        let e = format!("{:#}", refused.unwrap_err());
        assert!(e.contains("cannot make the folder"), "{e}");
    }
}

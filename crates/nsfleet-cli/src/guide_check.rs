//! The README and the guide in `docs/` checked against the repository and today's CLI:
//! every relative link reaches a file and, with an anchor, a heading of it; every
//! `nsfleet ...` command line they show parses; every script they tell a user to run is
//! there, and executable when they run it directly. A test only: nothing here runs a
//! command, it parses them.

use crate::Cli;
use clap::Parser;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The repository's top folder.
fn top() -> PathBuf {
    (Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize())
    .unwrap()
}

/// A page's path from the repository's top, as errors name it.
fn relative(page: &Path) -> std::path::Display<'_> {
    page.strip_prefix(top()).unwrap_or(page).display()
}

/// README.md and every Markdown file under docs/, with their text.
fn pages() -> Vec<(PathBuf, String)> {
    let mut paths = vec![top().join("README.md")];
    let mut dirs = vec![top().join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "md") {
                paths.push(p);
            }
        }
    }
    paths.sort();
    (paths.into_iter())
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
}

/// A page's lines, each with its number and whether it is code (a fenced or an indented
/// block). A code line that ends in `\\` is joined with the next, as a shell joins them.
fn lines(text: &str) -> Vec<(usize, String, bool)> {
    let mut fenced = false;
    let mut out: Vec<(usize, String, bool)> = Vec::new();
    let mut continued = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let code = fenced || line.starts_with("    ");
        match out.last_mut() {
            Some((_, joined, true)) if continued && code => joined.push_str(line.trim()),
            _ => out.push((i + 1, line.to_string(), code)),
        }
        continued = code && line.ends_with('\\');
        if continued {
            let (_, joined, _) = out.last_mut().unwrap();
            joined.pop();
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, only letters, digits, spaces, hyphens and
/// underscores kept, each space a hyphen.
fn slug(heading: &str) -> String {
    (heading.trim().to_lowercase().chars())
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page's headings (outside code blocks), with GitHub's `-1`, `-2` for
/// repeats.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for (_, line, code) in lines(text) {
        let Some(heading) = line.strip_prefix('#').filter(|_| !code) else {
            continue;
        };
        let base = slug(heading.trim_start_matches('#'));
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// The targets of a line's inline links, `[text](target)`.
fn link_targets(line: &str) -> Vec<&str> {
    line.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &line[at + 2..];
            let end = rest.find(')')?;
            Some(rest[..end].split_whitespace().next().unwrap_or(""))
        })
        .collect()
}

/// The spans of a line between backticks (inline code).
fn inline_code(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// What the README and the guide show a user to type, wherever they show it: each line of
/// a code block, and each span of inline code, with its place (`docs/x.md:12`) and
/// whether it is a code block's.
fn shown_to_type() -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    for (page, text) in pages() {
        for (n, line, code) in lines(&text) {
            let at = format!("{}:{n}", relative(&page));
            let spans = if code {
                vec![line.as_str()]
            } else {
                inline_code(&line)
            };
            out.extend(spans.into_iter().map(|s| (at.clone(), s.to_string(), code)));
        }
    }
    out
}

/// A shell line as typed: without a prompt (`$ `, `# `) or `sudo`.
fn typed(line: &str) -> &str {
    let line = line
        .trim()
        .trim_start_matches("$ ")
        .trim_start_matches("# ");
    line.strip_prefix("sudo ").unwrap_or(line)
}

/// Where in `page` a link to `target` fails, if it does.
fn broken_link(page: &Path, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (file, anchor) = match target.split_once('#') {
        Some((f, a)) => (f, Some(a)),
        None => (target, None),
    };
    let dest = if file.is_empty() {
        page.to_path_buf()
    } else {
        page.parent().unwrap().join(file)
    };
    if !dest.exists() {
        return Some(format!("{target}: no file {}", dest.display()));
    }
    let anchor = anchor?;
    let text = std::fs::read_to_string(&dest).ok()?;
    (!anchors(&text).contains(anchor)).then(|| format!("{target}: no heading #{anchor}"))
}

#[test]
fn every_relative_link_and_anchor_of_the_guide_is_there() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for (page, text) in pages() {
        for (n, line, code) in lines(&text) {
            for target in link_targets(&line).into_iter().filter(|_| !code) {
                checked += 1;
                if let Some(why) = broken_link(&page, target) {
                    broken.push(format!("{}:{n}: {why}", relative(&page)));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(checked > 0, "no link found in the README or docs/");
}

/// A shell line cut to its first command: no comment, no pipe, no redirection, no
/// command after `&&` or `;`.
fn first_command(line: &str) -> &str {
    let mut cut = line.len();
    for stop in [
        " #", " | ", " && ", " || ", "; ", " > ", " 2>", " >>", " < ",
    ] {
        if let Some(at) = line.find(stop) {
            cut = cut.min(at);
        }
    }
    line[..cut].trim()
}

/// Words as a POSIX shell splits them, for the quoting the guide uses ('...', "...").
fn shell_words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => (quote, any) = (Some(c), true),
            (None, c) if c.is_whitespace() => {
                if any || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            (None, c) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        words.push(word);
    }
    words
}

/// The nsfleet command a line of the guide runs, as words after `nsfleet`, or None when
/// the line is not one or is a synopsis (`[FILE]`, `a\|b`, `CMD...`) rather than a line
/// to type.
fn nsfleet_command(line: &str) -> Option<Vec<String>> {
    let line = typed(line);
    let rest = [
        "nsfleet ",
        "cargo run --release -- ",
        "target/release/nsfleet ",
    ]
    .iter()
    .find_map(|p| line.strip_prefix(p))?;
    let rest = first_command(rest);
    let synopsis = ["[", "|", "...", "…", "<", "{", "$("];
    if synopsis.iter().any(|s| rest.contains(s)) {
        return None;
    }
    Some(shell_words(rest))
}

/// Code blocks show whole command lines; text names commands in backticks too
/// (`nsfleet exec` enters...), so there a line may stop before its required arguments,
/// but whatever it gives must be right.
#[test]
fn every_nsfleet_command_the_guide_shows_parses() {
    use clap::error::ErrorKind::*;
    let mut refused = Vec::new();
    let mut checked = 0;
    for (at, span, code) in shown_to_type() {
        let Some(words) = nsfleet_command(&span) else {
            continue;
        };
        checked += 1;
        let args = std::iter::once("nsfleet".to_string()).chain(words.clone());
        let Err(e) = Cli::try_parse_from(args) else {
            continue;
        };
        let named_only = !code
            && matches!(
                e.kind(),
                MissingRequiredArgument | DisplayHelpOnMissingArgumentOrSubcommand
            );
        if !matches!(e.kind(), DisplayHelp | DisplayVersion) && !named_only {
            let why = e.to_string().lines().next().unwrap_or("").to_string();
            refused.push(format!("{at}: nsfleet {}: {why}", words.join(" ")));
        }
    }
    assert!(refused.is_empty(), "refused:\n{}", refused.join("\n"));
    assert!(checked >= 20, "only {checked} nsfleet command lines found");
}

/// The script a line tells a user to run, and whether it is run directly (so must be
/// executable) rather than through `bash`.
fn script_run(line: &str) -> Option<(&str, bool)> {
    let line = typed(line);
    let (line, direct) = match line.strip_prefix("bash ") {
        Some(rest) => (rest, false),
        None => (line, true),
    };
    let line = line.strip_prefix("./").unwrap_or(line);
    let script = line.split_whitespace().next()?;
    script.starts_with("scripts/").then_some((script, direct))
}

#[test]
fn every_script_the_guide_runs_is_there_and_runs_as_shown() {
    use std::os::unix::fs::PermissionsExt;
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (at, span, _) in shown_to_type() {
        let Some((script, direct)) = script_run(&span) else {
            continue;
        };
        checked += 1;
        let at = format!("{at}: {script}");
        match std::fs::metadata(top().join(script)) {
            Err(_) => wrong.push(format!("{at}: no such file")),
            Ok(m) if direct && m.permissions().mode() & 0o111 == 0 => {
                wrong.push(format!("{at}: not executable (Permission denied)"))
            }
            Ok(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(checked > 0, "no script found in the README or docs/");
}

#[test]
fn slugs_are_githubs() {
    assert_eq!(
        slug(" Ready at the protocol's pace: `--wait`"),
        "ready-at-the-protocols-pace---wait"
    );
    assert_eq!(
        slug("A live fleet: apply, cables, nodes, events"),
        "a-live-fleet-apply-cables-nodes-events"
    );
    assert_eq!(shell_words("up 'a b' \"c\" d"), ["up", "a b", "c", "d"]);
    assert_eq!(
        first_command("status --json | jq . # fleets"),
        "status --json"
    );
}

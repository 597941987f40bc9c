//! A scenario file (TOML) read into its steps, each with where it is written:
//!
//! ```toml
//! [scenario]
//! name = "a link fails"
//! seed = 7                      # random(...) choices; --seed overrides it
//!
//! [[step]]
//! do = "link r1:eth1 down"
//!
//! [[step]]
//! name = "traffic takes the other path"
//! expect = "ping r1 10.255.0.3"
//! within = 10
//! ```
//!
//! Every error of the file is said at once, each as FILE:LINE:COLUMN and what was
//! expected there, the column of a word inside a step's text included. Reads the file
//! only: whether the fleet has the nodes named is `check`'s.

use crate::step::{self, Action, Expect, Refusal};
use nsfleet::topology::{Place, TopologyError};
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;
use toml::Spanned;

/// The longest an expectation may be given to come true (`within`), and a step's `at`.
pub const MOST_SECONDS: f64 = 3600.0;

/// Most errors said at once, as a topology's.
const MAX_ERRORS: usize = 20;

/// What `within` is when a step does not say.
pub const DEFAULT_WITHIN: Duration = Duration::from_secs(10);

/// A scenario as its file says it.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    /// The file, as the user named it (for messages), and its folder (for `apply`'s
    /// files).
    pub file: String,
    pub folder: std::path::PathBuf,
    pub seed: Option<u64>,
    pub steps: Vec<Step>,
}

#[derive(Clone, Debug)]
pub struct Step {
    /// The step's `name`, or its text.
    pub name: String,
    /// Its text, as written (`do`'s or `expect`'s).
    pub text: String,
    /// Not before this long after the scenario began.
    pub at: Option<Duration>,
    pub what: What,
    /// Where the step's text is written, and its first character's offset in the file.
    pub place: Place,
}

#[derive(Clone, Debug)]
pub enum What {
    Do(Action),
    Expect {
        expect: Expect,
        within: Duration,
        /// `output = "REGEX"`: what an `exec`'s output must match.
        output: Option<regex::Regex>,
        /// `window = SECONDS`: how long a `loss` expectation's probes run.
        window: Duration,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    scenario: Head,
    #[serde(default)]
    step: Vec<Spanned<RawStep>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Head {
    name: String,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    name: Option<String>,
    #[serde(rename = "do")]
    act: Option<Spanned<String>>,
    expect: Option<Spanned<String>>,
    within: Option<Spanned<f64>>,
    at: Option<Spanned<f64>>,
    output: Option<Spanned<String>>,
    window: Option<Spanned<f64>>,
}

/// Reads and checks scenario file `path`: its steps, or every error in it.
pub fn read(path: &Path) -> Result<Scenario, TopologyError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        TopologyError::new(
            &shown,
            Place::default(),
            format!("cannot read the scenario: {e}"),
        )
    })?;
    let folder = path.parent().map(Path::to_path_buf).unwrap_or_default();
    parse(&text, &shown, folder)
}

/// A scenario's text, named `file` in messages.
pub fn parse(
    text: &str,
    file: &str,
    folder: std::path::PathBuf,
) -> Result<Scenario, TopologyError> {
    let place = |offset: usize| Place::of(text.as_bytes(), offset);
    let doc: Doc = toml::from_str(text).map_err(|e| {
        let at = e
            .span()
            .map_or(Place { line: 1, column: 1 }, |s| place(s.start));
        TopologyError::new(file, at, e.message().to_string())
    })?;
    let mut errors = Vec::new();
    let mut steps = Vec::new();
    for raw in &doc.step {
        match one_step(text, raw) {
            Ok(s) => steps.push(s),
            Err((offset, message)) => errors.push(TopologyError::new(file, place(offset), message)),
        }
    }
    if doc.step.is_empty() {
        errors.push(TopologyError::new(
            file,
            Place { line: 1, column: 1 },
            "no steps: a scenario has [[step]] tables, each with do = \"...\" or expect = \"...\"",
        ));
    }
    if let Some(first) = all_of(errors) {
        return Err(first);
    }
    Ok(Scenario {
        name: doc.scenario.name,
        file: file.to_string(),
        folder,
        seed: doc.scenario.seed,
        steps,
    })
}

/// Errors, in the file's order, as one (the first, with the others in `more`).
pub fn all_of(mut errors: Vec<TopologyError>) -> Option<TopologyError> {
    errors.sort_by_key(|e| e.at);
    let mut errors = errors.into_iter();
    let mut first = errors.next()?;
    first.more.extend(errors.take(MAX_ERRORS - 1));
    Some(first)
}

/// One `[[step]]`, or the offset in the file of what is wrong with it and what.
fn one_step(text: &str, raw: &Spanned<RawStep>) -> Result<Step, (usize, String)> {
    let s = raw.get_ref();
    let seconds =
        |v: &Option<Spanned<f64>>, key: &str| -> Result<Option<Duration>, (usize, String)> {
            match v {
                None => Ok(None),
                Some(v) if *v.get_ref() > 0.0 && *v.get_ref() <= MOST_SECONDS => {
                    Ok(Some(Duration::from_secs_f64(*v.get_ref())))
                }
                Some(v) => Err((
                    v.span().start,
                    format!(
                        "{key}: expected seconds above 0 and at most {MOST_SECONDS}, got {}",
                        v.get_ref()
                    ),
                )),
            }
        };
    let (text_of, what) = match (&s.act, &s.expect) {
        (Some(act), None) => {
            for (key, v) in [
                ("within", s.within.as_ref().map(|v| v.span())),
                ("output", s.output.as_ref().map(|v| v.span())),
                ("window", s.window.as_ref().map(|v| v.span())),
            ] {
                if let Some(span) = v {
                    return Err((
                        span.start,
                        format!("{key} belongs to an expect step, not a do step"),
                    ));
                }
            }
            let action = step::action(act.get_ref()).map_err(|r| inside(text, act, r))?;
            (act, What::Do(action))
        }
        (None, Some(exp)) => {
            let expect = step::expect(exp.get_ref()).map_err(|r| inside(text, exp, r))?;
            let output = match &s.output {
                Some(o) if !matches!(expect, Expect::Exec { .. }) => {
                    return Err((
                        o.span().start,
                        "output belongs to an exec expectation".into(),
                    ))
                }
                Some(o) => Some(regex::Regex::new(o.get_ref()).map_err(|e| {
                    (
                        o.span().start,
                        format!("output: not a regular expression: {e}"),
                    )
                })?),
                None => None,
            };
            if let (Some(w), false) = (&s.window, matches!(expect, Expect::Loss { .. })) {
                return Err((
                    w.span().start,
                    "window belongs to a loss expectation".into(),
                ));
            }
            let within = seconds(&s.within, "within")?.unwrap_or(DEFAULT_WITHIN);
            let window = seconds(&s.window, "window")?.unwrap_or(Duration::from_secs(5));
            (
                exp,
                What::Expect {
                    expect,
                    within,
                    output,
                    window,
                },
            )
        }
        (Some(_), Some(exp)) => {
            return Err((
                exp.span().start,
                "a step either does (do = ...) or expects (expect = ...), not both".into(),
            ))
        }
        (None, None) => {
            return Err((
                raw.span().start,
                "a step needs do = \"...\" or expect = \"...\"".into(),
            ))
        }
    };
    Ok(Step {
        name: s.name.clone().unwrap_or_else(|| text_of.get_ref().clone()),
        text: text_of.get_ref().clone(),
        at: seconds(&s.at, "at")?,
        what,
        place: Place::of(
            text.as_bytes(),
            text_of.span().start + quote_width(text, text_of),
        ),
    })
}

/// Where a step's text starts inside its quotes (one quote, or three).
fn quote_width(text: &str, s: &Spanned<String>) -> usize {
    let from = &text[s.span().start..];
    if from.starts_with("\"\"\"") || from.starts_with("'''") {
        3
    } else {
        1
    }
}

/// A refusal of a step's text placed in the file: the string's start, past its quote,
/// plus the word's offset (exact unless the string has escapes before it).
fn inside(text: &str, s: &Spanned<String>, r: Refusal) -> (usize, String) {
    (s.span().start + quote_width(text, s) + r.at, r.message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> String {
        parse(text, "s.toml", ".".into()).unwrap_err().to_string()
    }

    #[test]
    fn every_error_is_said_at_its_line_and_column() {
        let text = "[scenario]\nname = \"x\"\n\n[[step]]\ndo = \"link r1:eth1 sideways\"\n\n[[step]]\nexpect = \"ping r1 10.0.0.2\"\nwithin = 0\n";
        let e = refused(text);
        assert!(e.starts_with("s.toml:5:20: expected down or up"), "{e}");
        assert!(e.contains("\ns.toml:9:10: within: expected seconds"), "{e}");
        assert!(
            refused("[scenario]\nname = 1\n").starts_with("s.toml:2:8:"),
            "{}",
            refused("[scenario]\nname = 1\n")
        );
        let both =
            refused("[scenario]\nname = \"x\"\n[[step]]\ndo = \"heal\"\nexpect = \"ping a ::1\"\n");
        assert!(both.contains(":5:10: a step either does"), "{both}");
        assert!(refused("[scenario]\nname = \"x\"\n").contains("no steps"));
    }

    #[test]
    fn the_example_scenarios_read() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scenarios");
        let mut read = 0;
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let text = std::fs::read_to_string(e.path()).unwrap();
            if text.contains("\n[scenario]\n") {
                read += usize::from(read_ok(&e.path()));
            }
        }
        assert!(read > 0, "no example scenario found");
    }

    fn read_ok(p: &Path) -> bool {
        read(p).map_err(|e| panic!("{e}")).is_ok()
    }

    #[test]
    fn a_step_is_named_by_its_name_or_its_text() {
        let s = parse(
            "[scenario]\nname = \"x\"\nseed = 3\n[[step]]\ndo = \"sleep 1\"\nat = 2\n[[step]]\nname = \"up\"\nexpect = \"exec r1 -- true\"\noutput = \"^ok\"\n",
            "s.toml",
            ".".into(),
        )
        .unwrap();
        assert_eq!(
            (s.seed, s.steps[0].name.as_str(), s.steps[1].name.as_str()),
            (Some(3), "sleep 1", "up")
        );
        assert_eq!(s.steps[0].at, Some(Duration::from_secs(2)));
        assert_eq!(
            s.steps[1].place,
            Place {
                line: 9,
                column: 11
            }
        );
    }
}

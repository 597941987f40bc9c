//! A scenario file (TOML, or YAML beside a containerlab lab) read into its steps, each
//! with where it is written:
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

use crate::step::{self, Action, Expect};
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

/// A value of the file and where its text starts (past an opening quote): a word's
/// column inside a step's text is counted from there.
#[derive(Clone, Debug)]
struct At<T> {
    value: T,
    at: usize,
    /// The file has the value as it is (no escape, no folded line): a word's column
    /// inside it can be counted from `at`.
    verbatim: bool,
}

impl At<String> {
    /// Text written at `at` of `file`.
    fn text(value: String, at: usize, file: &str) -> At<String> {
        let verbatim = file.get(at..at + value.len()) == Some(value.as_str());
        At {
            value,
            at,
            verbatim,
        }
    }

    /// Where the word at byte `offset` of the value is written: there, or where the
    /// value begins when escapes make the two differ.
    fn word(&self, offset: usize) -> usize {
        match self.verbatim {
            true => self.at + offset,
            false => self.at,
        }
    }
}

/// A scenario file as either language gives it, before its steps are read.
struct RawDoc {
    name: String,
    seed: Option<u64>,
    steps: Vec<RawStep>,
    /// Where a file without steps is refused.
    end: usize,
}

/// One `[[step]]` (a list item in YAML), its values as written.
#[derive(Default)]
struct RawStep {
    name: Option<String>,
    act: Option<At<String>>,
    expect: Option<At<String>>,
    within: Option<At<f64>>,
    at: Option<At<f64>>,
    output: Option<At<String>>,
    window: Option<At<f64>>,
    /// Where the step begins.
    start: usize,
}

/// Where a string's text starts when its value begins at `offset`: past one quote, or
/// three, or none (YAML's plain scalars).
fn past_quote(text: &str, offset: usize) -> usize {
    let from = &text[offset.min(text.len())..];
    match () {
        _ if from.starts_with("\"\"\"") || from.starts_with("'''") => offset + 3,
        _ if from.starts_with(['"', '\'']) => offset + 1,
        _ => offset,
    }
}

/// Reads and checks scenario file `path` (TOML, or YAML when its name ends in `.yml` or
/// `.yaml`, as a containerlab lab's files do): its steps, or every error in it.
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
    let yaml = path.extension().is_some_and(|x| x == "yml" || x == "yaml");
    parse(&text, &shown, folder, yaml)
}

/// A scenario's text (YAML with `yaml`, else TOML), named `file` in messages.
pub fn parse(
    text: &str,
    file: &str,
    folder: std::path::PathBuf,
    yaml: bool,
) -> Result<Scenario, TopologyError> {
    let place = |offset: usize| Place::of(text.as_bytes(), offset);
    let refused =
        |(offset, message): (usize, String)| TopologyError::new(file, place(offset), message);
    let doc = match yaml {
        true => from_yaml(text),
        false => from_toml(text),
    }
    .map_err(refused)?;
    let mut errors = Vec::new();
    let mut steps = Vec::new();
    for raw in &doc.steps {
        match one_step(raw) {
            Ok((mut s, offset)) => {
                s.place = place(offset);
                steps.push(s);
            }
            Err(e) => errors.push(refused(e)),
        }
    }
    if doc.steps.is_empty() {
        errors.push(refused((
            doc.end,
            "no steps: a scenario has [[step]] tables (a `step:` list in YAML), each with do = \"...\" or expect = \"...\"".into(),
        )));
    }
    if let Some(first) = all_of(errors) {
        return Err(first);
    }
    Ok(Scenario {
        name: doc.name,
        file: file.to_string(),
        folder,
        seed: doc.seed,
        steps,
    })
}

/// The TOML file's tables, by toml's own reader (unknown keys refused at their place).
fn from_toml(text: &str) -> Result<RawDoc, (usize, String)> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Doc {
        scenario: Head,
        #[serde(default)]
        step: Vec<Spanned<Step>>,
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
    struct Step {
        name: Option<String>,
        #[serde(rename = "do")]
        act: Option<Spanned<String>>,
        expect: Option<Spanned<String>>,
        within: Option<Spanned<f64>>,
        at: Option<Spanned<f64>>,
        output: Option<Spanned<String>>,
        window: Option<Spanned<f64>>,
    }
    let doc: Doc = toml::from_str(text)
        .map_err(|e| (e.span().map_or(0, |s| s.start), e.message().to_string()))?;
    let string = |v: Option<Spanned<String>>| {
        v.map(|v| At::text(v.get_ref().clone(), past_quote(text, v.span().start), text))
    };
    let number = |v: Option<Spanned<f64>>| {
        v.map(|v| At {
            at: v.span().start,
            value: v.into_inner(),
            verbatim: true,
        })
    };
    let steps = (doc.step.into_iter())
        .map(|s| {
            let start = s.span().start;
            let s = s.into_inner();
            RawStep {
                name: s.name,
                act: string(s.act),
                expect: string(s.expect),
                within: number(s.within),
                at: number(s.at),
                output: string(s.output),
                window: number(s.window),
                start,
            }
        })
        .collect();
    Ok(RawDoc {
        name: doc.scenario.name,
        seed: doc.scenario.seed,
        steps,
        end: 0,
    })
}

/// The YAML file's mappings: `scenario:` (`name`, `seed`) and `step:`, a list of steps
/// with the keys a TOML step has.
fn from_yaml(text: &str) -> Result<RawDoc, (usize, String)> {
    use nsfleet::topology::front::yaml::{self, Yaml};
    let root = yaml::load(text).map_err(|(span, m)| (span.start, m))?;
    let entries = root.entries().ok_or((
        root.span.start,
        "expected a mapping with scenario: and step:".to_string(),
    ))?;
    let mut doc = RawDoc {
        name: String::new(),
        seed: None,
        steps: Vec::new(),
        end: text.len(),
    };
    let text_of = |v: &Yaml, key: &str| -> Result<At<String>, (usize, String)> {
        match v.str() {
            Some(s) => Ok(At::text(
                s.to_string(),
                past_quote(text, v.span.start),
                text,
            )),
            None => Err((v.span.start, format!("{key}: expected text"))),
        }
    };
    let number = |v: &Yaml, key: &str| -> Result<At<f64>, (usize, String)> {
        match v.str().map(str::parse::<f64>) {
            Some(Ok(n)) => Ok(At {
                value: n,
                at: v.span.start,
                verbatim: true,
            }),
            _ => Err((v.span.start, format!("{key}: expected a number of seconds"))),
        }
    };
    let mut named = false;
    for (k, v) in entries {
        match k.str() {
            Some("scenario") => {
                for (hk, hv) in v.entries().ok_or((
                    v.span.start,
                    "scenario: expected a mapping with name:".to_string(),
                ))? {
                    match hk.str() {
                        Some("name") => (doc.name, named) = (text_of(hv, "name")?.value, true),
                        Some("seed") => {
                            doc.seed = Some(hv.int().filter(|s| *s >= 0).ok_or((
                                hv.span.start,
                                "seed: expected a whole number".to_string(),
                            ))? as u64)
                        }
                        Some("description") => {}
                        _ => {
                            return Err((
                                hk.span.start,
                                "unknown key: a scenario has name, seed and description".into(),
                            ))
                        }
                    }
                }
            }
            Some("step") => {
                for item in v
                    .items()
                    .ok_or((v.span.start, "step: expected a list of steps".to_string()))?
                {
                    let mut s = RawStep {
                        start: item.span.start,
                        ..RawStep::default()
                    };
                    for (sk, sv) in item.entries().ok_or((
                        item.span.start,
                        "expected a step: a mapping with do: or expect:".to_string(),
                    ))? {
                        let key = sk.str().unwrap_or("");
                        match key {
                            "name" => s.name = Some(text_of(sv, key)?.value),
                            "do" => s.act = Some(text_of(sv, key)?),
                            "expect" => s.expect = Some(text_of(sv, key)?),
                            "output" => s.output = Some(text_of(sv, key)?),
                            "within" => s.within = Some(number(sv, key)?),
                            "at" => s.at = Some(number(sv, key)?),
                            "window" => s.window = Some(number(sv, key)?),
                            _ => return Err((sk.span.start, format!("unknown key {key:?}: a step has do or expect, and name, within, at, output, window"))),
                        }
                    }
                    doc.steps.push(s);
                }
            }
            _ => {
                return Err((
                    k.span.start,
                    "unknown key: a scenario file has scenario: and step:".into(),
                ))
            }
        }
    }
    if !named {
        return Err((0, "missing scenario: with its name:".into()));
    }
    Ok(doc)
}

/// Errors, in the file's order, as one (the first, with the others in `more`).
pub fn all_of(mut errors: Vec<TopologyError>) -> Option<TopologyError> {
    errors.sort_by_key(|e| e.at);
    let mut errors = errors.into_iter();
    let mut first = errors.next()?;
    first.more.extend(errors.take(MAX_ERRORS - 1));
    Some(first)
}

/// One step, and the offset in the file of its text; or the offset of what is wrong
/// with it and what.
fn one_step(s: &RawStep) -> Result<(Step, usize), (usize, String)> {
    let seconds = |v: &Option<At<f64>>, key: &str| -> Result<Option<Duration>, (usize, String)> {
        let most = match key {
            "window" => crate::probe::MOST_WINDOW.as_secs_f64(),
            _ => MOST_SECONDS,
        };
        match v {
            None => Ok(None),
            Some(v) if v.value > 0.0 && v.value <= most => {
                Ok(Some(Duration::from_secs_f64(v.value)))
            }
            Some(v) => Err((
                v.at,
                format!(
                    "{key}: expected seconds above 0 and at most {most}, got {}",
                    v.value
                ),
            )),
        }
    };
    let (text_of, what) = match (&s.act, &s.expect) {
        (Some(act), None) => {
            let only_expect = [
                ("within", s.within.as_ref().map(|v| v.at)),
                ("output", s.output.as_ref().map(|v| v.at)),
                ("window", s.window.as_ref().map(|v| v.at)),
            ];
            if let Some((key, Some(at))) = only_expect.into_iter().find(|(_, at)| at.is_some()) {
                return Err((
                    at,
                    format!("{key} belongs to an expect step, not a do step"),
                ));
            }
            let action = step::action(&act.value).map_err(|r| (act.word(r.at), r.message))?;
            (act, What::Do(action))
        }
        (None, Some(exp)) => {
            let expect = step::expect(&exp.value).map_err(|r| (exp.word(r.at), r.message))?;
            let output = match &s.output {
                Some(o) if !matches!(expect, Expect::Exec { .. }) => {
                    return Err((o.at, "output belongs to an exec expectation".into()))
                }
                Some(o) => Some(
                    regex::Regex::new(&o.value)
                        .map_err(|e| (o.at, format!("output: not a regular expression: {e}")))?,
                ),
                None => None,
            };
            if let (Some(w), false) = (&s.window, matches!(expect, Expect::Loss { .. })) {
                return Err((w.at, "window belongs to a loss expectation".into()));
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
                exp.at,
                "a step either does (do = ...) or expects (expect = ...), not both".into(),
            ))
        }
        (None, None) => {
            return Err((
                s.start,
                "a step needs do = \"...\" or expect = \"...\"".into(),
            ))
        }
    };
    let step = Step {
        name: s.name.clone().unwrap_or_else(|| text_of.value.clone()),
        text: text_of.value.clone(),
        at: seconds(&s.at, "at")?,
        what,
        place: Place::default(),
    };
    Ok((step, text_of.at))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> String {
        parse(text, "s.toml", ".".into(), false)
            .unwrap_err()
            .to_string()
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
        assert!(both.contains(":5:11: a step either does"), "{both}");
        assert!(refused("[scenario]\nname = \"x\"\n").contains("no steps"));
    }

    #[test]
    fn a_word_after_an_escape_is_placed_at_its_texts_start() {
        let e =
            refused("[scenario]\nname = \"x\"\n[[step]]\ndo = \"link \\\"r1:eth1\\\" sideways\"\n");
        assert!(e.starts_with("s.toml:4:7: expected down or up"), "{e}");
    }

    #[test]
    fn yaml_reads_as_toml_does_with_its_places() {
        let text = "scenario:\n  name: y\n  seed: 4\nstep:\n  - do: link r1:eth1 down\n  - name: back\n    expect: \"ping r1 10.0.0.2\"\n    within: 2.5\n";
        let s = parse(text, "s.yml", ".".into(), true).unwrap();
        assert_eq!((s.name.as_str(), s.seed, s.steps.len()), ("y", Some(4), 2));
        assert_eq!(s.steps[0].place, Place { line: 5, column: 9 });
        assert_eq!(
            s.steps[1].place,
            Place {
                line: 7,
                column: 14
            }
        );
        let refused = |t: &str| parse(t, "s.yml", ".".into(), true).unwrap_err().to_string();
        let e = refused(
            "scenario:\n  name: y\nstep:\n  - do: link r1:eth1 sideways\n  - expect: ping r1 x\n",
        );
        assert!(e.starts_with("s.yml:4:22: expected down or up"), "{e}");
        assert!(
            e.contains("\ns.yml:5:21: expected an IPv4 or IPv6 address"),
            "{e}"
        );
        let e = refused("scenario:\n  name: y\nstep:\n  - expect: ping r1 ::1\n    colour: red\n");
        assert!(e.starts_with("s.yml:5:5: unknown key \"colour\""), "{e}");
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
            false,
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

//! One step's text (`do = "link r1:eth1 down"`, `expect = "ping r1 10.0.0.2"`) read into
//! what it does or expects. The words are nsfleet's live verbs exactly as typed after
//! `nsfleet VERB FLEET`, plus the scenario's own (`sleep`, `partition`, `heal`, `apply`)
//! and expectations. Every error carries the byte offset of the word it is about, so the
//! file's reader can say its line and column.
//!
//! Pure: no fleet, no file, no kernel. Whether the nodes named exist is `check`'s.

use nsfleet::topology::Impair;
use nsfleet_values::IpNet;
use std::net::IpAddr;
use std::time::Duration;

/// A word of a step's text and where it starts in that text (bytes).
#[derive(Clone, Debug, PartialEq)]
pub struct Word {
    pub text: String,
    pub at: usize,
}

/// An error in a step's text: at which byte, and what was expected there.
#[derive(Debug, PartialEq)]
pub struct Refusal {
    pub at: usize,
    pub message: String,
}

type Parsed<T> = Result<T, Refusal>;

fn refuse<T>(at: usize, message: impl Into<String>) -> Parsed<T> {
    Err(Refusal {
        at,
        message: message.into(),
    })
}

/// One end of a link, named or chosen at random among those that match.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    /// `r1:eth1`
    End { node: String, iface: String },
    /// `random(r*:eth*)`: one end chosen by the scenario's seed, among the fleet's link
    /// ends whose node and interface match the two patterns.
    Random { node: String, iface: String },
}

/// What a `do` step does to the fleet.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// `link TARGET down|up`
    Link { target: Target, up: bool },
    /// `impair TARGET --delay 50ms ...`, or `--clear` (`None`).
    Impair {
        target: Target,
        impair: Option<Impair>,
    },
    /// `node NODE stop|start|restart|pause|resume`
    Node {
        node: String,
        action: nsfleet::control::NodeAction,
    },
    /// `wait started|healthy|converged [--timeout SECONDS]`
    Wait {
        until: nsfleet::ready::Condition,
        bound: Duration,
    },
    /// `sleep SECONDS`
    Sleep(Duration),
    /// `partition A B`: every link between a node of group A and one of group B pulled
    /// (each group: node names or patterns, separated by commas).
    Partition { a: Vec<String>, b: Vec<String> },
    /// `heal`: every cable the partitions before it pulled, plugged back.
    Heal,
    /// `apply FILE`: the fleet changed into FILE's topology (relative to the scenario's
    /// folder), all or nothing.
    Apply(String),
}

/// What an `expect` step waits for. `node` may be a pattern (`r*`): the expectation then
/// holds once it has held on every node that matches.
#[derive(Clone, Debug, PartialEq)]
pub enum Expect {
    /// `ping NODE ADDRESS` (`reach`), or `no ping NODE ADDRESS`: an echo answered, or not.
    Ping {
        node: String,
        addr: IpAddr,
        reach: bool,
    },
    /// `route NODE PREFIX [via ADDRESS]`, or `no route NODE PREFIX`: a route of the node's
    /// main table for exactly that prefix (through that next hop, one of a multipath
    /// route's), or none.
    Route {
        node: String,
        prefix: IpNet,
        via: Option<IpAddr>,
        present: bool,
    },
    /// `exec NODE -- CMD...`: the command exits 0 (and its output matches the step's
    /// `output`).
    Exec { node: String, command: Vec<String> },
    /// `loss NODE ADDRESS < PERCENT`: echoes sent without pause over the step's `window`
    /// lose less than that.
    Loss {
        node: String,
        addr: IpAddr,
        below: f64,
    },
}

impl Expect {
    /// The node (or pattern) it is checked on.
    pub fn node(&self) -> &str {
        match self {
            Expect::Ping { node, .. }
            | Expect::Route { node, .. }
            | Expect::Exec { node, .. }
            | Expect::Loss { node, .. } => node,
        }
    }
}

/// The words of `text`, as a shell splits them (spaces; single and double quotes; a
/// backslash escapes the next character outside single quotes), each with where it
/// starts.
pub fn words(text: &str) -> Parsed<Vec<Word>> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut word = String::new();
        let mut quote: Option<(char, usize)> = None;
        while let Some(&(i, c)) = chars.peek() {
            match (quote, c) {
                (None, c) if c.is_whitespace() => break,
                (None, '\'' | '"') => quote = Some((c, i)),
                (Some((q, _)), c) if c == q => quote = None,
                (Some(('\'', _)), c) => word.push(c),
                (_, '\\') => {
                    chars.next();
                    match chars.peek() {
                        Some(&(_, c)) => word.push(c),
                        None => return refuse(i, "a backslash at the end: nothing to escape"),
                    }
                }
                (_, c) => word.push(c),
            }
            chars.next();
        }
        if let Some((q, at)) = quote {
            return refuse(at, format!("this {q} is never closed"));
        }
        out.push(Word {
            text: word,
            at: start,
        });
    }
    Ok(out)
}

/// The words of a step, read from the front.
struct Reader {
    words: Vec<Word>,
    next: usize,
    /// Where the text ends, for what is missing at its end.
    end: usize,
}

impl Reader {
    fn new(text: &str) -> Parsed<Reader> {
        Ok(Reader {
            words: words(text)?,
            next: 0,
            end: text.len(),
        })
    }

    /// The next word, or what was expected in its place.
    fn take(&mut self, expected: &str) -> Parsed<Word> {
        match self.words.get(self.next) {
            Some(w) => {
                self.next += 1;
                Ok(w.clone())
            }
            None => refuse(self.end, format!("expected {expected} here")),
        }
    }

    fn peek(&self) -> Option<&Word> {
        self.words.get(self.next)
    }

    /// Nothing may follow.
    fn done(&self) -> Parsed<()> {
        match self.peek() {
            None => Ok(()),
            Some(w) => refuse(
                w.at,
                format!("unexpected {:?}: nothing follows here", w.text),
            ),
        }
    }

    fn rest(&mut self) -> Vec<Word> {
        let rest = self.words[self.next..].to_vec();
        self.next = self.words.len();
        rest
    }
}

/// The verbs a `do` step takes, as said when one is not known.
pub const VERBS: &str = "link, impair, node, wait, sleep, partition, heal or apply";

/// A `do` step's text.
pub fn action(text: &str) -> Parsed<Action> {
    let mut r = Reader::new(text)?;
    let verb = r.take(&format!("a verb: {VERBS}"))?;
    let action = match verb.text.as_str() {
        "link" => {
            let target = target(&r.take("NODE:IFACE")?)?;
            let state = r.take("down or up")?;
            let up = match state.text.as_str() {
                "down" => false,
                "up" => true,
                other => return refuse(state.at, format!("expected down or up, got {other:?}")),
            };
            Action::Link { target, up }
        }
        "impair" => {
            let target = target(&r.take("NODE:IFACE")?)?;
            let impair = impairment(&mut r)?;
            Action::Impair { target, impair }
        }
        "node" => {
            let node = plain_name(&r.take("a node")?)?;
            let w = r.take(&format!(
                "one of {}",
                nsfleet::control::NodeAction::names().join(", ")
            ))?;
            let action = w.text.parse().map_err(|m| Refusal {
                at: w.at,
                message: m,
            })?;
            Action::Node { node, action }
        }
        "wait" => {
            let w = r.take("started, healthy or converged")?;
            let until = nsfleet_client::ready::parse_condition(&w.text).map_err(|m| Refusal {
                at: w.at,
                message: m,
            })?;
            let mut bound = Duration::from_secs(300);
            if let Some(flag) = r.peek().cloned() {
                if flag.text != "--timeout" {
                    return refuse(
                        flag.at,
                        format!("expected --timeout SECONDS, got {:?}", flag.text),
                    );
                }
                r.next += 1;
                bound = seconds(&r.take("the seconds to wait at most")?, 3600.0)?;
            }
            Action::Wait { until, bound }
        }
        "sleep" => Action::Sleep(seconds(&r.take("the seconds to sleep")?, 3600.0)?),
        "partition" => {
            let a = group(&r.take("the first group of nodes (names or patterns, with commas)")?)?;
            let b = group(&r.take("the second group of nodes")?)?;
            Action::Partition { a, b }
        }
        "heal" => Action::Heal,
        "apply" => Action::Apply(r.take("the topology file")?.text),
        other => return refuse(verb.at, format!("unknown verb {other:?}: expected {VERBS}")),
    };
    r.done()?;
    Ok(action)
}

/// The expectations an `expect` step takes, as said when one is not known.
pub const EXPECTATIONS: &str = "ping, no ping, route, no route, exec or loss";

/// An `expect` step's text.
pub fn expect(text: &str) -> Parsed<Expect> {
    let mut r = Reader::new(text)?;
    let first = r.take(&format!("an expectation: {EXPECTATIONS}"))?;
    let (negated, kind) = match first.text.as_str() {
        "no" => (true, r.take("ping or route after no")?),
        _ => (false, first),
    };
    let expect = match kind.text.as_str() {
        "ping" => Expect::Ping {
            node: node_pattern(&r.take("a node")?)?,
            addr: address(&r.take("an address")?)?,
            reach: !negated,
        },
        "route" => {
            let node = node_pattern(&r.take("a node")?)?;
            let w = r.take("a prefix, like 10.0.0.0/24")?;
            let prefix = nsfleet_values::network_prefix(&w.text).map_err(|m| Refusal {
                at: w.at,
                message: m,
            })?;
            let via = match r.peek() {
                Some(w) if w.text == "via" && !negated => {
                    r.next += 1;
                    Some(address(&r.take("the next hop's address")?)?)
                }
                _ => None,
            };
            Expect::Route {
                node,
                prefix,
                via,
                present: !negated,
            }
        }
        "exec" if !negated => {
            let node = node_pattern(&r.take("a node")?)?;
            let dashes = r.take("-- and the command")?;
            if dashes.text != "--" {
                return refuse(
                    dashes.at,
                    format!("expected -- before the command, got {:?}", dashes.text),
                );
            }
            let command: Vec<String> = r.rest().into_iter().map(|w| w.text).collect();
            if command.is_empty() {
                return refuse(text.len(), "expected the command after --");
            }
            Expect::Exec { node, command }
        }
        "loss" if !negated => {
            let node = node_pattern(&r.take("a node")?)?;
            let addr = address(&r.take("an address")?)?;
            let lt = r.take("< PERCENT")?;
            if lt.text != "<" {
                return refuse(
                    lt.at,
                    format!("expected < before the percentage, got {:?}", lt.text),
                );
            }
            let w = r.take("a percentage, like 5%")?;
            let with_sign = if w.text.ends_with('%') {
                w.text.clone()
            } else {
                format!("{}%", w.text)
            };
            let below = nsfleet_values::percent(&with_sign).map_err(|m| Refusal {
                at: w.at,
                message: m,
            })?;
            Expect::Loss { node, addr, below }
        }
        other if negated => {
            return refuse(
                kind.at,
                format!("expected ping or route after no, got {other:?}"),
            )
        }
        other => {
            return refuse(
                kind.at,
                format!("unknown expectation {other:?}: expected {EXPECTATIONS}"),
            )
        }
    };
    r.done()?;
    Ok(expect)
}

/// `r1:eth1` or `random(r*:eth*)`.
fn target(w: &Word) -> Parsed<Target> {
    let random = w
        .text
        .strip_prefix("random(")
        .map(|rest| rest.strip_suffix(')'));
    let (inner, is_random) = match random {
        Some(Some(inner)) => (inner, true),
        Some(None) => {
            return refuse(
                w.at,
                format!(
                    "expected random(NODES:IFACES), like random(r*:eth*), got {:?}",
                    w.text
                ),
            )
        }
        None => (w.text.as_str(), false),
    };
    let Some((node, iface)) = inner
        .split_once(':')
        .filter(|(n, i)| !n.is_empty() && !i.is_empty())
    else {
        return refuse(
            w.at,
            format!("expected NODE:IFACE, like r1:eth1, got {:?}", w.text),
        );
    };
    let (node, iface) = (node.to_string(), iface.to_string());
    if is_random {
        return Ok(Target::Random { node, iface });
    }
    if is_pattern(&node) || is_pattern(&iface) {
        return refuse(
            w.at,
            format!(
                "{:?} is a pattern: name one end, or choose one with random({})",
                w.text, w.text
            ),
        );
    }
    Ok(Target::End { node, iface })
}

/// A node named exactly.
fn plain_name(w: &Word) -> Parsed<String> {
    match is_pattern(&w.text) {
        true => refuse(
            w.at,
            format!("expected a node's name, got the pattern {:?}", w.text),
        ),
        false => Ok(w.text.clone()),
    }
}

/// A node's name, or a pattern of names.
fn node_pattern(w: &Word) -> Parsed<String> {
    match w.text.is_empty() {
        true => refuse(w.at, "expected a node"),
        false => Ok(w.text.clone()),
    }
}

fn group(w: &Word) -> Parsed<Vec<String>> {
    let names: Vec<String> = w.text.split(',').map(str::to_string).collect();
    match names.iter().any(String::is_empty) {
        true => refuse(
            w.at,
            format!(
                "expected node names or patterns separated by commas, like r1,r2 or r1*, got {:?}",
                w.text
            ),
        ),
        false => Ok(names),
    }
}

fn address(w: &Word) -> Parsed<IpAddr> {
    w.text.parse().or_else(|_| {
        refuse(
            w.at,
            format!("expected an IPv4 or IPv6 address, got {:?}", w.text),
        )
    })
}

/// `5`, `2.5`, `500ms`, `2s`: seconds, above 0 and at most `most`.
pub fn seconds(w: &Word, most: f64) -> Parsed<Duration> {
    let s = w.text.as_str();
    let value = match s.parse::<f64>() {
        Ok(v) => Ok(v),
        Err(_) => nsfleet_values::duration_ns(s).map(|ns| ns as f64 / 1e9),
    };
    match value {
        Ok(v) if v > 0.0 && v <= most => Ok(Duration::from_secs_f64(v)),
        _ => refuse(
            w.at,
            format!("expected seconds above 0 and at most {most}, like 5 or 500ms, got {s:?}"),
        ),
    }
}

/// `--delay 50ms --loss 1%` (or `--delay=50ms`), or `--clear`: as `nsfleet impair` takes them.
fn impairment(r: &mut Reader) -> Parsed<Option<Impair>> {
    let flags = r.rest();
    let Some(first) = flags.first() else {
        return refuse(r.end, "expected --delay, --jitter, --loss, --duplicate, --corrupt, --reorder, --rate or --clear");
    };
    if first.text == "--clear" {
        return match flags.get(1) {
            None => Ok(None),
            Some(w) => refuse(w.at, "--clear removes the impairment: give it alone"),
        };
    }
    let mut imp = Impair::default();
    let mut i = 0;
    while i < flags.len() {
        let flag = &flags[i];
        let Some(name) = flag.text.strip_prefix("--") else {
            return refuse(
                flag.at,
                format!("expected an option such as --delay, got {:?}", flag.text),
            );
        };
        let (key, value) = match name.split_once('=') {
            Some((k, v)) => (
                k.to_string(),
                Word {
                    text: v.into(),
                    at: flag.at + 3 + k.len(),
                },
            ),
            None => {
                i += 1;
                let v = flags.get(i).cloned().ok_or_else(|| Refusal {
                    at: r.end,
                    message: format!("expected a value after --{name}"),
                })?;
                (name.to_string(), v)
            }
        };
        if key == "clear" {
            return refuse(flag.at, "--clear removes the impairment: give it alone");
        }
        imp.set(&key, &value.text).map_err(|m| Refusal {
            at: if m.starts_with("unknown") {
                flag.at
            } else {
                value.at
            },
            message: format!("--{key}: {m}"),
        })?;
        i += 1;
    }
    imp.check().map_err(|m| Refusal {
        at: first.at,
        message: m,
    })?;
    Ok(Some(imp))
}

/// Whether a name is a pattern (`*` any run of characters, `?` one).
pub fn is_pattern(s: &str) -> bool {
    s.contains(['*', '?'])
}

/// Whether `name` matches `pattern` (`*` any run of characters, `?` any one).
pub fn matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // The classic two-pointer match, backing up to the last `*` on a mismatch.
    let (mut pi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_verbs_read_as_typed_after_the_fleet() {
        assert_eq!(
            action("link r1:eth1 down").unwrap(),
            Action::Link {
                target: Target::End {
                    node: "r1".into(),
                    iface: "eth1".into()
                },
                up: false
            }
        );
        let Action::Impair {
            impair: Some(i), ..
        } = action("impair r1:eth1 --delay 50ms --loss=1%").unwrap()
        else {
            panic!("not an impairment");
        };
        assert_eq!((i.delay_ns, i.loss), (50_000_000, 1.0));
        assert!(matches!(
            action("impair r1:eth1 --clear").unwrap(),
            Action::Impair { impair: None, .. }
        ));
        assert!(matches!(
            action("link random(r*:eth*) up").unwrap(),
            Action::Link {
                target: Target::Random { .. },
                up: true
            }
        ));
        assert_eq!(
            action("partition r1,r2 r3*").unwrap(),
            Action::Partition {
                a: vec!["r1".into(), "r2".into()],
                b: vec!["r3*".into()]
            }
        );
        assert_eq!(
            action("sleep 500ms").unwrap(),
            Action::Sleep(Duration::from_millis(500))
        );
        assert!(matches!(
            action("wait converged --timeout 60").unwrap(),
            Action::Wait { .. }
        ));
    }

    #[test]
    fn a_refusal_points_at_the_word_it_is_about() {
        let e = action("link r1:eth1 sideways").unwrap_err();
        assert_eq!(e.at, 13);
        assert!(e.message.contains("down or up"), "{}", e.message);
        assert_eq!(action("teleport r1").unwrap_err().at, 0);
        assert_eq!(action("impair r1:eth1 --delay fast").unwrap_err().at, 23);
        assert_eq!(action("link r1:eth1").unwrap_err().at, 12);
        assert_eq!(expect("ping r1 10.0.0.300").unwrap_err().at, 8);
        assert_eq!(expect("loss r1 10.0.0.1 > 5%").unwrap_err().at, 17);
        assert_eq!(action("sleep 0").unwrap_err().at, 6);
        assert!(action("link r*:eth1 down")
            .unwrap_err()
            .message
            .contains("random("));
    }

    #[test]
    fn expectations_read_with_their_negations() {
        assert_eq!(
            expect("no route r* 10.0.13.0/30").unwrap(),
            Expect::Route {
                node: "r*".into(),
                prefix: "10.0.13.0/30".parse().unwrap(),
                via: None,
                present: false
            }
        );
        assert!(matches!(
            expect("route r1 10.0.0.0/24 via 10.0.1.2").unwrap(),
            Expect::Route { via: Some(_), .. }
        ));
        assert!(matches!(
            expect("no ping r1 ::1").unwrap(),
            Expect::Ping { reach: false, .. }
        ));
        assert_eq!(
            expect("exec r1 -- sh -c 'ip route | grep -q 10.0.0.0'").unwrap(),
            Expect::Exec {
                node: "r1".into(),
                command: vec![
                    "sh".into(),
                    "-c".into(),
                    "ip route | grep -q 10.0.0.0".into()
                ]
            }
        );
        assert!(
            matches!(expect("loss r1 10.0.0.2 < 5%").unwrap(), Expect::Loss { below, .. } if below == 5.0)
        );
        assert!(expect("no exec r1 -- true").is_err());
        assert!(expect("route r1 10.0.0.1/24")
            .unwrap_err()
            .message
            .contains("host bits"));
    }

    #[test]
    fn patterns_match_as_a_shell_globs() {
        assert!(matches("r*", "r12"));
        assert!(matches("r?", "r1"));
        assert!(!matches("r?", "r12"));
        assert!(matches("*:eth*", "*:eth1"));
        assert!(matches("a*b*c", "axxbyyc"));
        assert!(!matches("a*b", "axxbc"));
    }
}

//! A YAML document as a tree whose every node knows where it is written (byte offsets into
//! the text), so that a containerlab file's errors and warnings name file:line:column as
//! a TOML file's do. Built on saphyr-parser's events; only what topology files use:
//! scalars (kept as text, typed by whoever reads them), sequences, mappings, anchors and
//! aliases, and the `<<` merge key.
//!
//! This file knows nothing of what the document means.

use saphyr_parser::{Event, Marker, Parser, ScalarStyle};
use std::ops::Range;

/// One node of the document and where it is.
#[derive(Clone, Debug, PartialEq)]
pub struct Yaml {
    pub value: Value,
    pub span: Range<usize>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// An empty value, `~` or `null`.
    Null,
    /// A scalar's text, and whether it was written plain (unquoted, not a block): only a
    /// plain scalar can be a number, a boolean or null.
    Str(String, bool),
    Seq(Vec<Yaml>),
    /// Entries in the order written; keys are unique.
    Map(Vec<(Yaml, Yaml)>),
}

/// A document of more nodes than this (aliases expanded) is refused: the expansion of
/// aliases of aliases grows exponentially ("billion laughs").
const MAX_NODES: usize = 1_000_000;

/// An error: where, and what.
pub type Error = (Range<usize>, String);

/// The first document of `text` (`Null` for an empty one).
pub fn load(text: &str) -> Result<Yaml, Error> {
    let offsets = ByteOffsets::new(text);
    let mut b = Builder {
        text,
        ..Builder::default()
    };
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| {
            let at = offsets.of(*e.marker());
            (at..at, e.info().to_string())
        })?;
        let span = offsets.of(span.start)..offsets.of(span.end);
        match event {
            Event::DocumentEnd if b.root.is_some() => break,
            Event::Scalar(text, style, anchor, _) => {
                let value = match style {
                    ScalarStyle::Plain if is_null(&text) => Value::Null,
                    s => Value::Str(text.into_owned(), s == ScalarStyle::Plain),
                };
                b.add(Yaml { value, span }, anchor)?;
            }
            Event::SequenceStart(anchor, _) => b.open(Value::Seq(Vec::new()), span.start, anchor),
            Event::MappingStart(anchor, _) => b.open(Value::Map(Vec::new()), span.start, anchor),
            Event::SequenceEnd | Event::MappingEnd => b.close(span.end)?,
            Event::Alias(id) => {
                let node = b.anchors.iter().find(|(a, _)| *a == id).map(|(_, n)| n);
                let node = node
                    .cloned()
                    .ok_or((span, "an alias of no anchor".to_string()))?;
                b.count += count(&node);
                b.add(node, 0)?;
            }
            _ => {}
        }
    }
    Ok(b.root.unwrap_or(Yaml {
        value: Value::Null,
        span: 0..0,
    }))
}

fn is_null(s: &str) -> bool {
    matches!(s, "" | "~" | "null" | "Null" | "NULL")
}

fn count(node: &Yaml) -> usize {
    1 + match &node.value {
        Value::Seq(items) => items.iter().map(count).sum(),
        Value::Map(entries) => entries.iter().map(|(k, v)| count(k) + count(v)).sum(),
        _ => 0,
    }
}

/// saphyr's markers count characters; spans here are bytes.
struct ByteOffsets(Option<Vec<usize>>);

impl ByteOffsets {
    fn new(text: &str) -> Self {
        if text.is_ascii() {
            return ByteOffsets(None);
        }
        let starts = text.char_indices().map(|(b, _)| b);
        ByteOffsets(Some(starts.chain([text.len()]).collect()))
    }

    fn of(&self, m: Marker) -> usize {
        match &self.0 {
            None => m.index(),
            Some(v) => v.get(m.index()).copied().unwrap_or(*v.last().unwrap_or(&0)),
        }
    }
}

/// Collections being read, innermost last; a mapping's key waits for its value.
#[derive(Default)]
struct Builder<'t> {
    /// The document, to say where an earlier key is.
    text: &'t str,
    open: Vec<(Yaml, usize, Option<Yaml>)>,
    anchors: Vec<(usize, Yaml)>,
    root: Option<Yaml>,
    count: usize,
}

impl Builder<'_> {
    fn open(&mut self, value: Value, start: usize, anchor: usize) {
        let node = Yaml {
            value,
            span: start..start,
        };
        self.open.push((node, anchor, None));
    }

    fn close(&mut self, end: usize) -> Result<(), Error> {
        let Some((mut node, anchor, _)) = self.open.pop() else {
            return Ok(());
        };
        node.span.end = end.max(node.span.start);
        if let Value::Map(entries) = &mut node.value {
            merge(entries)?;
        }
        self.add(node, anchor)
    }

    fn add(&mut self, node: Yaml, anchor: usize) -> Result<(), Error> {
        self.count += 1;
        if self.count > MAX_NODES {
            return Err((
                node.span,
                format!("more than {MAX_NODES} YAML nodes (aliases expanded): refused"),
            ));
        }
        if anchor != 0 {
            self.anchors.retain(|(a, _)| *a != anchor);
            self.anchors.push((anchor, node.clone()));
        }
        let Some((parent, _, key)) = self.open.last_mut() else {
            self.root.get_or_insert(node);
            return Ok(());
        };
        match &mut parent.value {
            Value::Seq(items) => items.push(node),
            Value::Map(entries) => match key.take() {
                None => *key = Some(node),
                Some(k) => {
                    if let Some((first, _)) = entries.iter().find(|(x, _)| same_key(x, &k)) {
                        let line = self.text[..first.span.start].matches('\n').count() + 1;
                        let m = format!("duplicate key {}: it is already at line {line}", show(&k));
                        return Err((k.span, m));
                    }
                    entries.push((k, node));
                }
            },
            _ => {}
        }
        Ok(())
    }
}

fn same_key(a: &Yaml, b: &Yaml) -> bool {
    a.value == b.value
        || matches!((&a.value, &b.value), (Value::Str(x, _), Value::Str(y, _)) if x == y)
}

fn show(k: &Yaml) -> String {
    match &k.value {
        Value::Str(s, _) => format!("{s:?}"),
        _ => "(not a string)".to_string(),
    }
}

/// Resolves `<<: *anchor` (or a list of them): the merged mappings' keys the mapping does
/// not set itself, as YAML 1.1's merge key does.
fn merge(entries: &mut Vec<(Yaml, Yaml)>) -> Result<(), Error> {
    let is_merge = |k: &Yaml| matches!(&k.value, Value::Str(s, true) if s == "<<");
    if !entries.iter().any(|(k, _)| is_merge(k)) {
        return Ok(());
    }
    let (merges, mut own): (Vec<_>, Vec<_>) = std::mem::take(entries)
        .into_iter()
        .partition(|(k, _)| is_merge(k));
    for (_, v) in merges {
        let maps = match v.value {
            Value::Map(_) => vec![v],
            Value::Seq(items) => items,
            _ => return Err((v.span, "`<<` merges a mapping or a list of mappings".into())),
        };
        for m in maps {
            let Value::Map(inherited) = m.value else {
                return Err((m.span, "`<<` merges a mapping or a list of mappings".into()));
            };
            for (k, v) in inherited {
                if !own.iter().any(|(x, _)| same_key(x, &k)) {
                    own.push((k, v));
                }
            }
        }
    }
    *entries = own;
    Ok(())
}

impl Yaml {
    /// The entries of a mapping; `None` for anything else (an empty value is an empty
    /// mapping, as `nodes:` with nothing under it).
    pub fn entries(&self) -> Option<&[(Yaml, Yaml)]> {
        match &self.value {
            Value::Map(e) => Some(e),
            Value::Null => Some(&[]),
            _ => None,
        }
    }

    pub fn items(&self) -> Option<&[Yaml]> {
        match &self.value {
            Value::Seq(s) => Some(s),
            Value::Null => Some(&[]),
            _ => None,
        }
    }

    /// The text of a scalar (a number or a boolean as written).
    pub fn str(&self) -> Option<&str> {
        match &self.value {
            Value::Str(s, _) => Some(s),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        self.value == Value::Null
    }

    /// A plain scalar that reads as an integer.
    pub fn int(&self) -> Option<i64> {
        match &self.value {
            Value::Str(s, true) => s.parse().ok(),
            _ => None,
        }
    }

    pub fn get(&self, key: &str) -> Option<&Yaml> {
        (self.entries()?.iter()).find_map(|(k, v)| (k.str() == Some(key)).then_some(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str, span: &Range<usize>) -> String {
        text[span.clone()].to_string()
    }

    #[test]
    fn spans_are_bytes_of_the_text() {
        let text =
            "name: lab\ntopology:\n  nodes:\n    r1: {kind: linux}\n    \"é2\":\n      kind: frr\n";
        let doc = load(text).unwrap();
        assert_eq!(doc.get("name").unwrap().str(), Some("lab"));
        let nodes = doc.get("topology").unwrap().get("nodes").unwrap();
        let kind = nodes.get("é2").unwrap().get("kind").unwrap();
        assert_eq!(at(text, &kind.span), "frr");
        let r1 = nodes.get("r1").unwrap().get("kind").unwrap();
        assert_eq!(at(text, &r1.span), "linux");
    }

    #[test]
    fn scalars_keep_their_style() {
        let doc = load("a: 9500\nb: '9500'\nc:\nd: ~\nf: [x, \"y\"]\n").unwrap();
        assert_eq!(doc.get("a").unwrap().int(), Some(9500));
        assert_eq!(doc.get("b").unwrap().int(), None);
        assert!(doc.get("c").unwrap().is_null());
        assert!(doc.get("d").unwrap().is_null());
        let f: Vec<_> = doc
            .get("f")
            .unwrap()
            .items()
            .unwrap()
            .iter()
            .map(|y| y.str().unwrap())
            .collect();
        assert_eq!(f, ["x", "y"]);
    }

    #[test]
    fn aliases_and_merge_keys() {
        let text =
            "base: &b {kind: linux, image: alpine}\nr1:\n  <<: *b\n  image: debian\nr2: *b\n";
        let doc = load(text).unwrap();
        let r1 = doc.get("r1").unwrap();
        assert_eq!(r1.get("kind").unwrap().str(), Some("linux"));
        assert_eq!(r1.get("image").unwrap().str(), Some("debian"));
        assert_eq!(
            doc.get("r2").unwrap().get("image").unwrap().str(),
            Some("alpine")
        );
    }

    #[test]
    fn errors_say_where() {
        let text = "a: 1\nb: [1, 2\n";
        let (span, msg) = load(text).unwrap_err();
        assert!(span.start >= 5, "{span:?} {msg}");
        let (span, msg) = load("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!(span.start, 10);
        assert!(msg.contains("duplicate key \"a\""), "{msg}");
    }

    #[test]
    fn aliases_cannot_explode() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            let p = i - 1;
            text.push_str(&format!("a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"));
        }
        let (_, msg) = load(&text).unwrap_err();
        assert!(msg.contains("YAML nodes"), "{msg}");
    }
}

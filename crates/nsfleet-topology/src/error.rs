//! Where a topology's errors are: a [`Place`] in a file (line and column, as data, from
//! the front-ends through the engine to the client), [`TopologyError`] (file, place and
//! what was expected there), [`Subject`] (what an engine error is about, and where the
//! file wrote it), the collector that reports a stage's errors together ([`Errors`]), and
//! [`Ctx`], which turns a span of the file's text into a place. Every front-end, the
//! resolver and the engine use these; this file uses none of them.

use serde::{Deserialize, Serialize};
use std::ops::Range;

/// Where something is written in a topology file: its line and column, from 1. The
/// engine carries places without the file's name (the client knows it); `line` 0 is no
/// place at all (a file that could not be read).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Place {
    pub line: u32,
    pub column: u32,
}

impl Place {
    /// Where byte `offset` of `text` is: its line, and its column in bytes from the
    /// line's start (as the parsers' spans count). Bytes, so that it also places a byte
    /// of a file that is not valid UTF-8.
    pub fn of(text: &[u8], offset: usize) -> Place {
        let upto = &text[..offset.min(text.len())];
        let line_start = upto.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        Place {
            line: upto.iter().filter(|b| **b == b'\n').count() as u32 + 1,
            column: (upto.len() - line_start) as u32 + 1,
        }
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// An error about what a topology file wrote: where, and what was wrong or expected there.
/// Several found together travel as one: the first, with the others in `more`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyError {
    pub file: String,
    pub at: Place,
    pub message: String,
    /// The other errors of the same reading, in the file's order (at most
    /// [`MAX_ERRORS`] in all), and how many more there were beyond those.
    pub more: Vec<TopologyError>,
    pub unsaid: usize,
}

impl TopologyError {
    pub fn new(file: impl Into<String>, at: Place, message: impl Into<String>) -> Self {
        TopologyError {
            file: file.into(),
            at,
            message: message.into(),
            more: Vec::new(),
            unsaid: 0,
        }
    }

    /// This error and the others found with it, in the file's order.
    pub fn all(&self) -> impl Iterator<Item = &TopologyError> {
        std::iter::once(self).chain(&self.more)
    }

    /// One error, with its place, on a line of its own.
    fn fmt_one(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.at.line == 0 {
            // Not about a place in the file (it could not be read at all).
            return write!(f, "{}: {}", self.file, self.message);
        }
        write!(f, "{}:{}: {}", self.file, self.at, self.message)
    }
}

impl std::fmt::Display for TopologyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.fmt_one(f)?;
        for e in &self.more {
            writeln!(f)?;
            e.fmt_one(f)?;
        }
        if self.unsaid > 0 {
            write!(f, "\n... and {} more errors", self.unsaid)?;
        }
        Ok(())
    }
}

impl std::error::Error for TopologyError {}

/// Most errors reported from one file at once.
pub const MAX_ERRORS: usize = 20;

/// The errors of one stage of reading a file, for items that do not depend on each
/// other (the nodes, the links, the routes): each is checked, and all their errors are
/// reported together, in the file's order, up to [`MAX_ERRORS`]. A stage with errors ends
/// the reading: the next stages build on it.
#[derive(Default)]
pub(crate) struct Errors(Vec<TopologyError>);

impl Errors {
    /// The value of `r`, or `None` with its error kept.
    pub(crate) fn take<T>(&mut self, r: Result<T, TopologyError>) -> Option<T> {
        r.map_err(|e| self.0.push(e)).ok()
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Ok if nothing failed; else every error (up to the limit), as one: the first, with
    /// the others on lines of their own.
    pub(crate) fn done(mut self) -> Result<(), TopologyError> {
        self.0.sort_by_key(|e| e.at);
        let unsaid = self.0.len().saturating_sub(MAX_ERRORS);
        self.0.truncate(MAX_ERRORS);
        let mut errors = self.0.into_iter();
        let Some(mut first) = errors.next() else {
            return Ok(());
        };
        first.more.extend(errors);
        first.unsaid = unsaid;
        Err(first)
    }
}

impl TopologyError {
    /// Another message at the same place.
    pub(crate) fn with(&self, message: impl Into<String>) -> TopologyError {
        TopologyError::new(&self.file, self.at, message)
    }
}

/// What an error of the engine is about (a link, a route, a sysctl of a node) and where
/// the file wrote it: the context the engine gives a kernel's refusal, so that the place
/// reaches the client as data however the error is wrapped on its way (find it with
/// `anyhow::Error::downcast_ref::<Subject>()`, which searches the contexts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    pub text: String,
    pub at: Option<Place>,
}

impl Subject {
    /// What `text` names, written at `at` (no place if `at` is none: line 0).
    pub fn new(text: impl Into<String>, at: Place) -> Self {
        Subject {
            text: text.into(),
            at: (at.line > 0).then_some(at),
        }
    }
}

impl From<String> for Subject {
    fn from(text: String) -> Self {
        Subject { text, at: None }
    }
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for Subject {}

pub(crate) struct Ctx<'a> {
    pub(crate) file: &'a str,
    text: &'a str,
    /// Where the file first asks for an impairment only netem can apply.
    pub(crate) netem_at: std::cell::RefCell<Option<TopologyError>>,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(file: &'a str, text: &'a str) -> Self {
        Ctx {
            file,
            text,
            netem_at: Default::default(),
        }
    }

    /// Where the span starts. The column counts bytes from the line's start, as the
    /// spans the parsers give do.
    pub(crate) fn place(&self, span: Range<usize>) -> Place {
        Place::of(self.text.as_bytes(), span.start)
    }

    pub(crate) fn err(&self, span: Range<usize>, message: impl Into<String>) -> TopologyError {
        TopologyError::new(self.file, self.place(span), message)
    }
}

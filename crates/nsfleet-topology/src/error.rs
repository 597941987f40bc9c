//! Where a topology's errors are: [`TopologyError`] (file, line, column and what was
//! expected there), the collector that reports a stage's errors together ([`Errors`]),
//! and [`Ctx`], which turns a span of the file's text into a place. Every front-end and
//! the resolver use these; this file uses none of them.

use std::ops::Range;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for TopologyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            // Not about a place in the file (it could not be read at all).
            return write!(f, "{}: {}", self.file, self.message);
        }
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
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
        self.0.sort_by_key(|e| (e.line, e.column));
        let Some(mut first) = self.0.first().cloned() else {
            return Ok(());
        };
        for e in self.0.iter().skip(1).take(MAX_ERRORS - 1) {
            first.message.push_str(&format!("\n{e}"));
        }
        if self.0.len() > MAX_ERRORS {
            let more = self.0.len() - MAX_ERRORS;
            first
                .message
                .push_str(&format!("\n... and {more} more errors"));
        }
        Err(first)
    }
}

impl TopologyError {
    /// Another message at the same place.
    pub(crate) fn with(&self, message: impl Into<String>) -> TopologyError {
        TopologyError {
            message: message.into(),
            ..self.clone()
        }
    }
}

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

    pub(crate) fn line(&self, span: Range<usize>) -> u32 {
        self.err(span, "").line as u32
    }

    pub(crate) fn err(&self, span: Range<usize>, message: impl Into<String>) -> TopologyError {
        let upto = &self.text[..span.start.min(self.text.len())];
        let line = upto.matches('\n').count() + 1;
        let column = upto.len() - upto.rfind('\n').map_or(0, |i| i + 1) + 1;
        TopologyError {
            file: self.file.to_string(),
            line,
            column,
            message: message.into(),
        }
    }
}

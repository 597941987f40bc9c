//! nsfleet's benchmark results as data: the file format every `nsfleet bench` scenario
//! writes ([`Results`]), the comparison of two result files that `git bisect run` can act
//! on ([`compare`]), the self-contained HTML report with SVG charts ([`report`]), and the
//! fitted growth of a per-item cost with the count ([`growth`]).
//!
//! Pure functions of result files: this crate never runs a benchmark, never touches the
//! kernel, and never reads anything but the files it is given.

mod compare;
pub mod growth;
mod html;
mod schema;
mod svg;

pub use compare::{compare, compare_against, Against, Comparison, Row, Verdict};
pub use html::{markdown_table, report};
pub use schema::{
    median, percentiles, Axis, Better, Chart, Machine, Metric, Results, Series, FORMAT,
};

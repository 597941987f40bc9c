//! How a command's failure is said: for people, `nsfleet: ` and the error's chain, each
//! error about a place in a topology file as `FILE:LINE:COLUMN: message`; for machines
//! (`--json`), one `{"error": {"message", "file", "line", "column"}}` object per error
//! on its own line of stderr: `file` null when the error is about no topology file,
//! `line` and `column` null when it is about the file but no place in it (a file that
//! cannot be read, the "... and N more errors" of a long list).
//!
//! Places travel as data: the topology reader's [`TopologyError`], and the engine's
//! [`Subject`](nsfleet::topology::Subject) (a kernel's refusal during `up` or `apply`, placed by line and column but
//! not by file, which only the client knows) made one here with [`in_file`].

use nsfleet::topology::TopologyError;
use serde_json::json;
use std::path::Path;

/// `e` as an error of topology file `file` when the engine said where in it the failure
/// is (a [`Subject`](nsfleet::topology::Subject) with a place among its contexts); as it is otherwise. The message
/// keeps the whole chain: what failed, in which node, and the kernel's word.
pub fn in_file(e: anyhow::Error, file: &Path) -> anyhow::Error {
    match nsfleet::control::place_of(&e) {
        Some(at) => TopologyError::new(file.display().to_string(), at, format!("{e:#}")).into(),
        None => e,
    }
}

/// What was refused before anything was made (`up`'s preflight), all at once: what the
/// file writes at a place (`placed`, errors of the file there) and what is about the
/// machine (`unplaced`). Said after `what`, one per line if several; with `--json`, one
/// object each.
#[derive(Debug)]
pub struct Refused {
    pub what: String,
    pub placed: Vec<TopologyError>,
    pub unplaced: Vec<String>,
}

impl Refused {
    fn each(&self) -> impl Iterator<Item = String> + '_ {
        let placed = self.placed.iter().map(|e| e.to_string());
        placed.chain(self.unplaced.iter().cloned())
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let each: Vec<String> = self.each().collect();
        match each.as_slice() {
            [one] => write!(f, "{}: {one}", self.what),
            several => write!(f, "{}:\n  {}", self.what, several.join("\n  ")),
        }
    }
}

impl std::error::Error for Refused {}

/// Says `e` on stderr, as `--json` asks or for people.
pub fn report(e: &anyhow::Error, json: bool) {
    if !json {
        eprintln!("nsfleet: {e:#}");
        return;
    }
    for object in objects(e) {
        eprintln!("{object}");
    }
}

/// One JSON object per error `e` holds: each error of a topology file with its place,
/// or `e` itself.
pub fn objects(e: &anyhow::Error) -> Vec<serde_json::Value> {
    if let Some(r) = e.downcast_ref::<Refused>() {
        let placed = r
            .placed
            .iter()
            .map(|p| object(&format!("{}: {}", r.what, p.message), p));
        let unplaced = (r.unplaced.iter()).map(|m| {
            json!({"error": {
                "message": format!("{}: {m}", r.what), "file": null, "line": null, "column": null,
            }})
        });
        return placed.chain(unplaced).collect();
    }
    let Some(te) = e.chain().find_map(|c| c.downcast_ref::<TopologyError>()) else {
        return vec![json!({"error": {
            "message": format!("{e:#}"), "file": null, "line": null, "column": null,
        }})];
    };
    // What the errors were found doing ("fleet x was not started"), said with each.
    let outer: Vec<String> = (e.chain())
        .take_while(|c| c.downcast_ref::<TopologyError>().is_none())
        .map(|c| c.to_string())
        .collect();
    let mut objects: Vec<serde_json::Value> = te
        .all()
        .map(|one| {
            let message = (outer.iter().map(String::as_str))
                .chain([one.message.as_str()])
                .collect::<Vec<_>>()
                .join(": ");
            object(&message, one)
        })
        .collect();
    if te.unsaid > 0 {
        objects.push(json!({"error": {
            "message": format!("... and {} more errors", te.unsaid),
            "file": te.file, "line": null, "column": null,
        }}));
    }
    objects
}

/// One error of a topology file as its JSON object, said as `message`.
fn object(message: &str, e: &TopologyError) -> serde_json::Value {
    let placed = e.at.line > 0;
    json!({"error": {
        "message": message,
        "file": e.file,
        "line": placed.then_some(e.at.line),
        "column": placed.then_some(e.at.column),
    }})
}

#[cfg(test)]
mod tests {
    use super::*;
    use nsfleet::topology::{Place, Subject};

    fn at(line: u32, column: u32) -> Place {
        Place { line, column }
    }

    #[test]
    fn an_engine_error_with_a_place_becomes_one_of_the_file() {
        let refused = anyhow::anyhow!("Network is unreachable")
            .context(Subject::new("route 10.9.0.0/16 on r1", at(7, 3)))
            .context("node r1: routes");
        let e = in_file(refused, Path::new("lab.toml"));
        let te = e.downcast_ref::<TopologyError>().expect("placed");
        assert_eq!((te.file.as_str(), te.at), ("lab.toml", at(7, 3)));
        assert_eq!(
            te.to_string(),
            "lab.toml:7:3: node r1: routes: route 10.9.0.0/16 on r1: Network is unreachable"
        );
    }

    #[test]
    fn an_engine_error_without_a_place_stays_as_it_is() {
        let e = in_file(anyhow::anyhow!("no such fleet"), Path::new("lab.toml"));
        assert!(e.downcast_ref::<TopologyError>().is_none());
        let o = objects(&e);
        assert_eq!(o[0]["error"]["message"], "no such fleet");
        assert!(o[0]["error"]["file"].is_null() && o[0]["error"]["line"].is_null());
    }

    #[test]
    fn several_errors_are_several_objects_with_what_they_were_found_doing() {
        let mut first = TopologyError::new("f.toml", at(2, 5), "one");
        first
            .more
            .push(TopologyError::new("f.toml", at(9, 1), "two"));
        first.unsaid = 3;
        let e = anyhow::Error::new(first).context("fleet \"x\" was not started");
        let o = objects(&e);
        assert_eq!(o.len(), 3);
        assert_eq!(o[0]["error"]["message"], "fleet \"x\" was not started: one");
        assert_eq!(
            (
                o[1]["error"]["line"].as_u64(),
                o[1]["error"]["column"].as_u64()
            ),
            (Some(9), Some(1))
        );
        assert_eq!(o[2]["error"]["message"], "... and 3 more errors");
    }

    #[test]
    fn refusals_are_one_object_each_placed_where_the_file_writes_them() {
        let refused = Refused {
            what: "fleet \"x\" was not started".into(),
            placed: vec![TopologyError::new(
                "f.toml",
                at(11, 13),
                "host interface h0 exists",
            )],
            unplaced: vec!["too many namespaces".into()],
        };
        let e = anyhow::Error::new(refused);
        let o = objects(&e);
        assert_eq!(
            (
                o[0]["error"]["file"].as_str(),
                o[0]["error"]["line"].as_u64()
            ),
            (Some("f.toml"), Some(11))
        );
        assert!(o[1]["error"]["file"].is_null() && o[1]["error"]["line"].is_null());
        assert_eq!(
            o[1]["error"]["message"],
            "fleet \"x\" was not started: too many namespaces"
        );
        assert_eq!(
            e.to_string(),
            "fleet \"x\" was not started:\n  f.toml:11:13: host interface h0 exists\n  too many namespaces"
        );
    }
}

//! How a command's failure is said: for people, `nsfleet: ` and the error's chain, each
//! error about a place in a topology file as `FILE:LINE:COLUMN: message`; for machines
//! (`--json`), one `{"error": {"message", "file", "line", "column"}}` object per error
//! on its own line of stderr (file, line and column null when it names no place).
//!
//! Places travel as data: the topology reader's [`TopologyError`], and the engine's
//! [`Subject`] (a kernel's refusal during `up` or `apply`, placed by line and column but
//! not by file, which only the client knows) made one here with [`in_file`].

use nsfleet::topology::{Subject, TopologyError};
use serde_json::json;
use std::path::Path;

/// `e` as an error of topology file `file` when the engine said where in it the failure
/// is (a [`Subject`] with a place among its contexts); as it is otherwise. The message
/// keeps the whole chain: what failed, in which node, and the kernel's word.
pub fn in_file(e: anyhow::Error, file: &Path) -> anyhow::Error {
    match e.downcast_ref::<Subject>().and_then(|s| s.at) {
        Some(at) => TopologyError::new(file.display().to_string(), at, format!("{e:#}")).into(),
        None => e,
    }
}

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
fn objects(e: &anyhow::Error) -> Vec<serde_json::Value> {
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
            let placed = one.at.line > 0;
            json!({"error": {
                "message": message,
                "file": one.file,
                "line": placed.then_some(one.at.line),
                "column": placed.then_some(one.at.column),
            }})
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

#[cfg(test)]
mod tests {
    use super::*;
    use nsfleet::topology::Place;

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
}

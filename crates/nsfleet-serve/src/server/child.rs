//! The `nsfleet` command as the server's child: for what enters a node (a terminal's
//! shell, a capture) or outlives a request (`up`'s supervisor). Each child is killed when
//! the thread that started it ends (`die_with_spawner`), so a request's processes never
//! outlive it, nor the server.

use super::http::ApiError;
use serde_json::Value;
use std::process::{Child, Command};

/// A child of the server's: killed and reaped when dropped, on every path out of the
/// request that started it (the thread's end would kill it, but nobody would reap it).
pub struct Running(Option<Child>);

impl Running {
    pub fn child(&mut self) -> &mut Child {
        self.0
            .as_mut()
            .expect("a child until dropped or waited for")
    }

    /// Waits for it to end, with what it wrote (its standard output and error piped).
    pub fn output(mut self) -> std::io::Result<std::process::Output> {
        let child = self.0.take().expect("a child until dropped or waited for");
        child.wait_with_output()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts `cmd`, tied to this thread, with no signal blocked (the server's threads block
/// those its main thread waits for, and a child inherits the mask: a terminal's Ctrl-C
/// did not reach what its shell ran).
pub fn start(mut cmd: Command) -> Result<Running, ApiError> {
    nsfleet::sys::process::die_with_spawner(&mut cmd);
    nsfleet::sys::signals::unblocked_in(&mut cmd);
    let program = cmd.get_program().to_string_lossy().into_owned();
    (cmd.spawn())
        .map(|c| Running(Some(c)))
        .map_err(|e| ApiError::new(500, format!("cannot run {program}: {e}")))
}

/// A child's failure, from what it said on its standard error: the `--json` error objects
/// it wrote, or its lines of text; a 422 for a topology refused at its places, a 404
/// for what does not exist, a 409 for a fleet up already, else `status`. `shown` replaces `hidden` (the folder the server wrote
/// a topology to) wherever it is named: errors name the file as the client did.
pub fn failure(stderr: &[u8], hidden: Option<(&str, &str)>, status: u16) -> ApiError {
    let text = String::from_utf8_lossy(stderr);
    let text = match hidden {
        Some((hidden, shown)) => text.replace(hidden, shown),
        None => text.into_owned(),
    };
    let mut errors: Vec<Value> = (text.lines())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|mut v| v.get_mut("error").map(Value::take))
        .collect();
    if errors.is_empty() {
        let said: Vec<&str> = (text.lines())
            .map(|l| l.strip_prefix("nsfleet: ").unwrap_or(l))
            .filter(|l| !l.trim().is_empty())
            .collect();
        let message = match said.is_empty() {
            true => "the command failed and said nothing".to_string(),
            false => said.join("\n"),
        };
        errors.push(
            serde_json::json!({"message": message, "file": null, "line": null, "column": null}),
        );
    }
    let all: String = (errors.iter())
        .filter_map(|e| e["message"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    // A topology refused at its places is the client's text's fault, whatever it says.
    let placed = errors.iter().any(|e| !e["line"].is_null());
    let status = if placed {
        422
    } else if super::http::MISSING.iter().any(|m| all.contains(m)) {
        404
    } else if all.contains("is already up") {
        409
    } else {
        status
    };
    ApiError { status, errors }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_childs_json_errors_are_the_answers_with_the_file_as_the_client_named_it() {
        let said = br#"{"error":{"message":"/srv/t/0/lab.toml:3:1: unknown key","file":"/srv/t/0/lab.toml","line":3,"column":1}}
"#;
        let e = failure(said, Some(("/srv/t/0/lab.toml", "lab.toml")), 422);
        assert_eq!(e.status, 422);
        assert_eq!(e.errors[0]["file"], "lab.toml");
        assert_eq!(e.errors[0]["message"], "lab.toml:3:1: unknown key");
        let e = failure(b"nsfleet: fleet \"x\" has no node \"r9\"\n", None, 422);
        assert_eq!(
            (e.status, e.errors[0]["message"].as_str()),
            (404, Some("fleet \"x\" has no node \"r9\""))
        );
        assert_eq!(failure(b"", None, 500).status, 500);
    }
}

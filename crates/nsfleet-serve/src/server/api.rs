//! The routes: the page and its assets, and `/api/v1` (described, request by request, in
//! `openapi.json`, which is served at `/api/v1/openapi.json`).

use super::http::{self, ApiError, Request, Stream};
use super::{child, terminal, Server};
use crate::graph;
use nsfleet::control::{Client, NodeAction, Reply, Request as Ask};
use nsfleet_client::FleetRef;
use serde::Deserialize;
use serde_json::{json, Value};
use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::Duration;

const WORKBENCH: &str = include_str!("workbench.html");
pub const OPENAPI: &str = include_str!("openapi.json");
const ASSETS: [(&str, &str, &str); 5] = [
    (
        "xterm.js",
        "text/javascript",
        include_str!("../../assets/xterm/xterm.js"),
    ),
    (
        "xterm.css",
        "text/css",
        include_str!("../../assets/xterm/xterm.css"),
    ),
    (
        "addon-fit.js",
        "text/javascript",
        include_str!("../../assets/xterm/addon-fit.js"),
    ),
    (
        "LICENSE",
        "text/plain; charset=utf-8",
        include_str!("../../assets/xterm/LICENSE"),
    ),
    (
        "LICENSE-addon-fit",
        "text/plain; charset=utf-8",
        include_str!("../../assets/xterm/LICENSE-addon-fit"),
    ),
];

/// Answers `r`, which has shown the token.
pub fn route(
    server: &Server,
    r: &Request,
    mut reader: BufReader<Box<dyn Stream>>,
    socket: TcpStream,
) -> anyhow::Result<()> {
    let segments: Vec<&str> = r.path.trim_matches('/').split('/').collect();
    let out = reader.get_mut();
    let answer = match (r.method.as_str(), segments.as_slice()) {
        ("GET", [""] | ["index.html"]) => {
            let page =
                (WORKBENCH.replace("__GRAPH_CSS__", graph::CSS)).replace("__DRAW__", graph::DRAW);
            return Ok(http::respond(
                out,
                200,
                "text/html; charset=utf-8",
                &[],
                page.as_bytes(),
            )?);
        }
        ("GET", ["assets", "xterm", name]) => match ASSETS.iter().find(|(n, _, _)| n == name) {
            Some((_, kind, text)) => {
                return Ok(http::respond(out, 200, kind, &[], text.as_bytes())?);
            }
            None => Err(ApiError::new(404, format!("no asset {name:?}"))),
        },
        ("GET", ["api", "v1", "openapi.json"]) => Ok((200, serde_json::from_str(OPENAPI)?)),
        ("GET", ["api", "v1", "fleets"]) => Ok((200, fleets(server))),
        ("POST", ["api", "v1", "fleets"]) => bring_up(server, r),
        ("GET", ["api", "v1", "fleets", f]) => fleet(server, f).map(|v| (200, v)),
        ("DELETE", ["api", "v1", "fleets", f]) => take_down(server, f),
        ("GET", ["api", "v1", "fleets", f, "state"]) => known(server, f)
            .and_then(|_| graph::state(&server.rd(), f).map_err(|e| ApiError::from_client(&e, 500)))
            .map(|v| (200, v)),
        ("POST", ["api", "v1", "fleets", f, "apply"]) => apply(server, f, r),
        ("GET", ["api", "v1", "fleets", f, "links", end]) => link(server, f, end, None),
        ("POST", ["api", "v1", "fleets", f, "links", end]) => link(server, f, end, Some(r)),
        ("POST", ["api", "v1", "fleets", f, "nodes", node]) => node_action(server, f, node, r),
        ("GET", ["api", "v1", "fleets", f, "events"]) => {
            return events(server, f, out, &socket);
        }
        ("GET", ["api", "v1", "fleets", f, "nodes", node, "terminal"]) => {
            let fleet = match known(server, f) {
                Ok(f) => f,
                Err(e) => return Ok(e.send(out)?),
            };
            return terminal::open(server, fleet, node, r, reader, socket);
        }
        ("GET", ["api", "v1", "fleets", f, "capture"]) => {
            return capture(server, f, r, out, &socket);
        }
        (_, ["api", "v1", ..]) | (_, [""] | ["index.html"]) => Err(ApiError::new(
            if known_path(&segments) { 405 } else { 404 },
            format!(
                "{} {}: {}",
                r.method,
                r.path,
                if known_path(&segments) {
                    "not a method this path takes (see /api/v1/openapi.json)"
                } else {
                    "no such path (see /api/v1/openapi.json)"
                }
            ),
        )),
        _ => Err(ApiError::new(
            404,
            format!("{}: no such path (the API is under /api/v1)", r.path),
        )),
    };
    match answer {
        Ok((status, v)) => Ok(http::json_ok(out, status, &v)?),
        Err(e) => Ok(e.send(out)?),
    }
}

/// Whether `segments` is a path of the API under another method.
fn known_path(segments: &[&str]) -> bool {
    matches!(
        segments,
        [""] | ["index.html"]
            | ["api", "v1", "openapi.json" | "fleets"]
            | ["api", "v1", "fleets", _]
            | [
                "api",
                "v1",
                "fleets",
                _,
                "apply" | "events" | "capture" | "state"
            ]
            | ["api", "v1", "fleets", _, "links" | "nodes", _]
            | ["api", "v1", "fleets", _, "nodes", _, "terminal"]
    )
}

type Answer = Result<(u16, Value), ApiError>;

/// Fleet `name`, or a 404 naming the fleets there are.
pub(super) fn known(server: &Server, name: &str) -> Result<FleetRef, ApiError> {
    let rd = server.rd();
    if rd.record(name).is_none() {
        let names = rd.fleets();
        return Err(ApiError::new(
            404,
            format!(
                "no fleet named {name:?} (there are: {})",
                if names.is_empty() {
                    "none".into()
                } else {
                    names.join(", ")
                }
            ),
        ));
    }
    Ok(FleetRef {
        name: name.to_string(),
        run_dir: server.run_dir.clone(),
    })
}

/// `GET /api/v1/fleets`: as `nsfleet status --json`.
fn fleets(server: &Server) -> Value {
    let rd = server.rd();
    let all: Vec<_> = (rd.fleets().iter())
        .map(|n| nsfleet_client::status::query(&rd, n))
        .collect();
    json!({ "fleets": all })
}

/// `GET /api/v1/fleets/{fleet}`: its nodes (kind, interfaces with addresses,
/// impairments, place in the drawing), links, and state now (ends down, impairments,
/// counters), with its status.
fn fleet(server: &Server, name: &str) -> Result<Value, ApiError> {
    known(server, name)?;
    let rd = server.rd();
    let g = graph::load_running(&rd, name).map_err(|e| ApiError::from_client(&e, 500))?;
    let state = graph::state(&rd, name).map_err(|e| ApiError::from_client(&e, 500))?;
    Ok(json!({
        "name": name,
        "status": nsfleet_client::status::query(&rd, name),
        "nodes": graph::laid_out(&g),
        "links": g.links,
        "state": state,
    }))
}

/// A topology's text, as `POST /api/v1/fleets` and `apply` take it: `{"topology": TEXT,
/// "file": NAME}`, NAME saying its language (`.toml`, `.clab.yml`) and naming it in
/// errors.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TopologyText {
    topology: String,
    #[serde(default = "default_file")]
    file: String,
    /// The fleet's name, when not the text's.
    name: Option<String>,
}

fn default_file() -> String {
    "topology.toml".into()
}

impl TopologyText {
    /// Written to a folder of the server's own, as a file named as the client named it.
    fn write(&self, server: &Server) -> Result<PathBuf, ApiError> {
        let base = std::path::Path::new(&self.file)
            .file_name()
            .and_then(|n| n.to_str());
        let Some(base) = base.filter(|b| !b.starts_with('.')) else {
            return Err(ApiError::new(
                400,
                format!(
                    "\"file\": {:?} is not a file name, like lab.toml",
                    self.file
                ),
            ));
        };
        let path = (server.upload_dir())
            .map(|d| d.join(base))
            .map_err(|e| ApiError::new(500, format!("the server's folder: {e}")))?;
        std::fs::write(&path, &self.topology)
            .map_err(|e| ApiError::new(500, format!("{}: {e}", path.display())))?;
        Ok(path)
    }
}

/// `POST /api/v1/fleets`: a fleet brought up from a topology's text, as `nsfleet up`.
fn bring_up(server: &Server, r: &Request) -> Answer {
    let text: TopologyText = r.json()?;
    let path = text.write(server)?;
    let mut up = server.nsfleet();
    up.arg("up").arg("--json");
    if let Some(n) = &text.name {
        up.arg(format!("--name={n}"));
    }
    up.arg("--").arg(&path);
    up.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let done = child::start(up)?
        .output()
        .map_err(|e| ApiError::new(500, format!("waiting for `nsfleet up`: {e}")))?;
    let hidden = path.display().to_string();
    if !done.status.success() {
        let _ = std::fs::remove_dir_all(path.parent().unwrap_or(&path));
        return Err(child::failure(
            &done.stderr,
            Some((&hidden, &text.file)),
            422,
        ));
    }
    let said: Value = (String::from_utf8_lossy(&done.stdout).lines())
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null);
    Ok((201, said))
}

/// `DELETE /api/v1/fleets/{fleet}`: taken down, as `nsfleet down`.
fn take_down(server: &Server, name: &str) -> Answer {
    let fleet = known(server, name)?;
    nsfleet_client::down::down_quietly(&fleet).map_err(|e| ApiError::from_client(&e, 500))?;
    Ok((200, json!({ "fleet": name, "down": true })))
}

/// `POST /api/v1/fleets/{fleet}/apply[?dry_run=true]`: the fleet changed into a
/// topology's text, as `nsfleet apply`; the changes, object by object.
fn apply(server: &Server, name: &str, r: &Request) -> Answer {
    known(server, name)?;
    let text: TopologyText = r.json()?;
    if text.name.is_some() {
        return Err(ApiError::new(
            400,
            "\"name\": apply changes the fleet of its path; the name is for POST /api/v1/fleets",
        ));
    }
    let path = text.write(server)?;
    let args = nsfleet_client::apply::ApplyArgs {
        file: path.clone(),
        format: None,
        name: Some(name.to_string()),
        dry_run: r.flag("dry_run"),
        json: true,
        run_dir: server.run_dir.clone(),
        software: nsfleet::topology::Software::default(),
        images: nsfleet_client::image::default_store(),
    };
    let planned = nsfleet_client::apply::plan(args);
    let _ = std::fs::remove_dir_all(path.parent().unwrap_or(&path));
    let hidden = path.display().to_string();
    let plan = planned.map_err(|e| {
        let mut e = ApiError::from_client(&e, 422);
        for o in &mut e.errors {
            for field in ["message", "file"] {
                if let Some(s) = o[field].as_str() {
                    o[field] = s.replace(&hidden, &text.file).into();
                }
            }
        }
        e
    })?;
    Ok((
        200,
        json!({
            "fleet": name,
            "dry_run": r.flag("dry_run"),
            "applied": plan.applied,
            "changes": plan.changes,
            "report": plan.report,
        }),
    ))
}

/// `GET|POST /api/v1/fleets/{fleet}/links/{node}:{iface}`: a link's two ends (state,
/// counters) and impairment; a POST first pulls or plugs its cable (`{"state": "down"}`)
/// or sets its impairment (`{"impair": {"delay": "20ms", ...}}`, `null` to clear it).
fn link(server: &Server, name: &str, end: &str, r: Option<&Request>) -> Answer {
    let fleet = known(server, name)?;
    let Some((node, iface)) = end.split_once(':') else {
        return Err(ApiError::new(
            404,
            format!("{end:?}: a link is named NODE:IFACE, like r1:eth0"),
        ));
    };
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Change {
        state: Option<String>,
        #[serde(default, deserialize_with = "present")]
        impair: Option<Option<serde_json::Map<String, Value>>>,
    }
    let mut up = None;
    if let Some(r) = r {
        let change: Change = r.json()?;
        up = match change.state.as_deref() {
            None => None,
            Some("up") => Some(true),
            Some("down") => Some(false),
            Some(other) => {
                return Err(ApiError::new(
                    400,
                    format!("\"state\": expected \"up\" or \"down\", not {other:?}"),
                ))
            }
        };
        // One change a request: a second that failed would leave the first made.
        if change.state.is_some() == change.impair.is_some() {
            return Err(ApiError::new(
                400,
                "give \"state\" (\"up\" or \"down\") or \"impair\", one of them",
            ));
        }
        if let Some(impair) = change.impair {
            let impair = impair.map(impairment).transpose()?;
            nsfleet_client::impair::set(&fleet, node, iface, impair)
                .map_err(|e| ApiError::from_client(&e, 422))?;
        }
    }
    let link = Ask::Link {
        node: node.into(),
        iface: iface.into(),
        up,
    };
    match ask(&fleet, &link, 422)?.0 {
        Reply::Link {
            end,
            far,
            host,
            impair,
        } => Ok((
            200,
            json!({ "fleet": name, "end": end, "far": far, "host": host, "impair": impair }),
        )),
        other => Err(unexpected(&other)),
    }
}

/// A field given as `null` (`Some(None)`) apart from one not given (`None`).
fn present<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<serde_json::Map<String, Value>>>, D::Error> {
    Option::deserialize(d).map(Some)
}

/// An impairment from its JSON form: the parameters `nsfleet impair` takes, each a
/// string (`"20ms"`, `"1%"`) or a number.
fn impairment(
    params: serde_json::Map<String, Value>,
) -> Result<nsfleet::topology::Impair, ApiError> {
    let mut imp = nsfleet::topology::Impair::default();
    for (k, v) in params {
        let v = match v {
            Value::String(s) => s,
            Value::Number(n) => n.to_string(),
            other => {
                return Err(ApiError::new(
                    400,
                    format!("\"impair\".{k}: expected a string like \"20ms\", not {other}"),
                ))
            }
        };
        imp.set(&k, &v)
            .map_err(|e| ApiError::new(400, format!("\"impair\".{k}: {e}")))?;
    }
    imp.check()
        .map_err(|e| ApiError::new(400, format!("\"impair\": {e}")))?;
    Ok(imp)
}

/// `POST /api/v1/fleets/{fleet}/nodes/{node}`: `{"action": "stop"}` (or start, restart,
/// pause, resume), as `nsfleet node`.
fn node_action(server: &Server, name: &str, node: &str, r: &Request) -> Answer {
    let fleet = known(server, name)?;
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Action {
        action: String,
    }
    let a: Action = r.json()?;
    let action: NodeAction = a
        .action
        .parse()
        .map_err(|e: String| ApiError::new(400, format!("\"action\": {e}")))?;
    let change = Ask::Node {
        node: node.to_string(),
        action,
    };
    match ask(&fleet, &change, 422)?.0 {
        Reply::Node { processes, .. } => Ok((
            200,
            json!({ "fleet": name, "node": node, "action": action.name(), "processes": processes }),
        )),
        other => Err(unexpected(&other)),
    }
}

/// `request` asked of `fleet`'s supervisor: its reply, and the connection (which goes on
/// with a stream's replies). A failure to reach the supervisor is a 500; its refusal, a
/// 404 for what does not exist, else `status`.
pub(super) fn ask(
    fleet: &FleetRef,
    request: &Ask,
    status: u16,
) -> Result<(Reply, Client), ApiError> {
    let mut c = fleet
        .connect()
        .map_err(|e| ApiError::from_client(&e, 500))?;
    let reply = c
        .call(request)
        .map_err(|e| ApiError::from_client(&e, status))?;
    Ok((reply, c))
}

/// A reply the request does not take: the supervisor and this server disagree.
pub(super) fn unexpected(reply: &Reply) -> ApiError {
    ApiError::new(
        500,
        format!("unexpected reply from the supervisor: {reply:?}"),
    )
}

/// `fleet`'s events, followed from now on.
pub(super) fn watch(fleet: &FleetRef) -> Result<Client, ApiError> {
    match ask(fleet, &Ask::Events, 500)? {
        (Reply::Watching, c) => Ok(c),
        (other, _) => Err(unexpected(&other)),
    }
}

/// `GET /api/v1/fleets/{fleet}/events`: server-sent events, one `data:` line per event
/// as `nsfleet events --json` prints it, until the client goes or the fleet ends.
fn events(
    server: &Server,
    name: &str,
    out: &mut Box<dyn Stream>,
    socket: &TcpStream,
) -> anyhow::Result<()> {
    let mut c = match known(server, name).and_then(|fleet| watch(&fleet)) {
        Ok(c) => c,
        Err(e) => return Ok(e.send(out)?),
    };
    http::stream_head(out, "text/event-stream", &[])?;
    out.write_all(b": watching\n\n")?;
    out.flush()?;
    loop {
        if !c.has_line() && !http::until_readable(c.as_fd(), socket)? {
            return Ok(());
        }
        let Some(e) = c.next_as::<Value>()? else {
            return Ok(());
        };
        out.write_all(format!("data: {e}\n\n").as_bytes())?;
        out.flush()?;
    }
}

/// `GET /api/v1/fleets/{fleet}/capture?ifaces=a:eth0,b:eth1&filter=...&count=N`: pcapng,
/// streamed as `nsfleet capture -w -` writes it, until the client goes (or `count`
/// packets). Everything wrong (a node, an interface, the filter) is said before the
/// first byte. A client that stops reading for 30 s is dropped, and the capture ends.
fn capture(
    server: &Server,
    name: &str,
    r: &Request,
    out: &mut Box<dyn Stream>,
    socket: &TcpStream,
) -> anyhow::Result<()> {
    use std::io::Read;
    let fail = |e: ApiError, out: &mut Box<dyn Stream>| -> anyhow::Result<()> { Ok(e.send(out)?) };
    if let Err(e) = known(server, name) {
        return fail(e, out);
    }
    let ifaces: Vec<&str> = (r.query.get("ifaces").map(String::as_str).unwrap_or(""))
        .split(',')
        .filter(|i| !i.is_empty())
        .collect();
    if ifaces.is_empty() || ifaces.iter().any(|i| !i.contains(':')) {
        return fail(
            ApiError::new(
                400,
                "?ifaces=: give NODE:IFACE, comma-separated, like r1:eth0,r2:eth0",
            ),
            out,
        );
    }
    let count = match r.query.get("count").map(|c| c.parse::<u64>()) {
        None => None,
        Some(Ok(c)) if c > 0 => Some(c),
        Some(_) => {
            return fail(
                ApiError::new(400, "?count=: a number of packets, like 100"),
                out,
            )
        }
    };
    let mut cmd = server.nsfleet();
    // Its standard input closing (this thread's end) ends it, as for `capture --kube`.
    // Options first, then `--`: what the client gave is never read as an option.
    cmd.args(["capture", "-w", "-", "--until-stdin-closes"]);
    if let Some(c) = count {
        cmd.arg(format!("-c{c}"));
    }
    cmd.arg("--").arg(name).args(&ifaces);
    if let Some(f) = r.query.get("filter") {
        cmd.args(f.split_whitespace());
    }
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut running = match child::start(cmd) {
        Ok(c) => c,
        Err(e) => return fail(e, out),
    };
    let mut pcap = running.child().stdout.take().expect("piped");
    let mut buf = vec![0u8; 64 << 10];
    // The pcapng header comes once every interface is open: before it, a failure.
    let first = pcap.read(&mut buf)?;
    if first == 0 {
        let mut said = Vec::new();
        let stderr = running.child().stderr.take();
        stderr.expect("piped").read_to_end(&mut said)?;
        return fail(child::failure(&said, None, 400), out);
    }
    let file = format!("Content-Disposition: attachment; filename=\"{name}.pcapng\"");
    http::stream_head(out, "application/vnd.tcpdump.pcap", &[file])?;
    socket.set_write_timeout(Some(Duration::from_secs(30)))?;
    let mut n = first;
    let ended = loop {
        if let Err(e) = out.write_all(&buf[..n]).and_then(|()| out.flush()) {
            break Err(e);
        }
        match http::until_readable(pcap.as_fd(), socket) {
            Ok(true) => {}
            Ok(false) => break Ok(()),
            Err(e) => break Err(e),
        }
        n = match pcap.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => n,
            Err(e) => break Err(e),
        };
    };
    // Its end: standard input closed, then killed and reaped with `running`.
    drop(running.child().stdin.take());
    drop(running);
    Ok(ended?)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_guides_copy_of_the_openapi_file_is_the_one_served() {
        let guide = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/api/serve-openapi.json"
        );
        let copy = std::fs::read_to_string(guide).expect("docs/api/serve-openapi.json");
        assert!(
            copy == super::OPENAPI,
            "cp crates/nsfleet-serve/src/server/openapi.json docs/api/serve-openapi.json"
        );
        let v: serde_json::Value = serde_json::from_str(super::OPENAPI).unwrap();
        assert_eq!(v["openapi"], "3.1.0");
    }
}

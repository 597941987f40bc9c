//! `nsfleet graph`: a picture of a fleet, from its topology file or from the running fleet.
//!
//! The page is one self-contained HTML file: the graph, its layout (computed here, see
//! [`layout`]) and the script that draws it as SVG, with zoom, pan, search and hover, and
//! nothing fetched. `--serve PORT` serves the running fleet's page on 127.0.0.1 with its
//! live state: links that are down, counters (`/state`, polled), and the fleet's events
//! (`/events`, server-sent); `/once` is the page with the state of the moment only.
//! `--format dot|mermaid|json` gives the graph to other tools.

mod export;
mod layout;
mod model;

use anyhow::{bail, Context};
use model::Graph;
use nsfleet::control::{Reply, Request};
use nsfleet::rundir::RunDir;
use nsfleet_client::connect;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

const PAGE: &str = include_str!("page.html");
/// The drawing of a graph and its style, shared by this page and the workbench's.
pub(crate) const DRAW: &str = include_str!("draw.js");
pub(crate) const CSS: &str = include_str!("graph.css");
const HTML: &str = "text/html; charset=utf-8";

/// The port of containerlab's `--srv ADDR:PORT`. nsfleet serves the page on 127.0.0.1
/// only (it shows the lab's addresses and follows its events): another address is said.
pub fn port_of(addr: &str) -> anyhow::Result<u16> {
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| anyhow::anyhow!("--srv {addr:?}: expected ADDR:PORT, like 0.0.0.0:50080"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| anyhow::anyhow!("--srv {addr:?}: {port:?} is not a port"))?;
    if !matches!(host, "" | "127.0.0.1" | "localhost") {
        eprintln!("note: the page is served on 127.0.0.1:{port} only, not on {host}");
    }
    Ok(port)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Html,
    Dot,
    Mermaid,
    Json,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        Ok(match s {
            "html" => Format::Html,
            "dot" => Format::Dot,
            "mermaid" => Format::Mermaid,
            "json" => Format::Json,
            _ => return Err(format!("expected html, dot, mermaid or json, not {s:?}")),
        })
    }
}

pub struct GraphArgs {
    /// A topology file, or the name of a running fleet.
    pub source: String,
    pub format: Format,
    /// Where to write it; for HTML, `graph.html` without it, for the others standard output.
    pub output: Option<PathBuf>,
    /// Serve the running fleet's live page on 127.0.0.1:PORT.
    pub serve: Option<u16>,
    pub run_dir: PathBuf,
}

pub fn graph(a: GraphArgs) -> anyhow::Result<()> {
    let rd = RunDir::new(&a.run_dir);
    if let Some(port) = a.serve {
        if Path::new(&a.source).is_file() {
            bail!(
                "--serve shows a running fleet: give its name, not a file ({})",
                a.source
            );
        }
        return serve(&rd, &a.source, port);
    }
    let g = load(&rd, &a.source)?;
    let text = match a.format {
        Format::Html => page(&g, None),
        Format::Dot => export::dot(&g),
        Format::Mermaid => export::mermaid(&g),
        Format::Json => format!("{}\n", export::json(&g)),
    };
    let output = match (a.format, a.output) {
        (_, Some(p)) => Some(p),
        (Format::Html, None) => Some(PathBuf::from("graph.html")),
        _ => None,
    };
    match output {
        Some(p) if p.as_os_str() != "-" => {
            std::fs::write(&p, text)
                .with_context(|| format!("-o {}: cannot write it", p.display()))?;
            eprintln!(
                "nsfleet: the graph of {} ({} nodes, {} links) is in {}",
                g.name,
                g.nodes.len(),
                g.links.len(),
                p.display()
            );
        }
        _ => std::io::stdout().write_all(text.as_bytes())?,
    }
    Ok(())
}

/// The graph of `source`: a topology file (validated as `up` would, without the kernel),
/// or else a running fleet of that name, as it is now.
pub(crate) fn load(rd: &RunDir, source: &str) -> anyhow::Result<Graph> {
    let path = Path::new(source);
    if path.exists() {
        let draft = nsfleet::topology::read_file(path, None)?;
        let topo = draft.check(&nsfleet::topology::KernelCaps::assumed())?;
        let specs: Vec<_> = topo.nodes().collect();
        let nodes = specs
            .iter()
            .map(|s| (s.name.as_str(), &*s.config, &*s.wiring));
        return Ok(Graph::build(&topo.name, nodes));
    }
    if rd.record(source).is_none() {
        bail!(
            "{source:?} is neither a topology file nor a fleet under {} (`nsfleet status` lists them)",
            rd.root().display()
        );
    }
    load_running(rd, source)
}

/// The graph of running fleet `name`, as it is now.
pub(crate) fn load_running(rd: &RunDir, name: &str) -> anyhow::Result<Graph> {
    let source = name;
    let mut c = connect(rd, source)?;
    c.set_timeout(Some(Duration::from_secs(60)));
    let Reply::Shapes { nodes } = c.call(&Request::Shapes)? else {
        bail!("unexpected reply from the supervisor");
    };
    let shapes = nodes
        .iter()
        .map(|n| (n.name.as_str(), &*n.config, &*n.wiring));
    Ok(Graph::build(source, shapes))
}

/// The page of `g`, laid out. A live page starts from `state` (see [`state`]), then polls
/// `state` and listens to `events`.
fn page(g: &Graph, state: Option<serde_json::Value>) -> String {
    let live = state.is_some();
    let data = serde_json::json!({
        "name": g.name, "nodes": laid_out(g), "links": g.links, "live": live, "state": state,
    });
    // Inside a <script> element, "</" would end it.
    let data = data.to_string().replace("</", "<\\/");
    let title = format!("fleet {}", g.name)
        .replace('&', "&amp;")
        .replace('<', "&lt;");
    PAGE.replace("__TITLE__", &title)
        .replace("__GRAPH_CSS__", CSS)
        .replace("__DRAW__", DRAW)
        .replace("__DATA__", &data)
}

/// `g`'s nodes, each with its place in the drawing (`x`, `y`).
pub(crate) fn laid_out(g: &Graph) -> Vec<serde_json::Value> {
    let edges: Vec<(usize, usize)> = g.links.iter().map(|l| (l.a, l.b)).collect();
    let at = layout::layout(g.nodes.len(), &edges);
    let nodes: Vec<serde_json::Value> = (g.nodes.iter().zip(at))
        .map(|(n, (x, y))| {
            let mut v = serde_json::to_value(n).expect("a graph node serializes");
            v["x"] = serde_json::json!((x * 10.0).round() / 10.0);
            v["y"] = serde_json::json!((y * 10.0).round() / 10.0);
            v
        })
        .collect();
    nodes
}

/// Serves fleet `name`'s live page on 127.0.0.1:`port` until interrupted: `/` (laid out
/// anew on each load, so that it shows what `apply` changed), `/state` and `/events`.
fn serve(rd: &RunDir, name: &str, port: u16) -> anyhow::Result<()> {
    load(rd, name)?;
    let listener = TcpListener::bind(("127.0.0.1", port))
        .with_context(|| format!("cannot listen on 127.0.0.1:{port}"))?;
    let port = listener.local_addr()?.port();
    eprintln!("nsfleet: fleet {name}'s graph, live, on http://127.0.0.1:{port}/ (Ctrl-C ends)");
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let (rd, name) = (rd.clone(), name.to_string());
        std::thread::spawn(move || {
            // A page that went away before its answer is not an error worth a line.
            let gone = |e: &anyhow::Error| {
                e.downcast_ref::<std::io::Error>().is_some_and(|e| {
                    use std::io::ErrorKind::{BrokenPipe, ConnectionReset};
                    matches!(e.kind(), BrokenPipe | ConnectionReset)
                })
            };
            match answer(&rd, &name, conn) {
                Err(e) if !gone(&e) => eprintln!("nsfleet: graph: {e:#}"),
                _ => {}
            }
        });
    }
    Ok(())
}

/// One HTTP request: its path decides what is sent back.
fn answer(rd: &RunDir, name: &str, mut conn: TcpStream) -> anyhow::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    // The headers, up to the blank line; nothing in them changes the answer.
    let mut header = String::new();
    while reader.read_line(&mut header)? > 2 {
        header.clear();
    }
    let path = request.split_whitespace().nth(1).unwrap_or("/");
    match path {
        "/" | "/index.html" => {
            let body = page(&load(rd, name)?, Some(state(rd, name)?));
            respond(&mut conn, "200 OK", HTML, body.as_bytes())
        }
        // The state now, without following it: for a screenshot or a printout.
        "/once" => {
            let mut state = state(rd, name)?;
            state["once"] = true.into();
            let body = page(&load(rd, name)?, Some(state));
            respond(&mut conn, "200 OK", HTML, body.as_bytes())
        }
        "/state" => {
            let body = state(rd, name)?.to_string();
            respond(&mut conn, "200 OK", "application/json", body.as_bytes())
        }
        "/events" => stream_events(rd, name, conn),
        _ => respond(&mut conn, "404 Not Found", "text/plain", b"not found\n"),
    }
}

fn respond(conn: &mut TcpStream, status: &str, kind: &str, body: &[u8]) -> anyhow::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes())?;
    conn.write_all(body)?;
    Ok(())
}

/// The fleet's state now: the interfaces that are down (administratively or without
/// carrier) as `node:iface`, the impaired ones with their impairment (as `nsfleet impair`
/// left them), and every interface's counters.
pub(crate) fn state(rd: &RunDir, name: &str) -> anyhow::Result<serde_json::Value> {
    let mut c = connect(rd, name)?;
    c.set_timeout(Some(Duration::from_secs(60)));
    let Reply::Stats(s) = c.call(&Request::Stats { node: None })? else {
        bail!("unexpected reply from the supervisor");
    };
    let impaired: serde_json::Map<String, serde_json::Value> = (s.nodes.iter())
        .flat_map(|n| {
            (n.impairments.iter())
                .map(move |(i, m)| (format!("{}:{i}", n.name), m.to_string().into()))
        })
        .collect();
    let mut down = Vec::new();
    let mut counters = serde_json::Map::new();
    for n in &s.nodes {
        for i in &n.interfaces {
            let end = format!("{}:{}", n.name, i.name);
            if !(i.up && i.carrier) {
                down.push(serde_json::Value::from(end.clone()));
            }
            counters.insert(end, serde_json::to_value(i)?);
        }
    }
    Ok(serde_json::json!({ "down": down, "impaired": impaired, "counters": counters }))
}

/// The fleet's events as server-sent events, one `data:` line each, until the page goes
/// away or the fleet ends.
fn stream_events(rd: &RunDir, name: &str, mut conn: TcpStream) -> anyhow::Result<()> {
    let mut c = connect(rd, name)?;
    match c.call(&Request::Events)? {
        Reply::Watching => {}
        _ => bail!("unexpected reply from the supervisor"),
    }
    conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n: watching\n\n")?;
    while let Some(e) = c.next_as::<serde_json::Value>()? {
        if conn.write_all(format!("data: {e}\n\n").as_bytes()).is_err() {
            break;
        }
    }
    Ok(())
}

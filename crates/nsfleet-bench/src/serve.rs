//! `nsfleet bench serve`: the lab server as a person at the workbench feels it.
//!
//! - **Keystroke to echo**: a fleet of N nodes, T terminals open at once over the
//!   server's WebSockets, one key at a time typed into each in turn and timed until its
//!   echo comes back; against the same shells on pseudo-terminals of this process (`nsfleet
//!   exec` without the server): what the server adds. Median and 99th percentile. The
//!   same over HTTPS (`wss:`, a server given a certificate): what TLS adds.
//! - **First render**: a fleet of R nodes opened in headless Chromium, from navigation
//!   to the graph drawn (the page's own `ready` flag); against `nsfleet graph --serve`'s
//!   page of the same fleet, the same drawing with its data in the page.
//! - **The server's memory**: its resident set with the terminals open, and its peak
//!   after the render.

use super::{emit, machine, metric, need_root, note, percentile, ratios, Cli, Common};
use crate::browser::Browser;
use crate::tls::Certificate;
use anyhow::{anyhow, bail, Context};
use nsfleet_results::{Better, Results};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};
use tungstenite::{Message, WebSocket};

/// A terminal's connection: TCP, or TLS over TCP.
trait Wire: Read + Write {}
impl<T: Read + Write> Wire for T {}

pub struct ServeArgs {
    /// Nodes of the fleet the terminals are open in.
    pub nodes: u64,
    /// Terminals open at once.
    pub terminals: u64,
    /// Keys typed into each terminal.
    pub keys: u64,
    /// Nodes of the fleet whose page is rendered.
    pub render_nodes: u64,
    pub common: Common,
}

/// A grid of about `n` nodes (rows x cols), named r1..rN.
fn grid(n: u64) -> String {
    let cols = (n as f64).sqrt().ceil().max(1.0) as u64;
    let rows = n.div_ceil(cols);
    format!("[[generate]]\nkind = \"grid\"\nrows = {rows}\ncols = {cols}\n")
}

pub fn serve(a: ServeArgs) -> anyhow::Result<()> {
    need_root("serve")?;
    let c = &a.common;
    let (nodes, terminals) = (c.size(a.nodes, 100), c.size(a.terminals, 5));
    let (keys, render_nodes) = (c.size(a.keys, 20), c.size(a.render_nodes, 1000));
    let mut m: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    for r in 0..c.repetitions() {
        note(&format!(
            "run {}/{}: {terminals} terminals in {nodes} nodes, {keys} keys each",
            r + 1,
            c.repetitions()
        ));
        // HTTP and HTTPS take turns going first: neither gains from the other's warm-up.
        let typed = keystrokes(nodes, terminals, keys, c.workers, r % 2 == 1)?;
        note(&format!(
            "run {}/{}: the page of {render_nodes} nodes",
            r + 1,
            c.repetitions()
        ));
        let drawn = render(render_nodes, c.workers)?;
        for (k, v) in typed.into_iter().chain(drawn) {
            m.entry(k).or_default().push(v);
        }
    }
    let mut res = Results::new(
        "serve",
        machine(),
        serde_json::json!({"nodes": nodes, "terminals": terminals, "keys": keys, "render_nodes": render_nodes, "runs": c.repetitions(), "quick": c.quick}),
    );
    let ms = |k: &str| m.get(k).cloned().unwrap_or_default();
    for k in [
        "echo_p50_ms",
        "echo_p99_ms",
        "tls_echo_p50_ms",
        "tls_echo_p99_ms",
        "direct_echo_p50_ms",
        "direct_echo_p99_ms",
        "first_render_ms",
        "first_render_fetch_ms",
        "first_render_draw_ms",
        "graph_page_render_ms",
    ] {
        res.metric(k, metric("ms", Better::Lower, ms(k)));
    }
    res.metric(
        "echo_p50_vs_direct",
        metric(
            "x",
            Better::Lower,
            ratios(&ms("echo_p50_ms"), &ms("direct_echo_p50_ms")),
        ),
    );
    res.metric(
        "tls_echo_p50_vs_plain",
        metric(
            "x",
            Better::Lower,
            ratios(&ms("tls_echo_p50_ms"), &ms("echo_p50_ms")),
        ),
    );
    res.metric(
        "first_render_vs_graph_page",
        metric(
            "x",
            Better::Lower,
            ratios(&ms("first_render_ms"), &ms("graph_page_render_ms")),
        ),
    );
    for k in ["server_rss_terminals_mb", "server_peak_after_render_mb"] {
        res.metric(k, metric("MB", Better::Lower, ms(k)));
    }
    emit(
        &res,
        c,
        &format!(
            "the lab server: {terminals} terminals in {nodes} nodes, the page of {render_nodes}"
        ),
    )
}

/// A running `nsfleet serve` of a bench's run folder, ended when dropped.
struct Server {
    child: std::process::Child,
    port: u16,
    token: String,
    /// Its certificate, when it speaks HTTPS.
    tls: Option<Certificate>,
}

impl Server {
    /// The server; over HTTPS with `tls`.
    fn start(cli: &Cli, tls: Option<Certificate>) -> anyhow::Result<Server> {
        let mut serve = cli.command(&["serve", "--json"]);
        if let Some(c) = &tls {
            serve.arg("--cert").arg(&c.cert).arg("--key").arg(&c.key);
        }
        let mut child = serve
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .spawn()?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
        let said: serde_json::Value =
            serde_json::from_str(&line).with_context(|| format!("serve said {line:?}"))?;
        let token_file = said["token_file"]
            .as_str()
            .ok_or_else(|| anyhow!("serve said {said}"))?;
        Ok(Server {
            port: said["port"].as_u64().unwrap_or(0) as u16,
            token: std::fs::read_to_string(token_file)?.trim().to_string(),
            child,
            tls,
        })
    }

    /// Its resident memory now and its peak, MB.
    fn memory(&self) -> (f64, f64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let kb = |key: &str| -> f64 {
            (status.lines().find(|l| l.starts_with(key)))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
                .unwrap_or(0.0)
        };
        (kb("VmRSS:") / 1024.0, kb("VmHWM:") / 1024.0)
    }

    fn terminal(&self, node: &str) -> anyhow::Result<WebSocket<Box<dyn Wire>>> {
        use tungstenite::client::IntoClientRequest;
        let scheme = if self.tls.is_some() { "wss" } else { "ws" };
        let url = format!(
            "{scheme}://localhost:{}/api/v1/fleets/bench/nodes/{node}/terminal",
            self.port
        );
        let mut req = url.into_client_request()?;
        req.headers_mut()
            .insert("Authorization", format!("Bearer {}", self.token).parse()?);
        let tcp = TcpStream::connect(("127.0.0.1", self.port))?;
        tcp.set_read_timeout(Some(Duration::from_secs(30)))?;
        tcp.set_nodelay(true)?;
        let wire: Box<dyn Wire> = match &self.tls {
            None => Box::new(tcp),
            Some(c) => Box::new(c.connect("localhost", tcp)?),
        };
        let (ws, _) =
            tungstenite::client(req, wire).map_err(|e| anyhow!("terminal in {node}: {e}"))?;
        Ok(ws)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: kill(2) of our own child's pid; plain integers.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// Something a key is typed into and its echo read from.
trait Keys {
    fn press(&mut self, key: u8) -> anyhow::Result<()>;
    /// Reads until `key` comes back.
    fn echo(&mut self, key: u8) -> anyhow::Result<()>;
}

impl Keys for WebSocket<Box<dyn Wire>> {
    fn press(&mut self, key: u8) -> anyhow::Result<()> {
        Ok(self.send(Message::binary(vec![key]))?)
    }
    fn echo(&mut self, key: u8) -> anyhow::Result<()> {
        loop {
            match self.read()? {
                Message::Binary(b) if b.contains(&key) => return Ok(()),
                Message::Close(c) => bail!("the terminal closed: {c:?}"),
                _ => {}
            }
        }
    }
}

/// A shell on a pseudo-terminal of this process: `nsfleet exec` as the server runs it.
struct Direct {
    terminal: std::fs::File,
    child: std::process::Child,
}

impl Direct {
    fn open(cli: &Cli, node: &str) -> anyhow::Result<Direct> {
        let (master, slave) = nsfleet::sys::pty::open()?;
        nsfleet::sys::pty::set_size(master.as_fd(), 24, 80)?;
        let mut exec = cli.command(&[
            "exec",
            "bench",
            node,
            "--",
            "sh",
            "-c",
            "exec bash --norc -i",
        ]);
        exec.env("TERM", "xterm-256color");
        nsfleet::sys::pty::run_on(&mut exec, &slave)?;
        let child = exec.spawn()?;
        Ok(Direct {
            terminal: std::fs::File::from(master),
            child,
        })
    }
}

impl Keys for Direct {
    fn press(&mut self, key: u8) -> anyhow::Result<()> {
        Ok(self.terminal.write_all(&[key])?)
    }
    fn echo(&mut self, key: u8) -> anyhow::Result<()> {
        let mut buf = [0u8; 4096];
        loop {
            let n = self.terminal.read(&mut buf)?;
            if n == 0 {
                bail!("the shell ended");
            }
            if buf[..n].contains(&key) {
                return Ok(());
            }
        }
    }
}

impl Drop for Direct {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Each terminal's prompt awaited, then `keys` rounds of one key into each in turn, each
/// timed to its echo (ms). The line is cleared (Ctrl-U) every 50 keys.
fn typed(terms: &mut [impl Keys], keys: u64) -> anyhow::Result<Vec<f64>> {
    for t in terms.iter_mut() {
        // A marker's output, not its echo: the shell reads its terminal.
        for k in b"echo $((6*7))\r" {
            t.press(*k)?;
        }
        t.echo(b'4')?;
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut lat = Vec::new();
    for k in 0..keys {
        for t in terms.iter_mut() {
            let key = b'a' + (k % 26) as u8;
            let t0 = Instant::now();
            t.press(key)?;
            t.echo(key)?;
            lat.push(t0.elapsed().as_secs_f64() * 1e3);
            if k % 50 == 49 {
                t.press(0x15)?;
            }
        }
    }
    Ok(lat)
}

/// One run of the keystrokes: through the server and through a server over HTTPS (that
/// one first if `tls_first`), then directly.
fn keystrokes(
    nodes: u64,
    terminals: u64,
    keys: u64,
    workers: usize,
    tls_first: bool,
) -> anyhow::Result<Vec<(&'static str, f64)>> {
    let up = Cli::new()?.up_with(&grid(nodes), workers)?;
    let cli = up.cli;
    let names: Vec<String> = (1..=terminals.min(nodes))
        .map(|i| format!("r{i}"))
        .collect();
    let through = |tls: Option<Certificate>| -> anyhow::Result<(Vec<f64>, f64)> {
        let server = Server::start(&cli, tls)?;
        let mut ws = Vec::new();
        for n in &names {
            ws.push(server.terminal(n)?);
        }
        let lat = typed(&mut ws, keys)?;
        Ok((lat, server.memory().0))
    };
    let certificate = Certificate::make(&cli.run_dir().join("tls"), "DNS:localhost")?;
    let ((served, rss), (over_tls, _)) = if tls_first {
        let over_tls = through(Some(certificate))?;
        (through(None)?, over_tls)
    } else {
        (through(None)?, through(Some(certificate))?)
    };
    let mut direct = Vec::new();
    for n in &names {
        direct.push(Direct::open(&cli, n)?);
    }
    let local = typed(&mut direct, keys)?;
    drop(direct);
    Ok(vec![
        ("echo_p50_ms", percentile(&served, 50.0)),
        ("echo_p99_ms", percentile(&served, 99.0)),
        ("tls_echo_p50_ms", percentile(&over_tls, 50.0)),
        ("tls_echo_p99_ms", percentile(&over_tls, 99.0)),
        ("direct_echo_p50_ms", percentile(&local, 50.0)),
        ("direct_echo_p99_ms", percentile(&local, 99.0)),
        ("server_rss_terminals_mb", rss),
    ])
}

/// One run of the first render: the workbench's, then `graph --serve`'s page, of one
/// fleet, each in a new page of one Chromium.
fn render(nodes: u64, workers: usize) -> anyhow::Result<Vec<(&'static str, f64)>> {
    let up = Cli::new()?.up_with(&grid(nodes), workers)?;
    let cli = up.cli;
    let server = Server::start(&cli, None)?;
    let profile = cli.run_dir().join("chromium");
    // The cookie first (its redirect is not what is measured), then the page anew.
    let url = format!("http://localhost:{}/?token={}", server.port, server.token);
    let mut b = Browser::open(&url, &profile)?;
    let ready = "document.body.dataset.ready === '1'";
    let within = Duration::from_secs(600);
    b.wait("the workbench", ready, within)?;
    b.wait("its events", LIVE, within)?;
    let first = timed_load(
        &mut b,
        &format!("http://localhost:{}/", server.port),
        ready,
        within,
    )?;
    let part = |b: &mut Browser, key: &str| -> anyhow::Result<f64> {
        let v = b.eval(&format!("Number(document.body.dataset.{key})"))?;
        v.as_f64()
            .ok_or_else(|| anyhow!("no {key} from the page: {v}"))
    };
    let (fetch, draw) = (part(&mut b, "fetchMs")?, part(&mut b, "drawMs")?);
    let (_, peak) = server.memory();
    // nsfleet graph's live page of the same fleet: the same drawing, its data inline.
    let mut graph = cli
        .command(&["graph", "bench", "--serve", "0"])
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let mut said = String::new();
    BufReader::new(graph.stderr.take().expect("piped")).read_line(&mut said)?;
    let port = (said.split("http://127.0.0.1:").nth(1))
        .and_then(|r| r.split('/').next())
        .ok_or_else(|| anyhow!("graph --serve said {said:?}"))?
        .to_string();
    let page = timed_load(&mut b, &format!("http://127.0.0.1:{port}/"), ready, within);
    let _ = graph.kill();
    let _ = graph.wait();
    Ok(vec![
        ("first_render_ms", first),
        ("first_render_fetch_ms", fetch),
        ("first_render_draw_ms", draw),
        ("graph_page_render_ms", page?),
        ("server_peak_after_render_mb", peak),
    ])
}

/// Whether a page (the workbench's or `graph --serve`'s) follows the fleet's events, or
/// was refused them: the supervisor's descriptors may not reach a socket per node (a hard
/// RLIMIT_NOFILE of 20,000 and 10,000 nodes, where root lacks CAP_SYS_RESOURCE).
const LIVE: &str = "['live', 'disconnected'].includes(document.getElementById('live').textContent)";

/// Navigates to `url` and waits for `ready`: the page's own time from its navigation's
/// start to its graph drawn (`readyAt`, its performance.now() then), ms.
fn timed_load(b: &mut Browser, url: &str, ready: &str, within: Duration) -> anyhow::Result<f64> {
    // The page before is gone first (its teardown and its requests are not this one's).
    b.navigate("about:blank")?;
    b.wait(
        "a blank page",
        "location.href === 'about:blank' && document.readyState === 'complete'",
        within,
    )?;
    b.navigate(url)?;
    b.wait(url, ready, within)?;
    let took = b.eval("Number(document.body.dataset.readyAt)")?;
    // Once drawn, the page follows the fleet's events. The supervisor's first watcher of
    // a big fleet starts a watch of every node's links (about 4.5 s at 10,000 nodes,
    // ending or refused) and answers nothing else meanwhile: the next page measured must
    // not wait behind it.
    b.wait("its events", LIVE, within)?;
    took.as_f64()
        .ok_or_else(|| anyhow!("no time from the page: {took}"))
}

//! `nsfleet serve`: the lab server. One process answers for every fleet under the run
//! directory: the workbench page, and the HTTP API it is built on (`/api/v1`, described
//! by `openapi.json`), which scripts use as well.
//!
//! Each connection gets a thread and one request (`Connection: close`); a stream (events,
//! a terminal, a capture) holds its thread while it lasts. A client not yet known (its
//! request not yet read) has 30 s, and at most `socket::Strangers::MAX` of them are
//! waited on at once (a newcomer cuts off the oldest). Asking a fleet goes through its supervisor's socket, as the CLI's
//! commands do, with the client library; what enters a node or outlives a request (a
//! terminal's shell, a capture, `up`) is the `nsfleet` command run as a child, killed
//! when the thread that started it ends: a client that goes away takes its processes
//! with it, and so does the server's end, SIGKILL included.
//!
//! On a loopback address it speaks HTTP; given a certificate and its key (`--cert`,
//! `--key`), HTTPS, which any other address needs: whoever has the token runs shells in
//! the nodes, and neither the token nor the shells' bytes may cross a network in clear.
//!
//! What the server keeps is its folder, `RUN_DIR/serve-PORT/` (its token, 0600, and the
//! topologies `POST /api/v1/fleets` brought up), removed when it ends.

mod api;
mod child;
mod guard;
pub mod http;
mod socket;
mod terminal;
mod tls;

use anyhow::{bail, Context};
use guard::Guard;
use http::{ApiError, Request, Stream};
use nsfleet::rundir::RunDir;
use socket::{Socket, Stranger, Strangers};
use std::io::{BufReader, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub struct ServeArgs {
    pub listen: IpAddr,
    /// 0 picks a free port.
    pub port: u16,
    pub run_dir: PathBuf,
    /// The `nsfleet` program, run for what enters a node or outlives a request.
    pub program: PathBuf,
    /// Say the URL as one JSON object.
    pub json: bool,
    /// The certificate chain and its private key (PEM): HTTPS. Needed for an address
    /// other than loopback.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// More names the server is reached by (as the certificate names it), for the Host
    /// and Origin checks.
    pub hosts: Vec<String>,
}

/// What every connection's thread shares.
pub(crate) struct Server {
    guard: Guard,
    run_dir: PathBuf,
    program: PathBuf,
    folder: Folder,
    /// HTTPS, when the server has a certificate.
    tls: Option<Arc<rustls::ServerConfig>>,
    /// Numbers the topologies written to the folder.
    uploads: AtomicU64,
    /// The connections whose request has not come yet.
    strangers: Arc<Strangers>,
}

impl Server {
    pub(crate) fn rd(&self) -> RunDir {
        RunDir::new(&self.run_dir)
    }

    /// The `nsfleet` command, on this server's run directory.
    pub(crate) fn nsfleet(&self) -> std::process::Command {
        let mut c = std::process::Command::new(&self.program);
        c.arg("--run-dir").arg(&self.run_dir);
        c
    }

    /// A new folder of the server's own for one topology's text.
    pub(crate) fn upload_dir(&self) -> std::io::Result<PathBuf> {
        let n = self.uploads.fetch_add(1, Ordering::Relaxed);
        let dir = self.folder.path.join("topologies").join(n.to_string());
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }
}

/// Serves until SIGINT, SIGTERM or SIGHUP.
pub fn serve(a: ServeArgs) -> anyhow::Result<()> {
    // Everything the command line says is checked before anything is made.
    let tls = match &a.tls {
        Some((cert, key)) => Some(tls::config(cert, key)?),
        None if !a.listen.is_loopback() => bail!(
            "--listen {}: an address other than loopback needs TLS: give --cert FILE and --key FILE (PEM; `openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=NAME -addext subjectAltName=DNS:NAME -keyout key.pem -out cert.pem` makes a self-signed pair). Whoever has the token runs shells in the nodes as root, and without TLS the token would cross the network in clear. Or keep it on loopback and reach it through an SSH tunnel (ssh -L {}:127.0.0.1:{} HOST)",
            a.listen,
            if a.port == 0 { 8080 } else { a.port },
            if a.port == 0 { 8080 } else { a.port },
        ),
        None => None,
    };
    for h in &a.hosts {
        guard::check_host_name(h).with_context(|| format!("--host {h}"))?;
    }
    let rd = RunDir::new(&a.run_dir);
    rd.create()?;
    let listener = TcpListener::bind((a.listen, a.port))
        .with_context(|| format!("cannot listen on {}:{}", a.listen, a.port))?;
    let port = listener.local_addr()?.port();
    let token = guard::new_token().context("reading /dev/urandom for the token")?;
    let names = guard::names(a.listen, &a.hosts);
    let scheme = if tls.is_some() { "https" } else { "http" };
    // The URL names the server as the user asked (`--host`), else by its address, else
    // (listening on every address) by the machine's name.
    let host = (a.hosts.first().map(|h| guard::host_form(h)))
        .or_else(|| (!a.listen.is_unspecified()).then(|| guard::bracketed(a.listen)))
        .or_else(guard::machine_name)
        .unwrap_or_else(|| guard::bracketed(a.listen));
    let url = format!("{scheme}://{host}:{port}/?token={token}");
    let folder = Folder::make(&rd, port, &token, &url)?;
    // Signals are taken by this thread alone; every thread started from here on has them
    // blocked. A peer that goes away is an error on its socket, not a SIGPIPE.
    let signals = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
    let _held = nsfleet::sys::signals::SignalsHeld::new(&signals)?;
    nsfleet::sys::ignore_sigpipe();
    // A terminal holds about five descriptors (its sockets, its terminal, the fleet's
    // events): 1,024 would hold about 200.
    let _ = nsfleet::sys::raise_nofile(65_536);
    let server = Arc::new(Server {
        guard: Guard::new(token, scheme, &names, port),
        run_dir: a.run_dir,
        program: a.program,
        folder,
        tls,
        uploads: AtomicU64::new(0),
        strangers: Arc::default(),
    });
    let accepting = server.clone();
    std::thread::spawn(move || accept(listener, accepting));
    if a.json {
        let token_file = server.folder.path.join("token");
        println!(
            "{}",
            serde_json::json!({ "url": url, "port": port, "token_file": token_file })
        );
    } else {
        println!("{url}");
        eprintln!(
            "nsfleet: serving every fleet under {} on {}:{port} ({scheme}); open the URL above (its token is also in {}). Ctrl-C ends it.",
            rd.root().display(),
            guard::bracketed(a.listen),
            server.folder.path.join("token").display()
        );
    }
    std::io::stdout().flush()?;
    let sig = nsfleet::sys::signals::wait_signal(&signals)?;
    eprintln!("nsfleet: serve: signal {sig}: ending");
    // The children of every connection die with this process (see `child`); its folder
    // is removed now (connections' threads still hold the server).
    server.folder.remove();
    Ok(())
}

fn accept(listener: TcpListener, server: Arc<Server>) {
    for conn in listener.incoming() {
        let conn = match conn {
            Ok(c) => c,
            // Out of descriptors (EMFILE), the connection stays queued: wait, not spin.
            Err(_) => {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let Ok(stranger) = server.strangers.admit(&conn) else {
            continue;
        };
        let server = server.clone();
        std::thread::spawn(move || {
            if let Err(e) = connection(&server, conn, stranger) {
                if !gone(&e) {
                    eprintln!("nsfleet: serve: {e:#}");
                }
            }
        });
    }
}

/// Whether `e` is a peer that went away (from its socket, or a terminal's WebSocket), or
/// one that connected and sent nothing (a browser's preconnection, a scanner): not worth
/// a line.
fn gone(e: &anyhow::Error) -> bool {
    use std::io::ErrorKind::*;
    let io = |e: &std::io::Error| {
        matches!(
            e.kind(),
            BrokenPipe | ConnectionReset | UnexpectedEof | WouldBlock | TimedOut
        )
    };
    match e.downcast_ref::<tungstenite::Error>() {
        Some(tungstenite::Error::Io(e)) => io(e),
        Some(tungstenite::Error::Protocol(p)) => {
            matches!(
                p,
                tungstenite::error::ProtocolError::ResetWithoutClosingHandshake
            )
        }
        _ => e.downcast_ref::<std::io::Error>().is_some_and(io),
    }
}

/// One connection: its request read, checked, and answered.
fn connection(server: &Server, tcp: TcpStream, stranger: Stranger) -> anyhow::Result<()> {
    // Each read and write of a request's body and answer within this; a stream sets its
    // own bounds.
    tcp.set_read_timeout(Some(Duration::from_secs(30)))?;
    tcp.set_write_timeout(Some(Duration::from_secs(30)))?;
    let socket = tcp.try_clone()?;
    // Until its head is read, the client is unknown: the handshake and the head come
    // within this, however slowly their bytes trickle.
    let (head_within, deadline) = Socket::with_deadline(tcp, Duration::from_secs(30))?;
    if server.tls.is_some() {
        let mut first = [0u8; 1];
        if head_within.tcp().peek(&mut first)? == 1 && first[0] != tls::HANDSHAKE {
            return plain_to_https(head_within);
        }
    }
    let stream: Box<dyn Stream> = match &server.tls {
        None => Box::new(head_within),
        Some(config) => Box::new(tls::Tls::new(config, head_within)?),
    };
    let mut reader = BufReader::new(stream);
    let mut request = match http::read_request(&mut reader) {
        Ok(r) => r,
        Err(e) => return Ok(e.send(reader.get_mut())?),
    };
    deadline.lift(Duration::from_secs(30))?;
    // Its token is checked now, without waiting on the client.
    drop(stranger);
    // The body is read only once the request may be answered.
    let checked = (server.guard.check_origin(&request))
        .and_then(|()| authorized(server, &request))
        .and_then(|redirect| http::read_body(&mut reader, &mut request).map(|()| redirect));
    let out = reader.get_mut();
    match checked {
        Err(e) => Ok(e.send(out)?),
        Ok(Some(redirect)) => Ok(http::respond(out, 303, "text/plain", &redirect, b"")?),
        Ok(None) => api::route(server, &request, reader, socket),
    }
}

/// A plain HTTP request to an HTTPS server: its head read (so that the answer is not lost
/// to a reset), and told, in plain HTTP, which scheme to use.
fn plain_to_https(head_within: Socket) -> anyhow::Result<()> {
    let mut reader = BufReader::new(Box::new(head_within) as Box<dyn Stream>);
    let _ = http::read_request(&mut reader);
    let e = ApiError::new(
        400,
        "this server speaks HTTPS: use https://, as in the URL `nsfleet serve` printed",
    );
    Ok(e.send(reader.get_mut())?)
}

/// Whether `r` may be answered: its token checked. The page's first load, `/?token=`,
/// gets the cookie and is sent on to `/` (the token leaves the address bar and history).
fn authorized(server: &Server, r: &Request) -> Result<Option<Vec<String>>, ApiError> {
    if let (Some(shown), "/") = (r.query.get("token"), r.path.as_str()) {
        if !server.guard.is_token(shown) {
            return Err(ApiError::new(
                401,
                "a wrong token: open the URL `nsfleet serve` printed",
            ));
        }
        let cookie = format!(
            "Set-Cookie: {}={}; Path=/; HttpOnly; SameSite=Strict{}",
            server.guard.cookie,
            server.guard.token,
            // Over HTTPS, never sent in clear.
            if server.tls.is_some() { "; Secure" } else { "" }
        );
        return Ok(Some(vec![cookie, "Location: /".into()]));
    }
    server.guard.check_token(r).map(|()| None)
}

/// The server's folder in the run directory: `serve-PORT/`, with `token` (0600) and `url`
/// for scripts, `pid`, and the topologies brought up through the API.
struct Folder {
    path: PathBuf,
}

impl Folder {
    fn make(rd: &RunDir, port: u16, token: &str, url: &str) -> anyhow::Result<Folder> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let path = rd.root().join(format!("serve-{port}"));
        // A folder left by a server that was SIGKILLed on this port (this one holds the
        // port now): its record says its process is gone.
        if server_gone(&path) == Some(true) {
            std::fs::remove_dir_all(&path)
                .with_context(|| format!("removing {}", path.display()))?;
        }
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .with_context(|| format!("making {}", path.display()))?;
        let folder = Folder { path };
        let write = |name: &str, text: &str| -> anyhow::Result<()> {
            let p = folder.path.join(name);
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&p)
                .with_context(|| format!("writing {}", p.display()))?;
            f.write_all(text.as_bytes())?;
            Ok(())
        };
        write("token", &format!("{token}\n"))?;
        write("url", &format!("{url}\n"))?;
        let me = nsfleet::rundir::ProcId::of(std::process::id() as i32)
            .context("reading our own process's start time")?;
        write("pid", &format!("{}\n", serde_json::to_string(&me)?))?;
        Ok(folder)
    }
}

impl Folder {
    fn remove(&self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        self.remove();
    }
}

/// `nsfleet clean --all`'s sweep of the folders of servers that were killed (SIGKILL):
/// removes each `serve-PORT/` whose `pid` record names a process that is gone; returns
/// them. Only folders with that record: nothing matched by name alone.
pub const LEFT_BEHIND: nsfleet_client::clean::Sweep = nsfleet_client::clean::Sweep {
    sweep: sweep_left_behind,
    what: "the folder of an nsfleet serve that was killed",
};

fn sweep_left_behind(rd: &RunDir) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(rd.root()).into_iter().flatten().flatten();
    (entries.map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("serve-"))
        })
        .filter(|p| server_gone(p) == Some(true))
        .filter(|p| std::fs::remove_dir_all(p).is_ok())
        .collect()
}

/// Whether the server that made folder `dir` is gone; `None` when `dir` has no record
/// of one.
fn server_gone(dir: &Path) -> Option<bool> {
    let text = std::fs::read_to_string(dir.join("pid")).ok()?;
    let who: nsfleet::rundir::ProcId = serde_json::from_str(&text).ok()?;
    Some(!who.alive())
}

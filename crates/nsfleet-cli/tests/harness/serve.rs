//! `nsfleet serve` driven as a script drives it: the server started and its first line
//! read, requests with its token, its terminals over WebSockets. The server is ended
//! (SIGTERM) when dropped, and its folder must go with it.

use super::{children_of, signal, wait_until, Env};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A terminal's WebSocket, as a script holds it.
pub type Terminal = tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>;

/// A running `nsfleet serve`, ended (SIGTERM) when dropped; its folder must go with it.
pub struct Server {
    pub child: std::process::Child,
    pub port: u16,
    pub token: String,
    /// Its folder, `RUN_DIR/serve-PORT/`.
    pub folder: std::path::PathBuf,
}

impl Server {
    pub fn start(env: &Env) -> Server {
        Server::spawn(env.cmd(&["serve", "--json"]), |port| {
            format!("http://127.0.0.1:{port}")
        })
    }

    /// `serve --json` run by `cmd`, whose URL must begin with what `base` says of its port.
    pub fn spawn(mut cmd: std::process::Command, base: impl Fn(u16) -> String) -> Server {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let said: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        let token_file = std::path::PathBuf::from(said["token_file"].as_str().unwrap());
        let token = std::fs::read_to_string(&token_file)
            .unwrap()
            .trim()
            .to_string();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&token_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the token file is the user's alone");
        let port = said["port"].as_u64().unwrap() as u16;
        assert_eq!(
            said["url"].as_str().unwrap(),
            format!("{}/?token={token}", base(port))
        );
        Server {
            child,
            port,
            token,
            folder: token_file.parent().unwrap().to_path_buf(),
        }
    }

    pub fn host(&self) -> String {
        format!("localhost:{}", self.port)
    }

    /// A request with `headers` (the Host and the token are the test's to give): its
    /// status and its body as JSON (null when it is not).
    pub fn raw(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, Value) {
        let mut c = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        write!(c, "{head}\r\n{body}").unwrap();
        let mut all = Vec::new();
        c.read_to_end(&mut all).unwrap();
        let all = String::from_utf8_lossy(&all);
        let (head, body) = all.split_once("\r\n\r\n").unwrap_or((&all, ""));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, serde_json::from_str(body).unwrap_or(Value::Null))
    }

    /// A request as a script makes it: the server's Host, the token as a Bearer header.
    pub fn call(&self, method: &str, path: &str, body: &str) -> (u16, Value) {
        let bearer = format!("Bearer {}", self.token);
        self.raw(
            method,
            path,
            &[("Host", &self.host()), ("Authorization", &bearer)],
            body,
        )
    }

    /// [`Server::call`] that must answer `status`.
    pub fn expect(&self, status: u16, method: &str, path: &str, body: &str) -> Value {
        let (got, v) = self.call(method, path, body);
        assert_eq!(got, status, "{method} {path}: {v}");
        v
    }

    /// Waits until every process the server started has ended.
    pub fn wait_childless(&self, what: &str) {
        self.wait_until_children(0, what)
    }

    /// Waits until `n` processes the server started are left.
    pub fn wait_until_children(&self, n: usize, what: &str) {
        wait_until(what, Duration::from_secs(10), || match self.children() {
            left if left.len() == n => Ok(()),
            left => Err(left),
        });
    }

    /// The processes the server started that still run (shells, captures).
    pub fn children(&self) -> Vec<(i32, String)> {
        children_of(self.child.id() as i32)
    }

    /// A WebSocket to a shell in `node` of `fleet`, as a script opens one (the Bearer
    /// header; `origin` as a page would send it).
    pub fn terminal(
        &self,
        fleet: &str,
        node: &str,
        origin: Option<&str>,
    ) -> Result<Terminal, tungstenite::Error> {
        use tungstenite::client::IntoClientRequest;
        let url = format!(
            "ws://{}/api/v1/fleets/{fleet}/nodes/{node}/terminal?cols=100&rows=30",
            self.host()
        );
        let mut req = url.into_client_request().unwrap();
        let bearer = format!("Bearer {}", self.token);
        req.headers_mut()
            .insert("Authorization", bearer.parse().unwrap());
        if let Some(o) = origin {
            req.headers_mut().insert("Origin", o.parse().unwrap());
        }
        let tcp = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let (ws, _) = tungstenite::client(req, tungstenite::stream::MaybeTlsStream::Plain(tcp))
            .map_err(|e| match e {
                tungstenite::HandshakeError::Failure(e) => e,
                tungstenite::HandshakeError::Interrupted(_) => panic!("interrupted"),
            })?;
        Ok(ws)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        signal(self.child.id() as i32, libc::SIGTERM);
        let status = self.child.wait().unwrap();
        if !std::thread::panicking() {
            assert!(status.success(), "serve ended with {status}");
            assert!(!self.folder.exists(), "the server's folder went with it");
        }
    }
}

/// Sends `keys` and reads the screen until it shows `wanted`; what it read.
pub fn type_and_see<S: Read + Write>(
    t: &mut tungstenite::WebSocket<S>,
    keys: &str,
    wanted: &str,
) -> String {
    use tungstenite::Message;
    if !keys.is_empty() {
        t.send(Message::binary(keys.as_bytes().to_vec())).unwrap();
    }
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !seen.contains(wanted) {
        assert!(Instant::now() < deadline, "{wanted:?} not seen in {seen:?}");
        match t.read() {
            Ok(Message::Binary(b)) => seen.push_str(&String::from_utf8_lossy(&b)),
            Ok(Message::Close(c)) => panic!("closed ({c:?}) before {wanted:?}: {seen:?}"),
            Ok(_) => {}
            Err(e) => panic!("{e} before {wanted:?}: {seen:?}"),
        }
    }
    seen
}

/// Reads until the terminal closes: its close frame's reason.
pub fn closed<S: Read + Write>(t: &mut tungstenite::WebSocket<S>) -> String {
    use tungstenite::Message;
    loop {
        match t.read() {
            Ok(Message::Close(Some(c))) => return c.reason.to_string(),
            Ok(Message::Close(None)) => return String::new(),
            Ok(_) => {}
            Err(e) => panic!("no close frame: {e}"),
        }
    }
}

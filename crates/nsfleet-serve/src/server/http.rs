//! HTTP/1.1 as the lab server speaks it: one request per connection (`Connection: close`),
//! its head bounded, its body read whole up to a bound; answers written with their length,
//! or streamed until the stream ends. Errors are [`ApiError`]: a status and the CLI's
//! `--json` error objects, so that a script reads the same fields from both.

use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};

/// The longest request head taken: a URL, a cookie, a few headers.
const MAX_HEAD: usize = 16 << 10;
/// The largest body taken: a topology's text is bounded by the supervisor at far less.
pub const MAX_BODY: usize = 8 << 20;

/// What a connection is read from and written to (a TCP socket; a test's bytes).
pub trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

#[derive(Debug)]
pub struct Request {
    pub method: String,
    /// The path, percent-decoded, without its query.
    pub path: String,
    pub query: HashMap<String, String>,
    /// Header names lower-cased; a repeated header keeps its last value.
    pub headers: HashMap<String, String>,
    /// As its head says; `body` is empty until [`read_body`] has read it.
    pub body_length: usize,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// A cookie's value, from the `Cookie` header.
    pub fn cookie(&self, name: &str) -> Option<&str> {
        (self.header("cookie")?.split(';'))
            .filter_map(|c| c.trim().split_once('='))
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
    }

    /// The body as a JSON value of type `T`, or a 400 saying what is wrong with it.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, ApiError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            ApiError::new(
                400,
                format!("the request's body is not the JSON expected: {e}"),
            )
        })
    }

    /// A query parameter that is true (`?dry_run=true`, `?dry_run=1`, `?dry_run`).
    pub fn flag(&self, name: &str) -> bool {
        matches!(
            self.query.get(name).map(String::as_str),
            Some("" | "1" | "true")
        )
    }
}

/// Reads one request: its head, then as much body as `Content-Length` says.
/// A request's head, and the length of its body, which [`read_body`] reads once the
/// request may be answered: no one without the token makes the server hold 8 MiB.
pub fn read_request(stream: &mut BufReader<Box<dyn Stream>>) -> Result<Request, ApiError> {
    let mut head = Vec::new();
    // The whole head within this, however slowly its bytes come.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if std::time::Instant::now() > deadline {
            return Err(ApiError::new(408, "the request's head took over 30 s"));
        }
        let before = head.len();
        let n = (stream.take((MAX_HEAD + 1 - head.len()) as u64))
            .read_until(b'\n', &mut head)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::TimedOut => {
                    ApiError::new(408, "the request's head took over 30 s")
                }
                _ => ApiError::new(400, format!("reading the request: {e}")),
            })?;
        if n == 0 {
            return Err(ApiError::new(400, "the request ended before its head did"));
        }
        if head.len() > MAX_HEAD {
            return Err(ApiError::new(431, "the request's head is over 16 KiB"));
        }
        if matches!(&head[before..], b"\r\n" | b"\n") {
            break;
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Request::new(&mut headers);
    match parsed.parse(&head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => {
            return Err(ApiError::new(400, "an incomplete request head"))
        }
        Err(e) => return Err(ApiError::new(400, format!("a malformed request head: {e}"))),
    }
    let method = parsed.method.unwrap_or("GET").to_string();
    let target = parsed.path.unwrap_or("/");
    let headers: HashMap<String, String> = (parsed.headers.iter())
        .map(|h| {
            let value = String::from_utf8_lossy(h.value).trim().to_string();
            (h.name.to_ascii_lowercase(), value)
        })
        .collect();
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let query = (query.split('&'))
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (decode(k, true), decode(v, true))
        })
        .collect();
    let length: usize = match headers.get("content-length") {
        None => 0,
        Some(n) => n
            .parse()
            .map_err(|_| ApiError::new(400, format!("Content-Length {n:?} is not a number")))?,
    };
    if headers.contains_key("transfer-encoding") {
        return Err(ApiError::new(
            411,
            "a chunked body is not taken: send Content-Length",
        ));
    }
    if length > MAX_BODY {
        return Err(ApiError::new(
            413,
            format!("a body of {length} bytes: at most {MAX_BODY} are taken"),
        ));
    }
    Ok(Request {
        method,
        path: decode(path, false),
        query,
        headers,
        body_length: length,
        body: Vec::new(),
    })
}

/// Reads `r`'s body, as long as its head said. A client that asked to be told first
/// (`Expect: 100-continue`, as curl does for large bodies) is told.
pub fn read_body(stream: &mut BufReader<Box<dyn Stream>>, r: &mut Request) -> Result<(), ApiError> {
    if r.body_length == 0 {
        return Ok(());
    }
    let continued = r
        .header("expect")
        .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"));
    if continued {
        let said = stream.get_mut().write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
        said.map_err(|e| ApiError::new(400, format!("answering Expect: {e}")))?;
    }
    let mut body = Vec::with_capacity(r.body_length.min(64 << 10));
    let read = (stream.take(r.body_length as u64)).read_to_end(&mut body);
    match read {
        Ok(n) if n == r.body_length => {
            r.body = body;
            Ok(())
        }
        Ok(n) => Err(ApiError::new(
            400,
            format!(
                "the request's body ended after {n} of {} bytes",
                r.body_length
            ),
        )),
        Err(e) => Err(ApiError::new(
            400,
            format!("reading the request's body: {e}"),
        )),
    }
}

/// `%2F` as it was meant, and in a query (`query`) `+` as the space it stands for.
fn decode(s: &str, query: bool) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' if query => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The headers every answer has: nothing cached, no type guessed, and no page of another
/// origin may frame ours (a click there must not land on our buttons).
const SAFE: &str = "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\nContent-Security-Policy: frame-ancestors 'none'\r\n";

/// An answer with a body of known length. `extra` are whole header lines.
pub fn respond(
    out: &mut dyn Write,
    status: u16,
    kind: &str,
    extra: &[String],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n{SAFE}Connection: close\r\n",
        reason(status),
        body.len()
    );
    for h in extra {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    out.write_all(body)?;
    out.flush()
}

/// The head of an answer streamed until the connection closes.
pub fn stream_head(out: &mut dyn Write, kind: &str, extra: &[String]) -> std::io::Result<()> {
    let mut head =
        format!("HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\n{SAFE}Connection: close\r\n");
    for h in extra {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    out.flush()
}

pub fn json_ok(out: &mut dyn Write, status: u16, v: &Value) -> std::io::Result<()> {
    respond(
        out,
        status,
        "application/json",
        &[],
        format!("{v}\n").as_bytes(),
    )
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        303 => "See Other",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        422 => "Unprocessable Content",
        431 => "Request Header Fields Too Large",
        _ => "Internal Server Error",
    }
}

/// Waits until `source` is readable, or the client of a stream has gone: a closed
/// connection reads as its end (what else a client sends on a stream is read and
/// dropped). Whether `source` is readable; `false` when the client has gone.
pub fn until_readable(
    source: std::os::fd::BorrowedFd,
    socket: &std::net::TcpStream,
) -> std::io::Result<bool> {
    use std::os::fd::AsFd;
    loop {
        let ready = nsfleet::sys::poll::poll_events(
            &[(source, libc::POLLIN), (socket.as_fd(), libc::POLLIN)],
            None,
        )?;
        if ready[0] != 0 {
            return Ok(true);
        }
        let mut dropped = [0u8; 4096];
        if !matches!((&*socket).read(&mut dropped), Ok(n) if n > 0) {
            return Ok(false);
        }
    }
}

/// What the client library and the supervisor say of a fleet, node or interface that
/// does not exist: a 404.
pub const MISSING: [&str; 5] = [
    "has no node",
    "has no interface",
    "no fleet named",
    "no node named",
    // A capture's `r1:eth9: no interface "eth9" (it has ...)`.
    "no interface \"",
];

/// A request refused or failed: its HTTP status, and the CLI's `--json` error objects
/// (`{"message", "file", "line", "column"}`), one per error.
#[derive(Debug)]
pub struct ApiError {
    pub status: u16,
    pub errors: Vec<Value>,
}

impl ApiError {
    pub fn new(status: u16, message: impl Into<String>) -> ApiError {
        let message = message.into();
        ApiError {
            status,
            errors: vec![json!({"message": message, "file": null, "line": null, "column": null})],
        }
    }

    /// A failure of the client library, with its places when it is about a topology's
    /// text: a 404 when it says a fleet, node or interface does not exist, else `status`
    /// (422 for what was refused, a topology or a change the kernel would not make; 500
    /// for what should have worked).
    pub fn from_client(e: &anyhow::Error, status: u16) -> ApiError {
        let errors: Vec<Value> = (nsfleet_client::errors::objects(e).into_iter())
            .map(|mut o| o["error"].take())
            .collect();
        let message = format!("{e:#}");
        let missing = MISSING.iter().any(|m| message.contains(m));
        let status = if missing { 404 } else { status };
        ApiError { status, errors }
    }

    pub fn body(&self) -> Value {
        json!({ "error": self.errors[0], "errors": self.errors })
    }

    pub fn send(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let ask = ["WWW-Authenticate: Bearer".to_string()];
        let extra: &[String] = if self.status == 401 { &ask } else { &[] };
        let body = format!("{}\n", self.body());
        respond(out, self.status, "application/json", extra, body.as_bytes())
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(e: anyhow::Error) -> ApiError {
        ApiError::from_client(&e, 422)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &str) -> Result<Request, ApiError> {
        let stream: Box<dyn Stream> = Box::new(std::io::Cursor::new(raw.as_bytes().to_vec()));
        let mut stream = BufReader::new(stream);
        let mut r = read_request(&mut stream)?;
        read_body(&mut stream, &mut r)?;
        Ok(r)
    }

    #[test]
    fn a_request_its_query_its_cookie_and_its_body() {
        let r = parse("POST /api/v1/fleets/a%20b/apply?dry_run=true&x=a+b HTTP/1.1\r\nHost: localhost:1\r\nCookie: x=1; nsfleet=abc\r\nContent-Length: 2\r\n\r\n{}").unwrap();
        assert_eq!(
            (r.method.as_str(), r.path.as_str()),
            ("POST", "/api/v1/fleets/a b/apply")
        );
        assert!(r.flag("dry_run") && !r.flag("wet"));
        assert_eq!(r.query["x"], "a b");
        assert_eq!(r.cookie("nsfleet"), Some("abc"));
        assert_eq!(r.body, b"{}");
        assert_eq!(r.header("host"), Some("localhost:1"));
    }

    #[test]
    fn a_plus_is_a_space_in_a_query_only() {
        let r = parse("GET /a+b?c=d+e HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!((r.path.as_str(), r.query["c"].as_str()), ("/a+b", "d e"));
        let short = parse("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n{}").unwrap_err();
        assert_eq!(short.status, 400);
    }

    #[test]
    fn bad_requests_are_said() {
        assert_eq!(
            parse("GET / HTTP/1.1\r\nHost: x\r\n").unwrap_err().status,
            400
        );
        assert_eq!(parse("NOT A REQUEST\r\n\r\n").unwrap_err().status, 400);
        let big = format!("GET / HTTP/1.1\r\nContent-Length: {}\r\n\r\n", MAX_BODY + 1);
        assert_eq!(parse(&big).unwrap_err().status, 413);
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_HEAD));
        assert_eq!(parse(&long).unwrap_err().status, 431);
        let e = parse("GET / HTTP/1.1\r\nContent-Length: 1\r\n\r\n{").unwrap();
        let e = e.json::<Value>().unwrap_err();
        assert_eq!(e.status, 400);
        assert!(e.body()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not the JSON"));
    }
}

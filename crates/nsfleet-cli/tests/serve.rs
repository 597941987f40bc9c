//! `nsfleet serve`: the lab server's HTTP API driven as a script drives it (a fleet up,
//! cables, nodes, apply, events, a capture, down), its terminals over WebSockets on real
//! pseudo-terminals, the workbench page in Chromium, and everything refused: no or a
//! wrong token, a foreign Host or Origin, what does not exist, bad bodies and topologies,
//! clients that go away. Nothing is left: no process, no terminal, no folder.

mod harness;

use harness::serve::*;
use harness::*;
use nsfleet_bench::tls::{Certificate, TlsStream};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::Duration;

const LAB: &str = "[fleet]\nname = \"sv\"\n[[switch]]\nname = \"s1\"\n[[node]]\nname = \"r1\"\nrouter = true\ncommands = [\"sleep infinity\"]\n[[node]]\nname = \"h1\"\ncommands = [\"sleep infinity\"]\n[[node]]\nname = \"h2\"\n[[link]]\na = { at = \"r1:eth0\", addrs = [\"10.8.0.1/24\"] }\nb = \"s1\"\n[[link]]\na = { at = \"h1:eth0\", addrs = [\"10.8.0.2/24\"] }\nb = \"s1\"\n[[link]]\na = { at = \"r1:eth1\", addrs = [\"10.9.0.1/30\"] }\nb = { at = \"h2:eth0\", addrs = [\"10.9.0.2/30\"] }\n";

/// An error answer's first error, as the CLI's `--json` says one.
fn error(v: &Value) -> &Value {
    assert!(v["errors"].is_array(), "{v}");
    &v["error"]
}

#[test]
fn only_a_request_with_the_token_from_this_servers_own_origin_is_answered() {
    let env = Env::new("serveguard");
    let s = Server::start(&env);
    let bearer = format!("Bearer {}", s.token);
    let host = s.host();
    type Headers<'a> = &'a [(&'a str, &'a str)];
    let cases: [(Headers, u16, &str); 6] = [
        (&[("Host", &host)], 401, "no token"),
        (
            &[("Host", &host), ("Authorization", "Bearer 00")],
            401,
            "a wrong token",
        ),
        (
            &[("Host", &host), ("Cookie", "nsfleet_token_1=x")],
            401,
            "no token",
        ),
        (
            &[("Host", "evil.example"), ("Authorization", &bearer)],
            403,
            "Host \"evil.example\" is not this server's",
        ),
        (&[("Authorization", &bearer)], 403, "Host \"\""),
        (
            &[
                ("Host", &host),
                ("Authorization", &bearer),
                ("Origin", "http://evil.example"),
            ],
            403,
            "only this server's own pages",
        ),
    ];
    for (headers, status, said) in cases {
        let (got, v) = s.raw("GET", "/api/v1/fleets", headers, "");
        assert_eq!(got, status, "{headers:?}: {v}");
        let message = error(&v)["message"].as_str().unwrap();
        assert!(message.contains(said), "{headers:?}: {message}");
        assert!(error(&v)["file"].is_null() && error(&v)["line"].is_null());
    }
    // Its own page's origin is answered.
    let origin = format!("http://{host}");
    let (got, v) = s.raw(
        "GET",
        "/api/v1/fleets",
        &[
            ("Host", &host),
            ("Authorization", &bearer),
            ("Origin", &origin),
        ],
        "",
    );
    assert_eq!((got, v), (200, json!({ "fleets": [] })));

    // The page's first load sets the cookie and leaves the token out of the address.
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    write!(
        c,
        "GET /?token={} HTTP/1.1\r\nHost: {host}\r\n\r\n",
        s.token
    )
    .unwrap();
    let mut head = String::new();
    c.read_to_string(&mut head).unwrap();
    assert!(head.starts_with("HTTP/1.1 303"), "{head}");
    let cookie = format!(
        "Set-Cookie: nsfleet_token_{}={}; Path=/; HttpOnly; SameSite=Strict",
        s.port, s.token
    );
    assert!(
        head.contains(&cookie) && head.contains("Location: /\r\n"),
        "{head}"
    );
    let (got, _) = s.raw("GET", "/?token=nope", &[("Host", &host)], "");
    assert_eq!(got, 401);
    let with_cookie = format!("nsfleet_token_{}={}", s.port, s.token);
    let (got, _) = s.raw(
        "GET",
        "/api/v1/openapi.json",
        &[("Host", &host), ("Cookie", &with_cookie)],
        "",
    );
    assert_eq!(got, 200);

    // What does not exist, and bodies that are not what a path takes.
    let api = s.expect(200, "GET", "/api/v1/openapi.json", "");
    assert_eq!(
        api["openapi"].as_str().map(|v| &v[..2]),
        Some("3."),
        "{api}"
    );
    assert!(api["paths"]["/api/v1/fleets/{fleet}/nodes/{node}/terminal"].is_object());
    let missing = s.expect(404, "GET", "/api/v1/fleets/nope", "");
    assert!(error(&missing)["message"]
        .as_str()
        .unwrap()
        .contains("no fleet named \"nope\""));
    s.expect(404, "GET", "/api/v1/nothing", "");
    s.expect(405, "PUT", "/api/v1/fleets", "");
    let malformed = s.expect(400, "POST", "/api/v1/fleets", "{\"topology\": ");
    assert!(error(&malformed)["message"]
        .as_str()
        .unwrap()
        .contains("not the JSON expected"));
    s.expect(
        400,
        "POST",
        "/api/v1/fleets",
        "{\"topology\": \"\", \"colour\": 1}",
    );
    // A topology that does not validate: its errors, each at its place, and no fleet.
    let bad = json!({ "topology": "[fleet]\nname = \"x\"\n[[node]]\nname = \"a b\"\n", "file": "lab.toml" });
    let v = s.expect(422, "POST", "/api/v1/fleets", &bad.to_string());
    let e = error(&v);
    assert_eq!(
        (e["file"].as_str(), e["line"].as_u64(), e["column"].as_u64()),
        (Some("lab.toml"), Some(4), Some(8)),
        "{v}"
    );
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .starts_with("node name \"a b\" may contain only"),
        "{v}"
    );
    assert_eq!(
        s.expect(200, "GET", "/api/v1/fleets", ""),
        json!({ "fleets": [] }),
        "nothing was brought up"
    );
    // A body too large is refused from its length, before it is read.
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    write!(c, "POST /api/v1/fleets HTTP/1.1\r\nHost: {host}\r\nAuthorization: {bearer}\r\nContent-Length: {}\r\n\r\n", 9 << 20).unwrap();
    let mut answer = String::new();
    c.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");

    // A server killed (SIGKILL) leaves its folder, which `clean --all` finds by its
    // record and removes; the running one's stays.
    let mut killed = Server::start(&env);
    signal(killed.child.id() as i32, libc::SIGKILL);
    killed.child.wait().unwrap();
    assert!(killed.folder.exists());
    let said = env.ok(&["clean", "--all"]);
    assert!(
        said.contains(&format!(
            "removed {} (the folder of an nsfleet serve that was killed)",
            killed.folder.display()
        )),
        "{said}"
    );
    assert!(!killed.folder.exists() && s.folder.exists());
    std::mem::forget(killed);
}

/// The descriptors a process holds.
fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

#[test]
fn silent_clients_are_cut_off_oldest_first_for_those_who_ask() {
    let env = Env::new("servestrangers");
    let s = Server::start(&env);
    let before = descriptors(s.child.id());
    // As many silent clients as the server waits on at once (`Strangers::MAX`): each has
    // its 30 s to send a request.
    let mut silent: Vec<TcpStream> = (0..128)
        .map(|_| TcpStream::connect(("127.0.0.1", s.port)).unwrap())
        .collect();
    // A client with a request is answered all the same: the silent one waited on
    // longest is cut off for it, the others wait on.
    s.expect(200, "GET", "/api/v1/fleets", "");
    let mut byte = [0u8; 1];
    silent[0]
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert!(
        matches!(silent[0].read(&mut byte), Ok(0) | Err(_)),
        "the oldest silent client is cut off"
    );
    silent[1].set_nonblocking(true).unwrap();
    let waiting = silent[1].read(&mut byte).unwrap_err();
    assert_eq!(waiting.kind(), std::io::ErrorKind::WouldBlock);
    // Once they go, the server holds what it held before.
    silent.clear();
    wait_until(
        "the silent clients' threads end",
        Duration::from_secs(10),
        || match descriptors(s.child.id()) {
            n if n <= before => Ok(()),
            n => Err(n),
        },
    );
    s.expect(200, "GET", "/api/v1/fleets", "");
}

#[test]
fn a_fleet_is_driven_over_http_as_a_script_drives_it() {
    let env = Env::new("serveapi");
    let s = Server::start(&env);
    // Up from a file's text.
    let up = json!({ "topology": LAB, "file": "sv.toml" });
    // Its guard first: a failed assertion must still take the fleet down.
    let _f = Fleet {
        env: &env,
        name: "sv".into(),
    };
    let v = s.expect(201, "POST", "/api/v1/fleets", &up.to_string());
    assert_eq!(v["name"], "sv", "as `up --json` says it: {v}");
    s.expect(409, "POST", "/api/v1/fleets", &up.to_string());
    let fleets = s.expect(200, "GET", "/api/v1/fleets", "");
    assert_eq!(fleets["fleets"][0]["name"], "sv");
    assert_eq!(fleets["fleets"][0]["node_count"], 4);
    let fleet = s.expect(200, "GET", "/api/v1/fleets/sv", "");
    let names: Vec<&str> = fleet["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 4, "{fleet}");
    let h1 = fleet["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "h1")
        .unwrap();
    assert_eq!(h1["interfaces"][0], "eth0 10.8.0.2/24");
    assert!(h1["x"].is_number() && fleet["links"].as_array().unwrap().len() == 3);
    assert_eq!(fleet["state"]["down"], json!([]));

    // The events, followed as the page follows them.
    let mut events = sse(&s, "/api/v1/fleets/sv/events");
    // A cable pulled: this end down, the peer without carrier; then plugged back.
    let v = s.expect(
        200,
        "POST",
        "/api/v1/fleets/sv/links/r1:eth1",
        "{\"state\": \"down\"}",
    );
    assert_eq!(
        (
            v["end"]["up"].as_bool(),
            v["far"]["node"].as_str(),
            v["far"]["carrier"].as_bool()
        ),
        (Some(false), Some("h2"), Some(false)),
        "{v}"
    );
    wait_event(&mut events, |e| {
        e["event"] == "link" && e["node"] == "h2" && e["state"] == "no-carrier"
    });
    let state = s.expect(200, "GET", "/api/v1/fleets/sv/state", "");
    assert!(
        state["down"]
            .as_array()
            .unwrap()
            .contains(&json!("h2:eth0")),
        "{state}"
    );
    s.expect(
        200,
        "POST",
        "/api/v1/fleets/sv/links/r1:eth1",
        "{\"state\": \"up\"}",
    );
    wait_event(&mut events, |e| {
        e["event"] == "link" && e["node"] == "h2" && e["state"] == "up"
    });
    // An impairment (this kernel has tbf, not netem), read back, and cleared.
    let v = s.expect(
        200,
        "POST",
        "/api/v1/fleets/sv/links/h2:eth0",
        "{\"impair\": {\"rate\": \"10mbit\"}}",
    );
    assert_eq!(v["impair"]["rate_bps"], 10_000_000, "{v}");
    let v = s.expect(200, "GET", "/api/v1/fleets/sv/links/h2:eth0", "");
    assert_eq!(v["impair"]["rate_bps"], 10_000_000, "{v}");
    let state = s.expect(200, "GET", "/api/v1/fleets/sv/state", "");
    assert_eq!(state["impaired"]["h2:eth0"], "rate 10mbit", "{state}");
    let v = s.expect(
        200,
        "POST",
        "/api/v1/fleets/sv/links/h2:eth0",
        "{\"impair\": null}",
    );
    assert!(v["impair"].is_null(), "{v}");
    s.expect(
        400,
        "POST",
        "/api/v1/fleets/sv/links/h2:eth0",
        "{\"impair\": {\"rate\": \"fast\"}}",
    );
    s.expect(
        400,
        "POST",
        "/api/v1/fleets/sv/links/h2:eth0",
        "{\"state\": \"sideways\"}",
    );
    s.expect(400, "POST", "/api/v1/fleets/sv/links/h2:eth0", "{}");
    s.expect(
        404,
        "POST",
        "/api/v1/fleets/sv/links/h2:eth7",
        "{\"state\": \"down\"}",
    );
    s.expect(
        404,
        "POST",
        "/api/v1/fleets/sv/links/h9:eth0",
        "{\"state\": \"down\"}",
    );
    // A node's processes stopped and started.
    let v = s.expect(
        200,
        "POST",
        "/api/v1/fleets/sv/nodes/h1",
        "{\"action\": \"stop\"}",
    );
    assert_eq!(v["processes"], json!([]), "{v}");
    wait_event(&mut events, |e| {
        e["event"] == "node" && e["node"] == "h1" && e["action"] == "stopped"
    });
    let v = s.expect(
        200,
        "POST",
        "/api/v1/fleets/sv/nodes/h1",
        "{\"action\": \"start\"}",
    );
    assert_eq!(v["processes"][0]["running"], true, "{v}");
    let v = s.expect(
        404,
        "POST",
        "/api/v1/fleets/sv/nodes/h9",
        "{\"action\": \"stop\"}",
    );
    assert!(
        error(&v)["message"]
            .as_str()
            .unwrap()
            .contains("has no node \"h9\""),
        "{v}"
    );
    s.expect(
        400,
        "POST",
        "/api/v1/fleets/sv/nodes/h1",
        "{\"action\": \"fly\"}",
    );

    // A capture streamed as pcapng while h1 pings r1, read by tcpdump.
    let pcap = env.files.join("sv.pcapng");
    let mut reader = capture(
        &s,
        "/api/v1/fleets/sv/capture?ifaces=r1:eth0&filter=icmp&count=4",
    );
    env.ok(&[
        "exec", "sv", "h1", "--", "ping", "-c", "2", "-i", "0.2", "10.8.0.1",
    ]);
    let mut bytes = Vec::new();
    reader.read_to_end(&mut bytes).unwrap();
    std::fs::write(&pcap, &bytes).unwrap();
    let read = std::process::Command::new("tcpdump")
        .args(["-nr"])
        .arg(&pcap)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&read.stdout);
    assert_eq!(text.matches("ICMP echo").count(), 4, "{text}");
    // Everything wrong is said before the first byte.
    let v = s.expect(404, "GET", "/api/v1/fleets/sv/capture?ifaces=r1:eth9", "");
    assert!(
        error(&v)["message"].as_str().unwrap().contains("eth9"),
        "{v}"
    );
    s.expect(
        400,
        "GET",
        "/api/v1/fleets/sv/capture?ifaces=r1:eth0&filter=icmpp",
        "",
    );
    s.expect(400, "GET", "/api/v1/fleets/sv/capture", "");
    // A client that goes away mid-capture takes the capture with it.
    drop(capture(&s, "/api/v1/fleets/sv/capture?ifaces=r1:eth0"));
    s.wait_childless("the capture ends with its client");

    // apply: the plan, dry; a refused file, placed; then the change.
    let changed = LAB.replace("10.8.0.2/24", "10.8.0.3/24");
    let body = json!({ "topology": changed, "file": "sv.toml" }).to_string();
    let plan = s.expect(200, "POST", "/api/v1/fleets/sv/apply?dry_run=true", &body);
    assert_eq!(
        plan["changes"],
        json!([{ "op": "change", "object": "h1:eth0", "detail": "addresses 10.8.0.2/24 -> 10.8.0.3/24" }])
    );
    assert_eq!(plan["applied"], false);
    let wrong = json!({ "topology": format!("{LAB}[[node]]\nnam = \"x\"\n"), "file": "sv.toml" });
    let v = s.expect(422, "POST", "/api/v1/fleets/sv/apply", &wrong.to_string());
    assert_eq!(
        (error(&v)["file"].as_str(), error(&v)["line"].as_u64()),
        (Some("sv.toml"), Some(24)),
        "{v}"
    );
    let done = s.expect(200, "POST", "/api/v1/fleets/sv/apply", &body);
    assert_eq!(done["applied"], true, "{done}");
    let fleet = s.expect(200, "GET", "/api/v1/fleets/sv", "");
    let h1 = fleet["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "h1")
        .unwrap()
        .clone();
    assert_eq!(h1["interfaces"][0], "eth0 10.8.0.3/24");

    // Down: the events stream ends with the fleet.
    s.expect(200, "DELETE", "/api/v1/fleets/sv", "");
    wait_event(&mut events, |e| e["event"] == "fleet_down");
    s.expect(404, "DELETE", "/api/v1/fleets/sv", "");
    assert!(s.children().is_empty());
}

/// A server-sent-events stream of `path`, read up to its first comment.
fn sse(s: &Server, path: &str) -> BufReader<TcpStream> {
    stream(s, path, ": watching\n")
}

/// A GET of `path` whose answer streams on, read up to the line `until`.
fn stream(s: &Server, path: &str, until: &str) -> BufReader<TcpStream> {
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\r\n",
        s.host(),
        s.token
    )
    .unwrap();
    let mut r = BufReader::new(c);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    while line != until {
        line.clear();
        r.read_line(&mut line).unwrap();
    }
    r
}

/// Reads events until one is `wanted`.
fn wait_event(r: &mut BufReader<TcpStream>, wanted: impl Fn(&Value) -> bool) -> Value {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(r.read_line(&mut line).unwrap() > 0, "the events ended");
        if let Some(data) = line.strip_prefix("data: ") {
            let e: Value = serde_json::from_str(data).unwrap();
            if wanted(&e) {
                return e;
            }
        }
    }
}

/// A capture's stream, its head read: what follows is pcapng.
fn capture(s: &Server, path: &str) -> BufReader<TcpStream> {
    stream(s, path, "\r\n")
}

#[test]
fn a_terminal_is_a_shell_in_the_node_on_a_real_terminal() {
    use tungstenite::Message;
    let env = Env::new("serveterm");
    let _f = env.up(LAB);
    let s = Server::start(&env);

    let mut t = s.terminal("sv", "r1", None).unwrap();
    // The node's shell: its hostname, its addresses; a terminal that says its size.
    let seen = type_and_see(
        &mut t,
        "hostname; ip -br addr show eth1; stty size; tput colors; echo done-$((1+1))\r",
        "done-2",
    );
    for shown in ["10.9.0.1/30", "\r\n30 100\r\n", "\r\n256\r\n"] {
        assert!(seen.contains(shown), "{shown:?} in {seen:?}");
    }
    t.send(Message::text(r#"{"resize": {"cols": 132, "rows": 40}}"#))
        .unwrap();
    type_and_see(&mut t, "stty size\r", "40 132");
    // Ctrl-C ends what runs in the foreground, as in any terminal.
    type_and_see(&mut t, "sleep 60; echo slept-$((6*7))\r", "sleep 60");
    std::thread::sleep(Duration::from_millis(300));
    let seen = type_and_see(&mut t, "\x03echo after-$((6*7))\r", "after-42");
    assert!(!seen.contains("slept-42"), "{seen}");
    // A paste far larger than the terminal's buffers, into a command that reads it all.
    type_and_see(&mut t, "stty -echo; wc -c; stty echo\r", "stty -echo");
    std::thread::sleep(Duration::from_millis(300));
    let paste = "0123456789abcdefghijklmnopqrstuvwxyz\n".repeat(16 << 10);
    t.send(Message::binary(paste.into_bytes())).unwrap();
    t.send(Message::binary(b"\x04".to_vec())).unwrap();
    type_and_see(&mut t, "", &format!("{}", 37 * (16 << 10)));
    // The shell's end is the terminal's, even with a job it left holding the terminal
    // open and writing to it (as a window closes when its shell ends; the job ends with
    // its next write once the terminal is gone).
    t.send(Message::binary(
        b"(while echo x; do :; done) & exit 3\r".to_vec(),
    ))
    .unwrap();
    assert_eq!(closed(&mut t), "the shell in r1 ended (exit status 3)");

    // A terminal the page closes takes its shell with it.
    let mut t = s.terminal("sv", "h1", None).unwrap();
    type_and_see(&mut t, "echo $((40+2))\r", "42");
    assert_eq!(s.children().len(), 1, "one shell");
    t.close(None).unwrap();
    let _ = closed(&mut t);
    drop(t);
    s.wait_childless("the shell ends with its terminal");

    // A node a terminal is open in is not removed by apply (as for `nsfleet exec`).
    let mut t = s.terminal("sv", "h2", None).unwrap();
    // Its output, not the terminal's echo of what was typed: the shell is up.
    type_and_see(&mut t, "echo $((20+22))-ready\r", "42-ready");
    let without_h2 = LAB.split("[[node]]\nname = \"h2\"\n").next().unwrap().to_string()
        + "[[link]]\na = { at = \"r1:eth0\", addrs = [\"10.8.0.1/24\"] }\nb = \"s1\"\n[[link]]\na = { at = \"h1:eth0\", addrs = [\"10.8.0.2/24\"] }\nb = \"s1\"\n";
    let body = json!({ "topology": without_h2, "file": "sv.toml" }).to_string();
    let v = s.expect(422, "POST", "/api/v1/fleets/sv/apply", &body);
    assert!(
        error(&v)["message"]
            .as_str()
            .unwrap()
            .contains("would remove node h2, which nsfleet exec runs in"),
        "{v}"
    );

    // Refused before any shell starts: a node that does not exist, a foreign page, no
    // WebSocket.
    match s.terminal("sv", "h9", None) {
        Err(tungstenite::Error::Http(r)) => assert_eq!(r.status(), 404),
        other => panic!("{:?}", other.map(|_| ())),
    }
    match s.terminal("sv", "r1", Some("http://evil.example")) {
        Err(tungstenite::Error::Http(r)) => assert_eq!(r.status(), 403),
        other => panic!("{:?}", other.map(|_| ())),
    }
    s.expect(400, "GET", "/api/v1/fleets/sv/nodes/r1/terminal", "");
    assert_eq!(s.children().len(), 1, "h2's shell only");

    // The fleet goes down under an open terminal: closed, saying why, its shell gone.
    s.expect(200, "DELETE", "/api/v1/fleets/sv", "");
    assert_eq!(closed(&mut t), "fleet sv went down");
    s.wait_childless("the shell ends with its fleet");
}

/// The page in headless Chromium (nsfleet-bench's driver), failing the test on any error.
struct Page(nsfleet_bench::browser::Browser);

impl Page {
    fn eval(&mut self, expression: &str) -> Value {
        self.0.eval(expression).unwrap()
    }

    fn wait(&mut self, what: &str, expression: &str) {
        self.0
            .wait(what, expression, Duration::from_secs(30))
            .unwrap()
    }

    fn type_text(&mut self, text: &str) {
        self.0.type_line(text).unwrap()
    }

    /// The page as a PNG in `png`; also in NSFLEET_SCREENSHOTS, for the guide
    /// (NSFLEET_SCREENSHOTS=docs/images cargo test --test serve workbench).
    fn screenshot(&mut self, png: &std::path::Path) {
        let bytes = self.0.screenshot().unwrap();
        assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000);
        std::fs::write(png, &bytes).unwrap();
        if let Some(dir) = std::env::var_os("NSFLEET_SCREENSHOTS") {
            std::fs::write(
                std::path::Path::new(&dir).join(png.file_name().unwrap()),
                bytes,
            )
            .unwrap();
        }
    }
}

/// An address other than loopback: refused without a certificate; with one (made here by
/// openssl), HTTPS that curl checks against it, on the address and on the certificate's
/// name; plain HTTP and foreign names refused; a terminal over `wss:` with a paste larger
/// than TLS's buffers; a stream that ends with its connection ends cleanly
/// (close_notify). The server listens in a network namespace of its own, on a
/// veth's address: nothing of the host's is opened to its network.
#[test]
fn on_another_address_it_speaks_https_with_the_certificate_it_is_given() {
    use tungstenite::Message;
    let env = Env::new("servetls");
    let refused = env
        .cmd(&["serve", "--listen", "10.77.0.1"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.contains("needs TLS: give --cert FILE and --key FILE"),
        "{said}"
    );
    // Refused before anything is made: no server's folder.
    let folders = std::fs::read_dir(&env.run_dir)
        .into_iter()
        .flatten()
        .flatten();
    assert_eq!(
        folders.count(),
        0,
        "nothing made in {}",
        env.run_dir.display()
    );

    let tls = certificate(&env, "DNS:lab.test,IP:10.77.0.1");
    let _f = env.up(LAB);
    let s = Server::spawn(
        in_own_netns(env.cmd(&[
            "serve",
            "--json",
            "--listen",
            "10.77.0.1",
            "--host",
            "lab.test",
            "--cert",
            arg(&tls.cert),
            "--key",
            arg(&tls.key),
        ])),
        |port| format!("https://lab.test:{port}"),
    );
    let netns = format!("--net=/proc/{}/ns/net", s.child.id());
    // curl in the server's network namespace, trusting the test's CA alone.
    let at = format!("lab.test:{}:10.77.0.1", s.port);
    let bearer = format!("Authorization: Bearer {}", s.token);
    let curl_cmd = |url: &str, more: &[&str]| {
        let mut c = std::process::Command::new("nsenter");
        c.args([netns.as_str(), "curl", "-sS", "--max-time", "20"])
            .args(["--resolve", &at, "--cacert", arg(&tls.ca), "-H", &bearer])
            .args(more)
            .arg(url);
        c
    };
    let curl = |url: &str, more: &[&str]| -> (bool, String) {
        let out = curl_cmd(url, more).output().unwrap();
        let both = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), both)
    };
    let base = |host: &str| format!("https://{host}:{}", s.port);
    // By the certificate's name and by the address, the certificate checked against its CA.
    for host in ["lab.test", "10.77.0.1"] {
        let (ok, said) = curl(&format!("{}/api/v1/fleets", base(host)), &[]);
        assert!(ok && said.contains("\"sv\""), "{host}: {said}");
    }
    // The page's cookie is never sent in clear.
    let (_, said) = curl(&format!("{}/?token={}", base("lab.test"), s.token), &["-i"]);
    assert!(said.contains("Set-Cookie: __Host-nsfleet_token_"), "{said}");
    assert!(said.contains("; Secure"), "{said}");
    // Plain HTTP is told to use HTTPS; a name that is not the server's is refused.
    let (_, said) = curl(
        &format!("http://10.77.0.1:{}/api/v1/fleets", s.port),
        &["-i"],
    );
    assert!(
        said.starts_with("HTTP/1.1 400") && said.contains("this server speaks HTTPS"),
        "{said}"
    );
    let evil = format!("evil.test:{}:10.77.0.1", s.port);
    let (_, said) = curl(
        &format!("{}/api/v1/fleets", base("evil.test")),
        &["-k", "--resolve", &evil, "-i"],
    );
    assert!(said.starts_with("HTTP/1.1 403"), "{said}");

    // A terminal over wss:, from a thread in the server's network namespace.
    let (port, token, trusted) = (s.port, s.token.clone(), tls.clone());
    let ns = std::fs::File::open(format!("/proc/{}/ns/net", s.child.id())).unwrap();
    std::thread::spawn(move || {
        use std::os::fd::AsFd;
        nsfleet::sys::ns::setns_net(ns.as_fd()).unwrap();
        let mut t = wss_terminal(port, &token, &trusted, "r1");
        type_and_see(&mut t, "echo tls-$((6*7))\r", "tls-42");
        // More than rustls and the socket hold at once, both ways: the paste in, its
        // echo out.
        let paste = "0123456789abcdefghijklmnopqrstuvwxyz\n".repeat(8 << 10);
        type_and_see(&mut t, "wc -c\r", "wc -c");
        std::thread::sleep(Duration::from_millis(300));
        t.send(Message::binary(paste.into_bytes())).unwrap();
        t.send(Message::binary(b"\x04".to_vec())).unwrap();
        type_and_see(&mut t, "", &format!("{}", 37 * (8 << 10)));
        t.send(Message::binary(b"exit 5\r".to_vec())).unwrap();
        assert_eq!(closed(&mut t), "the shell in r1 ended (exit status 5)");
    })
    .join()
    .unwrap();
    s.wait_childless("the shell ends with its terminal");

    // The events stream ends with the fleet, and curl reads it to a clean end.
    let events = format!("{}/api/v1/fleets/sv/events", base("lab.test"));
    let mut follower = curl_cmd(&events, &["-N"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stream = BufReader::new(follower.stdout.take().unwrap());
    let mut line = String::new();
    while line != ": watching\n" {
        line.clear();
        assert!(stream.read_line(&mut line).unwrap() > 0, "no events stream");
    }
    let (ok, said) = curl(
        &format!("{}/api/v1/fleets/sv", base("lab.test")),
        &["-f", "-X", "DELETE"],
    );
    assert!(ok, "{said}");
    let mut rest = String::new();
    stream.read_to_string(&mut rest).unwrap();
    let ended = follower.wait().unwrap();
    assert!(
        ended.success() && rest.contains("fleet_down"),
        "{ended}: {rest}"
    );
}

/// A certificate for `names` and its CA, in the test's files.
fn certificate(env: &Env, names: &str) -> Certificate {
    Certificate::make(&env.files.join("tls"), names).unwrap()
}

/// A path as an argument.
fn arg(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// The workbench over HTTPS, on loopback (which may have it too): Chromium trusting the
/// test's certificate alone (by its key), the page opened with the token, a node's
/// terminal over wss:// typed into and read from the screen.
#[test]
fn the_workbench_over_https_runs_its_terminals_over_wss() {
    let env = Env::new("servepagetls");
    let tls = certificate(&env, "DNS:localhost,IP:127.0.0.1");
    // The certificate's key, as Chromium pins one: base64 of its SPKI's SHA-256.
    let pin = std::process::Command::new("sh")
        .arg("-c")
        .arg("openssl x509 -in \"$0\" -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64")
        .arg(&tls.cert)
        .output()
        .unwrap();
    assert!(pin.status.success(), "{pin:?}");
    let pin = String::from_utf8(pin.stdout).unwrap().trim().to_string();
    let _f = env.up(LAB);
    let s = Server::spawn(
        env.cmd(&[
            "serve",
            "--json",
            "--cert",
            arg(&tls.cert),
            "--key",
            arg(&tls.key),
        ]),
        |port| format!("https://127.0.0.1:{port}"),
    );
    let url = format!("https://{}/?token={}", s.host(), s.token);
    let trusted = format!("--ignore-certificate-errors-spki-list={pin}");
    let browser = nsfleet_bench::browser::Browser::open_with(
        &url,
        &env.files.join("profile"),
        &[trusted.as_str()],
    );
    let mut b = Page(browser.expect("chromium runs (Debian's chromium; .ci/run installs it)"));
    b.wait("the page is drawn", "document.body.dataset.ready === '1'");
    assert_eq!(b.eval("location.protocol + location.search"), "https:");
    b.eval(&click(".node[data-name='r1']"));
    b.wait(
        "r1's terminal opens over wss://",
        "document.getElementById('term-r1')?.dataset.state === 'open'",
    );
    b.wait(
        "r1's prompt",
        "document.querySelector('#term-r1 .xterm-rows').textContent.includes('r1')",
    );
    b.type_text("echo tls-$((6*7))");
    b.wait(
        "the echo's answer on the screen",
        "document.querySelector('#term-r1 .xterm-rows').textContent.includes('tls-42')",
    );
    assert_eq!(s.children().len(), 1, "one shell");
    drop(b);
    s.wait_childless("the browser gone, its shell ends");
}

/// `cmd`, run in a network namespace of its own whose only address but loopback is
/// 10.77.0.1, on a veth (this kernel may have no dummy links); the namespace goes with
/// the process.
fn in_own_netns(cmd: std::process::Command) -> std::process::Command {
    let mut wrapped = std::process::Command::new("unshare");
    wrapped.args(["--net", "--", "sh", "-c"]);
    wrapped.arg("ip link set lo up && ip link add d0 type veth peer name d1 && ip addr add 10.77.0.1/24 dev d0 && ip link set d1 up && ip link set d0 up && exec \"$0\" \"$@\"");
    wrapped.arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    wrapped
}

/// A terminal of `node` over `wss:`, reached as lab.test at 10.77.0.1, the server's
/// certificate checked against `tls`'s CA, the only one trusted.
fn wss_terminal(
    port: u16,
    token: &str,
    tls: &Certificate,
    node: &str,
) -> tungstenite::WebSocket<TlsStream> {
    use tungstenite::client::IntoClientRequest;
    let tcp = TcpStream::connect(("10.77.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let url = format!("wss://lab.test:{port}/api/v1/fleets/sv/nodes/{node}/terminal");
    let mut req = url.into_client_request().unwrap();
    let bearer = format!("Bearer {token}");
    req.headers_mut()
        .insert("Authorization", bearer.parse().unwrap());
    let stream = tls.connect("lab.test", tcp).unwrap();
    match tungstenite::client(req, stream) {
        Ok((ws, _)) => ws,
        Err(e) => panic!("{e}"),
    }
}

/// Clicks the element `selector` finds, as a mouse does (the event bubbles).
fn click(selector: &str) -> String {
    format!(
        "document.querySelector({selector:?}).dispatchEvent(new MouseEvent('click', {{ bubbles: true }})) && true"
    )
}

#[test]
fn the_workbench_in_chromium_opens_a_terminal_and_pulls_a_cable() {
    let env = Env::new("servepage");
    let _f = env.up(LAB);
    let s = Server::start(&env);
    let url = format!("http://{}/?token={}", s.host(), s.token);
    let browser = nsfleet_bench::browser::Browser::open(&url, &env.files.join("profile"));
    let mut b = Page(browser.expect("chromium runs (Debian's chromium; .ci/run installs it)"));
    b.wait("the page is drawn", "document.body.dataset.ready === '1'");
    // Names are text in the DOM, each node reachable by keyboard.
    let labels = b.eval("[...document.querySelectorAll('#nodes .label')].map((l) => l.textContent).sort().join(',')");
    assert_eq!(labels, "h1,h2,r1,s1");
    let reachable = b.eval("[...document.querySelectorAll('.node[tabindex=\"0\"][role=button]')].map((g) => g.getAttribute('aria-label')).sort().join(',')");
    assert_eq!(reachable, "host h1,host h2,router r1,switch s1");
    assert_eq!(b.eval("location.search"), "", "the token left the address");

    // A node clicked: its terminal; `echo` typed into it, its answer on the screen.
    b.eval(&click(".node[data-name='r1']"));
    b.wait(
        "r1's terminal opens",
        "document.getElementById('term-r1')?.dataset.state === 'open'",
    );
    b.wait(
        "r1's prompt",
        "document.querySelector('#term-r1 .xterm-rows').textContent.includes('r1')",
    );
    b.type_text("echo web-$((6*7))");
    b.wait(
        "the echo's answer on the screen",
        "document.querySelector('#term-r1 .xterm-rows').textContent.includes('web-42')",
    );
    assert_eq!(s.children().len(), 1, "one shell");
    b.screenshot(&env.files.join("workbench-terminal.png"));

    // A cable pulled from the link's panel: the link turns red, the peer loses carrier.
    b.eval(&click("line[data-a='r1:eth1']"));
    b.wait(
        "the link's panel",
        "document.querySelector('#link-state tr') !== null",
    );
    b.eval(&click("#pull"));
    b.wait(
        "the link is drawn down",
        "document.querySelector(\"line[data-a='r1:eth1']\").classList.contains('down')",
    );
    b.wait("the peer without carrier", "document.querySelector(\"#link-state tr[data-end='h2:eth0']\").textContent.includes('NO-CARRIER')");
    let kernel = env.ok(&["link", "sv", "h2:eth0"]);
    assert!(kernel.contains("h2:eth0  UP, NO-CARRIER"), "{kernel}");
    b.wait(
        "the events log says so",
        "document.getElementById('events').textContent.includes('no-carrier')",
    );
    b.screenshot(&env.files.join("workbench-link.png"));
    b.eval(&click("#plug"));
    b.wait(
        "plugged back",
        "!document.querySelector(\"line[data-a='r1:eth1']\").classList.contains('down')",
    );
    // Its packets, listed live as a ping crosses it; stopped, the capture ends.
    b.eval(&click("#live-packets"));
    b.wait(
        "the capture runs",
        "document.getElementById('packets').dataset.state === 'capturing'",
    );
    env.ok(&[
        "exec", "sv", "h2", "--", "ping", "-c", "3", "-i", "0.2", "10.9.0.1",
    ]);
    b.wait(
        "the pings listed",
        "document.getElementById('packets').textContent.includes('10.9.0.2 > 10.9.0.1 ICMP')",
    );
    b.eval(&click("#live-packets"));
    s.wait_until_children(1, "the live capture ends when stopped");

    // The topology's text, and the plan of a change before it is applied.
    b.eval(&click("#tabs [data-panel='topology-panel']"));
    let changed = LAB.replace("10.8.0.2/24", "10.8.0.3/24");
    b.eval(&format!(
        "document.getElementById('topology').value = {}; true",
        json!(changed)
    ));
    b.eval(&click("#dry-run"));
    b.wait(
        "the plan",
        "document.getElementById('plan').textContent.includes('~ h1:eth0')",
    );
    assert!(b
        .eval("document.getElementById('plan').textContent")
        .as_str()
        .unwrap()
        .contains("dry run: nothing was changed"));

    // The page gone, its terminal's shell goes.
    drop(b);
    s.wait_childless("the page's shell ends with it");
}

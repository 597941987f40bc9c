//! `nsfleet graph`: the page of a topology file as a person sees it in Chromium (its
//! nodes, their kinds and names in the DOM, a screenshot), the exports for other tools,
//! a running fleet's live page following a cable pulled out, and bad input.

mod harness;

use harness::*;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

const LAB: &str = "[fleet]\nname = \"gr\"\n[[switch]]\nname = \"s1\"\n[[node]]\nname = \"r1\"\nrouter = true\n[[node]]\nname = \"h1\"\n[[node]]\nname = \"h2\"\n[[link]]\na = { at = \"r1:eth0\", addrs = [\"10.7.0.1/24\"] }\nb = \"s1\"\n[[link]]\na = { at = \"h1:eth0\", addrs = [\"10.7.0.2/24\"] }\nb = \"s1\"\nimpair = { rate = \"10mbit\" }\n[[link]]\na = { at = \"h2:eth0\", addrs = [\"10.7.0.3/24\"] }\nb = \"s1\"\n[[link]]\na = \"r1:eth1\"\nb = \"h2:eth1\"\n";

/// What Chromium shows of `url`: the DOM once the page's script has run, and a
/// screenshot in `png`.
fn chromium(url: &str, png: &std::path::Path) -> String {
    let run = |extra: &[&str]| {
        // A profile of its own each time: Chromiums sharing one hand their pages over.
        let profile = tempdir(png);
        (nsfleet_bench::browser::headless(&profile).unwrap())
            .args(["--window-size=1200,900", "--virtual-time-budget=4000"])
            .args(extra)
            .arg(url)
            .output()
            .expect("chromium is installed (Debian's chromium; .ci/run installs it)")
    };
    let shot = format!("--screenshot={}", png.display());
    run(&[&shot]);
    let png_bytes = std::fs::read(png).unwrap_or_default();
    assert!(
        png_bytes.starts_with(b"\x89PNG") && png_bytes.len() > 5000,
        "a screenshot of {url}"
    );
    String::from_utf8(run(&["--dump-dom"]).stdout).unwrap()
}

/// A new, empty folder beside `file`.
fn tempdir(file: &std::path::Path) -> std::path::PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = file.with_extension(format!("profile-{n}"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Occurrences of `what` in `dom`.
fn count(dom: &str, what: &str) -> usize {
    dom.matches(what).count()
}

#[test]
fn a_files_page_shows_every_node_by_kind_and_name_without_a_network() {
    let env = Env::new("graphfile");
    let file = env.file("gr.toml", LAB);
    let html = env.files.join("gr.html");
    env.ok(&[
        "graph",
        file.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        !page.contains("src=\"http") && !page.contains("href=\"http"),
        "nothing fetched"
    );
    let dom = chromium(
        &format!("file://{}", html.display()),
        &env.files.join("gr.png"),
    );
    assert!(dom.contains("data-ready=\"1\""), "the script ran");
    assert!(
        dom.contains("data-nodes=\"4\"") && dom.contains("data-links=\"4\""),
        "{dom}"
    );
    assert_eq!(count(&dom, "<g class=\"node switch"), 1);
    assert_eq!(count(&dom, "<g class=\"node router"), 1);
    assert_eq!(count(&dom, "<g class=\"node host"), 2);
    for name in ["s1", "r1", "h1", "h2"] {
        assert!(
            dom.contains(&format!("<text class=\"label\" y=\"22\">{name}</text>")),
            "label {name}"
        );
    }
    assert_eq!(
        count(&dom, "class=\"link veth impaired\""),
        1,
        "the rate-limited link"
    );

    // 2,000 hosts on one switch: every node is drawn, names hidden until zoomed in.
    let star = env.file(
        "star.toml",
        "[fleet]\nname = \"big\"\n[[generate]]\nkind = \"star\"\ncount = 2000\n",
    );
    let big = env.files.join("big.html");
    env.ok(&["graph", star.to_str().unwrap(), "-o", big.to_str().unwrap()]);
    let dom = chromium(
        &format!("file://{}", big.display()),
        &env.files.join("big.png"),
    );
    assert_eq!(count(&dom, "<g class=\"node host"), 2000);
    assert!(
        dom.contains("class=\"far\""),
        "names hidden at this distance"
    );
    assert!(env.fleet_dirs().is_empty(), "nothing was brought up");
}

#[test]
fn dot_mermaid_and_json_for_other_tools() {
    let env = Env::new("graphexport");
    let file = env.file("gr.toml", LAB);
    let f = file.to_str().unwrap();
    let dot = env.ok(&["graph", f, "--format", "dot"]);
    assert!(dot.starts_with("graph \"gr\" {"), "{dot}");
    assert!(dot.contains("\"s1\" [shape=box"), "{dot}");
    assert!(
        dot.contains("\"r1\" -- \"h2\" [taillabel=\"eth1\", headlabel=\"eth1\"]"),
        "{dot}"
    );
    assert_eq!(dot.matches(" -- ").count(), 4);
    let mermaid = env.ok(&["graph", f, "--format", "mermaid"]);
    assert!(mermaid.starts_with("graph LR\n"), "{mermaid}");
    assert!(
        mermaid.contains("((\"r1\"))") && mermaid.contains("[\"s1\"]"),
        "{mermaid}"
    );
    let json: Value = serde_json::from_str(&env.ok(&["graph", f, "--format", "json"])).unwrap();
    assert_eq!(json["nodes"].as_array().unwrap().len(), 4);
    let links = json["links"].as_array().unwrap();
    assert!(
        links
            .iter()
            .any(|l| l["a"] == "r1:eth1" && l["b"] == "h2:eth1"),
        "{json}"
    );
    let h1 = (json["nodes"].as_array().unwrap().iter())
        .find(|n| n["name"] == "h1")
        .unwrap();
    assert_eq!(h1["interfaces"][0], "eth0 10.7.0.2/24");
    assert_eq!(h1["impairments"][0], "eth0: rate 10mbit");
}

#[test]
fn containerlab_s_graph_flags_draw_a_lab_s_file() {
    let env = Env::new("graphclab");
    let text = "name: gc\nmgmt: {ipv4-subnet: 172.31.93.0/24}\ntopology:\n  nodes:\n    a: {kind: linux}\n    b: {kind: linux}\n  links:\n    - endpoints: [a:eth1, b:eth1]\n";
    let file = env.file("gc.clab.yml", text);
    let f = file.to_str().unwrap();
    let mermaid = env.ok(&["graph", "-t", f, "--mermaid"]);
    assert!(
        mermaid.starts_with("graph LR\n") && mermaid.contains("(\"a\")"),
        "{mermaid}"
    );
    let dot = env.ok(&["graph", "-t", f, "--offline", "--dot"]);
    assert!(dot.starts_with("graph \"gc\" {"), "{dot}");
    env.fails(&["graph", "-t", f, "--drawio"], "clab-io-draw");
    env.fails(
        &["graph", "-t", f, "--srv", "nonsense"],
        "expected ADDR:PORT",
    );
}

/// An HTTP GET of `path` on 127.0.0.1:`port`: the status line and the body.
fn get(port: u16, path: &str) -> (String, String) {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(c, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut all = String::new();
    c.read_to_string(&mut all).unwrap();
    let (head, body) = all.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

#[test]
fn a_running_fleets_page_follows_a_cable_pulled_out() {
    let env = Env::new("graphlive");
    let _f = env.up(LAB);
    let mut server = env
        .cmd(&["graph", "gr", "--serve", "0"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    let mut stderr = BufReader::new(server.stderr.take().unwrap());
    stderr.read_line(&mut said).unwrap();
    // Whatever else it says, read (and shown if the test fails).
    let rest = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        rest
    });
    let port: u16 = (said.split("http://127.0.0.1:").nth(1))
        .and_then(|r| r.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{said}"));
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _server = Kill(server);

    let (status, page) = get(port, "/");
    assert!(status.contains("200"), "{status}");
    assert!(page.contains("\"live\":true"), "a live page");
    let state = |port| -> Value { serde_json::from_str(&get(port, "/state").1).unwrap() };
    assert_eq!(state(port)["down"], serde_json::json!([]));
    assert!(state(port)["counters"]["r1:eth0"]["rx_packets"].is_u64());
    assert!(get(port, "/nope").0.contains("404"));

    // The events stream, then a cable pulled out.
    let mut events = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(events, "GET /events HTTP/1.1\r\n\r\n").unwrap();
    events
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut events = BufReader::new(events);
    let mut line = String::new();
    while !line.starts_with(": watching") {
        line.clear();
        events.read_line(&mut line).unwrap();
    }
    env.ok(&["link", "gr", "r1:eth1", "down"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        line.clear();
        events.read_line(&mut line).unwrap();
        if line.starts_with("data:") && line.contains("\"r1\"") && line.contains("\"eth1\"") {
            break;
        }
        assert!(Instant::now() < deadline, "no event for r1:eth1");
    }
    // An impairment set on the live fleet shows in its state.
    env.ok(&["impair", "gr", "h2:eth0", "--rate", "5mbit"]);
    assert_eq!(state(port)["impaired"]["h2:eth0"], "rate 5mbit");
    let down = state(port)["down"].clone();
    assert!(
        down.as_array().unwrap().iter().any(|d| d == "r1:eth1"),
        "{down}"
    );

    // What a person sees: the pulled link drawn as down (the page of the moment: the
    // live one's event stream never ends, and headless Chromium would wait for it).
    let dom = chromium(
        &format!("http://127.0.0.1:{port}/once"),
        &env.files.join("live.png"),
    );
    drop(_server);
    let said = rest.join().unwrap();
    assert!(dom.contains("data-nodes=\"4\""), "{said}: {dom}");
    assert!(
        dom.contains("link veth down"),
        "the pulled cable is drawn down"
    );
    assert!(
        dom.contains("data-impaired=\"3\""),
        "h1:eth0, its port, h2:eth0"
    );
}

#[test]
fn what_cannot_be_drawn_is_refused_with_why() {
    let env = Env::new("graphbad");
    let bad = env.file(
        "bad.toml",
        "[fleet]\nname = \"x\"\n[[node]]\nname = \"a b\"\n",
    );
    let file = env.file("ok.toml", LAB);
    let cases: [(&[&str], &str); 3] = [
        (
            &["graph", bad.to_str().unwrap()],
            "bad.toml:4:8: node name \"a b\"",
        ),
        (
            &["graph", "nofleet"],
            "\"nofleet\" is neither a topology file nor a fleet",
        ),
        (
            &["graph", file.to_str().unwrap(), "--serve", "0"],
            "--serve shows a running fleet",
        ),
    ];
    for (args, expected) in cases {
        env.fails(args, expected);
    }
    let unwritable = env.files.join("no/such/dir/g.html");
    let out = env.run(&[
        "graph",
        file.to_str().unwrap(),
        "-o",
        unwritable.to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot write it"));
    assert_eq!(
        env.run(&["graph", "x", "--format", "png"]).status.code(),
        Some(2)
    );
}

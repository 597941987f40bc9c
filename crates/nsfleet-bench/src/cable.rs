//! `nsfleet bench cable`: a live fleet's cables pulled one after the other, timed from the
//! `link down` request to the event that the peer has lost its carrier (`nsfleet events`,
//! from the kernel's link notification in the peer's node): what a user watching the
//! fleet sees. N hosts on one switch (a star), each host's `eth0` pulled once; median
//! and 99th percentile per run.

use super::{emit, machine, metric, need_root, note, percentile, Cli, Common};
use anyhow::{anyhow, bail};
use nsfleet::control::{Client, Reply, Request};
use nsfleet_results::{Better, Results};
use std::time::{Duration, Instant};

pub struct CableArgs {
    /// Links pulled (hosts on the switch).
    pub count: u64,
    pub common: Common,
}

pub fn cable(a: CableArgs) -> anyhow::Result<()> {
    need_root("cable")?;
    let c = &a.common;
    let count = c.size(a.count, 50);
    let (mut p50, mut p99, mut reply) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..c.repetitions() {
        note(&format!(
            "run {}/{}: {count} cables pulled",
            r + 1,
            c.repetitions()
        ));
        let (lat, rep) = run(count, c.workers)?;
        p50.push(percentile(&lat, 50.0));
        p99.push(percentile(&lat, 99.0));
        reply.push(percentile(&rep, 50.0));
    }
    let mut res = Results::new(
        "cable",
        machine(),
        serde_json::json!({"count": count, "runs": c.repetitions(), "workers": c.workers, "quick": c.quick}),
    );
    res.metric(
        "link_down_to_peer_no_carrier_p50_ms",
        metric("ms", Better::Lower, p50),
    );
    res.metric(
        "link_down_to_peer_no_carrier_p99_ms",
        metric("ms", Better::Lower, p99),
    );
    res.metric("link_down_reply_p50_ms", metric("ms", Better::Lower, reply));
    emit(
        &res,
        c,
        &format!("{count} links pulled one by one, to the peer's no-carrier event"),
    )
}

/// One run: the star up, a watcher, every host's cable pulled; the latencies (ms) to the
/// switch port's no-carrier event, and of the request's reply.
fn run(count: u64, workers: usize) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let cli = Cli::new()?;
    let body = format!("[[generate]]\nkind = \"star\"\ncount = {count}\n");
    let mut up = cli.up_with(&body, workers)?;
    let socket = up.cli.socket("bench");
    let mut watch = Client::connect(&socket)?;
    match watch.call(&Request::Events)? {
        Reply::Watching => {}
        other => bail!("unexpected reply to events: {other:?}"),
    }
    // The switch's ports that lost carrier, and when.
    let (tx, rx) = std::sync::mpsc::channel::<(String, Instant)>();
    let reader = std::thread::spawn(move || {
        while let Ok(Some(e)) = watch.next_as::<serde_json::Value>() {
            if e["event"] == "link" && e["node"] == "s1" && e["state"] == "no-carrier" {
                let port = e["iface"].as_str().unwrap_or("").to_string();
                let _ = tx.send((port, Instant::now()));
            }
        }
    });
    let (mut lat, mut rep) = (Vec::new(), Vec::new());
    for k in 1..=count {
        let req = Request::Link {
            node: format!("h{k}"),
            iface: "eth0".into(),
            up: Some(false),
        };
        // A connection per request, as the supervisor answers one each.
        let t0 = Instant::now();
        let port = match Client::connect(&socket)?.call(&req)? {
            Reply::Link { far: Some(far), .. } => {
                rep.push(t0.elapsed().as_secs_f64() * 1e3);
                far.iface
            }
            other => bail!("unexpected reply to link: {other:?}"),
        };
        let seen = loop {
            let (p, at) = rx.recv_timeout(Duration::from_secs(5)).map_err(|_| {
                anyhow!("h{k}:eth0 pulled: no no-carrier event from s1:{port} in 5 s")
            })?;
            if p == port {
                break at;
            }
        };
        lat.push((seen - t0).as_secs_f64() * 1e3);
    }
    up.cli.down()?;
    let _ = reader.join();
    Ok((lat, rep))
}

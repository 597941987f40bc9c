//! `nsfleet link`: pull a link's cable (`down`), plug it back (`up`), or look at it: both
//! ends' state (up, carrier), the impairment, the counters.

use super::{human_bytes, FleetRef};
use anyhow::{anyhow, bail};
use nsfleet::control::{Reply, Request};
use nsfleet::subsys::cable::EndState;

pub struct LinkArgs {
    pub fleet: FleetRef,
    /// `node:iface`
    pub target: String,
    /// `down`, `up`, or nothing to look.
    pub action: Option<String>,
    pub json: bool,
}

pub fn link(a: LinkArgs) -> anyhow::Result<()> {
    let (node, iface) = (a.target.split_once(':'))
        .ok_or_else(|| anyhow!("expected NODE:IFACE, like r1:eth0, got {:?}", a.target))?;
    let up = match a.action.as_deref() {
        None => None,
        Some("down") => Some(false),
        Some("up") => Some(true),
        Some(other) => bail!("expected down or up, got {other:?}"),
    };
    let mut client = a.fleet.connect()?;
    let req = Request::Link {
        node: node.into(),
        iface: iface.into(),
        up,
    };
    let (end, far, host, impair) = match client.call(&req)? {
        Reply::Link {
            end,
            far,
            host,
            impair,
        } => (end, far, host, impair),
        other => bail!("unexpected reply from the supervisor: {other:?}"),
    };
    if a.json {
        let v = serde_json::json!({ "fleet": a.fleet.name, "end": end, "far": far, "host": host, "impair": impair });
        println!("{v}");
        return Ok(());
    }
    print(&end, far.as_ref(), host.as_deref(), impair.as_ref());
    Ok(())
}

/// A link as people read it: this end, its peer (`far`: a node's end; `host`: the host's
/// end of a host link; neither: a tunnel's), and its impairment.
pub fn print(
    end: &EndState,
    far: Option<&EndState>,
    host: Option<&str>,
    impair: Option<&nsfleet::topology::Impair>,
) {
    println!("{}", line(end));
    match (far, host) {
        (Some(f), _) => println!("  peer {}", line(f)),
        (None, Some(h)) => println!("  peer host:{h} (the host's end)"),
        _ => println!("  peer: none nsfleet can see (a tunnel)"),
    }
    if let Some(i) = impair {
        println!("  impairment: {i}");
    }
}

fn line(e: &EndState) -> String {
    let state = match (e.up, e.carrier) {
        (false, _) => "DOWN (cable pulled here)",
        (true, false) => "UP, NO-CARRIER (its peer is down)",
        (true, true) => "UP, carrier",
    };
    let c = &e.counters;
    format!(
        "{}:{}  {state}  rx {} packets {}, dropped {}  tx {} packets {}, dropped {}",
        e.node,
        e.iface,
        c.rx_packets,
        human_bytes(c.rx_bytes as i64),
        c.rx_dropped,
        c.tx_packets,
        human_bytes(c.tx_bytes as i64),
        c.tx_dropped
    )
}

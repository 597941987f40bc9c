//! `nsfleet impair`: change one interface's impairment on a live fleet.

use super::FleetRef;
use anyhow::{anyhow, bail};
use nsfleet::control::{Reply, Request};
use nsfleet::topology::Impair;

pub struct ImpairArgs {
    pub fleet: FleetRef,
    /// `node:iface`
    pub target: String,
    /// (parameter, value) as given: ("delay", "20ms").
    pub set: Vec<(&'static str, String)>,
    pub clear: bool,
    pub json: bool,
}

pub fn impair(a: ImpairArgs) -> anyhow::Result<()> {
    let (node, iface) = a
        .target
        .split_once(':')
        .ok_or_else(|| anyhow!("expected NODE:IFACE, like r1:eth0, got {:?}", a.target))?;
    let impair = match (a.clear, a.set.is_empty()) {
        (true, false) => bail!("--clear removes the impairment: give it alone"),
        (false, true) => bail!("nothing to change: give --delay, --jitter, --loss, --duplicate, --corrupt, --reorder, --rate, or --clear"),
        (true, true) => None,
        (false, false) => {
            let mut imp = Impair::default();
            for (k, v) in &a.set {
                imp.set(k, v).map_err(|e| anyhow!("--{k}: {e}"))?;
            }
            imp.check().map_err(|e| anyhow!("{e}"))?;
            Some(imp)
        }
    };
    let impair = set(&a.fleet, node, iface, impair)?;
    if a.json {
        println!(
            "{}",
            serde_json::json!({ "fleet": a.fleet.name, "node": node, "iface": iface, "impair": impair })
        );
        return Ok(());
    }
    match impair {
        Some(i) => println!("{node}:{iface}: {i}"),
        None => println!("{node}:{iface}: no impairment"),
    }
    Ok(())
}

/// Sets (or, with `None`, removes) an interface's impairment; returns the one it has now.
pub fn set(
    fleet: &FleetRef,
    node: &str,
    iface: &str,
    impair: Option<Impair>,
) -> anyhow::Result<Option<Impair>> {
    let mut client = fleet.connect()?;
    let req = Request::Impair {
        node: node.into(),
        iface: iface.into(),
        impair,
    };
    match client.call(&req)? {
        Reply::Impaired { impair, .. } => Ok(impair),
        other => bail!("unexpected reply from the supervisor: {other:?}"),
    }
}

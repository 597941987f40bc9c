//! `nsfleet node`: one node's processes stopped, started, restarted, paused or resumed on
//! a live fleet; its namespace, links and addresses stay.

use super::status::describe_process;
use super::FleetRef;
use anyhow::bail;
use nsfleet::control::{NodeAction, Reply, Request};

pub struct NodeArgs {
    pub fleet: FleetRef,
    pub node: String,
    pub action: NodeAction,
    pub json: bool,
}

pub fn node(a: NodeArgs) -> anyhow::Result<()> {
    let mut client = a.fleet.connect()?;
    let req = Request::Node {
        node: a.node.clone(),
        action: a.action,
    };
    let processes = match client.call(&req)? {
        Reply::Node { processes, .. } => processes,
        other => bail!("unexpected reply from the supervisor: {other:?}"),
    };
    if a.json {
        let v =
            serde_json::json!({ "fleet": a.fleet.name, "node": a.node, "processes": processes });
        println!("{v}");
        return Ok(());
    }
    println!("node {}: processes {}", a.node, a.action.done());
    for p in &processes {
        println!("  {}", describe_process(p));
    }
    Ok(())
}

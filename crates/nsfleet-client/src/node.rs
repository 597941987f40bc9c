//! `nsfleet node`: one node's processes stopped, started, restarted, paused or resumed on
//! a live fleet; its namespace, links and addresses stay.

use super::connect;
use super::status::describe_process;
use anyhow::bail;
use nsfleet::control::{NodeAction, Reply, Request};
use nsfleet::rundir::RunDir;
use std::path::PathBuf;

pub struct NodeArgs {
    pub name: String,
    pub node: String,
    pub action: NodeAction,
    pub json: bool,
    pub run_dir: PathBuf,
}

pub fn node(a: NodeArgs) -> anyhow::Result<()> {
    let rd = RunDir::new(&a.run_dir);
    let mut client = connect(&rd, &a.name)?;
    let req = Request::Node {
        node: a.node.clone(),
        action: a.action,
    };
    let processes = match client.call(&req)? {
        Reply::Node { processes, .. } => processes,
        other => bail!("unexpected reply from the supervisor: {other:?}"),
    };
    if a.json {
        let v = serde_json::json!({ "fleet": a.name, "node": a.node, "processes": processes });
        println!("{v}");
        return Ok(());
    }
    println!("node {}: processes {}", a.node, a.action.done());
    for p in &processes {
        println!("  {}", describe_process(p));
    }
    Ok(())
}

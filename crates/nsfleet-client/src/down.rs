//! `nsfleet down`: ask the supervisor to end the fleet and, unless `--no-wait`, report when
//! the kernel has reclaimed every namespace.

use super::FleetRef;
use anyhow::bail;
use nsfleet::control::{Reply, Request};

pub struct DownArgs {
    pub fleet: FleetRef,
    pub no_wait: bool,
    pub json: bool,
}

pub fn down(a: DownArgs) -> anyhow::Result<()> {
    let mut c = a.fleet.connect()?;
    c.send(&Request::Down { wait: !a.no_wait })?;
    let mut result = serde_json::json!({ "name": a.fleet.name });
    while let Some(reply) = c.next_reply()? {
        match reply {
            Reply::Dropped { nodes, teardown_ms } => {
                result["nodes"] = nodes.into();
                result["teardown_ms"] = teardown_ms.into();
                if !a.json {
                    println!(
                        "fleet {:?}: {nodes} nodes torn down in {teardown_ms:.1} ms",
                        a.fleet.name
                    );
                }
                if a.no_wait {
                    if !a.json {
                        println!("  not waiting for the kernel to reclaim them (--no-wait)");
                    } else {
                        println!("{result}");
                    }
                    return Ok(());
                }
            }
            Reply::Reclaimed {
                nodes,
                reclaimed,
                held,
                total_ms,
                unconfirmed,
            } => {
                result["reclaimed"] = reclaimed.into();
                result["reclaimed_ms"] = total_ms.into();
                result["held"] = serde_json::to_value(&held)?;
                result["unconfirmed"] = serde_json::to_value(&unconfirmed)?;
                if let (Some(why), false) = (&unconfirmed, a.json) {
                    println!("  warning: the kernel's reclamation could not be confirmed: {why}");
                }

                if a.json {
                    println!("{result}");
                } else {
                    println!("  kernel reclaimed {reclaimed} of {nodes} namespaces {total_ms:.1} ms after down began");
                    for h in &held {
                        let who = if h.holders.is_empty() {
                            "an unknown holder".to_string()
                        } else {
                            h.holders.join(", ")
                        };
                        println!(
                            "  node {} outlives the fleet: its namespace is held by {who}",
                            h.node
                        );
                    }
                }
                return Ok(());
            }
            Reply::Error { message, .. } => bail!("{message}"),
            _ => {}
        }
    }
    bail!(
        "the supervisor of {:?} ended without confirming the teardown",
        a.fleet.name
    )
}

/// Takes the fleet down and waits until the kernel has reclaimed it, saying nothing:
/// for a command whose own failure it follows (`up --wait`).
pub fn down_quietly(fleet: &FleetRef) -> anyhow::Result<()> {
    let mut c = fleet.connect()?;
    c.send(&Request::Down { wait: true })?;
    // Read on until the supervisor closes: its run folder is gone then.
    while let Some(reply) = c.next_reply()? {
        if let Reply::Error { message, .. } = reply {
            bail!("{message}");
        }
    }
    Ok(())
}

//! Per-node sysctls from the topology (`sysctls = { "net.ipv4.ip_forward" = 1 }`), in the
//! Configure phase so that per-interface keys find their interfaces.

use nsfleet_core::{InitCtx, Node, Phase, Shape, Subsystem};
use nsfleet_topology::Subject;

use anyhow::Context;

pub struct Sysctls;

/// The value each key had before the node's first write to it: what removing the key
/// from the node's topology puts back.
pub type Originals = Vec<(String, String)>;

impl Subsystem for Sysctls {
    type State = Originals;

    fn name(&self) -> &'static str {
        "sysctls"
    }

    fn phase(&self) -> Phase {
        Phase::Configure
    }

    fn wants(&self, node: &Node) -> bool {
        let config = node.config();
        !config.sysctls.is_empty()
    }

    fn init(&self, cx: &mut InitCtx<'_>, originals: &mut Originals) -> anyhow::Result<()> {
        let config = cx.node.config();
        config
            .sysctls
            .iter()
            .try_for_each(|(key, value)| set(cx, originals, key, value))
    }

    /// Puts back the original value of each key the node no longer sets. A key of a
    /// device that is gone went with it.
    fn retire(
        &self,
        cx: &mut InitCtx<'_>,
        originals: &mut Originals,
        was: &Shape,
    ) -> anyhow::Result<()> {
        let now = cx.node.config();
        for (key, _) in &was.config.sysctls {
            if now.sysctls.iter().any(|(k, _)| k == key) {
                continue;
            }
            let Some(at) = originals.iter().position(|(k, _)| k == key) else {
                continue;
            };
            let (_, original) = originals.swap_remove(at);
            match cx.write_sysctl(key, &original) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                r => r.with_context(|| format!("sysctl {key} back to {original}"))?,
            }
        }
        Ok(())
    }

    /// Writes each key that is new or has a new value, and each key of a device made
    /// anew (which starts from the defaults).
    fn extend(
        &self,
        cx: &mut InitCtx<'_>,
        originals: &mut Originals,
        was: &Shape,
    ) -> anyhow::Result<()> {
        let (config, wiring) = (cx.node.config(), cx.node.wiring());
        let remade = |key: &str| {
            wiring.ifaces.iter().any(|i| {
                !crate::kept(&was.wiring, i) && key.split('.').nth(3) == Some(i.name.as_str())
            })
        };
        for (key, value) in &config.sysctls {
            if was.config.sysctls.contains(&(key.clone(), value.clone())) && !remade(key) {
                continue;
            }
            set(cx, originals, key, value)?;
        }
        Ok(())
    }

    // No exit: the values die with the namespace.
}

/// Writes `key`, first noting what it was if this is the node's first write to it.
fn set(
    cx: &mut InitCtx<'_>,
    originals: &mut Originals,
    key: &str,
    value: &str,
) -> anyhow::Result<()> {
    if !originals.iter().any(|(k, _)| k == key) {
        if let Ok(was) = cx.read_sysctl(key) {
            originals.push((key.to_string(), was));
        }
    }
    let at = cx.node.config().sysctl_places.get(key);
    cx.write_sysctl(key, value).map_err(|e| {
        let subject = Subject {
            text: format!("sysctl {key} = {value}"),
            at,
        };
        nsfleet_core::about(e.into(), subject)
    })
}

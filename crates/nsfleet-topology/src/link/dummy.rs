//! Dummy interfaces: `[[dummy]]` tables. A dummy is an interface with nothing behind it,
//! always up: where a router's loopback-like addresses live when `lo` is not enough (a
//! second router ID, an anycast address, a prefix to announce). containerlab's `type:
//! dummy` links are these.
//!
//! ```toml
//! [[dummy]]
//! at = "r1:dummy0"          # node and interface name
//! addrs = ["10.255.0.1/32"]
//! mtu = 1500                # optional
//! ```

use crate::decl::{EndDecl, Spanned};
use crate::error::Ctx;
use crate::link::Link;
use crate::resolve::plan::Plan;
use crate::TopologyError;
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DummySection {
    at: Spanned<String>,
    #[serde(default)]
    addrs: Vec<Spanned<String>>,
    mtu: Option<Spanned<i64>>,
}

/// A `[[dummy]]`: a dummy interface on one node.
pub(crate) fn parse(
    cx: &Ctx<'_>,
    d: &Spanned<DummySection>,
    plan: &mut Plan,
) -> Result<(), TopologyError> {
    let sec = d.get_ref();
    let end = super::device_end(cx, &sec.at, &sec.addrs, sec.mtu.as_ref(), "r1:dummy0")?;
    plan.add_dummy(end, cx.place(d.span()))
        .map_err(|m| cx.err(d.span(), m))
}

impl Plan {
    /// A dummy interface on `end.node`. Not on a switch: a port with nothing behind it
    /// would carry nothing.
    pub fn add_dummy(&mut self, end: EndDecl, at: crate::Place) -> Result<(), String> {
        let i = self.find(&end.node)?;
        if self.is_switch_at(i) {
            return Err(format!(
                "{} is a switch: a dummy interface belongs on a node",
                end.node
            ));
        }
        self.claim(&end.addrs, at)?;
        self.push_iface(i, &end, Link::Dummy, at)?;
        Ok(())
    }
}

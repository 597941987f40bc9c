//! `impair`: a link end's impairments changed on the live fleet.

use crate::control::Reply;
use crate::Supervisor;
use nsfleet_subsys::impair::{Impaired, Impairments};
use nsfleet_topology::Impair;
use std::sync::Arc;

impl Supervisor {
    pub(super) fn impair(
        &self,
        node: String,
        iface: String,
        impair: Option<Impair>,
    ) -> anyhow::Result<Reply> {
        let _change = self.change()?;
        let id = self.defaults.impair;
        let (n, i) = (node.clone(), iface.clone());
        let r = self.fleet.on_node(&node, move |cx| {
            let mut state: Impaired = cx.node.modify(id, std::mem::take).unwrap_or_default();
            let r = Impairments::change(cx, &mut state, &i, impair);
            cx.node.modify(id, |s: &mut Impaired| *s = state);
            r
        });
        r?;
        // What the node is now: `apply` starts from it.
        let node = self.known_node(&n)?;
        let mut shape = (*node.shape()).clone();
        let wiring = Arc::make_mut(&mut shape.wiring);
        if let Some(i) = wiring.ifaces.iter_mut().find(|i| i.name == iface) {
            i.impair = impair;
        }
        node.reshape(Arc::new(shape));
        Ok(Reply::Impaired {
            node: n,
            iface,
            impair,
        })
    }
}

//! `link`: a cable pulled or plugged back, and both ends' state.

use crate::control::Reply;
use crate::Supervisor;
use nsfleet_subsys::cable;

impl Supervisor {
    /// `nsfleet link`: one end down or up, then both ends' state.
    pub(super) fn link(&self, node: &str, iface: &str, up: Option<bool>) -> anyhow::Result<Reply> {
        let _change = self.change()?;
        let n = self.known_node(node)?;
        let i = iface.to_string();
        let (end, far) = self.fleet.on_node(node, move |cx| {
            Ok((cable::set(cx, &i, up)?, cable::far_end(cx, &i)))
        })?;
        let (far, host) = match far {
            cable::Far::Node(n, f) => {
                let state = self.fleet.on_node(&n, move |cx| cable::set(cx, &f, None))?;
                (Some(state), None)
            }
            cable::Far::Host(h) => (None, Some(h)),
            cable::Far::None => (None, None),
        };
        let impair = (self.impairments(&n).into_iter())
            .find(|(f, _)| f == iface)
            .map(|(_, imp)| imp);
        Ok(Reply::Link {
            end,
            far,
            host,
            impair,
        })
    }
}

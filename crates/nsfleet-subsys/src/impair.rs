//! Link impairments: netem as the root qdisc of an interface, from the topology
//! (`impair = { delay = "20ms", loss = "1%" }` on a link end) and on a live fleet
//! (`nsfleet impair`). The state is what each interface has now, for `status`.
//!
//! Kernels built without netem (CONFIG_NET_SCH_NETEM off) still get `rate`, from a token
//! bucket (tbf); any other impairment is refused before anything is created.

use nsfleet_core::{InitCtx, Node, Phase, Shape, Subsystem};
use nsfleet_netlink::rtnl::{self, Netem};
use nsfleet_netlink::Batch;
use nsfleet_topology::{netem_refusal, Iface, Impair};

pub struct Impairments;

/// Interfaces of a node with an impairment, as (name, impairment).
pub type Impaired = Vec<(String, Impair)>;

fn netem(i: &Impair) -> Netem {
    let prob = |pct: f64| (pct / 100.0 * u32::MAX as f64).round() as u32;
    Netem {
        delay_ns: i.delay_ns,
        jitter_ns: i.jitter_ns,
        loss: prob(i.loss),
        duplicate: prob(i.duplicate),
        corrupt: prob(i.corrupt),
        reorder: prob(i.reorder),
        rate: i.rate_bps / 8,
    }
}

fn request(b: &mut Batch, seq: u32, index: i32, imp: Option<&Impair>) {
    match imp {
        Some(i) if !super::probe::has_netem() => rtnl::set_tbf(b, seq, index, i.rate_bps / 8),
        Some(i) => rtnl::set_netem(b, seq, index, &netem(i)),
        None => rtnl::del_root_qdisc(b, seq, index),
    }
}

impl Impairments {
    /// Sets (or with `None`, clears) the impairment of one interface of a live node.
    pub fn change(
        cx: &mut InitCtx<'_>,
        state: &mut Impaired,
        iface: &str,
        imp: Option<Impair>,
    ) -> anyhow::Result<()> {
        let wiring = cx.node.wiring();
        let i = (wiring.iface(iface)).ok_or_else(|| crate::no_interface(cx.node, iface))?;
        Self::set(cx, state, &[(i, imp)])
    }

    /// Sets (or clears) the impairments of several interfaces of the node, in one netlink
    /// burst, and records them in `state`. Clearing what has none is nothing to do.
    fn set(
        cx: &mut InitCtx<'_>,
        state: &mut Impaired,
        wanted: &[(&Iface, Option<Impair>)],
    ) -> anyhow::Result<()> {
        let node = cx.node;
        let netem = super::probe::has_netem();
        if let Some(why) = (wanted.iter()).find_map(|(_, imp)| netem_refusal(imp.as_ref()?, netem))
        {
            anyhow::bail!("{why}");
        }
        let todo: Vec<(&Iface, Option<Impair>)> = (wanted.iter().copied())
            .filter(|(i, imp)| imp.is_some() || state.iter().any(|(n, _)| *n == i.name))
            .collect();
        cx.send_each(
            &todo,
            |out, (i, imp)| out.add(|b, seq| request(b, seq, i.index, imp.as_ref())),
            |(i, imp)| {
                let what = imp.map_or("no impairment".to_string(), |x| format!("impairment {x}"));
                let text = format!("{what} of {}:{}", node.name(), i.name);
                nsfleet_topology::Subject::new(text, i.at)
            },
        )?;
        for (i, imp) in todo {
            state.retain(|(n, _)| *n != i.name);
            state.extend(imp.map(|imp| (i.name.clone(), imp)));
        }
        Ok(())
    }
}

impl Subsystem for Impairments {
    type State = Impaired;

    fn name(&self) -> &'static str {
        "impairments"
    }

    fn phase(&self) -> Phase {
        Phase::Configure
    }

    /// Every node with interfaces, so that `nsfleet impair` finds a state to change.
    fn wants(&self, node: &Node) -> bool {
        !node.wiring().ifaces.is_empty()
    }

    fn init(&self, cx: &mut InitCtx<'_>, state: &mut Impaired) -> anyhow::Result<()> {
        let wiring = cx.node.wiring();
        let impaired: Vec<(&Iface, Option<Impair>)> = (wiring.ifaces.iter())
            .filter(|i| i.impair.is_some())
            .map(|i| (i, i.impair))
            .collect();
        Self::set(cx, state, &impaired)
    }

    /// Forgets the impairments of devices that go or are re-made (their qdiscs go too).
    fn retire(
        &self,
        cx: &mut InitCtx<'_>,
        state: &mut Impaired,
        was: &Shape,
    ) -> anyhow::Result<()> {
        let now = cx.node.wiring();
        state.retain(|(name, _)| (now.iface(name)).is_some_and(|i| crate::kept(&was.wiring, i)));
        Ok(())
    }

    /// Sets each device's impairment where the new shape's differs from the old.
    fn extend(
        &self,
        cx: &mut InitCtx<'_>,
        state: &mut Impaired,
        was: &Shape,
    ) -> anyhow::Result<()> {
        let now = cx.node.wiring();
        let differs = |i: &&Iface| {
            let before = (was.wiring.iface(&i.name))
                .filter(|_| crate::kept(&was.wiring, i))
                .and_then(|o| o.impair);
            before != i.impair
        };
        let changed: Vec<(&Iface, Option<Impair>)> = (now.ifaces.iter())
            .filter(differs)
            .map(|i| (i, i.impair))
            .collect();
        Self::set(cx, state, &changed)
    }

    // No exit: qdiscs go with their interfaces.
}

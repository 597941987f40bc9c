//! `[[switch]]`'s `kind` and Open vSwitch's keys (`controller`, `protocols`, `fail_mode`,
//! `datapath`, `dpid`, `port_numbers`): read into a switch's configuration, and, once its
//! ports are laid out, its port numbers and datapath id checked against the fleet's.

use super::SwitchSection;
use crate::decl::{value, Spanned};
use crate::error::{Ctx, Errors, TopologyError};
use crate::kind::ovs::{self as kind, OvsSwitch};
use crate::resolve::config::{Built, Needed};
use crate::resolve::draft::switch_config as bridge_config;
use crate::resolve::plan::Plan;
use crate::NodeConfig;

/// Whether a switch's `kind` says Open vSwitch.
pub(super) fn is_ovs(kind: Option<&Spanned<String>>) -> bool {
    kind.is_some_and(|k| k.get_ref() == "ovs")
}

/// The configuration of switch `sec`: a Linux bridge's, or an Open vSwitch's.
pub(super) fn switch_config(cx: &Ctx<'_>, sec: &SwitchSection) -> Result<Built, TopologyError> {
    match sec.kind.as_ref().map(|k| (k, k.get_ref().as_str())) {
        None | Some((_, "bridge")) => {
            refuse_ovs_keys(cx, sec)?;
            Ok(bridge_config(false))
        }
        Some((k, "ovs")) => ovs_config(cx, sec, k),
        Some((k, other)) => Err(cx.err(
            k.span(),
            format!("unknown switch kind {other:?}: expected {}", kind::KINDS),
        )),
    }
}

/// A Linux bridge takes none of Open vSwitch's keys.
fn refuse_ovs_keys(cx: &Ctx<'_>, sec: &SwitchSection) -> Result<(), TopologyError> {
    let spans = [
        ("controller", sec.controller.first().map(|c| c.span())),
        ("protocols", sec.protocols.first().map(|c| c.span())),
        ("fail_mode", sec.fail_mode.as_ref().map(|c| c.span())),
        ("datapath", sec.datapath.as_ref().map(|c| c.span())),
        ("dpid", sec.dpid.as_ref().map(|c| c.span())),
        ("port_numbers", sec.port_numbers.as_ref().map(|c| c.span())),
    ];
    match spans.into_iter().find_map(|(k, s)| Some((k, s?))) {
        Some((key, span)) => Err(cx.err(
            span,
            format!("`{key}` is for an Open vSwitch switch: add kind = \"ovs\" (this switch is a Linux bridge, a learning switch without OpenFlow)"),
        )),
        None => Ok(()),
    }
}

fn ovs_config(
    cx: &Ctx<'_>,
    sec: &SwitchSection,
    kind_at: &Spanned<String>,
) -> Result<Built, TopologyError> {
    if let Some(p) = &sec.ports {
        if p.get_ref() != "veth" {
            return Err(cx.err(
                p.span(),
                "an Open vSwitch switch's ports are veths: ports = \"macvlan\" is for a Linux bridge",
            ));
        }
    }
    let mut controllers = Vec::new();
    for c in &sec.controller {
        let addr = value(cx, c, kind::parse_controller)?;
        if controllers.contains(&addr) {
            return Err(cx.err(c.span(), format!("controller {addr} is given twice")));
        }
        controllers.push(addr);
    }
    let protocols = (sec.protocols.iter())
        .map(|p| value(cx, p, kind::parse_protocol))
        .collect::<Result<Vec<_>, _>>()?;
    let fail_mode = (sec.fail_mode.as_ref())
        .map(|f| value(cx, f, kind::parse_fail_mode))
        .transpose()?;
    let datapath = (sec.datapath.as_ref())
        .map(|d| value(cx, d, kind::parse_datapath))
        .transpose()?
        .unwrap_or_default();
    let dpid = (sec.dpid.as_ref())
        .map(|d| value(cx, d, kind::parse_dpid))
        .transpose()?;
    let mut port_numbers = Vec::new();
    for (name, n) in sec.port_numbers.iter().flat_map(|m| m.get_ref()) {
        let number = kind::check_port_number(*n.get_ref()).map_err(|m| cx.err(n.span(), m))?;
        port_numbers.push((name.clone(), number));
    }
    let needs = kind::needs();
    let mut built = bridge_config(false);
    built.config = NodeConfig {
        netns_of: Some(kind::HUB_NAME.to_string()),
        ovs: Some(OvsSwitch {
            controllers,
            protocols,
            fail_mode,
            datapath,
            dpid,
            port_numbers,
        }),
        ..built.config
    };
    built.needs = (needs.into_iter())
        .map(|(need, why)| Needed {
            need,
            why,
            at: cx.err(kind_at.span(), ""),
        })
        .collect();
    Ok(built)
}

/// Once every port is laid out: each Open vSwitch switch's port numbers (no two ports
/// on one number, every numbered name a port), and no datapath id twice in the fleet.
pub(super) fn check_switches<'a>(
    cx: &Ctx<'_>,
    switches: impl Iterator<Item = &'a SwitchSection>,
    plan: &Plan,
    errors: &mut Errors,
) {
    let mut dpids: Vec<(u64, &Spanned<String>)> = Vec::new();
    for sec in switches.filter(|s| is_ovs(s.kind.as_ref())) {
        let dpid = (sec.dpid.as_ref()).and_then(|d| Some((kind::parse_dpid(d.get_ref()).ok()?, d)));
        if let Some((id, d)) = dpid {
            match dpids.iter().find(|(other, _)| *other == id) {
                Some((_, first)) => errors.take::<()>(Err(cx.err(
                    d.span(),
                    format!(
                        "dpid {id:016x} is already switch {}'s (line {})",
                        first.get_ref(),
                        cx.place(first.span()).line
                    ),
                ))),
                None => {
                    dpids.push((id, &sec.name));
                    None
                }
            };
        }
        errors.take(check_ports(cx, sec, plan));
    }
}

fn check_ports(cx: &Ctx<'_>, sec: &SwitchSection, plan: &Plan) -> Result<(), TopologyError> {
    let Some(map) = &sec.port_numbers else {
        return Ok(());
    };
    let i = plan
        .find(sec.name.get_ref())
        .map_err(|m| cx.err(sec.name.span(), m))?;
    let wiring = plan.wiring_of(i);
    let names: Vec<&str> = wiring.ifaces.iter().map(|f| f.name.as_str()).collect();
    for (name, n) in map.get_ref() {
        if !names.contains(&name.as_str()) {
            let close = crate::closest(name, &names);
            let hint = match close.is_empty() {
                true => format!("its ports are {}", names.join(", ")),
                false => format!("did you mean {}?", close.join(" or ")),
            };
            return Err(cx.err(
                n.span(),
                format!(
                    "switch {} has no port {name:?} ({hint})",
                    sec.name.get_ref()
                ),
            ));
        }
    }
    let sw = OvsSwitch {
        port_numbers: (map.get_ref().iter())
            .filter_map(|(k, v)| Some((k.clone(), kind::check_port_number(*v.get_ref()).ok()?)))
            .collect(),
        ..OvsSwitch::default()
    };
    sw.numbered(names.into_iter())
        .map(drop)
        .map_err(|m| cx.err(map.span(), format!("switch {}: {m}", sec.name.get_ref())))
}

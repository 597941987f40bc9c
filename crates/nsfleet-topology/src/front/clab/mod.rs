//! containerlab's topology files (`lab.clab.yml`), read as they are and built as a fleet
//! with no container engine: every node runs its image (or, when asked, the host's own
//! software) in a world of its own (network, PID, mount and UTS namespaces), as a
//! container would.
//!
//! - [`node`]: a node's definition through containerlab's layers (defaults < kind <
//!   group < node), its kind, and the node configuration it becomes;
//! - [`kind`]: the kinds nsfleet takes, and those it refuses (a vendor's image, ...);
//! - [`frr`]: FRR's rules for a node that runs the host's FRR (which daemons it runs);
//! - [`shlex`]: containerlab's word splitting of `exec` lines, `entrypoint` and `cmd`;
//! - [`keys`]: every key containerlab knows, and whether nsfleet takes it, warns that it
//!   does not apply, or refuses it because ignoring it would change what the lab is;
//! - [`mgmt`]: the management network (every node's `eth0` on one switch, reachable from
//!   the host through a host link), with addresses as containerlab gives them;
//! - [`links`]: `topology.links`, brief and extended;
//! - [`ports`]: ports published on the host.
//!
//! Errors and warnings name file:line:column of the YAML, as for nsfleet's own files, and
//! everything is checked before the first namespace exists. This module never touches
//! the kernel; it reads the host's files that the lab names (startup configurations,
//! bind sources).

mod envfile;
mod envsubst;
mod frr;
mod gotemplate;
mod keys;
mod kind;
mod links;
mod mgmt;
mod node;
mod ports;
mod shlex;
mod stages;

use crate::decl::Spanned;
use crate::error::{Ctx, TopologyError};
use crate::front::yaml::{self, Yaml};
use crate::resolve;
use crate::resolve::draft::{Draft, Groups};
use crate::{check_name, Names, MAX_FLEET_NAME, MAX_NODE_NAME};
use std::ops::Range;

/// Reads a containerlab topology file; `file` names it in errors. Its nodes run their
/// images.
pub fn read(file: &str, text: &str) -> Result<Draft, TopologyError> {
    read_with(file, text, crate::front::Software::Images)
}

/// Reads a containerlab topology file whose nodes run what `software` says.
pub fn read_with(
    file: &str,
    text: &str,
    software: crate::front::Software,
) -> Result<Draft, TopologyError> {
    read_with_vars(file, text, software, &[])
}

/// Reads a containerlab topology file, rendered as a Go template with the variables of
/// `vars` (or of the vars files beside it, as containerlab finds them), whose nodes run
/// what `software` says.
pub fn read_with_vars(
    file: &str,
    text: &str,
    software: crate::front::Software,
    vars: &[std::path::PathBuf],
) -> Result<Draft, TopologyError> {
    let rendered = gotemplate::render(file, text, vars)?;
    let text = expand_env(file, rendered.as_deref().unwrap_or(text))?;
    let cx = Ctx::new(file, &text);
    let doc = yaml::load(&text).map_err(|(at, m)| cx.err(at, format!("YAML: {m}")))?;
    let mut lab = Lab {
        cx: &cx,
        warnings: Vec::new(),
        software,
    };
    lab.map(&doc, "a containerlab topology: name, topology, ...")?;
    lab.check_keys(&doc, keys::TOP, "top-level")?;
    let name = lab.need(&doc, "name", "the lab's name")?;
    let name_str = lab.string(name)?;
    check_name("lab name", &name_str, MAX_FLEET_NAME).map_err(|m| cx.err(name.span.clone(), m))?;
    let prefix = match doc.get("prefix") {
        // Empty (null) is containerlab's default, as Go's YAML reads it; "" is no prefix.
        Some(p) if p.is_null() => None,
        Some(p) => Some(lab.string(p)?),
        None => None,
    };
    let topology = lab.need(&doc, "topology", "the lab's nodes and links")?;
    lab.map(topology, "nodes, links, defaults, kinds, groups")?;
    lab.check_keys(topology, keys::TOPOLOGY, "topology")?;
    let mgmt = mgmt::Mgmt::read(&mut lab, doc.get("mgmt"), &name_str)?;
    let nodes = node::read_all(&mut lab, topology, &name_str, prefix.as_deref())?;
    stages::check(&mut lab, &nodes)?;

    let mut groups = Groups::default();
    // A `kind: host` node is the host itself: its link ends are host links.
    for n in nodes.iter().filter(|n| n.kind != kind::Kind::Host) {
        let built = n.build(&mut lab, mgmt.host_iface())?;
        groups.add(&cx, Names::One(n.name.clone()), built, &n.spanned_name())?;
    }
    ports::check_unique(&lab, groups.list.iter().flat_map(|g| g.config.ports.iter()))?;
    let managed: Vec<&node::NodeDecl> = nodes.iter().filter(|n| n.managed()).collect();
    if !managed.is_empty() {
        let at = Spanned::new(mgmt.at.clone(), mgmt.network.clone());
        check_name("management network name", &mgmt.network, MAX_NODE_NAME)
            .map_err(|m| cx.err(mgmt.at.clone(), m))?;
        groups.add(&cx, Names::One(mgmt.network.clone()), crate::resolve::draft::switch_config(true), &at)
            .map_err(|e| e.with(format!("{} (the management network's switch is named after mgmt.network: set another there)", e.message)))?;
    }
    let mut plan = groups.plan();
    for n in nodes.iter().filter(|n| n.kind == kind::Kind::OvsBridge) {
        (plan.set_ovs(&n.name)).map_err(|m| lab.err(n.spanned_name().span(), m))?;
    }
    if !managed.is_empty() {
        mgmt.wire(&lab, &managed, &mut plan)?;
    }
    links::read_all(&mut lab, topology.get("links"), &nodes, &mgmt, &mut plan)?;
    let warnings = lab.warnings;
    resolve::finish(
        &name_str,
        groups,
        plan,
        cx,
        warnings,
        node::count_interfaces,
    )
}

/// A command line split into words as containerlab splits `exec` lines and `exec
/// --cmd` (Go's shlex: quotes and backslashes, no shell).
pub fn split_words(line: &str) -> Result<Vec<String>, String> {
    shlex::shlex(line)
}

/// The file's text with the environment's variables in it, as containerlab reads it.
fn expand_env(file: &str, text: &str) -> Result<String, TopologyError> {
    envsubst::expand(text, |k| std::env::var(k).ok())
        .map_err(|m| TopologyError::new(file, crate::Place::default(), m))
}

/// The file being read, and what it has warned about so far.
pub(crate) struct Lab<'a> {
    cx: &'a Ctx<'a>,
    warnings: Vec<TopologyError>,
    /// Whether nodes run their images or the host's software.
    software: crate::front::Software,
}

impl<'a> Lab<'a> {
    fn err(&self, at: Range<usize>, m: impl Into<String>) -> TopologyError {
        self.cx.err(at, m)
    }

    fn warn(&mut self, at: Range<usize>, m: impl Into<String>) {
        let w = self.cx.err(at, m);
        if !self.warnings.contains(&w) {
            self.warnings.push(w);
        }
    }

    fn map<'y>(&self, y: &'y Yaml, what: &str) -> Result<&'y [(Yaml, Yaml)], TopologyError> {
        y.entries()
            .ok_or_else(|| self.err(y.span.clone(), format!("expected a mapping: {what}")))
    }

    fn list<'y>(&self, y: &'y Yaml, what: &str) -> Result<&'y [Yaml], TopologyError> {
        y.items()
            .ok_or_else(|| self.err(y.span.clone(), format!("expected a list: {what}")))
    }

    fn need<'y>(&self, y: &'y Yaml, key: &str, what: &str) -> Result<&'y Yaml, TopologyError> {
        y.get(key).ok_or_else(|| {
            let at = y.span.start..y.span.start;
            self.err(at, format!("missing `{key}`: {what}"))
        })
    }

    /// A scalar as text (numbers and booleans as written).
    fn string(&self, y: &Yaml) -> Result<String, TopologyError> {
        y.str()
            .map(str::to_string)
            .ok_or_else(|| self.err(y.span.clone(), "expected a string"))
    }

    /// A list of strings.
    fn strings(&self, y: &Yaml, what: &str) -> Result<Vec<(String, Range<usize>)>, TopologyError> {
        (self.list(y, what)?.iter())
            .map(|i| Ok((self.string(i)?, i.span.clone())))
            .collect()
    }

    /// A mapping of strings to scalars, as `env` and `labels` are.
    fn string_map(
        &self,
        y: &Yaml,
        what: &str,
    ) -> Result<Vec<(String, String, Range<usize>)>, TopologyError> {
        (self.map(y, what)?.iter())
            .map(|(k, v)| {
                let value = if v.is_null() {
                    String::new()
                } else {
                    self.string(v)?
                };
                Ok((self.string(k)?, value, v.span.clone()))
            })
            .collect()
    }

    /// Checks a mapping's keys against what nsfleet does with each (see [`keys`]).
    fn check_keys(
        &mut self,
        y: &Yaml,
        known: &[keys::Key],
        place: &str,
    ) -> Result<(), TopologyError> {
        for (k, v) in y.entries().unwrap_or_default() {
            let name = self.string(k)?;
            match known.iter().find(|key| key.name == name) {
                Some(key) => match key.use_ {
                    keys::Use::Taken => {}
                    keys::Use::Ignored(why) => {
                        self.warn(k.span.clone(), format!("`{name}` is not applied: {why}"))
                    }
                    keys::Use::Refused(why) if !v.is_null() => {
                        return Err(self.err(k.span.clone(), format!("`{name}`: {why}")))
                    }
                    keys::Use::Refused(_) => {}
                },
                None => self.warn(
                    k.span.clone(),
                    format!("unknown {place} key `{name}`: ignored (containerlab would refuse it)"),
                ),
            }
        }
        Ok(())
    }
}

/// The nodes a containerlab file declares as `kind: bridge` (on the node itself), read
/// without validating the rest: the bridges a tool that drives containerlab would make on
/// the host, which nsfleet makes as switches of the lab's own.
pub fn bridge_nodes(file: &str, text: &str) -> Result<Vec<String>, TopologyError> {
    let rendered = gotemplate::render(file, text, &[])?;
    let text = expand_env(file, rendered.as_deref().unwrap_or(text))?;
    let cx = Ctx::new(file, &text);
    let doc = yaml::load(&text).map_err(|(at, m)| cx.err(at, format!("YAML: {m}")))?;
    let nodes = (doc.get("topology").and_then(|t| t.get("nodes")))
        .and_then(|n| n.entries())
        .unwrap_or_default();
    Ok((nodes.iter())
        .filter(|(_, def)| def.get("kind").and_then(|k| k.str()) == Some("bridge"))
        .filter_map(|(name, _)| name.str().map(String::from))
        .collect())
}

/// The lab's name in a containerlab file, read without validating the rest (so that a
/// lab whose file has since changed can still be destroyed); a Go-templated file is
/// rendered with the variables beside it.
pub fn lab_name(file: &str, text: &str) -> Result<String, TopologyError> {
    let rendered = gotemplate::render(file, text, &[])?;
    let text = expand_env(file, rendered.as_deref().unwrap_or(text))?;
    let cx = Ctx::new(file, &text);
    let doc = yaml::load(&text).map_err(|(at, m)| cx.err(at, format!("YAML: {m}")))?;
    let lab = Lab {
        cx: &cx,
        warnings: Vec::new(),
        software: crate::front::Software::Host,
    };
    lab.string(lab.need(&doc, "name", "the lab's name")?)
}

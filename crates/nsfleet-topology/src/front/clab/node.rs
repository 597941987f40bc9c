//! A containerlab node: its definition through the layers containerlab documents
//! (defaults < kind < group < node, with its merge rules per key), its kind, and the
//! nsfleet node configuration it becomes.
//!
//! - `linux`: runs `entrypoint`/`cmd` and then its `exec` lines, split as containerlab
//!   splits them (shell words, no shell). A `linux` node whose image is FRR's
//!   (`frrouting/frr`) runs the host's FRR with the `frr.conf` and `daemons` it binds, as
//!   the image's entrypoint would.
//! - `frr`: the host's FRR with `startup-config` as its configuration.
//! - `bridge`: a switch, in a namespace of its own; `ovs-bridge`: a bridge of the fleet's Open vSwitch.
//! - `host`: the host itself; its link ends are host links.
//!
//! Which kinds are taken and which refused is [`super::kind`]'s; which FRR daemons a node
//! runs is [`super::frr`]'s; `exec`'s word splitting is [`super::shlex`]'s.

use super::frr::{content, daemons_configured, daemons_enabled, Frr};
use super::kind::{resolve_kind, Kind};
use super::shlex::shlex;
use super::{keys, Lab};
use crate::decl::{NodeKeys, Spanned, Value};
use crate::error::TopologyError;
use crate::front::yaml::Yaml;
use crate::resolve::config::{self, Built};
use crate::{check_name, template, Bind, ClabNode, PublishedPort, MAX_NODE_NAME};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

/// One node as the file declares it.
pub(crate) struct NodeDecl<'a> {
    pub name: String,
    /// Where its name is written.
    pub at: Range<usize>,
    pub kind: Kind,
    kind_name: String,
    kind_at: Range<usize>,
    group: Option<String>,
    /// Its definitions, most specific first: the node, its group, its kind, defaults.
    layers: Vec<&'a Yaml>,
    container: String,
    lab: String,
    lab_dir: String,
}

/// Every node of `topology.nodes`, in file order, with its kind resolved.
pub(crate) fn read_all<'a>(
    lab: &mut Lab<'_>,
    topology: &'a Yaml,
    lab_name: &str,
    prefix: Option<&str>,
) -> Result<Vec<NodeDecl<'a>>, TopologyError> {
    let defaults = topology.get("defaults").filter(|d| !d.is_null());
    let kinds = section(lab, topology.get("kinds"), "kinds")?;
    let groups = section(lab, topology.get("groups"), "groups")?;
    if let Some(d) = defaults {
        lab.map(d, "node settings for every node")?;
        lab.check_keys(d, keys::NODE, "node")?;
    }
    let nodes = lab.need(topology, "nodes", "the lab's nodes")?;
    let entries = lab.map(nodes, "node names, each with its settings")?;
    if entries.is_empty() {
        return Err(lab.err(nodes.span.clone(), "a lab needs at least one node"));
    }
    let base = lab_base(lab.cx.file);
    let lab_dir = format!("{base}/clab-{lab_name}");
    let mut out = Vec::new();
    for (k, def) in entries {
        let name = lab.string(k)?;
        check_name("node name", &name, MAX_NODE_NAME).map_err(|m| lab.err(k.span.clone(), m))?;
        lab.map(def, "the node's settings")?;
        lab.check_keys(def, keys::NODE, "node")?;
        let scalar = |y: Option<&'a Yaml>| y.filter(|v| !v.is_null());
        let group_of = |d: Option<&'a Yaml>| scalar(d.and_then(|d| d.get("group")));
        let group_def = |g: Option<&'a Yaml>| g.and_then(|g| g.str()).and_then(|g| get(groups, g));
        let kind = scalar(def.get("kind"))
            .or_else(|| scalar(group_def(group_of(Some(def))).and_then(|g| g.get("kind"))))
            .or_else(|| scalar(group_def(group_of(defaults)).and_then(|g| g.get("kind"))))
            .or_else(|| scalar(defaults.and_then(|d| d.get("kind"))))
            .ok_or_else(|| lab.err(k.span.clone(), format!("node {name} has no kind: set `kind` on it, its group or topology.defaults (linux, frr or bridge)")))?;
        let kind_name = lab.string(kind)?;
        let kind_def = get(kinds, &kind_name);
        let group = group_of(Some(def))
            .or_else(|| group_of(kind_def))
            .or_else(|| group_of(defaults));
        let group_name = group.map(|g| lab.string(g)).transpose()?;
        // A group with no definition is only a label, as in containerlab (for its graph).
        let group_def = group_name.as_deref().and_then(|g| get(groups, g));
        let layers = [Some(def), group_def, kind_def, defaults]
            .into_iter()
            .flatten()
            .collect();
        let container = match prefix {
            None => format!("clab-{lab_name}-{name}"),
            Some("") => name.clone(),
            Some("__lab-name") => format!("{lab_name}-{name}"),
            Some(p) => format!("{p}-{lab_name}-{name}"),
        };
        out.push(NodeDecl {
            kind: resolve_kind(lab, &name, &kind_name, kind.span.clone())?,
            name,
            at: k.span.clone(),
            kind_name,
            kind_at: kind.span.clone(),
            group: group_name,
            layers,
            container,
            lab: lab_name.to_string(),
            lab_dir: lab_dir.clone(),
        });
    }
    Ok(out)
}

fn section<'a>(
    lab: &mut Lab<'_>,
    y: Option<&'a Yaml>,
    what: &str,
) -> Result<Option<&'a Yaml>, TopologyError> {
    let Some(y) = y.filter(|y| !y.is_null()) else {
        return Ok(None);
    };
    for (_, def) in lab.map(y, &format!("{what}, each with node settings"))? {
        lab.map(def, "node settings")?;
        lab.check_keys(def, keys::NODE, "node")?;
    }
    Ok(Some(y))
}

fn get<'a>(section: Option<&'a Yaml>, name: &str) -> Option<&'a Yaml> {
    section.and_then(|s| s.get(name)).filter(|d| !d.is_null())
}

/// The folder relative paths are relative to: the topology file's.
fn lab_base(file: &str) -> String {
    let dir = Path::new(file)
        .parent()
        .filter(|p| !p.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    std::path::absolute(dir)
        .unwrap_or(dir.to_path_buf())
        .display()
        .to_string()
}

impl NodeDecl<'_> {
    pub fn spanned_name(&self) -> Spanned<String> {
        Spanned::new(self.at.clone(), self.name.clone())
    }

    /// Whether the node has an `eth0` on the management network.
    pub fn managed(&self) -> bool {
        matches!(self.kind, Kind::Linux | Kind::Frr)
            && self.first("network-mode").and_then(|m| m.str()) != Some("none")
    }

    /// `network-mode`: none (no management network), bridge (the default); host and
    /// container:NAME put the node in another's network namespace, which would make it
    /// another lab.
    fn check_network_mode(&self, lab: &Lab<'_>) -> Result<(), TopologyError> {
        let Some(m) = self.first("network-mode") else {
            return Ok(());
        };
        match lab.string(m)?.as_str() {
            "none" | "bridge" => Ok(()),
            other => Err(lab.err(m.span.clone(), format!("node {}: network-mode {other} shares another network namespace; every nsfleet node has its own (none and bridge are taken)", self.name))),
        }
    }

    /// The first layer's value of `key` that is set (`mgmt-ipv4`, ...).
    pub(crate) fn first(&self, key: &str) -> Option<&Yaml> {
        self.layers
            .iter()
            .find_map(|l| l.get(key).filter(|v| !v.is_null() && v.str() != Some("")))
    }

    /// A map key merged over the layers, the most specific winning.
    fn merged_map(
        &self,
        lab: &Lab<'_>,
        key: &str,
    ) -> Result<Vec<(String, String, Range<usize>)>, TopologyError> {
        let mut out: Vec<(String, String, Range<usize>)> = Vec::new();
        for l in self.layers.iter().rev() {
            let Some(m) = l.get(key).filter(|v| !v.is_null()) else {
                continue;
            };
            for (k, v, at) in lab.string_map(m, key)? {
                out.retain(|(x, _, _)| *x != k);
                out.push((k, v, at));
            }
        }
        Ok(out)
    }

    /// A list key concatenated over the layers (defaults first), without repeats.
    fn merged_list(
        &self,
        lab: &Lab<'_>,
        key: &str,
    ) -> Result<Vec<(String, Range<usize>)>, TopologyError> {
        let mut out: Vec<(String, Range<usize>)> = Vec::new();
        for l in self.layers.iter().rev() {
            let Some(list) = l.get(key).filter(|v| !v.is_null()) else {
                continue;
            };
            for (s, at) in lab.strings(list, key)? {
                if !out.iter().any(|(x, _)| *x == s) {
                    out.push((s, at));
                }
            }
        }
        Ok(out)
    }

    /// containerlab's magic variables, filled for this node.
    fn magic(&self, s: &str) -> String {
        let node_dir = format!("{}/{}", self.lab_dir, self.name);
        s.replace("__clabNodeName__", &self.name)
            .replace("__clabNodeDir__", &node_dir)
            .replace("__clabDir__", &self.lab_dir)
            .replace("__clabLabName__", &format!("clab-{}", self.lab))
    }

    /// A host path as containerlab resolves it: `~` is home, a relative path is relative
    /// to the topology file's folder.
    fn host_path(&self, p: &str) -> String {
        let p = self.magic(p);
        if let Some(rest) = p.strip_prefix("~/") {
            return format!("{}/{rest}", std::env::var("HOME").unwrap_or_default());
        }
        if p.starts_with('/') {
            return p;
        }
        let base = self.lab_dir.rsplit_once('/').map_or(".", |(b, _)| b);
        format!("{base}/{}", p.trim_start_matches("./"))
    }

    /// The node configuration this node becomes (bridges and the host have none).
    /// `host_iface` is the host's end of the management network, which published ports
    /// are reached through.
    pub fn build(&self, lab: &mut Lab<'_>, host_iface: &str) -> Result<Built, TopologyError> {
        if self.kind == Kind::Bridge {
            return Ok(crate::resolve::draft::switch_config(false));
        }
        if self.kind == Kind::OvsBridge {
            return Ok(self.ovs_bridge(lab));
        }
        self.check_network_mode(lab)?;
        let binds = self.binds(lab)?;
        let frr = self.frr(lab, &binds)?;
        let mut keys = self.keys(lab, frr.as_ref())?;
        if !self.runs_image(lab) {
            keys.dirs_from_host = holders_to_copy(&binds, &keys);
        }
        let mut built = config::build(lab.cx, &[&keys], None)?;
        let c = &mut built.config;
        if let Some(image) = &mut c.image {
            image.entrypoint = self.words(lab, "entrypoint")?;
            image.cmd = self.words(lab, "cmd")?;
            image.user = self.first("user").map(|u| lab.string(u)).transpose()?;
        } else if let Some(u) = self.first("user") {
            return Err(lab.err(u.span.clone(), format!("node {}: `user` is for a node that runs its image; the host's software runs as root here (running it as another user would change what it can do)", self.name)));
        }
        if let (Some(_), Some(script)) = (&frr, self.exec_script(lab)?) {
            // Once FRR has read its configuration, as the image's entrypoint has by the
            // time containerlab runs exec lines.
            if let Some(last) = c.commands.last_mut() {
                last.push('\n');
                last.push_str(script.get_ref());
            }
        }
        for (b, at) in &binds {
            config::check_bind(b, &c.dirs, c.image.is_some())
                .map_err(|m| lab.err(at.clone(), m))?;
        }
        c.binds = binds.into_iter().map(|(b, _)| b).collect();
        c.env = self.env(lab)?;
        if let Some(d) = self.first("startup-delay") {
            c.start_delay_s = match d.int() {
                Some(s @ 0..=86_400) => s as u32,
                _ => {
                    return Err(lab.err(
                        d.span.clone(),
                        "startup-delay: expected seconds, from 0 to 86400",
                    ))
                }
            };
        }
        c.healthcheck = self.healthcheck(lab)?;
        c.ports = self.ports(lab, host_iface)?;
        c.aliases = Some(self.container.clone())
            .filter(|a| *a != self.name)
            .into_iter()
            .collect();
        c.clab = Some(self.declared(lab)?);
        Ok(built)
    }

    /// An `ovs-bridge`: a bridge of the fleet's Open vSwitch, in standalone mode (as a
    /// bridge made with `ovs-vsctl add-br` and no controller is: a learning switch).
    /// containerlab attaches its nodes to a bridge the host already has; nsfleet makes
    /// its own and touches none of the host's.
    fn ovs_bridge(&self, lab: &mut Lab<'_>) -> Built {
        let mut built = crate::resolve::draft::switch_config(false);
        built.config.netns_of = Some(crate::kind::ovs::HUB_NAME.to_string());
        built.config.ovs = Some(crate::OvsSwitch::default());
        built.needs = (crate::kind::ovs::needs().into_iter())
            .map(|(need, why)| crate::resolve::config::Needed {
                need,
                why,
                at: lab.err(self.kind_at.clone(), ""),
            })
            .collect();
        built
    }

    /// What the node is as nsfleet's node keys (whose checks it then goes through): its
    /// host name, private folders (a container's own /tmp, `tmpfs`), sysctls, FRR or
    /// its commands.
    fn keys(&self, lab: &mut Lab<'_>, frr: Option<&Frr>) -> Result<NodeKeys, TopologyError> {
        let text = |s: &str, at: &Range<usize>| Spanned::new(at.clone(), s.to_string());
        let image = self.first("image").filter(|_| self.runs_image(lab));
        let mut keys = NodeKeys {
            hostname: Some(match self.first("hostname") {
                Some(h) => text(&template::literal(&lab.string(h)?), &h.span),
                None => text(&self.name, &self.at),
            }),
            // A container's own /tmp and /root (what its processes write there stays
            // the node's, not the host's); an image's are the node's own already.
            dirs: match image {
                Some(_) => Vec::new(),
                None => vec![text("/tmp", &self.at), text("/root", &self.at)],
            },
            image: image
                .map(|i| Ok(text(&lab.string(i)?, &i.span)))
                .transpose()?,
            ..NodeKeys::default()
        };
        if let Some(p) = self.first("privileged") {
            let yes = match lab.string(p)?.as_str() {
                "true" => true,
                "false" => false,
                _ => return Err(lab.err(p.span.clone(), "privileged: expected true or false")),
            };
            keys.privileged = Some(Spanned::new(p.span.clone(), yes));
        }
        // Docker's words for a container's limits: a size, CPUs, a CPU list, a size.
        let limit =
            |lab: &mut Lab<'_>, key: &str| -> Result<Option<Spanned<Value>>, TopologyError> {
                let Some(v) = self.first(key) else {
                    return Ok(None);
                };
                Ok(Some(Spanned::new(
                    v.span.clone(),
                    Value::Text(lab.string(v)?),
                )))
            };
        keys.memory = limit(lab, "memory")?;
        keys.cpu = limit(lab, "cpu")?;
        keys.cpuset = limit(lab, "cpu-set")?;
        keys.shm_size = limit(lab, "shm-size")?;
        self.security(lab, &mut keys)?;
        for (path, _, at) in self.merged_map(lab, "tmpfs")? {
            keys.dirs.push(text(&path, &at));
        }
        for (k, v, at) in self.merged_map(lab, "sysctls")? {
            keys.sysctls.insert(k, Spanned::new(at, Value::Text(v)));
        }
        let main = self.main_command(lab)?;
        if let Some((config, daemons)) = frr {
            keys.kind = Some(text("frr", &self.kind_at));
            keys.config = Some(config.clone());
            keys.daemons = daemons.iter().map(|d| text(d, &config.span())).collect();
            if let Some(main) = main {
                let m = format!(
                    "node {}: `cmd` and `entrypoint` are not run: the node runs the host's FRR",
                    self.name
                );
                lab.warn(main.span(), m);
            }
            return Ok(keys);
        }
        if let Some(sc) = self.first("startup-config") {
            let m = format!("node {}: `startup-config` is not applied to a linux node (bind its files, or use kind frr)", self.name);
            lab.warn(sc.span.clone(), m);
        }
        if keys.image.is_none() {
            // With an image, `entrypoint` and `cmd` override the image's (see `build`).
            keys.commands.extend(main);
        }
        keys.commands.extend(self.exec_script(lab)?);
        Ok(keys)
    }

    /// Docker's `cap-add`, `cap-drop`, `security-opts` and `devices` as nsfleet's
    /// `capabilities`, `security_opt` and `devices`. A node keeps every capability unless
    /// dropped: `cap-add` names are checked, and add nothing.
    fn security(&self, lab: &mut Lab<'_>, keys: &mut NodeKeys) -> Result<(), TopologyError> {
        for (name, at) in self.merged_list(lab, "cap-add")? {
            nsfleet_values::capability(&name).map_err(|m| lab.err(at, format!("cap-add: {m}")))?;
        }
        for (name, at) in self.merged_list(lab, "cap-drop")? {
            nsfleet_values::capability(&name)
                .map_err(|m| lab.err(at.clone(), format!("cap-drop: {m}")))?;
            keys.capabilities.push(Spanned::new(at, format!("-{name}")));
        }
        let list = |lab: &Lab<'_>, key: &str| -> Result<Vec<Spanned<String>>, TopologyError> {
            Ok((self.merged_list(lab, key)?.into_iter())
                .map(|(v, at)| Spanned::new(at, v))
                .collect())
        };
        keys.security_opt = list(lab, "security-opts")?;
        keys.devices = list(lab, "devices")?;
        Ok(())
    }

    /// Whether the node runs its image: a linux node that names one, unless the host's
    /// software was asked for.
    fn runs_image(&self, lab: &Lab<'_>) -> bool {
        lab.software == crate::front::Software::Images
            && self.kind == Kind::Linux
            && self.first("image").is_some()
    }

    /// `entrypoint` or `cmd` as words, split as containerlab splits them.
    fn words(&self, lab: &Lab<'_>, key: &str) -> Result<Option<Vec<String>>, TopologyError> {
        let Some(y) = self.first(key) else {
            return Ok(None);
        };
        let line = self.magic(&lab.string(y)?);
        shlex(&line)
            .map(Some)
            .map_err(|m| lab.err(y.span.clone(), m))
    }

    /// `healthcheck`, from the first layer that sets it: `test` as Docker takes it
    /// (`[CMD, prog, args...]`, `[CMD-SHELL, line]`, or `[NONE]`), and `start-period`,
    /// `interval`, `timeout` (seconds) and `retries`, at Docker's defaults when left out
    /// (0, 30, 30, 3).
    fn healthcheck(&self, lab: &Lab<'_>) -> Result<Option<crate::HealthCheck>, TopologyError> {
        let Some(h) = self.first("healthcheck") else {
            return Ok(None);
        };
        let err = |y: &Yaml, m: &str| {
            lab.err(
                y.span.clone(),
                format!("node {}: healthcheck: {m}", self.name),
            )
        };
        let Some(entries) = h.entries() else {
            return Err(err(
                h,
                "expected a mapping of test, start-period, interval, timeout and retries",
            ));
        };
        let mut check = crate::HealthCheck::with_docker_defaults(Vec::new());
        let mut test = None;
        for (k, v) in entries {
            let most = crate::HealthCheck::MAX_SECONDS;
            let number = |lo: i64, what: &str| match v.int() {
                Some(n) if (lo..=most).contains(&n) => Ok(n as u32),
                _ => Err(err(
                    v,
                    &format!(
                        "{}: expected {what} from {lo} to {most}",
                        k.str().unwrap_or("")
                    ),
                )),
            };
            match k.str().unwrap_or("") {
                "test" => test = Some(self.health_test(lab, v)?),
                "start-period" => check.start_period_s = number(0, "whole seconds")?,
                "interval" => check.interval_s = number(1, "whole seconds")?,
                "timeout" => check.timeout_s = number(1, "whole seconds")?,
                "retries" => check.retries = number(1, "a whole number")?,
                other => return Err(err(k, &format!("unknown key {other:?}: expected test, start-period, interval, timeout or retries"))),
            }
        }
        // An image's own HEALTHCHECK is not read: a node's check is the file's.
        let Some(argv) = test else {
            return Err(err(
                h,
                "expected a test (an image's own HEALTHCHECK is not run)",
            ));
        };
        if argv.is_empty() {
            // `[NONE]`: Docker then checks nothing.
            return Ok(None);
        }
        check.argv = argv;
        Ok(Some(check))
    }

    /// A health check's `test`: what it runs in the node.
    fn health_test(&self, lab: &Lab<'_>, v: &Yaml) -> Result<Vec<String>, TopologyError> {
        let expected =
            "test: expected [CMD-SHELL, \"a shell line\"], [CMD, program, arguments...] or [NONE]";
        let bad = || {
            lab.err(
                v.span.clone(),
                format!("node {}: healthcheck: {expected}", self.name),
            )
        };
        let words = lab.strings(v, "healthcheck test")?;
        let words: Vec<String> = words.iter().map(|(w, _)| self.magic(w)).collect();
        crate::HealthCheck::docker_test(&words).ok_or_else(bad)
    }

    /// `ports`, from the first layer that sets it (as containerlab takes it).
    fn ports(&self, lab: &Lab<'_>, host_iface: &str) -> Result<Vec<PublishedPort>, TopologyError> {
        let Some(list) = self.first("ports") else {
            return Ok(Vec::new());
        };
        if !self.managed() {
            let m = format!("node {}: `ports` are published to a node's management address, and network-mode none gives it none", self.name);
            return Err(lab.err(list.span.clone(), m));
        }
        super::ports::read(lab, &lab.strings(list, "ports")?, host_iface)
    }

    /// The node as the file declares it, for `inspect`.
    fn declared(&self, lab: &Lab<'_>) -> Result<ClabNode, TopologyError> {
        Ok(ClabNode {
            container: self.container.clone(),
            kind: self.kind_name.clone(),
            image: self.first("image").map(|i| lab.string(i)).transpose()?,
            labels: self.labels(lab)?,
        })
    }

    /// `entrypoint` and `cmd`, as the container's main process would run them.
    fn main_command(&self, lab: &Lab<'_>) -> Result<Option<Spanned<String>>, TopologyError> {
        let parts = ["entrypoint", "cmd"].map(|k| self.first(k));
        let Some(at) = parts.iter().flatten().next().map(|y| y.span.clone()) else {
            return Ok(None);
        };
        let mut words = Vec::new();
        for y in parts.into_iter().flatten() {
            let line = self.magic(&lab.string(y)?);
            words.extend(shlex(&line).map_err(|m| lab.err(y.span.clone(), m))?);
        }
        let line = words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ");
        Ok(Some(Spanned::new(
            at,
            template::literal(&format!("exec {line}")),
        )))
    }

    /// The `exec` lines as one script: each run in turn, split into words as containerlab
    /// splits them (no shell), a failure reported in the node's log without stopping the
    /// others; the script fails if any did.
    fn exec_script(&self, lab: &Lab<'_>) -> Result<Option<Spanned<String>>, TopologyError> {
        let lines = self.merged_list(lab, "exec")?;
        let Some((_, at)) = lines.first() else {
            return Ok(None);
        };
        let mut script = String::from("failed=0\n");
        for (line, at) in &lines {
            let line = self.magic(line);
            let words = shlex(&line).map_err(|m| lab.err(at.clone(), format!("exec: {m}")))?;
            if words.is_empty() {
                continue;
            }
            let argv = words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ");
            let say = quote(&format!("exec: {line}"));
            script.push_str(&format!("echo {say}; {argv} || {{ failed=$?; echo \"exec failed with status $failed\" >&2; }}\n"));
        }
        script.push_str("exit $failed");
        Ok(Some(Spanned::new(at.clone(), template::literal(&script))))
    }

    /// Its labels as containerlab sets them on the container: its own (`containerlab`,
    /// `clab-node-name`, ...), then `labels` merged over the layers.
    fn labels(&self, lab: &Lab<'_>) -> Result<Vec<(String, String)>, TopologyError> {
        let node_type = match self.first("type") {
            Some(t) => lab.string(t)?,
            None => String::new(),
        };
        // As containerlab: the deploying user (through sudo, the one who ran sudo).
        let owner = ["SUDO_USER", "USER"]
            .iter()
            .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
            .unwrap_or_default();
        let topo_file = std::path::absolute(lab.cx.file)
            .map_or(lab.cx.file.to_string(), |p| p.display().to_string());
        let mut labels = vec![
            ("containerlab".to_string(), self.lab.clone()),
            ("clab-node-name".into(), self.name.clone()),
            ("clab-node-longname".into(), self.container.clone()),
            ("clab-node-kind".into(), self.kind_name.clone()),
            ("clab-node-type".into(), node_type),
            (
                "clab-node-group".into(),
                self.group.clone().unwrap_or_default(),
            ),
            (
                "clab-node-lab-dir".into(),
                format!("{}/{}", self.lab_dir, self.name),
            ),
            ("clab-topo-file".into(), topo_file),
            ("clab-owner".into(), owner),
        ];
        for (k, v, _) in self.merged_map(lab, "labels")? {
            labels.retain(|(x, _)| *x != k);
            labels.push((k, v));
        }
        Ok(labels)
    }

    /// The node's environment: containerlab's own variables (labels as `CLAB_LABEL_*`),
    /// then `env-files`', then `env` merged over the layers; `CLAB_INTFS` comes with the
    /// wiring.
    fn env(&self, lab: &Lab<'_>) -> Result<Vec<(String, String)>, TopologyError> {
        let mut env = Vec::new();
        for (k, v) in self.labels(lab)? {
            env.push((label_variable(&k), v));
        }
        for (k, v) in self.env_files(lab)? {
            env.retain(|(x, _)| *x != k);
            env.push((k, v));
        }
        for (k, v, at) in self.merged_map(lab, "env")? {
            let ok = k.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok || v.contains('\0') {
                return Err(lab.err(
                    at,
                    format!("env {k:?}: expected a variable name of letters, digits and '_'"),
                ));
            }
            env.retain(|(x, _)| *x != k);
            env.push((k, v));
        }
        Ok(env)
    }

    /// The variables of `env-files` merged over the layers (defaults first), each file
    /// relative to the topology file's folder; a later file's value wins, and `env`'s over
    /// all of them.
    fn env_files(&self, lab: &Lab<'_>) -> Result<Vec<(String, String)>, TopologyError> {
        let mut vars: Vec<(String, String)> = Vec::new();
        for (file, at) in self.merged_list(lab, "env-files")? {
            let path = self.host_path(&file);
            let text = config::read_source(&path)
                .map_err(|m| lab.err(at.clone(), format!("env-files: {m}")))?;
            let shell = |k: &str| std::env::var(k).ok();
            let read = super::envfile::parse(&text, &shell)
                .map_err(|(n, m)| lab.err(at.clone(), format!("env-file {path}, line {n}: {m}")))?;
            for (k, v) in read {
                vars.retain(|(x, _)| *x != k);
                vars.push((k, v));
            }
        }
        Ok(vars)
    }

    /// `binds` merged over the layers: one per target (the most specific wins), a folder
    /// before what is bound inside it (as Docker mounts them), each with where it is
    /// written.
    fn binds(&self, lab: &Lab<'_>) -> Result<Vec<(Bind, Range<usize>)>, TopologyError> {
        let mut out: Vec<(Bind, Range<usize>)> = Vec::new();
        for (spec, at) in self.merged_list(lab, "binds")? {
            let (source, target, read_only) = match config::split_bind(&spec) {
                Ok(parts) => parts,
                Err(m) => return Err(lab.err(at, m)),
            };
            let source = self.host_path(source);
            if std::fs::symlink_metadata(&source).is_err() {
                return Err(lab.err(at, format!("bind {spec:?}: the host has no {source} (relative paths are relative to the topology file's folder)")));
            }
            let bind = Bind {
                source,
                target: config::host_view(target),
                read_only,
            };
            out.push((bind, at));
        }
        let out = config::order_binds(out).map_err(|(m, at)| lab.err(at, m))?;
        Ok(out)
    }

    /// The file a node has at `path` through its binds: bound there, or inside a bound
    /// folder (`config/r1:/etc/frr` gives `/etc/frr/frr.conf`).
    fn bound_file<'b>(
        &self,
        binds: &'b [(Bind, Range<usize>)],
        path: &str,
    ) -> Option<(String, &'b Range<usize>)> {
        binds.iter().rev().find_map(|(b, at)| {
            let rest = path.strip_prefix(&b.target)?;
            let source = format!("{}{rest}", b.source);
            (rest.is_empty() || rest.starts_with('/') && Path::new(&source).is_file())
                .then_some((source, at))
        })
    }

    /// FRR's configuration and daemons, if the node runs FRR: kind frr (its
    /// `startup-config`), or a linux node with FRR's image (the `frr.conf` it binds).
    fn frr(
        &self,
        lab: &Lab<'_>,
        binds: &[(Bind, Range<usize>)],
    ) -> Result<Option<Frr>, TopologyError> {
        let image = self
            .first("image")
            .and_then(|i| i.str())
            .unwrap_or_default();
        // registry:port/frrouting/frr:tag@digest -> frr
        let last = image.rsplit('/').next().unwrap_or("");
        let frr_image = last.split(['@', ':']).next() == Some("frr");
        let host_frr = self.kind == Kind::Linux && frr_image && !self.runs_image(lab);
        if self.kind != Kind::Frr && !host_frr {
            return Ok(None);
        }
        let (config, text) = match (
            self.first("startup-config"),
            self.bound_file(binds, "/etc/frr/frr.conf"),
        ) {
            (Some(sc), _) if self.kind == Kind::Frr => {
                let s = self.magic(&lab.string(sc)?);
                if s.contains('\n') {
                    (Spanned::new(sc.span.clone(), content(&s)), s)
                } else {
                    let path = self.host_path(&s);
                    let text = config::read_source(&path)
                        .map_err(|m| lab.err(sc.span.clone(), format!("startup-config: {m}")))?;
                    (Spanned::new(sc.span.clone(), Value::Text(path)), text)
                }
            }
            (_, Some((source, at))) => {
                let text = config::read_source(&source).map_err(|m| lab.err(at.clone(), m))?;
                (Spanned::new(at.clone(), Value::Text(source)), text)
            }
            _ => (
                Spanned::new(self.kind_at.clone(), content("")),
                String::new(),
            ),
        };
        let mut daemons = match self.bound_file(binds, "/etc/frr/daemons") {
            Some((source, at)) => {
                let text = config::read_source(&source).map_err(|m| lab.err(at.clone(), m))?;
                daemons_enabled(&text)
            }
            None => daemons_configured(&text),
        };
        // FRR's image runs FRR's init, which starts staticd always ("The watchfrr, zebra
        // and staticd daemons are always started", its daemons file says), and tools
        // that configure such nodes later (netlab) add static routes then: staticd
        // runs. nsfleet's own `kind: frr` starts it only for a file with static routes.
        if host_frr && !daemons.iter().any(|d| d == "staticd") {
            daemons.insert(0, "staticd".to_string());
        }
        Ok(Some((config, daemons)))
    }
}

/// The folders a host-software node gets a copy of, for binds whose target folder the
/// host does not have (netlab binds its scripts to /etc/config/, which a container's
/// root gets made for it): the nearest folder above the target that the host has,
/// copied into the node's world, where the mount point can then be made. The host
/// never gets a new folder.
fn holders_to_copy(binds: &[(Bind, Range<usize>)], keys: &NodeKeys) -> Vec<Spanned<String>> {
    let mut copies: Vec<Spanned<String>> = Vec::new();
    let private = |t: &str| {
        (keys.dirs.iter()).any(|d| t == d.get_ref() || t.starts_with(&format!("{}/", d.get_ref())))
    };
    for (b, at) in binds {
        let target = Path::new(&b.target);
        let Some(parent) = target.parent() else {
            continue;
        };
        if parent.exists() || private(&b.target) {
            continue;
        }
        let Some(holder) = parent.ancestors().find(|a| a.is_dir()) else {
            continue;
        };
        let holder = holder.display().to_string();
        if holder != "/" && !copies.iter().any(|c| *c.get_ref() == holder) {
            copies.push(Spanned::new(at.clone(), holder));
        }
    }
    copies
}

/// The variable containerlab exports a label as: `clab-node-kind` is `CLAB_LABEL_CLAB_NODE_KIND`.
fn label_variable(label: &str) -> String {
    let upper = label.chars().map(|c| {
        if c.is_ascii_alphanumeric() {
            c.to_ascii_uppercase()
        } else {
            '_'
        }
    });
    format!("CLAB_LABEL_{}", upper.collect::<String>())
}

use crate::shell_quote as quote;

/// Gives every node `CLAB_INTFS`, the number of its interfaces besides `eth0`, as
/// containerlab does (images wait for that many). A containerlab file's groups are one
/// node each, so the groups and the nodes' wiring go in step.
pub(crate) fn count_interfaces(groups: &mut [crate::NodeGroup], wiring: &[Arc<crate::NodeWiring>]) {
    for (g, w) in groups.iter_mut().zip(wiring) {
        if g.config.clab.is_some() && !g.config.switch {
            let n = w.ifaces.iter().filter(|i| i.name != "eth0").count();
            Arc::make_mut(&mut g.config)
                .env
                .push(("CLAB_INTFS".into(), n.to_string()));
        }
    }
}

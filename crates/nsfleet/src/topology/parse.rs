//! Reading a topology file (TOML) into a validated [`Topology`], or a precise error.
//!
//! Every check happens here, before the first namespace exists: the engine trusts a
//! `Topology`. Errors name file:line:column and what was expected there.

use super::{check_name, Names, NodeConfig, NodeGroup, Topology, MAX_FLEET_NAME, MAX_NODE_NAME};
use indexmap::IndexMap;
use serde::Deserialize;
use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use toml::Spanned;

/// The fleet `nsfleet up` builds when given no file.
pub const DEFAULT_FLEET: &str = include_str!("../../../../examples/default.toml");
pub const DEFAULT_FLEET_FILE: &str = "<built-in default fleet>";

/// Upper bounds that catch typos (`count = 1000000000`) long before the kernel would.
const MAX_COUNT: u64 = 200_000;
const MAX_COMMAND_LEN: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for TopologyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            // Not about a place in the file (it could not be read at all).
            return write!(f, "{}: {}", self.file, self.message);
        }
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

impl std::error::Error for TopologyError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    fleet: Spanned<FleetSection>,
    #[serde(default)]
    defaults: Option<Spanned<ConfigSection>>,
    #[serde(default)]
    node: Vec<Spanned<NodeSection>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FleetSection {
    name: Spanned<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ConfigSection {
    #[serde(default)]
    sysctls: IndexMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    commands: Vec<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeSection {
    name: Spanned<String>,
    count: Option<Spanned<i64>>,
    start: Option<Spanned<i64>>,
    #[serde(default)]
    sysctls: IndexMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    commands: Vec<Spanned<String>>,
}

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn err(&self, span: Range<usize>, message: impl Into<String>) -> TopologyError {
        let upto = &self.text[..span.start.min(self.text.len())];
        let line = upto.matches('\n').count() + 1;
        let column = upto.len() - upto.rfind('\n').map_or(0, |i| i + 1) + 1;
        TopologyError {
            file: self.file.to_string(),
            line,
            column,
            message: message.into(),
        }
    }
}

pub fn parse_file(path: &Path) -> Result<Topology, TopologyError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| TopologyError {
        file: file.clone(),
        line: 0,
        column: 0,
        message: format!("cannot read the topology file: {e}"),
    })?;
    parse(&file, &text)
}

/// Parses and validates `text`; `file` names it in errors.
pub fn parse(file: &str, text: &str) -> Result<Topology, TopologyError> {
    let cx = Ctx { file, text };
    let doc: File = toml::from_str(text).map_err(|e| {
        let msg = e.message().trim_end().to_string();
        cx.err(e.span().unwrap_or(0..0), msg)
    })?;
    let name = &doc.fleet.get_ref().name;
    check_name("fleet name", name.get_ref(), MAX_FLEET_NAME).map_err(|m| cx.err(name.span(), m))?;
    if doc.node.is_empty() {
        return Err(cx.err(
            doc.fleet.span(),
            "a fleet needs at least one [[node]] table, e.g. [[node]] name = \"h{i}\" count = 4",
        ));
    }
    let empty = ConfigSection::default();
    let defaults = doc.defaults.as_ref().map_or(&empty, |d| d.get_ref());
    let mut groups = Vec::with_capacity(doc.node.len());
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut total = 0u64;
    for node in &doc.node {
        let group = node_group(&cx, node.get_ref(), defaults)?;
        total += group.names.len();
        if total > MAX_COUNT {
            return Err(cx.err(
                node.span(),
                format!("the fleet would have {total} nodes; nsfleet accepts at most {MAX_COUNT}"),
            ));
        }
        let here = cx.err(node.get_ref().name.span(), "").line;
        for n in group.names.iter() {
            if let Some(first) = seen.insert(n.clone(), here) {
                return Err(cx.err(
                    node.get_ref().name.span(),
                    format!("node name {n:?} is already used by the node at line {first}"),
                ));
            }
        }
        groups.push(group);
    }
    let topo = Topology {
        name: name.get_ref().clone(),
        groups,
    };
    check_sysctls_writable(&cx, &doc)?;
    Ok(topo)
}

fn node_group(
    cx: &Ctx<'_>,
    n: &NodeSection,
    defaults: &ConfigSection,
) -> Result<NodeGroup, TopologyError> {
    let template = n.name.get_ref();
    let names = match &n.count {
        None => {
            if let Some(s) = &n.start {
                return Err(cx.err(s.span(), "`start` only makes sense together with `count`"));
            }
            if template.contains(['{', '}']) {
                return Err(cx.err(
                    n.name.span(),
                    "a name with `{i}` needs `count = N` to generate nodes",
                ));
            }
            check_name("node name", template, MAX_NODE_NAME)
                .map_err(|m| cx.err(n.name.span(), m))?;
            Names::One(template.clone())
        }
        Some(count) => {
            let c = *count.get_ref();
            if c < 1 || c as u64 > MAX_COUNT {
                return Err(cx.err(
                    count.span(),
                    format!("expected a count from 1 to {MAX_COUNT}, got {c}"),
                ));
            }
            let start = match &n.start {
                Some(s) if *s.get_ref() < 0 => {
                    return Err(cx.err(s.span(), "expected a start index of 0 or more"));
                }
                Some(s) => *s.get_ref() as u64,
                None => 1,
            };
            if template.matches("{i}").count() != 1
                || template.replace("{i}", "").contains(['{', '}'])
            {
                return Err(cx.err(
                    n.name.span(),
                    "expected a name template with exactly one `{i}`, e.g. \"r{i}\"",
                ));
            }
            let widest = template.replace("{i}", &(start + c as u64 - 1).to_string());
            check_name("generated node name", &widest, MAX_NODE_NAME)
                .map_err(|m| cx.err(n.name.span(), m))?;
            Names::Generated {
                template: template.clone(),
                start,
                count: c as u64,
            }
        }
    };
    let mut config = NodeConfig::default();
    for (key, value) in defaults.sysctls.iter().chain(&n.sysctls) {
        let v = sysctl(cx, key, value)?;
        match config.sysctls.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = v,
            None => config.sysctls.push((key.clone(), v)),
        }
    }
    for cmd in defaults.commands.iter().chain(&n.commands) {
        let c = cmd.get_ref();
        if c.trim().is_empty() || c.len() > MAX_COMMAND_LEN || c.contains('\0') {
            return Err(cx.err(
                cmd.span(),
                format!(
                    "expected a non-empty shell command line of at most {MAX_COMMAND_LEN} bytes"
                ),
            ));
        }
        config.commands.push(c.clone());
    }
    Ok(NodeGroup {
        names,
        config: Arc::new(config),
    })
}

fn sysctl(cx: &Ctx<'_>, key: &str, value: &Spanned<toml::Value>) -> Result<String, TopologyError> {
    let ok_key = key.starts_with("net.")
        && key.len() < 256
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c))
        && !key.contains("..")
        && !key.split(['.', '/']).any(|part| part.is_empty());
    if !ok_key {
        return Err(cx.err(
            value.span(),
            format!("sysctl {key:?}: expected a per-namespace key under `net.`, e.g. \"net.ipv4.ip_forward\""),
        ));
    }
    match value.get_ref() {
        toml::Value::String(s) if !s.contains(['\n', '\0']) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Boolean(b) => Ok(if *b { "1" } else { "0" }.into()),
        _ => Err(cx.err(
            value.span(),
            format!("sysctl {key:?}: expected a string, an integer or a boolean"),
        )),
    }
}

/// `net.ipv4.conf.all.forwarding` -> `net/ipv4/conf/all/forwarding`. A key written with
/// slashes is already a path (sysctl(8)'s way to name `eth0.100`).
pub(crate) fn sysctl_path(key: &str) -> String {
    if key.contains('/') {
        key.to_string()
    } else {
        key.replace('.', "/")
    }
}

/// Per-interface keys name interfaces that exist only once the fleet is wired.
fn names_an_interface(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    matches!(parts.as_slice(), ["net", "ipv4" | "ipv6", "conf" | "neigh", dev, ..] if !matches!(*dev, "all" | "default"))
}

/// Checks that every sysctl key is writable in a fresh network namespace, which is what a
/// node starts as. Host-only keys (`net.core.rmem_max`) are absent or read-only there and
/// are refused now rather than half-way through `up`. The probe namespace lives on a
/// scratch thread and dies with it; where we may not create one (not root), the check is
/// left to `up`.
fn check_sysctls_writable(cx: &Ctx<'_>, doc: &File) -> Result<(), TopologyError> {
    let mut keys: Vec<(String, Range<usize>)> = Vec::new();
    let sections = doc
        .defaults
        .iter()
        .map(|d| &d.get_ref().sysctls)
        .chain(doc.node.iter().map(|n| &n.get_ref().sysctls));
    for map in sections {
        for (k, v) in map {
            let path = sysctl_path(k);
            if !names_an_interface(&path) && !keys.iter().any(|(p, _)| *p == path) {
                keys.push((path, v.span()));
            }
        }
    }
    if keys.is_empty() {
        return Ok(());
    }
    let paths: Vec<String> = keys.iter().map(|(p, _)| p.clone()).collect();
    let writable_in_node = std::thread::spawn(move || -> Option<Vec<bool>> {
        crate::sys::unshare_net().ok()?;
        Some(paths.iter().map(|p| writable(p)).collect())
    })
    .join()
    .ok()
    .flatten();
    for (ok, (path, span)) in writable_in_node.unwrap_or_default().into_iter().zip(keys) {
        if !ok {
            let key = path.replace('/', ".");
            let hint = if writable(&path) {
                "it exists on the host but is not per network namespace"
            } else {
                "no such sysctl on this kernel"
            };
            return Err(cx.err(span, format!("sysctl {key:?}: {hint}")));
        }
    }
    Ok(())
}

/// Whether this thread's view of `/proc/sys/<path>` can be written.
fn writable(path: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(Path::new("/proc/sys").join(path))
        .is_ok_and(|m| m.permissions().mode() & 0o200 != 0)
}

//! A node group's [`NodeConfig`] from the layers of node keys that apply to it
//! (`[defaults]`, a generator's own keys, its `node` table or a `[[node]]`), later layers
//! over earlier ones; and the checks of what those keys name on the host: private
//! directories, file sources, templates. Per-node checks (an address a template names) wait
//! for the wiring: [`Templates`] keeps what they need.

use crate::decl::{sysctl, NodeKeys, Spanned, Value};
use crate::error::{Ctx, TopologyError};
use crate::kind;
use crate::resolve::template::{self, Placeholder, Vars};
use crate::{FileSource, IpNet, NodeConfig, NodeWiring, PrivateDir, PrivateFile};
use std::collections::HashMap;
use std::ops::Range;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

const MAX_COMMAND_LEN: usize = 4096;
const MAX_DIRS: usize = 64;
const MAX_FILES: usize = 256;
/// Largest file a node may be given (a configuration, not a disk image).
const MAX_FILE: u64 = 1 << 20;
/// Most a `dirs_from_host` folder may hold: each node gets a copy in memory (tmpfs).
const MAX_COPIED: u64 = 64 << 20;
/// The kernel's limit on a host name (`__NEW_UTS_LEN`).
const MAX_HOSTNAME: usize = 64;

/// Where nothing may be mounted: the kernel's own filesystems, and `/` itself.
const FORBIDDEN: &[&str] = &["/proc", "/sys", "/dev"];

/// Folders whose private (empty) version would hide the system the node's programs run
/// from (`/bin/sh`, libraries, `/etc/passwd`): folders inside them are fine.
const SYSTEM: &[&str] = &[
    "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/var",
];

/// Every node with a world has its own empty /run, as a container has: its daemons' run
/// folders are made there, and the host's /run is never written.
pub const PRIVATE_RUN: &str = "/run";

/// The fleet's /etc/hosts, which nsfleet writes.
pub const HOSTS: &str = "/etc/hosts";

/// A group's templates, checked per node once the wiring is known.
#[derive(Default)]
pub(crate) struct Templates {
    /// The placeholders of a template, and where it is written.
    uses: Vec<(Vec<Placeholder>, TopologyError)>,
    /// Files whose source path is a template: checked for each node.
    sources: Vec<(String, TopologyError)>,
    /// Where the host name template is written: checked for each node once filled.
    hostname_at: Option<TopologyError>,
    /// Interfaces that sysctls name (`net.ipv4.conf.eth1.rp_filter`), and where: each
    /// node must have them, or the kernel has no such key.
    iface_keys: Vec<(String, TopologyError)>,
}

/// What a group's layers give besides its configuration.
pub(crate) struct Built {
    pub config: NodeConfig,
    pub templates: Templates,
    /// The `loopback` pool, and where it is written.
    pub loopback: Option<(Vec<IpNet>, TopologyError)>,
    /// The per-namespace sysctls it sets, for the kernel to be asked about.
    pub asked: Vec<Asked>,
    /// What its kind needs installed, for the host to be asked about.
    pub needs: Vec<Needed>,
    /// What is said at its place on every `up` (a privileged node).
    pub warnings: Vec<TopologyError>,
}

impl Built {
    /// `config`, with no templates, loopback or sysctls to ask about.
    pub(crate) fn of(config: NodeConfig) -> Built {
        Built {
            config,
            templates: Templates::default(),
            loopback: None,
            asked: Vec::new(),
            needs: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

/// A sysctl and value the kernel is asked about, and where the file sets it.
#[derive(Debug)]
pub(crate) struct Asked {
    /// The key's path below /proc/sys as probed. A scratch namespace has none of the
    /// fleet's interfaces, so an interface's key is probed on `lo`, whose keys are the
    /// same and checked by the same handlers (`net/ipv4/conf/lo/rp_filter`).
    pub path: String,
    /// The key as the file writes it (`net.ipv4.conf.eth1.rp_filter`).
    pub key: String,
    pub value: String,
    pub at: TopologyError,
}

/// Something a node's kind needs of the host, what to say without it, and where the
/// kind is written.
#[derive(Debug)]
pub(crate) struct Needed {
    pub need: crate::HostNeed,
    pub why: String,
    pub at: TopologyError,
}

/// The configuration `layers` (lowest first) give a group; `router` is the group's
/// default for `router` when no layer sets it.
pub(crate) fn build(
    cx: &Ctx<'_>,
    layers: &[&NodeKeys],
    router: Option<bool>,
) -> Result<Built, TopologyError> {
    let last =
        |f: fn(&NodeKeys) -> Option<&Spanned<String>>| layers.iter().rev().find_map(|l| f(l));
    let cfg = layers.iter().rev().find_map(|l| l.config.as_ref());
    let own_router = layers.iter().rev().find_map(|l| l.router);
    let privileged = layers.iter().rev().find_map(|l| l.privileged.as_ref());
    let confined = layers.iter().rev().find_map(|l| l.confined.as_ref());
    let mut config = NodeConfig {
        router: own_router.or(router).unwrap_or(false),
        privileged: privileged.is_some_and(|p| *p.get_ref()),
        confined_asked: confined.is_some_and(|c| *c.get_ref()),
        ..NodeConfig::default()
    };
    if let Some(c) = confined.filter(|_| config.confined_asked && config.privileged) {
        return Err(cx.err(c.span(), CONFINED_AND_PRIVILEGED));
    }
    let mut warnings: Vec<TopologyError> = (privileged.filter(|p| *p.get_ref()))
        .map(|p| cx.err(p.span(), PRIVILEGED))
        .into_iter()
        .collect();
    let mut templates = Templates::default();
    let mut asked = Vec::new();
    let mut needs = Vec::new();
    for (key, value) in layers.iter().flat_map(|l| &l.sysctls) {
        let v = sysctl(cx, key, value)?;
        let mut path = crate::sysctl_path(key);
        if let Some(iface) = crate::kernel::interface_of(&path) {
            templates
                .iface_keys
                .push((iface.to_string(), cx.err(value.span(), "")));
            path = crate::kernel::on_lo(&path);
        }
        asked.push(Asked {
            path,
            key: key.to_string(),
            value: v.clone(),
            at: cx.err(value.span(), ""),
        });
        (config.sysctl_places.0).insert(key.to_string(), cx.place(value.span()));
        match config.sysctls.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = v,
            None => config.sysctls.push((key.to_string(), v)),
        }
    }
    if let Some(kind) = last(|l| l.kind.as_ref()) {
        let daemons_at = layers.iter().rev().find(|l| !l.daemons.is_empty());
        let daemons: Vec<String> = daemons_at.map_or(Vec::new(), |l| {
            l.daemons.iter().map(|d| d.get_ref().clone()).collect()
        });
        let source = cfg.map(|c| file_source(cx, "config", c)).transpose()?;
        let parts = kind::parts(kind.get_ref(), source, &daemons).map_err(|(key, m)| {
            let at = match key {
                "config" => cfg.map(|c| c.span()),
                "daemons" => daemons_at.and_then(|l| l.daemons.first()).map(|d| d.span()),
                _ => None,
            };
            cx.err(at.unwrap_or(kind.span()), m)
        })?;
        if parts.router {
            config.router = own_router.unwrap_or(true);
        }
        config.dirs = parts.dirs;
        config.commands = parts.commands;
        needs.extend(parts.needs.into_iter().map(|(need, why)| Needed {
            need,
            why,
            at: cx.err(kind.span(), ""),
        }));
        let at = cfg.map_or(kind.span(), |c| c.span());
        for f in parts.files {
            add_file(cx, &mut config, &mut templates, f, at.clone())?;
        }
    } else if let Some(c) = cfg {
        return Err(cx.err(
            c.span(),
            "`config` is for kind = \"frr\" or \"bird\": set `kind` too",
        ));
    }
    for cmd in layers.iter().flat_map(|l| &l.commands) {
        let c = cmd.get_ref();
        if c.trim().is_empty() || c.len() > MAX_COMMAND_LEN || c.contains('\0') {
            return Err(cx.err(
                cmd.span(),
                format!(
                    "expected a non-empty shell command line of at most {MAX_COMMAND_LEN} bytes"
                ),
            ));
        }
        templates.add(cx, c, cmd.span())?;
        config.commands.push(c.clone());
    }
    if let Some(i) = last(|l| l.image.as_ref()) {
        config.image = Some(image(cx, i, last(|l| l.kind.as_ref()))?);
    }
    if let Some(h) = last(|l| l.hostname.as_ref()) {
        templates.add(cx, h.get_ref(), h.span())?;
        templates.hostname_at = Some(cx.err(h.span(), ""));
        config.hostname = Some(h.get_ref().clone());
    }
    if let Some(r) = last(|l| l.restart.as_ref()) {
        config.restart_on_failure = match r.get_ref().as_str() {
            "no" => false,
            "on-failure" => true,
            other => {
                return Err(cx.err(
                    r.span(),
                    format!("restart = {other:?}: expected \"no\" or \"on-failure\""),
                ))
            }
        };
    }
    if let Some(h) = layers.iter().rev().find_map(|l| l.healthcheck.as_ref()) {
        config.healthcheck = healthcheck(cx, h)?;
    }
    dirs(cx, layers, &mut config)?;
    binds(cx, layers, &mut config)?;
    files(cx, layers, &mut config, &mut templates)?;
    limits(cx, layers, &mut config, &mut needs)?;
    security(cx, layers, &mut config, &mut warnings, &mut needs)?;
    let loopback = match layers.iter().rev().find_map(|l| l.loopback.as_ref()) {
        Some(v) => Some((loopback(cx, v)?, cx.err(v.span(), ""))),
        None => None,
    };
    Ok(Built {
        config,
        templates,
        loopback,
        asked,
        needs,
        warnings,
    })
}

/// Why `confined = true` is refused on a node that is also `privileged = true`.
pub(crate) const CONFINED_AND_PRIVILEGED: &str = "confined: this node is also privileged = true; a node is confined or privileged, not both (leave one out)";

/// What is said of a privileged node at its line, on every `up`.
pub(crate) const PRIVILEGED: &str = "privileged: this node runs as the host's root with every capability, not confined to its own namespaces (see docs/confinement.md)";

/// The capabilities, security options and devices `layers` give (each key from the last
/// layer that sets it), into `config`; what is not applied, said in `warnings`.
fn security(
    cx: &Ctx<'_>,
    layers: &[&NodeKeys],
    config: &mut NodeConfig,
    warnings: &mut Vec<TopologyError>,
    needs: &mut Vec<Needed>,
) -> Result<(), TopologyError> {
    let last = |f: fn(&NodeKeys) -> &Vec<Spanned<String>>| {
        (layers.iter().rev()).map(|l| f(l)).find(|v| !v.is_empty())
    };
    let runs_image = config.image.is_some();
    let s = &mut config.security;
    if let Some(caps) = last(|l| &l.capabilities) {
        s.drop_capabilities = nsfleet_values::ALL_CAPABILITIES & !kept_capabilities(cx, caps)?;
    }
    for o in last(|l| &l.security_opt).into_iter().flatten() {
        if let Some(w) = security_opt(cx, o.get_ref(), s).map_err(|m| cx.err(o.span(), m))? {
            warnings.push(cx.err(o.span(), w));
        }
    }
    for d in last(|l| &l.devices).into_iter().flatten() {
        let device = device(d.get_ref(), runs_image).map_err(|m| cx.err(d.span(), m))?;
        let write = device.mode & 0o222 != 0;
        needs.push(Needed {
            need: crate::HostNeed::Device(device.host.clone(), write),
            why: format!("devices {:?}: a user's node gets the host's {} bound into it (a user namespace may make no device file), and this user may not open it{}: ask for access to it (its group), or run nsfleet as root (docs/rootless.md)", d.get_ref(), device.host, if write { " for writing" } else { "" }),
            at: cx.err(d.span(), ""),
        });
        s.devices.push(device);
    }
    Ok(())
}

/// What `capabilities` keeps: each name kept, each `-NAME` dropped, in order, from
/// every capability if the first is a drop, else from none.
fn kept_capabilities(cx: &Ctx<'_>, caps: &[Spanned<String>]) -> Result<u64, TopologyError> {
    let from_all = caps.first().is_some_and(|c| c.get_ref().starts_with('-'));
    let mut kept = if from_all {
        nsfleet_values::ALL_CAPABILITIES
    } else {
        0
    };
    for c in caps {
        let (dropped, name) = match c.get_ref().strip_prefix('-') {
            Some(name) => (true, name),
            None => (false, c.get_ref().as_str()),
        };
        let bits = nsfleet_values::capability(name)
            .map_err(|m| cx.err(c.span(), format!("capabilities: {m}")))?;
        kept = if dropped { kept & !bits } else { kept | bits };
    }
    Ok(kept)
}

/// One of Docker's `--security-opt`s, into `s`; a warning if it is not applied. A
/// seccomp profile's file is relative to the topology file's folder.
fn security_opt(
    cx: &Ctx<'_>,
    opt: &str,
    s: &mut crate::Security,
) -> Result<Option<String>, String> {
    let opt = opt.trim();
    // Docker takes `seccomp:unconfined` (its older form) as `seccomp=unconfined`.
    let (key, value) = opt.split_once(['=', ':']).unwrap_or((opt, ""));
    match (key, value) {
        ("seccomp", "unconfined") => s.seccomp = crate::Seccomp::Unconfined,
        ("seccomp", "") => return Err(format!("security_opt {opt:?}: expected seccomp=unconfined or seccomp=FILE, a profile of Docker's format")),
        ("seccomp", file) => {
            let text = std::fs::read_to_string(absolute(cx, file))
                .map_err(|e| format!("security_opt {opt:?}: reading the profile {file}: {e}"))?;
            let profile = crate::seccomp::parse(file, &text)
                .map_err(|m| format!("security_opt {opt:?}: {m}"))?;
            s.seccomp = crate::Seccomp::Profile(profile);
        }
        ("systempaths", "unconfined") => s.system_paths = false,
        ("no-new-privileges", "" | "true") => s.no_new_privileges = true,
        ("no-new-privileges", "false") => s.no_new_privileges = false,
        ("apparmor" | "label", _) => {
            return Ok(Some(format!("security_opt {opt:?} is not applied: nsfleet loads no AppArmor or SELinux profile")))
        }
        _ => return Err(format!("security_opt {opt:?}: expected seccomp=unconfined, seccomp=FILE, systempaths=unconfined, no-new-privileges[=true|false], apparmor=... or label=... (Docker's --security-opt)")),
    }
    Ok(None)
}

/// A device as Docker's `--device` takes it: `HOST[:NODE[:PERMISSIONS]]`, PERMISSIONS of
/// `r`, `w` and `m` (`rwm` when left out). The host's file must be a device now. A node
/// that runs the host's software gets its device at the host's path (a privileged one
/// sees the host's /dev, where it is already).
fn device(text: &str, runs_image: bool) -> Result<crate::Device, String> {
    let expected =
        "expected HOST_PATH[:NODE_PATH[:PERMISSIONS]], as /dev/kvm or /dev/net/tun:/dev/net/tun:rw";
    let mut parts = text.split(':');
    let host = parts.next().unwrap_or_default();
    let path = parts.next().unwrap_or(host);
    let perms = parts.next().unwrap_or("rwm");
    if parts.next().is_some() || !host.starts_with('/') || !path.starts_with('/') {
        return Err(format!("devices {text:?}: {expected}"));
    }
    if perms.is_empty() || !perms.chars().all(|c| "rwm".contains(c)) {
        return Err(format!(
            "devices {text:?}: permissions {perms:?}: expected r, w and m (rwm)"
        ));
    }
    if !runs_image && path != host {
        return Err(format!("devices {text:?}: a node that runs the host's software gets a device at the host's path (a privileged one sees the host's /dev): {host}"));
    }
    let meta = std::fs::metadata(host).map_err(|e| format!("devices {text:?}: {host}: {e}"))?;
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    if !kind.is_char_device() && !kind.is_block_device() {
        return Err(format!("devices {text:?}: {host} is not a device file"));
    }
    let rdev = meta.rdev();
    let mode = (if perms.contains('r') { 0o444 } else { 0 })
        | (if perms.contains('w') { 0o222 } else { 0 });
    Ok(crate::Device {
        path: path.to_string(),
        host: host.to_string(),
        block: kind.is_block_device(),
        major: (((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff)) as u32,
        minor: ((rdev & 0xff) | ((rdev >> 12) & !0xff)) as u32,
        mode,
    })
}

/// Docker's smallest memory limit: below it a node's init and shell do not fit.
const MIN_MEMORY: u64 = 6 << 20;

/// The limits `layers` set (each key from the last layer that sets it), into `config`;
/// and what each needs of the host, at its place: its cgroup controller (and a
/// `cpuset`'s CPUs), for the host's answer to refuse before anything exists.
fn limits(
    cx: &Ctx<'_>,
    layers: &[&NodeKeys],
    config: &mut NodeConfig,
    needs: &mut Vec<Needed>,
) -> Result<(), TopologyError> {
    let last = |f: fn(&NodeKeys) -> Option<&Spanned<Value>>| layers.iter().rev().find_map(|l| f(l));
    let mut need = |v: &Spanned<Value>, key: &str, need: crate::HostNeed| {
        let why = match &need {
            crate::HostNeed::Cpus(cpus) => format!("{key} = {}: this machine has no CPU {cpus} online (see /sys/devices/system/cpu/online)", shown(v.get_ref())),
            // Each limit's key is its controller's name.
            _ => format!("`{key}` needs the {key} cgroup controller, which this host does not give nsfleet: a cgroup v1 hierarchy of it, or cgroup v2 with +{key} in its root's cgroup.subtree_control (see docs/confinement.md, \"Limits\")"),
        };
        needs.push(Needed {
            need,
            why,
            at: cx.err(v.span(), ""),
        });
    };
    let cgroup = |key: &str| crate::HostNeed::Cgroup(key.to_string());
    let bad = |v: &Spanned<Value>, key: &str, why: String| {
        cx.err(v.span(), format!("{key} = {}: {why}", shown(v.get_ref())))
    };
    let l = &mut config.limits;
    if let Some(v) = last(|l| l.memory.as_ref()).filter(|v| is_unlimited(v.get_ref())) {
        l.memory_counted = true;
        need(v, "memory", cgroup("memory"));
    } else if let Some(v) = last(|l| l.memory.as_ref()) {
        let bytes = size(v.get_ref()).map_err(|why| {
            bad(
                v,
                "memory",
                format!("{why}; or \"unlimited\": counted apart, not limited"),
            )
        })?;
        if bytes < MIN_MEMORY {
            return Err(bad(
                v,
                "memory",
                format!(
                    "at least {} (Docker's least too)",
                    nsfleet_values::memory_text(MIN_MEMORY)
                ),
            ));
        }
        l.memory = Some(bytes);
        need(v, "memory", cgroup("memory"));
    }
    if let Some(v) = last(|l| l.cpu.as_ref()) {
        let n = match v.get_ref() {
            Value::Integer(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            Value::Text(t) => t.trim().parse().ok(),
            _ => None,
        };
        let milli = n
            .ok_or_else(|| "expected a number of CPUs like 1.5 or 0.25".to_string())
            .and_then(nsfleet_values::cpus_milli)
            .map_err(|why| bad(v, "cpu", why))?;
        l.cpu_milli = Some(milli);
        need(v, "cpu", cgroup("cpu"));
    }
    if let Some(v) = last(|l| l.cpuset.as_ref()) {
        let text = match v.get_ref() {
            Value::Text(t) => t.clone(),
            Value::Integer(i) => i.to_string(),
            _ => String::new(),
        };
        let cpus = nsfleet_values::cpu_list(&text).map_err(|why| bad(v, "cpuset", why))?;
        need(
            v,
            "cpuset",
            crate::HostNeed::Cpus(nsfleet_values::cpu_list_text(&cpus)),
        );
        need(v, "cpuset", cgroup("cpuset"));
        l.cpuset = Some(cpus);
    }
    if let Some(v) = last(|l| l.pids.as_ref()) {
        l.pids = Some(match v.get_ref() {
            Value::Integer(n) if *n >= 1 => *n as u64,
            _ => {
                return Err(bad(
                    v,
                    "pids",
                    "expected how many processes and threads at most, a whole number from 1".into(),
                ))
            }
        });
        need(v, "pids", cgroup("pids"));
    }
    if let Some(v) = last(|l| l.shm_size.as_ref()) {
        let bytes = size(v.get_ref()).map_err(|why| bad(v, "shm_size", why))?;
        if bytes < 4096 {
            return Err(bad(v, "shm_size", "at least a page, 4096 bytes".into()));
        }
        l.shm_bytes = Some(bytes);
    }
    Ok(())
}

/// `memory = "unlimited"`: a memory cgroup of the node's own, without a limit.
fn is_unlimited(v: &Value) -> bool {
    matches!(v, Value::Text(t) if t == "unlimited")
}

/// A size: a number of bytes, or a text with a binary unit (`64M`, `1GiB`).
fn size(v: &Value) -> Result<u64, String> {
    match v {
        Value::Integer(n) if *n >= 0 => Ok(*n as u64),
        Value::Text(t) => nsfleet_values::memory_bytes(t),
        _ => Err("expected a size like \"64M\", \"512MiB\" or \"2G\" (binary units), or a number of bytes".into()),
    }
}

/// A value as the file wrote it, for an error.
fn shown(v: &Value) -> String {
    match v {
        Value::Text(t) => format!("{t:?}"),
        Value::Integer(n) => n.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::List(_) => "[...]".into(),
        Value::Table(_) => "{...}".into(),
    }
}

/// Longest image reference (Docker's is 255 for the name alone, plus tag and digest).
const MAX_IMAGE_REF: usize = 512;

/// An `image` key: a reference checked for its form only here (the image store, which
/// parses it fully and finds the image, is the machine's); not beside a `kind`, whose
/// daemons are the host's.
fn image(
    cx: &Ctx<'_>,
    i: &Spanned<String>,
    kind: Option<&Spanned<String>>,
) -> Result<crate::NodeImage, TopologyError> {
    let r = i.get_ref();
    if r.is_empty()
        || r.len() > MAX_IMAGE_REF
        || r.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(cx.err(i.span(), format!("image {r:?}: expected a reference such as \"alpine:3.20\" or \"registry.example:5000/team/tool@sha256:...\" (no spaces, at most {MAX_IMAGE_REF} bytes)")));
    }
    if let Some(k) = kind {
        return Err(cx.err(i.span(), format!("image {r:?} with kind = {:?}: a kind runs the host's daemons, an image its own software; give one of them", k.get_ref())));
    }
    Ok(crate::NodeImage {
        reference: r.clone(),
        at: cx.place(i.span()),
        ..Default::default()
    })
}

impl Templates {
    fn add(&mut self, cx: &Ctx<'_>, text: &str, span: Range<usize>) -> Result<(), TopologyError> {
        let used = template::check(text).map_err(|(off, m)| {
            // The offset is in the value; the span starts at its opening quote.
            let mut e = cx.err(span.clone(), m);
            e.at.column += off as u32 + 1;
            e
        })?;
        if used.iter().any(|p| matches!(p, Placeholder::Addr { .. })) {
            self.uses.push((used, cx.err(span, "")));
        }
        Ok(())
    }

    /// Checks that every template of the group `config` can be filled for the node `vars`
    /// names, and that its template files exist and are sound.
    fn check_node(
        &self,
        config: &NodeConfig,
        vars: &Vars<'_>,
        read: &mut SourceCache,
    ) -> Result<(), TopologyError> {
        if let (Some(at), Some(h)) = (&self.hostname_at, &config.hostname) {
            let name = template::expand(h, vars);
            let ok = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_';
            if name.is_empty() || name.len() > MAX_HOSTNAME || !name.chars().all(ok) {
                return Err(at.with(format!("hostname {name:?} (node {}): expected 1 to {MAX_HOSTNAME} letters, digits, '-', '.' or '_'", vars.name)));
            }
        }
        for (used, at) in &self.uses {
            if let Some(m) = template::missing(used, vars) {
                return Err(at.with(m));
            }
        }
        for (iface, at) in &self.iface_keys {
            if vars.wiring.iface(iface).is_none() {
                return Err(at.with(format!(
                    "a sysctl of interface {iface}, which node {} does not have (it has: {})",
                    vars.name,
                    (vars.wiring.ifaces.iter().map(|i| i.name.as_str()))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        for (path, at) in &self.sources {
            let path = template::expand(path, vars);
            let used = read.check(&path, at)?;
            if let Some(m) = template::missing(used, vars) {
                return Err(at.with(format!("{m} (in {path})")));
            }
        }
        Ok(())
    }

    fn is_empty(&self) -> bool {
        self.uses.is_empty()
            && self.sources.is_empty()
            && self.hostname_at.is_none()
            && self.iface_keys.is_empty()
    }
}

/// Template files read once each, with their placeholders.
#[derive(Default)]
pub(crate) struct SourceCache {
    seen: HashMap<String, Vec<Placeholder>>,
}

impl SourceCache {
    fn check(&mut self, path: &str, at: &TopologyError) -> Result<&[Placeholder], TopologyError> {
        if !self.seen.contains_key(path) {
            let text = read_source(path).map_err(|m| at.with(m))?;
            let used = template::check(&text).map_err(|(off, m)| place(path, &text, off, m))?;
            self.seen.insert(path.to_string(), used);
        }
        Ok(&self.seen[path])
    }
}

/// The text of a file source; also what the engine reads when a node starts.
pub fn read_source(path: &str) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("file source {path}: {e}"))?;
    if !meta.is_file() || meta.len() > MAX_FILE {
        return Err(format!(
            "file source {path}: expected a regular file of at most {MAX_FILE} bytes"
        ));
    }
    std::fs::read_to_string(path).map_err(|e| format!("file source {path}: {e}"))
}

/// An error at byte `off` of file `path`.
fn place(path: &str, text: &str, off: usize, message: String) -> TopologyError {
    Ctx::new(path, text).err(off..off, message)
}

/// A path of the file, relative to the topology file's folder, made absolute.
fn absolute(cx: &Ctx<'_>, path: &str) -> String {
    if path.starts_with('/') {
        return path.to_string();
    }
    let base = Path::new(cx.file)
        .parent()
        .filter(|p| p.is_dir())
        .unwrap_or(Path::new(""));
    let joined = base.join(path);
    std::path::absolute(&joined)
        .unwrap_or(joined)
        .display()
        .to_string()
}

/// A source path without placeholders must exist; one with them is checked per node.
fn check_source(cx: &Ctx<'_>, path: &str, at: Range<usize>) -> Result<(), TopologyError> {
    if template::check(path).is_ok_and(|u| u.is_empty()) {
        read_source(path).map_err(|m| cx.err(at, m))?;
    }
    Ok(())
}

/// `HOST_PATH:NODE_PATH` or `HOST_PATH:NODE_PATH:ro` (and `rw`), as containerlab and
/// Docker write a bind: its host path, node path and whether it is read-only.
pub(crate) fn split_bind(spec: &str) -> Result<(&str, &str, bool), String> {
    let parts: Vec<&str> = spec.split(':').collect();
    let (source, target, mode) = match parts[..] {
        [s, t] => (s, t, "rw"),
        [s, t, m] => (s, t, m),
        _ => {
            return Err(format!(
                "bind {spec:?}: expected HOST_PATH:NODE_PATH or HOST_PATH:NODE_PATH:ro"
            ))
        }
    };
    Ok((source, target, mode.split(',').any(|o| o == "ro")))
}

/// A node path as the host resolves its folders (`/var/run/x` is `/run/x`), so that the
/// checks of where a bind may go see what the node will.
pub(crate) fn host_view(target: &str) -> String {
    let path = Path::new(target);
    let real = (path.parent()).and_then(|p| std::fs::canonicalize(p).ok());
    match (real, path.file_name()) {
        (Some(dir), Some(name)) => dir.join(name).display().to_string(),
        _ => target.to_string(),
    }
}

/// Binds as Docker mounts them: one per target (the last given wins), a folder before
/// what is bound inside it, and each bound inside another finding its mount point in
/// the other's host folder (making one would write into the host's folder). Each comes
/// with where it was written (`T`), which an error gives back.
pub(crate) fn order_binds<T>(
    given: Vec<(crate::Bind, T)>,
) -> Result<Vec<(crate::Bind, T)>, (String, T)> {
    let mut out: Vec<(crate::Bind, T)> = Vec::new();
    for (b, at) in given {
        out.retain(|(o, _)| o.target != b.target);
        out.push((b, at));
    }
    out.sort_by(|(a, _), (b, _)| {
        let depth = |t: &str| t.matches('/').count();
        (depth(&a.target), &a.target).cmp(&(depth(&b.target), &b.target))
    });
    for i in 0..out.len() {
        let b = &out[i].0;
        let outer = out[..i]
            .iter()
            .find(|(o, _)| b.target.starts_with(&format!("{}/", o.target)));
        if let Some((o, _)) = outer {
            let inside = format!("{}{}", o.source, &b.target[o.target.len()..]);
            if !Path::new(&inside).exists() {
                let m = format!("bind target {} is inside the bind of {} to {}, which has no {inside} to mount over (nsfleet never creates files on the host)", b.target, o.source, o.target);
                return Err((m, out.swap_remove(i).1));
            }
        }
    }
    Ok(out)
}

/// `binds`: host paths that exist (relative ones from the file's folder), mounted where
/// the node's world has room for them (see [`check_bind`]), ordered as [`order_binds`].
fn binds(cx: &Ctx<'_>, layers: &[&NodeKeys], config: &mut NodeConfig) -> Result<(), TopologyError> {
    let mut given = Vec::new();
    for spec in layers.iter().flat_map(|l| &l.binds) {
        let err = |m: String| cx.err(spec.span(), m);
        let (source, target, read_only) = split_bind(spec.get_ref()).map_err(err)?;
        let source = absolute(cx, source);
        if std::fs::symlink_metadata(&source).is_err() {
            let m = format!("bind {:?}: the host has no {source}", spec.get_ref());
            return Err(err(m));
        }
        let bind = crate::Bind {
            source,
            target: host_view(target),
            read_only,
        };
        given.push((bind, spec.span()));
    }
    let ordered = order_binds(given).map_err(|(m, at)| cx.err(at, m))?;
    for (b, at) in &ordered {
        check_bind(b, &config.dirs, config.image.is_some()).map_err(|m| cx.err(at.clone(), m))?;
    }
    config.binds = ordered.into_iter().map(|(b, _)| b).collect();
    Ok(())
}

fn dirs(cx: &Ctx<'_>, layers: &[&NodeKeys], config: &mut NodeConfig) -> Result<(), TopologyError> {
    let declared = layers.iter().flat_map(|l| {
        (l.dirs.iter().map(|d| (d, false))).chain(l.dirs_from_host.iter().map(|d| (d, true)))
    });
    for (d, from_host) in declared {
        let path = d.get_ref();
        check_dir_path(path).map_err(|m| cx.err(d.span(), m))?;
        if !from_host && SYSTEM.contains(&path.as_str()) {
            let m = format!("private directory {path}: an empty {path} of the node's own would hide the system its programs run from; give a folder inside it (\"{path}/myapp\"), or copy it with dirs_from_host");
            return Err(cx.err(d.span(), m));
        }
        config.dirs.retain(|x| x.path != *path);
        let host = std::fs::metadata(path).ok().filter(|m| m.is_dir());
        if from_host && host.is_none() {
            return Err(cx.err(
                d.span(),
                format!("dirs_from_host: the host has no directory {path} to copy"),
            ));
        }
        if from_host && !fits_in_a_copy(Path::new(path), &mut 0) {
            let m = format!("dirs_from_host: {path} holds more than {} MB (each file counted as at least a 4 KB page), and every node gets a copy of it in memory: give a smaller folder", MAX_COPIED >> 20);
            return Err(cx.err(d.span(), m));
        }
        config.dirs.push(PrivateDir {
            path: path.clone(),
            from_host,
            owner: host.as_ref().map(|m| (m.uid(), m.gid())),
            user: None,
            mode: host.as_ref().map(|m| m.permissions().mode() & 0o7777),
        });
        if config.dirs.len() > MAX_DIRS {
            return Err(cx.err(
                d.span(),
                format!("a node has at most {MAX_DIRS} private directories"),
            ));
        }
    }
    // Parents first: a directory inside another is made in the other's tmpfs.
    config.dirs.sort_by_key(|d| d.path.matches('/').count());
    for (i, d) in config.dirs.iter().enumerate() {
        let made_inside = private_holder(&d.path, &config.dirs[..i]).is_some();
        if !made_inside && !Path::new(&d.path).is_dir() {
            let at = declared_at(layers, &d.path);
            let m = format!("private directory {}: the host has no such directory to mount over (one inside another private directory, or in /run, is made there)", d.path);
            return Err(cx.err(at.unwrap_or(0..0), m));
        }
    }
    Ok(())
}

/// Whether a folder stays within what a per-node copy may hold; `used` counts the bytes
/// seen so far, each entry as at least a page, as tmpfs stores it. Stops early.
fn fits_in_a_copy(dir: &Path, used: &mut u64) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return true; // unreadable: the copy says why, in the node's log
    };
    for e in entries.flatten() {
        let Ok(meta) = e.metadata() else { continue };
        *used += meta.len().max(4096);
        if *used > MAX_COPIED {
            return false;
        }
        if meta.is_dir() && !fits_in_a_copy(&e.path(), used) {
            return false;
        }
    }
    true
}

fn declared_at(layers: &[&NodeKeys], path: &str) -> Option<Range<usize>> {
    let all = layers
        .iter()
        .rev()
        .flat_map(|l| l.dirs.iter().chain(&l.dirs_from_host));
    all.filter(|d| d.get_ref() == path).map(|d| d.span()).next()
}

/// A private directory's path: absolute, plain, and not where the kernel's filesystems are.
fn check_dir_path(path: &str) -> Result<(), String> {
    if !plain_absolute(path) || path.contains(['{', '}']) {
        return Err(format!("private directory {path:?}: expected an absolute path without `.`, `..`, `//`, braces or a trailing `/`, other than `/`"));
    }
    if let Some(f) = FORBIDDEN
        .iter()
        .find(|f| path == **f || path.starts_with(&format!("{f}/")))
    {
        return Err(format!(
            "private directory {path}: {f} is the kernel's; nsfleet mounts nothing there"
        ));
    }
    if path == PRIVATE_RUN {
        return Err(
            "private directory /run: every node that runs processes has its own /run already"
                .into(),
        );
    }
    Ok(())
}

fn files(
    cx: &Ctx<'_>,
    layers: &[&NodeKeys],
    config: &mut NodeConfig,
    templates: &mut Templates,
) -> Result<(), TopologyError> {
    for (path, v) in layers.iter().flat_map(|l| &l.files) {
        let file = PrivateFile {
            path: path.clone(),
            source: file_source(cx, &format!("files.{path:?}"), v)?,
        };
        add_file(cx, config, templates, file, v.span())?;
    }
    Ok(())
}

/// A file's content as a key gives it: a source path (relative to the topology file's
/// folder), or `{ content = "..." }`.
fn file_source(cx: &Ctx<'_>, key: &str, v: &Spanned<Value>) -> Result<FileSource, TopologyError> {
    match v.get_ref() {
        Value::Text(s) => return Ok(FileSource::Path(absolute(cx, s))),
        Value::Table(t) if t.len() == 1 => {
            if let Some(Value::Text(text)) = t.get("content") {
                return Ok(FileSource::Inline(text.clone()));
            }
        }
        _ => {}
    }
    Err(cx.err(
        v.span(),
        format!(
            "{key}: expected a source path (\"configs/{{name}}.conf\") or {{ content = \"...\" }}"
        ),
    ))
}

/// Adds a file to the node (a later one replaces one at the same path), after checking
/// its path, its templates and its source; `at` is where it is declared.
fn add_file(
    cx: &Ctx<'_>,
    config: &mut NodeConfig,
    templates: &mut Templates,
    file: PrivateFile,
    at: Range<usize>,
) -> Result<(), TopologyError> {
    check_file_path(&file.path, &config.dirs).map_err(|m| cx.err(at.clone(), m))?;
    templates.add(cx, &file.path, at.clone())?;
    match &file.source {
        FileSource::Inline(text) => templates.add(cx, text, at.clone())?,
        FileSource::Path(p) => {
            templates.add(cx, p, at.clone())?;
            check_source(cx, p, at.clone())?;
            templates.sources.push((p.clone(), cx.err(at.clone(), "")));
        }
    }
    config.files.retain(|f| f.path != file.path);
    config.files.push(file);
    if config.files.len() > MAX_FILES {
        return Err(cx.err(at, format!("a node has at most {MAX_FILES} files")));
    }
    Ok(())
}

fn check_file_path(path: &str, dirs: &[PrivateDir]) -> Result<(), String> {
    if path == HOSTS {
        return Err(format!(
            "{HOSTS} is the fleet's: nsfleet writes every node's name and addresses there"
        ));
    }
    if !plain_absolute(path) {
        return Err(format!(
            "file {path:?}: expected an absolute path without `.`, `..` or `//`"
        ));
    }
    if dirs.iter().any(|d| d.path == path) {
        return Err(format!(
            "file {path}: it is one of the node's private directories"
        ));
    }
    if private_holder(path, dirs).is_none() {
        return Err(format!("file {path}: it must be inside one of the node's private `dirs` (or /run), so that the host's files are never written"));
    }
    Ok(())
}

/// Checks where a bind is mounted in a node whose private folders are `dirs`: a plain
/// absolute path, not in the kernel's filesystems, and either on the host already (to be
/// mounted over, in the node's world only) or inside a private folder, where the mount
/// point is made; in a node that runs an image (`in_image`), anywhere in its root. The
/// host never gets a new file.
pub(crate) fn check_bind(
    bind: &crate::Bind,
    dirs: &[PrivateDir],
    in_image: bool,
) -> Result<(), String> {
    let t = &bind.target;
    // A bind to /etc/hosts is the node's hosts file instead of the fleet's, as a bind
    // there replaces the one Docker writes.
    if !plain_absolute(t) {
        return Err(format!(
            "bind target {t:?}: expected an absolute path without `.`, `..` or `//`"
        ));
    }
    if let Some(f) = FORBIDDEN
        .iter()
        .find(|f| t == *f || t.starts_with(&format!("{f}/")))
    {
        return Err(format!(
            "bind target {t}: {f} is the kernel's; nsfleet mounts nothing there"
        ));
    }
    let source_dir = Path::new(&bind.source).is_dir();
    // An image's root is the node's own, wherever the target is; what the image has
    // there is known only once it is found.
    if in_image || private_holder(t, dirs).is_some() || dirs.iter().any(|d| d.path == *t) {
        return Ok(());
    }
    match std::fs::metadata(t) {
        Ok(m) if m.is_dir() != source_dir => Err(format!(
            "bind target {t}: the host has a {} there, and {} is a {}",
            if m.is_dir() { "folder" } else { "file" },
            bind.source,
            if source_dir { "folder" } else { "file" }
        )),
        Ok(_) => Ok(()),
        Err(_) => Err(format!("bind target {t}: the host has nothing there to mount over, and nsfleet never creates files on the host; bind into a folder that exists, or into /tmp or /run, which are the node's own")),
    }
}

/// An absolute path other than `/`, without empty, `.` or `..` components (so without a
/// trailing `/`) or line breaks.
fn plain_absolute(path: &str) -> bool {
    path.starts_with('/')
        && !(path.split('/').skip(1)).any(|c| c.is_empty() || c == "." || c == "..")
        && !path.contains(['\0', '\n'])
}

/// The innermost of the node's private folders (or its own /run) that holds `path`, if
/// any: where a file or a folder of the node's own is made, never on the host.
pub fn private_holder<'a>(path: &str, dirs: &'a [PrivateDir]) -> Option<&'a str> {
    let inside = |d: &str| path.starts_with(&format!("{d}/"));
    (dirs.iter().map(|d| d.path.as_str()).chain([PRIVATE_RUN]))
        .filter(|d| inside(d))
        .max_by_key(|d| d.len())
}

/// `healthcheck = { test = "a shell line", interval = 30, timeout = 30, retries = 3,
/// start_period = 0 }`, containerlab's (Docker's) check in TOML: `test` a shell line, or a
/// program and its arguments as a list, or Docker's own list (`["CMD-SHELL", LINE]`,
/// `["CMD", ...]`, `["NONE"]`: no check); the others whole seconds (retries a count), at
/// Docker's defaults when left out. Not a template: run as written.
fn healthcheck(
    cx: &Ctx<'_>,
    v: &Spanned<Value>,
) -> Result<Option<crate::HealthCheck>, TopologyError> {
    let err = |m: String| cx.err(v.span(), format!("healthcheck: {m}"));
    let Value::Table(t) = v.get_ref() else {
        return Err(err("expected a table: { test = \"a shell line\", interval = 30, timeout = 30, retries = 3, start_period = 0 }".into()));
    };
    let mut check = crate::HealthCheck::with_docker_defaults(Vec::new());
    let mut tested = false;
    for (k, x) in t {
        let most = crate::HealthCheck::MAX_SECONDS;
        let number = |lo: i64| match x {
            Value::Integer(n) if (lo..=most).contains(n) => Ok(*n as u32),
            _ => Err(err(format!(
                "{k}: expected a whole number from {lo} to {most}"
            ))),
        };
        match k.as_str() {
            "test" => {
                check.argv = health_test(x).map_err(err)?;
                tested = true;
            }
            "interval" => check.interval_s = number(1)?,
            "timeout" => check.timeout_s = number(1)?,
            "retries" => check.retries = number(1)?,
            "start_period" => check.start_period_s = number(0)?,
            other => {
                return Err(err(format!(
                "unknown key {other:?}: expected test, interval, timeout, retries or start_period"
            )))
            }
        }
    }
    if !tested {
        return Err(err(EXPECTED_TEST.into()));
    }
    // ["NONE"]: Docker then checks nothing.
    Ok((!check.argv.is_empty()).then_some(check))
}

const EXPECTED_TEST: &str = "test: expected a shell line (\"test -e /tmp/ready\") or a program and its arguments ([\"/usr/bin/curl\", \"-f\", \"http://localhost/\"])";

/// A health check's `test` as argv: a shell line, a program and its arguments, or
/// Docker's list (empty for `["NONE"]`); the error says what was expected.
fn health_test(x: &Value) -> Result<Vec<String>, String> {
    match x {
        Value::Text(line) if !line.trim().is_empty() => {
            Ok(vec!["/bin/sh".into(), "-c".into(), line.clone()])
        }
        Value::List(words) if !words.is_empty() => {
            let words: Vec<String> = (words.iter())
                .map(|w| w.as_str().filter(|w| !w.is_empty()).map(str::to_string))
                .collect::<Option<_>>()
                .ok_or(EXPECTED_TEST)?;
            if !["CMD", "CMD-SHELL", "NONE"].contains(&words[0].as_str()) {
                return Ok(words);
            }
            crate::HealthCheck::docker_test(&words).ok_or_else(|| format!("test: Docker's form: expected [\"CMD-SHELL\", \"a shell line\"], [\"CMD\", program, arguments...] or [\"NONE\"], not {words:?}"))
        }
        _ => Err(EXPECTED_TEST.into()),
    }
}

/// `loopback = "10.255.0.0/16"` or a list of such pools (one per IP version): each node of
/// the group gets the next address of each, as a /32 or /128.
fn loopback(cx: &Ctx<'_>, v: &Spanned<Value>) -> Result<Vec<IpNet>, TopologyError> {
    let bad = || {
        cx.err(v.span(), "loopback: expected an address pool like \"10.255.0.0/16\" (or one IPv4 and one IPv6 pool in a list)")
    };
    let items: Vec<&str> = match v.get_ref() {
        Value::Text(s) => vec![s.as_str()],
        Value::List(a) => a
            .iter()
            .map(|x| x.as_str().ok_or_else(bad))
            .collect::<Result<_, _>>()?,
        _ => return Err(bad()),
    };
    let pools: Vec<IpNet> = items
        .iter()
        .map(|s| {
            s.parse::<IpNet>().map_err(|_| bad())?;
            crate::values::network_prefix(s).map_err(|m| cx.err(v.span(), m))
        })
        .collect::<Result<_, _>>()?;
    let v4 = pools.iter().filter(|p| p.addr.is_ipv4()).count();
    if pools.is_empty() || v4 > 1 || pools.len() - v4 > 1 {
        return Err(bad());
    }
    Ok(pools)
}

/// Checks every node's templates once the wiring is laid out.
pub(crate) fn check_nodes<'a>(
    fleet: &str,
    groups: impl Iterator<Item = (&'a crate::NodeGroup, &'a Templates)>,
    wiring: &[std::sync::Arc<NodeWiring>],
) -> Result<(), TopologyError> {
    let unwired = NodeWiring::default();
    let mut cache = SourceCache::default();
    let mut k = 0;
    for (group, t) in groups {
        for (name, number) in group.names.numbered() {
            if !t.is_empty() {
                let vars = Vars {
                    name: &name,
                    number,
                    fleet,
                    wiring: wiring.get(k).map_or(&unwired, |w| w),
                };
                t.check_node(&group.config, &vars, &mut cache)?;
            }
            k += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Value {
        Value::List(w.iter().map(|s| Value::Text(s.to_string())).collect())
    }

    #[test]
    fn a_health_test_is_a_line_a_program_or_dockers_list() {
        let shell = health_test(&Value::Text("test -e /x".into())).unwrap();
        assert_eq!(shell, ["/bin/sh", "-c", "test -e /x"]);
        assert_eq!(
            health_test(&words(&["curl", "-f"])).unwrap(),
            ["curl", "-f"]
        );
        assert_eq!(health_test(&words(&["CMD", "curl"])).unwrap(), ["curl"]);
        let docker_shell = health_test(&words(&["CMD-SHELL", "true"])).unwrap();
        assert_eq!(docker_shell, ["/bin/sh", "-c", "true"]);
        assert!(health_test(&words(&["NONE"])).unwrap().is_empty());
        let e = health_test(&words(&["CMD-SHELL", "a", "b"])).unwrap_err();
        assert!(e.starts_with("test: Docker's form"), "{e}");
        assert!(health_test(&Value::Integer(5)).is_err());
        assert!(health_test(&words(&["ok", ""])).is_err());
    }
}

//! The node keys as a front-end declares them ([`NodeKeys`]: what a node is and runs,
//! each value with its span), and the readers of single values every front-end and the
//! resolver share (an address, an MTU, an impairment, a sysctl), each placing its error
//! at the value. Still TOML's values: containerlab's reader builds them too.

use crate::error::{Ctx, TopologyError};
use crate::Impair;
use indexmap::IndexMap;
use serde::Deserialize;
use toml::Spanned;

pub(crate) type Sysctls = IndexMap<String, Spanned<toml::Value>>;

pub(crate) type ImpairMap = IndexMap<String, Spanned<String>>;

/// The keys that say what a node is and runs: `[defaults]`, a `[[generate]]` group's
/// `node` table, and (beside its name, links and routes) every `[[node]]`.
#[derive(Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub(crate) struct NodeKeys {
    #[serde(default)]
    pub(crate) sysctls: Sysctls,
    #[serde(default)]
    pub(crate) commands: Vec<Spanned<String>>,
    pub(crate) router: Option<bool>,
    pub(crate) kind: Option<Spanned<String>>,
    pub(crate) hostname: Option<Spanned<String>>,
    pub(crate) config: Option<Spanned<toml::Value>>,
    #[serde(default)]
    pub(crate) daemons: Vec<Spanned<String>>,
    #[serde(default)]
    pub(crate) dirs: Vec<Spanned<String>>,
    #[serde(default)]
    pub(crate) dirs_from_host: Vec<Spanned<String>>,
    #[serde(default)]
    pub(crate) files: IndexMap<String, Spanned<toml::Value>>,
    pub(crate) restart: Option<Spanned<String>>,
    pub(crate) loopback: Option<Spanned<toml::Value>>,
}

/// Parses a string value with `f`, placing its error at the value.
pub(crate) fn value<T>(
    cx: &Ctx<'_>,
    v: &Spanned<String>,
    f: impl Fn(&str) -> Result<T, String>,
) -> Result<T, TopologyError> {
    f(v.get_ref()).map_err(|m| cx.err(v.span(), m))
}

pub(crate) fn mtu(cx: &Ctx<'_>, m: &Spanned<i64>) -> Result<u32, TopologyError> {
    match *m.get_ref() {
        v @ 68..=65535 => Ok(v as u32),
        v => Err(cx.err(
            m.span(),
            format!("expected an MTU from 68 to 65535, got {v}"),
        )),
    }
}

pub(crate) fn impair(cx: &Ctx<'_>, map: &Spanned<ImpairMap>) -> Result<Impair, TopologyError> {
    let mut imp = Impair::default();
    for (k, v) in map.get_ref() {
        imp.set(k, v.get_ref()).map_err(|m| cx.err(v.span(), m))?;
    }
    imp.check().map_err(|m| cx.err(map.span(), m))?;
    if imp.is_empty() {
        return Err(cx.err(
            map.span(),
            "an empty impairment: expected delay, jitter, loss, duplicate, corrupt, reorder or rate",
        ));
    }
    if imp.needs_netem() {
        cx.netem_at
            .borrow_mut()
            .get_or_insert_with(|| cx.err(map.span(), ""));
    }
    Ok(imp)
}

pub(crate) fn sysctl(
    cx: &Ctx<'_>,
    key: &str,
    value: &Spanned<toml::Value>,
) -> Result<String, TopologyError> {
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
pub fn sysctl_path(key: &str) -> String {
    if key.contains('/') {
        key.to_string()
    } else {
        key.replace('.', "/")
    }
}

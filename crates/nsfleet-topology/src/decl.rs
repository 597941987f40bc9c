//! The node keys as a front-end declares them ([`NodeKeys`]: what a node is and runs, each
//! value with its span, read one key at a time, so that a section with keys of its own
//! reads them through the same [`read_table`]), and the readers of single values every
//! front-end and the resolver share (an address, an MTU, an impairment, a sysctl), each
//! placing its error at the value. Neutral: a key whose value may take several shapes (a
//! sysctl, a file's source, `loopback`) holds a [`Value`], which any serde format can
//! produce and a front-end can build, so that no format's own values reach the resolver.
//! Also one end of a link as declared ([`EndDecl`]), which the front-ends and the link
//! kinds build and the plan (`resolve/plan.rs`) lays out: here, where both reach it, as
//! the plan imports the link kinds.

use crate::error::{Ctx, TopologyError};
use crate::{Impair, IpNet};
use indexmap::IndexMap;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;

/// A value with where it is written (byte offsets into the file). The one spanned type of
/// every front-end and the resolver: TOML's reader fills it, others build it.
pub(crate) use serde_spanned::Spanned;

pub(crate) type Sysctls = IndexMap<String, Spanned<Value>>;

pub(crate) type ImpairMap = IndexMap<String, Spanned<String>>;

/// A value as a file writes it, whatever the format: what a key that takes several
/// shapes holds until the resolver reads it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Text(String),
    Integer(i64),
    Float(f64),
    Bool(bool),
    List(Vec<Value>),
    /// A table (a mapping), its keys in the order written.
    Table(IndexMap<String, Value>),
}

impl Value {
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

/// Reads a [`Value`] through serde's data model alone, so that any format gives one.
struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, a number, a boolean, a list or a table")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, i: i64) -> Result<Value, E> {
        Ok(Value::Integer(i))
    }

    fn visit_u64<E: de::Error>(self, u: u64) -> Result<Value, E> {
        i64::try_from(u).map(Value::Integer).map_err(|_| {
            E::invalid_value(de::Unexpected::Unsigned(u), &"an integer up to 2^63 - 1")
        })
    }

    fn visit_f64<E>(self, f: f64) -> Result<Value, E> {
        Ok(Value::Float(f))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::Text(s.to_string()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::Text(s))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut list = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(v) = seq.next_element()? {
            list.push(v);
        }
        Ok(Value::List(list))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut table = IndexMap::new();
        while let Some((k, v)) = map.next_entry::<String, Value>()? {
            table.insert(k, v);
        }
        Ok(Value::Table(table))
    }
}

/// One end of a link as declared: a node, maybe an interface name, and its settings.
#[derive(Clone, Debug, Default)]
pub(crate) struct EndDecl {
    pub node: String,
    pub iface: Option<String>,
    pub addrs: Vec<IpNet>,
    pub mtu: Option<u32>,
    pub mac: Option<[u8; 6]>,
    pub impair: Option<Impair>,
}

/// The keys that say what a node is and runs: `[defaults]`, a `[[generate]]` group's
/// `node` table, and (beside its name, links and routes) every `[[node]]`. Read one key at
/// a time ([`NodeKeys::take_key`]), so that a section that holds them besides keys of its
/// own reads them the same way, each value keeping its span (serde's `flatten` loses them).
#[derive(Default, Clone)]
pub(crate) struct NodeKeys {
    pub(crate) sysctls: Sysctls,
    pub(crate) commands: Vec<Spanned<String>>,
    pub(crate) router: Option<bool>,
    pub(crate) kind: Option<Spanned<String>>,
    pub(crate) hostname: Option<Spanned<String>>,
    /// A kind's configuration file: a source path, or `{ content = "..." }`.
    pub(crate) config: Option<Spanned<Value>>,
    pub(crate) daemons: Vec<Spanned<String>>,
    pub(crate) dirs: Vec<Spanned<String>>,
    pub(crate) dirs_from_host: Vec<Spanned<String>>,
    /// Host paths mounted in the node's world: `HOST_PATH:NODE_PATH[:ro]`.
    pub(crate) binds: Vec<Spanned<String>>,
    /// Each file's source, as `config` takes it.
    pub(crate) files: IndexMap<String, Spanned<Value>>,
    pub(crate) restart: Option<Spanned<String>>,
    /// An address pool, or a list of them.
    pub(crate) loopback: Option<Spanned<Value>>,
    /// The container image the node runs (`alpine:3.20`).
    pub(crate) image: Option<Spanned<String>>,
    /// How to tell the node is healthy: `{ test = ..., interval = ..., ... }`.
    pub(crate) healthcheck: Option<Spanned<Value>>,
    /// Runs as the host's root, not confined.
    pub(crate) privileged: Option<Spanned<bool>>,
    /// A world of its own, confined, though it starts nothing (what `exec` runs there).
    pub(crate) confined: Option<Spanned<bool>>,
    /// What its cgroup limits (see `resolve::config::limits`): a size, CPUs, a CPU list,
    /// a count, and the size of its /dev/shm.
    pub(crate) memory: Option<Spanned<Value>>,
    pub(crate) cpu: Option<Spanned<Value>>,
    pub(crate) cpuset: Option<Spanned<Value>>,
    pub(crate) pids: Option<Spanned<Value>>,
    pub(crate) shm_size: Option<Spanned<Value>>,
    /// The capabilities it keeps (see `resolve::config::security`).
    pub(crate) capabilities: Vec<Spanned<String>>,
    /// Docker's `--security-opt`s.
    pub(crate) security_opt: Vec<Spanned<String>>,
    /// The host's devices it is given: `HOST[:NODE[:PERMISSIONS]]`.
    pub(crate) devices: Vec<Spanned<String>>,
}

impl NodeKeys {
    /// The node keys, in the order an unknown key's error lists them.
    pub(crate) const FIELDS: &'static [&'static str] = &[
        "sysctls",
        "commands",
        "router",
        "kind",
        "hostname",
        "config",
        "daemons",
        "dirs",
        "dirs_from_host",
        "binds",
        "files",
        "restart",
        "loopback",
        "image",
        "healthcheck",
        "privileged",
        "confined",
        "memory",
        "cpu",
        "cpuset",
        "pids",
        "shm_size",
        "capabilities",
        "security_opt",
        "devices",
    ];

    /// `own` keys, then the node keys: every key of a section that holds node keys
    /// besides its own, for its unknown key's error. `N` is their number.
    pub(crate) const fn after<const N: usize>(own: &[&'static str]) -> [&'static str; N] {
        let mut all = [""; N];
        let mut i = 0;
        while i < N {
            all[i] = if i < own.len() {
                own[i]
            } else {
                NodeKeys::FIELDS[i - own.len()]
            };
            i += 1;
        }
        all
    }

    /// Reads the value of `key` into its field, if `key` is a node key (false if not).
    pub(crate) fn take_key<'de, A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
    ) -> Result<bool, A::Error> {
        match key {
            "sysctls" => self.sysctls = map.next_value()?,
            "commands" => self.commands = map.next_value()?,
            "router" => self.router = map.next_value()?,
            "kind" => self.kind = map.next_value()?,
            "hostname" => self.hostname = map.next_value()?,
            "config" => self.config = map.next_value()?,
            "daemons" => self.daemons = map.next_value()?,
            "dirs" => self.dirs = map.next_value()?,
            "dirs_from_host" => self.dirs_from_host = map.next_value()?,
            "binds" => self.binds = map.next_value()?,
            "privileged" => self.privileged = map.next_value()?,
            "confined" => self.confined = map.next_value()?,
            "memory" => self.memory = map.next_value()?,
            "cpu" => self.cpu = map.next_value()?,
            "cpuset" => self.cpuset = map.next_value()?,
            "pids" => self.pids = map.next_value()?,
            "shm_size" => self.shm_size = map.next_value()?,
            "capabilities" => self.capabilities = map.next_value()?,
            "security_opt" => self.security_opt = map.next_value()?,
            "devices" => self.devices = map.next_value()?,
            "files" => self.files = map.next_value()?,
            "restart" => self.restart = map.next_value()?,
            "loopback" => self.loopback = map.next_value()?,
            "image" => self.image = map.next_value()?,
            "healthcheck" => self.healthcheck = map.next_value()?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl<'de> Deserialize<'de> for NodeKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<NodeKeys, D::Error> {
        struct Keys;
        impl<'de> Visitor<'de> for Keys {
            type Value = NodeKeys;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("struct NodeKeys")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<NodeKeys, A::Error> {
                let mut keys = NodeKeys::default();
                read_table(map, NodeKeys::FIELDS, |key, map| keys.take_key(key, map))?;
                Ok(keys)
            }
        }
        d.deserialize_struct("NodeKeys", NodeKeys::FIELDS, Keys)
    }
}

/// Reads a table whose keys are `fields`, handing each key, once, to `take`, which reads
/// its value (false: not a key it knows). An unknown key is refused with serde's error
/// that lists `fields`, raised while the key is read, so that the format places it there.
pub(crate) fn read_table<'de, A: MapAccess<'de>>(
    mut map: A,
    fields: &'static [&'static str],
    mut take: impl FnMut(&'static str, &mut A) -> Result<bool, A::Error>,
) -> Result<(), A::Error> {
    let mut seen = Vec::new();
    while let Some(key) = map.next_key_seed(Key(fields))? {
        if seen.contains(&key) {
            return Err(de::Error::duplicate_field(key));
        }
        seen.push(key);
        if !take(key, &mut map)? {
            return Err(de::Error::unknown_field(key, fields));
        }
    }
    Ok(())
}

/// A key that must be one of its table's fields.
struct Key(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for Key {
    type Value = &'static str;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<&'static str, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = &'static str;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("field identifier")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<&'static str, E> {
        let known = self.0.iter().find(|f| **f == key);
        known.copied().ok_or_else(|| E::unknown_field(key, self.0))
    }
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
    value: &Spanned<Value>,
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
        Value::Text(s) if !s.contains(['\n', '\0']) => Ok(s.clone()),
        Value::Integer(i) => Ok(i.to_string()),
        Value::Bool(b) => Ok(if *b { "1" } else { "0" }.into()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::value::{Error, MapDeserializer, SeqDeserializer};

    #[test]
    fn a_value_comes_from_any_format() {
        // serde's own in-memory format, not TOML's.
        let list = SeqDeserializer::<_, Error>::new(["10.0.0.0/8", "fd00::/64"].into_iter());
        assert_eq!(
            Value::deserialize(list),
            Ok(Value::List(vec![
                Value::Text("10.0.0.0/8".into()),
                Value::Text("fd00::/64".into())
            ]))
        );
        let table = MapDeserializer::<_, Error>::new([("content", "x")].into_iter());
        let want = Value::Table([("content".to_string(), Value::Text("x".into()))].into());
        assert_eq!(Value::deserialize(table), Ok(want));
        let unsigned = serde::de::value::U64Deserializer::<Error>::new(u64::MAX);
        assert!(Value::deserialize(unsigned).is_err());
    }

    #[test]
    fn an_error_in_a_nodes_sysctl_is_placed_at_its_value() {
        let text = "[fleet]\nname = \"f\"\n[defaults]\nsysctls = { \"net.ipv4.ip_forward\" = 2.5 }\n[[node]]\nname = \"a\"\n\n[node.sysctls]\n\"net.ipv6.conf.all.forwarding\" = [1]\n";
        let e = crate::read("t.toml", text).unwrap_err();
        assert_eq!((e.at.line, e.at.column), (4, 37), "{e}");
        let text = text.replace("2.5", "1");
        let e = crate::read("t.toml", &text).unwrap_err();
        assert_eq!((e.at.line, e.at.column), (9, 34), "{e}");
        assert_eq!(
            e.message,
            "sysctl \"net.ipv6.conf.all.forwarding\": expected a string, an integer or a boolean"
        );
    }

    #[test]
    fn an_unknown_key_is_placed_at_it_and_the_error_lists_the_keys() {
        let text = "[fleet]\nname = \"f\"\n[[node]]\nname = \"a\"\n  loopbak = \"10.0.0.0/8\"\n";
        let e = crate::read("t.toml", text).unwrap_err();
        assert_eq!((e.at.line, e.at.column), (5, 3), "{e}");
        assert_eq!(e.message, "unknown field `loopbak`, expected one of `name`, `count`, `start`, `routes`, `host_link`, `sysctls`, `commands`, `router`, `kind`, `hostname`, `config`, `daemons`, `dirs`, `dirs_from_host`, `binds`, `files`, `restart`, `loopback`, `image`, `healthcheck`, `privileged`, `confined`, `memory`, `cpu`, `cpuset`, `pids`, `shm_size`, `capabilities`, `security_opt`, `devices`");
        let text = "[fleet]\nname = \"f\"\n[defaults]\nname = \"a\"\n[[node]]\nname = \"a\"\n";
        let e = crate::read("t.toml", text).unwrap_err();
        assert_eq!((e.at.line, e.at.column), (4, 1), "{e}");
        assert!(e.message.ends_with("expected one of `sysctls`, `commands`, `router`, `kind`, `hostname`, `config`, `daemons`, `dirs`, `dirs_from_host`, `binds`, `files`, `restart`, `loopback`, `image`, `healthcheck`, `privileged`, `confined`, `memory`, `cpu`, `cpuset`, `pids`, `shm_size`, `capabilities`, `security_opt`, `devices`"), "{e}");
    }
}

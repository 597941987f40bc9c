//! The node keys as a front-end declares them ([`NodeKeys`]: what a node is and runs,
//! each value with its span), and the readers of single values every front-end and the
//! resolver share (an address, an MTU, an impairment, a sysctl), each placing its error
//! at the value. Neutral: a key whose value may take several shapes (a sysctl, a file's
//! source, `loopback`) holds a [`Value`], which any serde format can produce and a
//! front-end can build, so that no format's own values reach the resolver.

use crate::error::{Ctx, TopologyError};
use crate::Impair;
use indexmap::IndexMap;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
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
    /// A kind's configuration file: a source path, or `{ content = "..." }`.
    pub(crate) config: Option<Spanned<Value>>,
    #[serde(default)]
    pub(crate) daemons: Vec<Spanned<String>>,
    #[serde(default)]
    pub(crate) dirs: Vec<Spanned<String>>,
    #[serde(default)]
    pub(crate) dirs_from_host: Vec<Spanned<String>>,
    /// Each file's source, as `config` takes it.
    #[serde(default)]
    pub(crate) files: IndexMap<String, Spanned<Value>>,
    pub(crate) restart: Option<Spanned<String>>,
    /// An address pool, or a list of them.
    pub(crate) loopback: Option<Spanned<Value>>,
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
}

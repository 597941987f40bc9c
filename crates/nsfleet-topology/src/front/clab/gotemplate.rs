//! A containerlab file as the Go template containerlab renders it before reading it
//! (`text/template`, with containerlab's functions), with its variables: the files
//! `deploy --vars` names, or else those beside the topology file named after it
//! (`lab.clab_vars.yml`, `.yaml`, `.json`, merged in name order), and the subtemplates of
//! its `clab_templates/*.gotmpl`. Rendering is gotmpl's, a port of Go's `text/template`,
//! with every function containerlab gives its templates; a template's error names its
//! line and column in the file.
//!
//! A file without `{{` is not a template: it is read as it is, and its lines stay the
//! lines errors name. A rendered file's later errors name lines of the rendered text.

use crate::error::TopologyError;
use crate::front::yaml::{self, Yaml};
use gotmpl::{Template, TemplateError, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Loops may not run longer than this (Go's templates have no bound; a file is not a
/// program).
const MAX_RANGE: u64 = 1_000_000;

/// `text` rendered, if it is a template (or variables are given); `None` otherwise.
pub(crate) fn render(
    file: &str,
    text: &str,
    vars: &[PathBuf],
) -> Result<Option<String>, TopologyError> {
    if !text.contains("{{") && vars.is_empty() {
        return Ok(None);
    }
    let path = Path::new(file);
    let found;
    let vars = if vars.is_empty() {
        found = vars_beside(path);
        &found
    } else {
        vars
    };
    let mut data = Value::Nil;
    for v in vars {
        data = merge(data, read_vars(v)?);
    }
    let name = path
        .file_name()
        .map_or(file.to_string(), |n| n.to_string_lossy().into_owned());
    let placed = |e: TemplateError| error(file, text, e);
    let mut t = functions(Template::new(&name)).max_range_iters(MAX_RANGE);
    t = t.parse(&namespaced(text)).map_err(placed)?;
    for sub in subtemplates(path) {
        let sub_text = std::fs::read_to_string(&sub).map_err(|e| {
            TopologyError::new(
                file,
                crate::Place::default(),
                format!("subtemplate {}: {e}", sub.display()),
            )
        })?;
        t = (t.parse(&namespaced(&sub_text)))
            .map_err(|e| error(&sub.display().to_string(), &sub_text, e))?;
    }
    let out = t.execute_to_string(&data).map_err(placed)?;
    Ok(Some(out))
}

/// `lab.clab_vars.*` beside `lab.clab.yml`, as containerlab finds them.
fn vars_beside(topo: &Path) -> Vec<PathBuf> {
    let Some(stem) = topo.file_name() else {
        return Vec::new();
    };
    let stem = stem.to_string_lossy();
    let prefix = format!("{}_vars.", stem.rsplit_once('.').map_or(&*stem, |(s, _)| s));
    files_in(&folder_of(topo), |n| {
        n.starts_with(&prefix) && [".yml", ".yaml", ".json"].iter().any(|x| n.ends_with(x))
    })
}

/// `clab_templates/*.gotmpl` beside the topology file, in name order.
fn subtemplates(topo: &Path) -> Vec<PathBuf> {
    files_in(&folder_of(topo).join("clab_templates"), |n| {
        n.ends_with(".gotmpl")
    })
}

/// The folder a file is in (`.` for a bare name).
fn folder_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The files of `dir` whose names `keep` takes, in name order (none if it cannot be read).
fn files_in(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = (std::fs::read_dir(dir).into_iter().flatten().flatten())
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| keep(&n.to_string_lossy())))
        .collect();
    found.sort();
    found
}

/// A variables file (YAML, or JSON, which is YAML) as the template's data.
fn read_vars(path: &Path) -> Result<Value, TopologyError> {
    let file = path.display().to_string();
    let text = crate::resolve::config::read_source(&file).map_err(|m| {
        TopologyError::new(
            &file,
            crate::Place::default(),
            format!("template variables: {m}"),
        )
    })?;
    let doc = yaml::load(&text).map_err(|(at, m)| {
        TopologyError::new(
            &file,
            crate::Place::of(text.as_bytes(), at.start),
            format!("YAML: {m}"),
        )
    })?;
    Ok(value(&doc))
}

/// A YAML node as Go's YAML reader types it: plain scalars that are numbers, booleans or
/// null become those.
fn value(y: &Yaml) -> Value {
    match &y.value {
        yaml::Value::Null => Value::Nil,
        yaml::Value::Str(s, plain) => match (plain, s.as_str()) {
            (false, _) => Value::String(s.as_str().into()),
            (true, "true" | "True" | "TRUE") => Value::Bool(true),
            (true, "false" | "False" | "FALSE") => Value::Bool(false),
            (true, "~" | "null" | "Null" | "NULL") => Value::Nil,
            (true, t) => match (t.parse::<i64>(), t.parse::<f64>()) {
                (Ok(i), _) => Value::Int(i),
                (_, Ok(f)) if t.contains(['.', 'e', 'E']) => Value::Float(f),
                _ => Value::String(t.into()),
            },
        },
        yaml::Value::Seq(items) => Value::List(items.iter().map(value).collect()),
        yaml::Value::Map(entries) => {
            let map: BTreeMap<Arc<str>, Value> = entries
                .iter()
                .map(|(k, v)| (Arc::from(k.str().unwrap_or_default()), value(v)))
                .collect();
            Value::Map(Arc::new(map))
        }
    }
}

/// Maps merged key by key (the later file's value wins), as containerlab merges them.
fn merge(into: Value, from: Value) -> Value {
    match (into, from) {
        (Value::Map(a), Value::Map(b)) => {
            let mut a = Arc::unwrap_or_clone(a);
            for (k, v) in Arc::unwrap_or_clone(b) {
                let merged = match a.remove(&k) {
                    Some(old) => merge(old, v),
                    None => v,
                };
                a.insert(k, merged);
            }
            Value::Map(Arc::new(a))
        }
        (_, from) => from,
    }
}

/// A template error at its place in `file`, whose text is `text`: a parse error carries
/// its line and column; an undefined function, which gotmpl names without a place, is
/// found where the text first calls it; any other is about the file as a whole.
fn error(file: &str, text: &str, e: TemplateError) -> TopologyError {
    let place = match &e {
        TemplateError::Parse { line, col, .. } | TemplateError::Lex { line, col, .. } => {
            Some(crate::Place {
                line: *line as u32,
                column: *col as u32,
            })
        }
        TemplateError::UndefinedFunction(f) => {
            first_call(&namespaced(text), f).map(|o| crate::Place::of(text.as_bytes(), o))
        }
        _ => None,
    };
    let message = match e {
        TemplateError::Parse { message, .. } | TemplateError::Lex { message, .. } => message,
        other => other.to_string(),
    };
    let message = NAMESPACED
        .iter()
        .fold(message, |m, (dotted, flat)| m.replace(flat, dotted));
    TopologyError::new(
        file,
        place.unwrap_or_default(),
        format!("Go template: {message}"),
    )
}

/// Where `text` first names `function` inside an action.
fn first_call(text: &str, function: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(open) = text[from..].find("{{").map(|o| o + from) {
        let close = text[open..].find("}}").map_or(text.len(), |c| c + open);
        let found = text[open..close].match_indices(function).find(|(i, _)| {
            let before = text[open..open + i].chars().last();
            let after = text[open + i + function.len()..].chars().next();
            let word =
                |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.');
            !word(before) && !word(after)
        });
        if let Some((i, _)) = found {
            return Some(open + i);
        }
        from = close;
    }
    None
}

/// containerlab's namespaced functions, and the names they are called by here: Go
/// calls `strings.Split` as a method of what the function `strings` returns, which
/// gotmpl does not, so inside actions the text names a function of the same length
/// instead (columns stay right), and errors name it back.
const NAMESPACED: [(&str, &str); 5] = [
    ("strings.Split", "strings_Split"),
    ("strings.ReplaceAll", "strings_ReplaceAll"),
    ("conv.Join", "conv_Join"),
    ("conv.ToInt", "conv_ToInt"),
    ("net.CIDRHost", "net_CIDRHost"),
];

/// `text` with containerlab's namespaced calls renamed (see [`NAMESPACED`]) inside its
/// actions, outside their quoted strings; a name that is a field (`.strings.Split`) or
/// part of a longer one is left alone.
fn namespaced(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let action = &rest[open..];
        let close = action.find("}}").map_or(action.len(), |c| c + 2);
        out.push_str(&rename_in_action(&action[..close]));
        rest = &action[close..];
    }
    out.push_str(rest);
    out
}

fn rename_in_action(action: &str) -> String {
    let b = action.as_bytes();
    let mut out = String::with_capacity(action.len());
    let (mut i, mut quote) = (0, None::<u8>);
    while i < b.len() {
        let c = b[i];
        match quote {
            Some(q) => {
                if c == b'\\' && q != b'`' && i + 1 < b.len() {
                    out.push_str(&action[i..i + 2]);
                    i += 2;
                    continue;
                }
                if c == q {
                    quote = None;
                }
            }
            None if matches!(c, b'"' | b'`' | b'\'') => quote = Some(c),
            None => {
                let word_before = i > 0
                    && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b'.');
                let found = NAMESPACED.iter().find(|(dotted, _)| {
                    action[i..].starts_with(dotted)
                        && !action[i + dotted.len()..]
                            .starts_with(|c: char| c.is_alphanumeric() || c == '_')
                });
                if let (false, Some((dotted, flat))) = (word_before, found) {
                    out.push_str(flat);
                    i += dotted.len();
                    continue;
                }
            }
        }
        let ch = action[i..].chars().next().expect("on a char boundary");
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// containerlab's template functions (its `utils.CreateFuncs`): arithmetic, `seq`,
/// `slice`, `ToJSON`, `ToJSONPretty`, and `strings.Split`, `strings.ReplaceAll`,
/// `conv.Join`, `conv.ToInt`, `net.CIDRHost` (see [`NAMESPACED`]).
fn functions(t: Template) -> Template {
    t.func("add", |a| {
        arith(a, "add", |x, y| x + y, |x, y| x.checked_add(y))
    })
    .func("subtract", |a| {
        arith(a, "subtract", |x, y| x - y, |x, y| x.checked_sub(y))
    })
    .func("mul", |a| {
        arith(a, "mul", |x, y| x * y, |x, y| x.checked_mul(y))
    })
    .func("div", |a| {
        let [x, y] = numbers(a, "div")?;
        if y == 0.0 {
            return Err(TemplateError::Exec("div: division by zero".into()));
        }
        Ok(Value::Float(x / y))
    })
    .func("idiv", |a| ints(a, "idiv", i64::checked_div))
    .func("rem", |a| ints(a, "rem", i64::checked_rem))
    .func("seq", seq)
    .func("ToJSON", |a| {
        Ok(Value::String(json(a.first().unwrap_or(&Value::Nil)).into()))
    })
    .func("ToJSONPretty", |a| match a {
        [v, prefix, indent] => Ok(Value::String(
            pretty(v, &text(prefix), &text(indent), 0).into(),
        )),
        _ => Err(arg_count("ToJSONPretty", 3, a.len())),
    })
    .func("slice", |a| Ok(Value::List(a.to_vec().into())))
    .func("strings_Split", |a| match a {
        [sep, s] => Ok(Value::List(
            split(&text(s), &text(sep))
                .into_iter()
                .map(|p| Value::String(p.into()))
                .collect(),
        )),
        _ => Err(arg_count("strings.Split", 2, a.len())),
    })
    .func("strings_ReplaceAll", |a| match a {
        // containerlab's: nil is "", and an empty `old` replaces nothing.
        [_, _, Value::Nil] => Ok(Value::String("".into())),
        [old, _, s] if text(old).is_empty() => Ok(Value::String(text(s).into())),
        [old, new, s] => Ok(Value::String(
            text(s).replace(&*text(old), &text(new)).into(),
        )),
        _ => Err(arg_count("strings.ReplaceAll", 3, a.len())),
    })
    .func("conv_Join", |a| match a {
        [Value::List(l), sep] => Ok(Value::String(
            l.iter()
                .map(text)
                .collect::<Vec<_>>()
                .join(&text(sep))
                .into(),
        )),
        [other, _] => Err(TemplateError::Exec(format!(
            "conv.Join: input to Join must be an array, got {other}"
        ))),
        _ => Err(arg_count("conv.Join", 2, a.len())),
    })
    .func("conv_ToInt", |a| match a {
        [v] => int(v).map(Value::Int).ok_or_else(|| {
            TemplateError::Exec(format!("conv.ToInt: could not convert {v} to int"))
        }),
        _ => Err(arg_count("conv.ToInt", 1, a.len())),
    })
    .func("net_CIDRHost", |a| match a {
        [n, prefix] => {
            let n = int(n).ok_or_else(|| {
                TemplateError::Exec(format!("net.CIDRHost: expected a number, got {n}"))
            })?;
            cidr_host(n, &text(prefix))
                .map(|ip| Value::String(ip.into()))
                .map_err(|m| TemplateError::Exec(format!("net.CIDRHost: {m}")))
        }
        _ => Err(arg_count("net.CIDRHost", 2, a.len())),
    })
}

fn arg_count(name: &str, expected: usize, got: usize) -> TemplateError {
    TemplateError::ArgCount {
        name: name.into(),
        expected,
        got,
    }
}

/// A value as gomplate's `ToString` gives it: a string as it is, anything else printed.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.to_string(),
        other => other.to_string(),
    }
}

/// Go's `strings.Split`: an empty separator splits after each character; an empty
/// string split by an empty separator is no element.
fn split(s: &str, sep: &str) -> Vec<String> {
    if sep.is_empty() {
        return s.chars().map(String::from).collect();
    }
    s.split(sep).map(String::from).collect()
}

/// gomplate's `net.CIDRHost`: host `n` of `prefix` (from its end when negative).
fn cidr_host(n: i64, prefix: &str) -> Result<String, String> {
    let net: crate::IpNet = prefix
        .parse()
        .map_err(|_| format!("{prefix:?} is not a prefix"))?;
    let bits: u32 = if net.addr.is_ipv4() { 32 } else { 128 };
    let host_bits = bits - u32::from(net.prefix);
    let max: u128 = if host_bits == 128 {
        u128::MAX
    } else {
        (1u128 << host_bits) - 1
    };
    let num: u128 = if n < 0 {
        let back = n.unsigned_abs() as u128 - 1;
        max.checked_sub(back).ok_or_else(|| {
            format!(
                "prefix of {} does not accommodate a host numbered {n}",
                net.prefix
            )
        })?
    } else {
        n as u128
    };
    if num > max {
        return Err(format!(
            "prefix of {} does not accommodate a host numbered {n}",
            net.prefix
        ));
    }
    let base = match net.addr {
        std::net::IpAddr::V4(a) => u128::from(u32::from(a) & !(max as u32)),
        std::net::IpAddr::V6(a) => u128::from(a) & !max,
    };
    Ok(match net.addr {
        std::net::IpAddr::V4(_) => std::net::Ipv4Addr::from((base | num) as u32).to_string(),
        std::net::IpAddr::V6(_) => std::net::Ipv6Addr::from(base | num).to_string(),
    })
}

fn float(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Uint(u) => Some(*u as f64),
        Value::Float(f) => Some(*f),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::Uint(u) => i64::try_from(*u).ok(),
        Value::Float(f) if f.fract() == 0.0 => Some(*f as i64),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn numbers(a: &[Value], name: &str) -> gotmpl::Result<[f64; 2]> {
    match a {
        [x, y] => match (float(x), float(y)) {
            (Some(x), Some(y)) => Ok([x, y]),
            _ => Err(TemplateError::Exec(format!(
                "{name}: expected numbers, got {x} and {y}"
            ))),
        },
        _ => Err(TemplateError::ArgCount {
            name: name.into(),
            expected: 2,
            got: a.len(),
        }),
    }
}

/// Integers stay integers (as gomplate's arithmetic does), unless one side is a float.
fn arith(
    a: &[Value],
    name: &str,
    on_floats: fn(f64, f64) -> f64,
    on_ints: fn(i64, i64) -> Option<i64>,
) -> gotmpl::Result<Value> {
    let [x, y] = numbers(a, name)?;
    if let (Some(i), Some(j)) = (int(&a[0]), int(&a[1])) {
        if !matches!(a[0], Value::Float(_)) && !matches!(a[1], Value::Float(_)) {
            return on_ints(i, j)
                .map(Value::Int)
                .ok_or_else(|| TemplateError::Exec(format!("{name}: integer overflow")));
        }
    }
    Ok(Value::Float(on_floats(x, y)))
}

fn ints(a: &[Value], name: &str, f: fn(i64, i64) -> Option<i64>) -> gotmpl::Result<Value> {
    match a {
        [x, y] => match (int(x), int(y)) {
            (Some(x), Some(y)) => f(x, y)
                .map(Value::Int)
                .ok_or_else(|| TemplateError::Exec(format!("{name}: division by zero"))),
            _ => Err(TemplateError::Exec(format!(
                "{name}: expected integers, got {x} and {y}"
            ))),
        },
        _ => Err(TemplateError::ArgCount {
            name: name.into(),
            expected: 2,
            got: a.len(),
        }),
    }
}

/// `seq END`, `seq START END`, `seq START END STEP`: gomplate's inclusive sequence.
fn seq(a: &[Value]) -> gotmpl::Result<Value> {
    let n: Vec<i64> = a.iter().filter_map(int).collect();
    if n.len() != a.len() || a.is_empty() || a.len() > 3 {
        return Err(TemplateError::Exec(
            "seq: expected END, START END or START END STEP, as integers".into(),
        ));
    }
    let (start, end, step) = match n[..] {
        [end] => (1, end, 1),
        [start, end] => (start, end, if end >= start { 1 } else { -1 }),
        [start, end, step] => (start, end, step),
        _ => unreachable!("checked above"),
    };
    if step == 0 || (end - start).signum() * step.signum() < 0 {
        return Err(TemplateError::Exec(format!(
            "seq {start} {end} {step}: the step never reaches the end"
        )));
    }
    let count = (end - start) / step + 1;
    if count as u64 > MAX_RANGE {
        return Err(TemplateError::Exec(format!(
            "seq: more than {MAX_RANGE} numbers"
        )));
    }
    Ok(Value::List(
        (0..count).map(|i| Value::Int(start + i * step)).collect(),
    ))
}

/// A value as Go's `json.MarshalIndent(v, prefix, indent)` writes it (map keys sorted).
fn pretty(v: &Value, prefix: &str, indent: &str, depth: usize) -> String {
    let pad = |d: usize| format!("\n{prefix}{}", indent.repeat(d));
    let items: Vec<String> = match v {
        Value::List(l) if !l.is_empty() => l
            .iter()
            .map(|x| pretty(x, prefix, indent, depth + 1))
            .collect(),
        Value::Map(m) if !m.is_empty() => m
            .iter()
            .map(|(k, x)| {
                format!(
                    "{}: {}",
                    json_string(k),
                    pretty(x, prefix, indent, depth + 1)
                )
            })
            .collect(),
        other => return json(other),
    };
    let (open, close) = if matches!(v, Value::List(_)) {
        ("[", "]")
    } else {
        ("{", "}")
    };
    let inner = items
        .iter()
        .map(|i| format!("{}{i}", pad(depth + 1)))
        .collect::<Vec<_>>()
        .join(",");
    format!("{open}{inner}{}{close}", pad(depth))
}

/// A string as Go's `encoding/json` writes it: quotes, backslashes and control
/// characters escaped, and `<`, `>`, `&`, U+2028 and U+2029 as `\u` escapes (Go's
/// HTML-safe default).
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || matches!(c, '<' | '>' | '&' | '\u{2028}' | '\u{2029}') => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A value as JSON text.
fn json(v: &Value) -> String {
    match v {
        Value::Nil => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Float(f) => f.to_string(),
        Value::String(s) => json_string(s),
        Value::List(l) => format!("[{}]", l.iter().map(json).collect::<Vec<_>>().join(",")),
        Value::Map(m) => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{}:{}", json_string(k), json(v)))
                .collect();
            format!("{{{}}}", items.join(","))
        }
        _ => "null".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Renders `text` with a vars file of its own: tests run side by side.
    fn rendered(text: &str, vars: &str) -> Result<String, TopologyError> {
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("nsfleet-gotemplate-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let v = dir.join("vars.yml");
        std::fs::write(&v, vars).unwrap();
        let out = render("lab.clab.yml", text, &[v]).map(Option::unwrap);
        std::fs::remove_dir_all(&dir).unwrap();
        out
    }

    #[test]
    fn a_file_without_actions_is_not_a_template() {
        assert_eq!(render("x.clab.yml", "name: x\n", &[]).unwrap(), None);
    }

    #[test]
    fn variables_loops_and_containerlab_s_functions_render_as_containerlab_renders_them() {
        let text = "name: {{ .lab }}\ntopology:\n  nodes:\n{{- range $i := seq 1 .count }}\n    n{{ $i }}: {kind: linux, mgmt-ipv4: 172.20.20.{{ add $i 10 }}}\n{{- end }}\n# {{ ToJSON .tags }} {{ idiv 7 2 }} {{ div 1 4 }}\n";
        let out = rendered(text, "lab: big\ncount: 3\ntags: [a, 'b']\n").unwrap();
        assert_eq!(
            out,
            "name: big\ntopology:\n  nodes:\n    n1: {kind: linux, mgmt-ipv4: 172.20.20.11}\n    n2: {kind: linux, mgmt-ipv4: 172.20.20.12}\n    n3: {kind: linux, mgmt-ipv4: 172.20.20.13}\n# [\"a\",\"b\"] 3 0.25\n"
        );
    }

    #[test]
    fn containerlab_s_namespaced_functions_render_as_gomplate_s() {
        let text = "{{ $p := strings.Split \",\" .ports }}{{ index $p 1 }} {{ strings.ReplaceAll \"-\" \"_\" .name }} {{ conv.Join .tags \"+\" }} {{ add (conv.ToInt \"41\") 1 }} {{ net.CIDRHost 5 \"10.1.0.0/16\" }} {{ net.CIDRHost -2 \"10.1.0.0/24\" }} {{ net.CIDRHost 1 \"3fff::/64\" }} {{ ToJSON (slice 1 \"a\") }} \"strings.Split\" {{ \"strings.Split\" }}\n{{ ToJSONPretty .m \"\" \"  \" }}";
        let out = rendered(
            text,
            "ports: 'a,b,c'\nname: r-1\ntags: [x, y]\nm: {k: [1]}\n",
        )
        .unwrap();
        assert_eq!(
            out,
            "b r_1 x+y 42 10.1.0.5 10.1.0.254 3fff::1 [1,\"a\"] \"strings.Split\" strings.Split\n{\n  \"k\": [\n    1\n  ]\n}"
        );
        let e = rendered("name: x\n# {{ strings.Split 1 }}\n", "{}\n").unwrap_err();
        assert!(
            e.message.contains("strings.Split") && !e.message.contains("strings_Split"),
            "{e}"
        );
        let e = rendered("# {{ net.CIDRHost 300 \"10.0.0.0/24\" }}\n", "{}\n").unwrap_err();
        assert!(
            e.message
                .contains("does not accommodate a host numbered 300"),
            "{e}"
        );
    }

    #[test]
    fn strings_are_json_as_go_writes_them() {
        assert_eq!(
            json_string("a\"b\\c\n\u{1b}<&>"),
            "\"a\\\"b\\\\c\\n\\u001b\\u003c\\u0026\\u003e\""
        );
    }

    #[test]
    fn a_template_error_names_its_line_and_column() {
        let e = rendered("name: x\ntopology:\n  nodes: {{ if }}\n", "x: [1]\n").unwrap_err();
        assert_eq!(e.at.line, 3, "{e}");
        assert!(e.message.starts_with("Go template:"), "{e}");
        let e = rendered("name: {{ nosuch 1 }}\n", "{}\n").unwrap_err();
        assert_eq!(e.at.line, 1, "{e}");
        assert!(e.message.contains("nosuch"), "{e}");
    }
}

#[cfg(test)]
mod hostile {
    use super::render;

    /// Whatever a file's actions say, rendering ends, with an error or a text.
    #[test]
    fn hostile_templates_end_with_an_error_not_a_crash() {
        let nasty = [
            "{{",
            "{{}}",
            "{{ .a.b.c }}",
            "{{ range }}",
            "{{ template \"none\" }}",
            "{{ define \"a\" }}{{ template \"a\" }}{{ end }}{{ template \"a\" }}",
            "{{ range seq 1 100000000 }}x{{ end }}",
            "{{ seq 1 10 0 }}",
            "{{ idiv 1 0 }}",
            "{{ add 9223372036854775807 1 }}",
            "{{ printf \"%s\" }}",
        ];
        for t in nasty {
            let _ = render("h.clab.yml", t, &[]);
        }
    }
}

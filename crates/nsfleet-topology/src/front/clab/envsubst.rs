//! Environment variables in a containerlab file, expanded before it is read, as
//! containerlab does (hellt/envsubst, restricted): `$VAR` and `${VAR}` when VAR is set,
//! `${VAR:-default}` / `${VAR-default}` / `${VAR:=default}` / `${VAR=default}` (default
//! when unset, or also when empty with `:`), `${VAR:+alt}` / `${VAR+alt}`, and `$$` for a
//! literal `$`. A variable that is not set and has no default stays as written.
//!
//! Values with a line break are refused, so that every line keeps its number and errors
//! still point at the file as written.

/// `text` with its variables expanded from `lookup`; an error names the variable.
pub(crate) fn expand(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('{') {
            let Some(end) = inner.find('}') else {
                out.push('$');
                rest = after;
                continue;
            };
            let written = &rest[at..at + end + 3];
            out.push_str(&braced(&inner[..end], &lookup).unwrap_or(written.to_string()));
            rest = &inner[end + 1..];
        } else {
            let len = name_len(after);
            match (len > 0).then(|| lookup(&after[..len])).flatten() {
                Some(v) => out.push_str(&v),
                None => out.push_str(&rest[at..at + 1 + len]),
            }
            rest = &after[len..];
        }
    }
    out.push_str(rest);
    if out.matches('\n').count() != text.matches('\n').count() {
        return Err(
            "a variable's value has a line break, which nsfleet does not expand (lines would move)"
                .into(),
        );
    }
    Ok(out)
}

fn name_len(s: &str) -> usize {
    let first = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first {
        return 0;
    }
    s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len())
}

/// The value of `${inner}`, or `None` to leave it as written.
fn braced(inner: &str, lookup: &impl Fn(&str) -> Option<String>) -> Option<String> {
    let len = name_len(inner);
    if len == 0 {
        return None;
    }
    let value = lookup(&inner[..len]);
    let op = &inner[len..];
    let (colon, op) = match op.strip_prefix(':') {
        Some(o) => (true, o),
        None => (false, op),
    };
    let unset = value.is_none() || (colon && value.as_deref() == Some(""));
    match op.chars().next() {
        None if !colon => value,
        Some('-' | '=') if unset => Some(op[1..].to_string()),
        Some('-' | '=') => value,
        Some('+') if unset => Some(String::new()),
        Some('+') => Some(op[1..].to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(k: &str) -> Option<String> {
        match k {
            "IMG" => Some("alpine:3".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_as_containerlab() {
        let e = |s: &str| expand(s, env).unwrap();
        assert_eq!(e("image: ${IMG}"), "image: alpine:3");
        assert_eq!(e("image: $IMG and $NOPE"), "image: alpine:3 and $NOPE");
        assert_eq!(
            e("v: ${NOPE:=3.19} ${NOPE-x} ${EMPTY:-d} ${EMPTY-d}"),
            "v: 3.19 x d "
        );
        assert_eq!(e("v: ${IMG:+set} ${NOPE:+set}"), "v: set ");
        assert_eq!(
            e("exec: echo $$HOME ${NOPE} ${IMG"),
            "exec: echo $HOME ${NOPE} ${IMG"
        );
        assert!(expand("a: ${X}\n", |_| Some("1\n2".into())).is_err());
    }
}

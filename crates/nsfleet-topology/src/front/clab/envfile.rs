//! `env-files`: files of `KEY=VALUE` lines a node's environment is read from, as
//! containerlab reads them (joho/godotenv): blank lines and `#` comments skipped, an
//! optional `export `, `KEY=VALUE` or `KEY: VALUE`; a value in single quotes as written,
//! in double quotes with `\n`, `\t`, `\"`, `\\` and `\$` escapes; unquoted, up to a ` #`
//! comment, trimmed. `$VAR` and `${VAR}` in unquoted and double-quoted values are
//! expanded from the keys before them, then from `lookup` (the deploying shell, as
//! containerlab expands them). Values over more than one line are refused, with the line.

/// The variables of one env file, in order; an error is the file's line and what was
/// expected there.
pub(crate) fn parse(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, (usize, String)> {
    let mut vars: Vec<(String, String)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line).trim_start();
        let Some(split) = line.find(['=', ':']) else {
            return Err((n + 1, format!("expected KEY=VALUE, got {line:?}")));
        };
        let key = line[..split].trim();
        if !is_name(key) {
            return Err((
                n + 1,
                format!("{key:?}: expected a variable name of letters, digits and '_'"),
            ));
        }
        let known = |name: &str| {
            (vars.iter().rev())
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .or_else(|| lookup(name))
        };
        let value = value(line[split + 1..].trim_start(), &known).map_err(|m| (n + 1, m))?;
        vars.retain(|(k, _)| k != key);
        vars.push((key.to_string(), value));
    }
    Ok(vars)
}

fn is_name(k: &str) -> bool {
    k.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A value as written after `=`.
fn value(raw: &str, known: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    if let Some(rest) = raw.strip_prefix('\'') {
        let end = rest
            .find('\'')
            .ok_or("a single quote that is not closed on its line")?;
        return Ok(rest[..end].to_string());
    }
    if let Some(rest) = raw.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = rest.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => return Ok(expand(&out, known)),
                '\\' => match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('r') => out.push('\r'),
                    Some('t') => out.push('\t'),
                    // Kept escaped from expansion: `\$` is a literal dollar.
                    Some('$') => out.push('\u{0}'),
                    Some(o) => out.push(o),
                    None => break,
                },
                c => out.push(c),
            }
        }
        return Err("a double quote that is not closed on its line".into());
    }
    let end = raw.find(" #").unwrap_or(raw.len());
    Ok(expand(raw[..end].trim_end(), known))
}

/// `$VAR` and `${VAR}` replaced by their values (empty when unknown, as godotenv does);
/// an escaped dollar (held as NUL) put back.
fn expand(s: &str, known: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, tail) = match after.strip_prefix('{') {
            Some(inner) => match inner.find('}') {
                Some(end) => (&inner[..end], &inner[end + 1..]),
                None => ("", after),
            },
            None => {
                let len = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                (&after[..len], &after[len..])
            }
        };
        if name.is_empty() {
            out.push('$');
        } else {
            out.push_str(&known(name).unwrap_or_default());
        }
        rest = tail;
    }
    out.push_str(rest);
    out.replace('\u{0}', "$")
}

#[cfg(test)]
mod tests {
    use super::parse;

    fn read(text: &str) -> Vec<(String, String)> {
        let shell = |k: &str| (k == "SHELL_ONLY").then(|| "from-shell".to_string());
        parse(text, &shell).unwrap()
    }

    #[test]
    fn the_forms_godotenv_reads() {
        let text = "# a comment\n\nA=1\nexport B = two words  # comment\nC: yaml\nD='$A kept'\nE=\"x\\ny \\$A $A\"\nF=${A}-$SHELL_ONLY-$NONE.\nA=again\n";
        let want = [
            ("B", "two words"),
            ("C", "yaml"),
            ("D", "$A kept"),
            ("E", "x\ny $A 1"),
            ("F", "1-from-shell-."),
            ("A", "again"),
        ];
        let got = read(text);
        let got: Vec<(&str, &str)> = got.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_bad_line_is_refused_with_its_number() {
        let none = |_: &str| None;
        assert_eq!(parse("A=1\nnonsense\n", &none).unwrap_err().0, 2);
        assert_eq!(parse("A=1\n\n9X=1\n", &none).unwrap_err().0, 3);
        let e = parse("A=\"open\nB=1\n", &none).unwrap_err();
        assert_eq!(e.0, 1);
        assert!(e.1.contains("not closed"), "{}", e.1);
    }
}

//! containerlab's word splitting for `exec` lines, `entrypoint` and `cmd` (google/shlex,
//! as containerlab's exec uses it): words, quotes and backslashes, and nothing else.
//!
//! It never runs a shell and never expands anything (no variables, globs or
//! substitutions): a word is what the line says, once its quotes are taken off.

/// Splits a line into words as google/shlex (containerlab's exec) does: blanks separate
/// words; single quotes keep everything; a backslash escapes the next character, in
/// double quotes too; `#` at a word's start begins a comment.
pub(super) fn shlex(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' | '\r' => words.extend(cur.take()),
            '#' if cur.is_none() => break,
            '\\' => cur.get_or_insert_default().extend(chars.next()),
            '\'' => {
                let w = cur.get_or_insert_default();
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err(format!("unclosed ' in {line:?}")),
                    }
                }
            }
            '"' => {
                let w = cur.get_or_insert_default();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c) => w.push(c),
                            None => return Err(format!("unclosed \" in {line:?}")),
                        },
                        Some(c) => w.push(c),
                        None => return Err(format!("unclosed \" in {line:?}")),
                    }
                }
            }
            c => cur.get_or_insert_default().push(c),
        }
    }
    words.extend(cur);
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shlex_splits_as_containerlab() {
        let w = shlex(r#"bash -c 'echo "a b" > /x' "c\"d" e\ f # comment"#).unwrap();
        assert_eq!(w, ["bash", "-c", "echo \"a b\" > /x", "c\"d", "e f"]);
        assert!(shlex("echo 'open").is_err());
    }
}

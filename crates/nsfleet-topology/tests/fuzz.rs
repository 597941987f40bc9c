//! The validator against mangled topologies: every example file, cut, spliced, repeated
//! and sprinkled with the tokens a topology is made of, thousands of times over, read and
//! checked against an assumed kernel. Whatever the text, the answer is a topology or an
//! error with its place: never a panic. No root, no kernel, nothing created (the kernel
//! is the injected `KernelCaps::assumed()`).

use nsfleet_topology::{read, Format, KernelCaps};
use std::path::PathBuf;

/// Pieces of topology text, to splice in.
const TOKENS: &[&str] = &[
    "[[node]]\n",
    "[[link]]\n",
    "[[switch]]\n",
    "[[generate]]\n",
    "[fleet]\n",
    "name = ",
    "\"",
    "{",
    "}",
    "[",
    "]",
    "=",
    ",",
    "\n",
    "count = 3\n",
    "{i}",
    "{addr.eth0}",
    "a:eth0",
    "b = \"s\"\n",
    "addrs = [\"10.0.0.1/30\"]",
    "mtu = 0",
    "mtu = 70000",
    "::",
    "/129",
    "via ",
    "dev ",
    "default",
    "kind = \"ring\"\n",
    "kind = \"frr\"\n",
    "pool6 = \"fd00::/64\"",
    "impair = { delay = \"5ms\" }",
    "sysctls = { \"net.ipv4.ip_forward\" = 1 }",
    "- ",
    ": ",
    "&a ",
    "*a",
    "<<: ",
    "${X:=y}",
    "\u{0}",
    "é",
    "\t",
    "#",
    "'",
    "0x",
    "-1",
    "1e9",
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64: deterministic, so a failure reproduces.
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One mangling of `text`.
fn mangle(text: &str, rng: &mut Rng) -> String {
    let mut t: Vec<u8> = text.as_bytes().to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(t.len() + 1);
        match rng.below(4) {
            0 => {
                let end = (at + rng.below(40)).min(t.len());
                t.drain(at..end);
            }
            1 => {
                let tok = TOKENS[rng.below(TOKENS.len())];
                t.splice(at..at, tok.bytes());
            }
            2 => {
                let end = (at + rng.below(80)).min(t.len());
                let piece: Vec<u8> = t[at..end].to_vec();
                let to = rng.below(t.len() + 1);
                t.splice(to..to, piece);
            }
            _ => {
                if let Some(b) = t.get_mut(at) {
                    *b = b" \n\"=[]{}0123456789abcxyz:/.,"[rng.below(27)];
                }
            }
        }
    }
    String::from_utf8_lossy(&t).into_owned()
}

/// A count of five digits or more would make the validator build that many nodes: fine,
/// but not thousands of times in a test.
fn small(text: &str) -> bool {
    let mut run = 0;
    for c in text.chars() {
        run = if c.is_ascii_digit() { run + 1 } else { 0 };
        if run >= 5 {
            return false;
        }
    }
    true
}

fn corpus() -> Vec<(PathBuf, String)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut files = Vec::new();
    let mut dirs = vec![root];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "toml" || x == "yml") {
                files.push((p.clone(), std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn no_mangled_topology_makes_the_validator_panic() {
    let caps = KernelCaps::assumed();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut tried, mut valid) = (0, 0);
    for (path, text) in corpus() {
        let name = path.display().to_string();
        let clab = Format::of(&path) == Format::Clab;
        for _ in 0..400 {
            let t = mangle(&text, &mut rng);
            if !small(&t) {
                continue;
            }
            let outcome = std::panic::catch_unwind(|| {
                let draft = if clab {
                    nsfleet_topology::clab::read(&name, &t)
                } else {
                    read(&name, &t)
                };
                draft.and_then(|d| d.check(&caps)).is_ok()
            });
            match outcome {
                Ok(ok) => valid += ok as usize,
                Err(_) => panic!("the validator panicked on this text of {name}:\n{t}"),
            }
            tried += 1;
        }
    }
    assert!(tried > 4000, "only {tried} texts tried");
    eprintln!("{tried} mangled topologies, {valid} still valid, none panicked");
}

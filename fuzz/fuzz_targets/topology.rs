//! The topology parser and validator on arbitrary bytes: it must never panic, never take
//! forever, and every refusal must point at a line of the file it was given.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nsfleet_topology::KernelCaps;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match nsfleet_topology::parse("fuzz.toml", text, &KernelCaps::assumed()) {
        Ok(topo) => {
            // What validated is self-consistent: one wiring per node, or none at all.
            let n = topo.node_count() as usize;
            assert!(topo.wiring.is_empty() || topo.wiring.len() == n);
        }
        Err(e) => {
            let lines = text.lines().count().max(1);
            assert!(
                e.line >= 1 && e.line <= lines + 1,
                "line {} of {lines}: {e}",
                e.line
            );
        }
    }
});

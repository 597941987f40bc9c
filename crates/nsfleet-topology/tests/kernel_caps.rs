//! What a topology asks of the kernel, and how the kernel's answer (a value) decides: no
//! kernel is touched here, which is the point of the crate.

use nsfleet_topology::{read, Asks, KernelCaps};
use std::collections::BTreeSet;

const FILE: &str = r#"[fleet]
name = "caps"
[[node]]
name = "a"
sysctls = { "net.ipv4.ip_forward" = 1, "net.core.rmem_max" = 1, "net.ipv4.conf.eth0.rp_filter" = 0 }
[[node]]
name = "b"
[[link]]
a = "a:eth0"
b = "b:eth0"
pool = "10.0.0.0/30"
impair = { delay = "5ms" }
"#;

fn caps(netem: bool, netns: &[&str], host: &[&str]) -> KernelCaps {
    let set = |s: &[&str]| s.iter().map(|k| k.to_string()).collect::<BTreeSet<_>>();
    KernelCaps {
        netem,
        netns_sysctls: Some(set(netns)),
        host_sysctls: set(host),
        refused_values: Default::default(),
    }
}

#[test]
fn a_draft_asks_for_its_namespace_sysctls_and_netem_only() {
    let mut asks = read("caps.toml", FILE).unwrap().asks();
    asks.sysctls.sort();
    asks.values.sort();
    let want = Asks {
        // An interface's own key is asked of `lo`: eth0 does not exist yet, and a
        // scratch namespace has only lo, whose keys are the same.
        sysctls: vec![
            "net/core/rmem_max".into(),
            "net/ipv4/conf/lo/rp_filter".into(),
            "net/ipv4/ip_forward".into(),
        ],
        values: vec![
            ("net/core/rmem_max".into(), "1".into()),
            ("net/ipv4/conf/lo/rp_filter".into(), "0".into()),
            ("net/ipv4/ip_forward".into(), "1".into()),
        ],
        netem: true,
    };
    assert_eq!(asks, want);
    let plain = "[fleet]\nname = \"p\"\n[[node]]\nname = \"a\"\n";
    assert_eq!(read("p.toml", plain).unwrap().asks(), Asks::default());
}

#[test]
fn the_kernels_answer_decides_with_the_line_that_asked() {
    let all = [
        "net/ipv4/ip_forward",
        "net/core/rmem_max",
        "net/ipv4/conf/lo/rp_filter",
    ];
    let check = |c: KernelCaps| read("caps.toml", FILE).unwrap().check(&c);
    assert!(check(caps(true, &all, &all)).is_ok());

    let e = check(caps(false, &all, &all)).unwrap_err();
    assert_eq!(
        (e.line, e.message.contains("no netem qdisc")),
        (12, true),
        "{e}"
    );

    let netns = ["net/ipv4/ip_forward", "net/ipv4/conf/lo/rp_filter"];
    let e = check(caps(true, &netns, &all)).unwrap_err();
    assert_eq!(e.line, 5, "{e}");
    assert!(
        e.message.contains(
            "\"net.core.rmem_max\": it exists on the host but is not per network namespace"
        ),
        "{e}"
    );

    let e = check(caps(true, &netns, &[])).unwrap_err();
    assert!(e.message.contains("no such sysctl on this kernel"), "{e}");

    // An interface's key the kernel lacks is named as the file writes it.
    let e = check(caps(true, &all[..2], &all[..2])).unwrap_err();
    assert!(
        e.message
            .contains("\"net.ipv4.conf.eth0.rp_filter\": no such sysctl on this kernel"),
        "{e}"
    );

    // Unknown sysctls (no root to probe with) are left to `up`; assumed() checks nothing.
    assert!(check(KernelCaps {
        netns_sysctls: None,
        ..caps(true, &[], &[])
    })
    .is_ok());
    assert!(check(KernelCaps::assumed()).is_ok());
}

#[test]
fn a_value_the_kernel_refused_in_its_scratch_namespace_is_refused_with_its_line() {
    let all = ["net/ipv4/ip_forward", "net/core/rmem_max"];
    let mut c = caps(true, &all, &all);
    let refused = ("net/ipv4/ip_forward".to_string(), "1".to_string());
    c.refused_values
        .insert(refused, "Invalid argument (os error 22)".into());
    let e = read("caps.toml", FILE).unwrap().check(&c).unwrap_err();
    assert_eq!(e.line, 5, "{e}");
    assert!(
        e.message.contains("refuses this value (Invalid argument"),
        "{e}"
    );
}

//! What a topology asks of the kernel and the host, and how their answer (a value)
//! decides: no kernel or host is touched here, which is the point of the crate.

use nsfleet_topology::{read, Asks, HostNeed, KernelCaps};
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
        missing_devices: Default::default(),
        host: Default::default(),
        host_root: true,
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
        devices: BTreeSet::new(),
        host: BTreeSet::new(),
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
        (e.at.line, e.message.contains("no netem qdisc")),
        (12, true),
        "{e}"
    );

    let netns = ["net/ipv4/ip_forward", "net/ipv4/conf/lo/rp_filter"];
    let e = check(caps(true, &netns, &all)).unwrap_err();
    assert_eq!(e.at.line, 5, "{e}");
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
    assert_eq!(e.at.line, 5, "{e}");
    assert!(
        e.message.contains("refuses this value (Invalid argument"),
        "{e}"
    );
}

#[test]
fn a_kinds_needs_are_asked_of_the_host_and_its_answer_decides_with_the_kinds_line() {
    let file = "[fleet]\nname = \"r\"\n[[node]]\nname = \"r1\"\nkind = \"frr\"\nconfig = { content = \"router bgp 1\\n\" }\ndaemons = [\"bgpd\"]\n";
    let asks = read("r.toml", file).unwrap().asks();
    let want: BTreeSet<HostNeed> = [
        HostNeed::File("/usr/lib/frr/bgpd".into()),
        HostNeed::File("/usr/lib/frr/staticd".into()),
        HostNeed::File("/usr/lib/frr/zebra".into()),
        HostNeed::Program("vtysh".into()),
        HostNeed::User("frr".into()),
    ]
    .into();
    assert_eq!(asks.host, want);

    // A host without FRR's vtysh: refused at the kind's line, with how to get it.
    let mut c = KernelCaps::assumed();
    c.host.missing.insert(HostNeed::Program("vtysh".into()));
    let e = read("r.toml", file).unwrap().check(&c).unwrap_err();
    assert_eq!(e.at.line, 5, "{e}");
    assert!(
        e.message
            .contains("needs FRR's vtysh, which is not in PATH: apt-get install frr"),
        "{e}"
    );

    // The user's ids, as the host says them, own FRR's folders; without an answer
    // (assumed), they stay root's.
    let mut c = KernelCaps::assumed();
    c.host.users.insert("frr".into(), (101, 102));
    let topo = read("r.toml", file).unwrap().check(&c).unwrap();
    let spec = topo.nodes().next().unwrap();
    let etc = spec
        .config
        .dirs
        .iter()
        .find(|d| d.path == "/etc/frr")
        .unwrap();
    assert_eq!(etc.owner, Some((101, 102)));
    let tmp = spec
        .config
        .dirs
        .iter()
        .find(|d| d.path == "/var/tmp")
        .unwrap();
    assert_eq!(tmp.owner, Some((0, 0)));
    let topo = read("r.toml", file)
        .unwrap()
        .check(&KernelCaps::assumed())
        .unwrap();
    let etc = (topo.nodes().next().unwrap().config.dirs.iter())
        .find(|d| d.path == "/etc/frr")
        .map(|d| d.owner);
    assert_eq!(etc, Some(Some((0, 0))));
}

#[test]
fn a_device_kind_the_kernel_may_lack_is_asked_and_refused_at_its_first_line() {
    let file = "[fleet]\nname = \"d\"\n[[node]]\nname = \"a\"\n[[dummy]]\nat = \"a:dum0\"\naddrs = [\"10.255.0.1/32\"]\n[[dummy]]\nat = \"a:dum1\"\n";
    let asks = read("d.toml", file).unwrap().asks();
    assert_eq!(asks.devices, BTreeSet::from(["dummy".to_string()]));
    assert!(read("d.toml", file)
        .unwrap()
        .check(&KernelCaps::assumed())
        .is_ok());

    let mut c = KernelCaps::assumed();
    c.missing_devices.insert("dummy".into());
    let e = read("d.toml", file).unwrap().check(&c).unwrap_err();
    assert_eq!(e.at.line, 5, "{e}");
    assert!(e.message.contains("cannot make dummy devices"), "{e}");
    assert!(e.message.contains("nsfleet vm"), "{e}");
}

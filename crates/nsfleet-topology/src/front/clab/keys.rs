//! Every key of containerlab's topology file (as of containerlab 0.79), and what nsfleet
//! does with it: takes it, warns that it does not apply here (the lab is the same lab
//! without it), or refuses it, because running the lab without it would make it another
//! lab. A key containerlab does not know is warned about too.

pub(crate) struct Key {
    pub name: &'static str,
    pub use_: Use,
}

#[derive(Clone, Copy)]
pub(crate) enum Use {
    Taken,
    /// Not applied; the reason is shown.
    Ignored(&'static str),
    /// An error (when set to anything but null): what the key would change.
    Refused(&'static str),
}

const fn taken(name: &'static str) -> Key {
    Key {
        name,
        use_: Use::Taken,
    }
}

const fn ignored(name: &'static str, why: &'static str) -> Key {
    Key {
        name,
        use_: Use::Ignored(why),
    }
}

const fn refused(name: &'static str, why: &'static str) -> Key {
    Key {
        name,
        use_: Use::Refused(why),
    }
}

const NO_ENGINE: &str = "there is no container engine; nodes run the host's software";
const NO_LINK_ADDRS: &str = "give addresses in the nodes' exec lines or configuration";

pub(crate) const TOP: &[Key] = &[
    taken("name"),
    taken("prefix"),
    taken("mgmt"),
    taken("topology"),
    ignored("settings", "nsfleet issues no certificates"),
];

pub(crate) const TOPOLOGY: &[Key] = &[
    taken("defaults"),
    taken("kinds"),
    taken("groups"),
    taken("nodes"),
    taken("links"),
];

pub(crate) const MGMT: &[Key] = &[
    taken("network"),
    taken("bridge"),
    taken("ipv4-subnet"),
    taken("ipv4_subnet"),
    taken("ipv4-gw"),
    taken("ipv6-subnet"),
    taken("ipv6_subnet"),
    taken("ipv6-gw"),
    taken("mtu"),
    ignored(
        "ipv4-range",
        "addresses are given in node order from the start of the subnet",
    ),
    ignored(
        "ipv6-range",
        "addresses are given in node order from the start of the subnet",
    ),
    ignored(
        "external-access",
        "nsfleet adds no NAT or firewall rules on the host",
    ),
    ignored(
        "skip-when-unused",
        "the management network exists only when a node uses it",
    ),
    ignored("driver-opts", NO_ENGINE),
];

/// A node definition's keys: `defaults`, each of `kinds` and `groups`, each node.
pub(crate) const NODE: &[Key] = &[
    taken("kind"),
    taken("group"),
    taken("type"),
    taken("image"),
    taken("startup-config"),
    taken("exec"),
    taken("binds"),
    taken("env"),
    taken("env-files"),
    taken("stages"),
    taken("startup-delay"),
    taken("healthcheck"),
    taken("mgmt-ipv4"),
    taken("mgmt-ipv6"),
    taken("labels"),
    taken("cmd"),
    taken("entrypoint"),
    taken("user"),
    taken("hostname"),
    taken("sysctls"),
    taken("tmpfs"),
    taken("network-mode"),
    taken("ports"),
    ignored("image-pull-policy", "images come from nsfleet's image store, as pulled or loaded (`nsfleet image pull`, `nsfleet image load`)"),
    ignored("runtime", NO_ENGINE),
    ignored("restart-policy", "a node's processes are not restarted (set restart = \"on-failure\" in nsfleet's own format)"),
    ignored("auto-remove", NO_ENGINE),
    ignored("enforce-startup-config", "the startup configuration is always applied"),
    ignored("suppress-startup-config", "the startup configuration is always applied"),
    taken("memory"),
    taken("cpu"),
    taken("cpu-set"),
    taken("shm-size"),
    ignored("cgroupns-mode", NO_ENGINE),
    ignored("cgroup-parent", NO_ENGINE),
    taken("privileged"),
    taken("cap-add"),
    taken("cap-drop"),
    taken("security-opts"),
    taken("devices"),
    ignored("volumes", "named volumes need a container engine; use binds"),
    ignored("dns", "names resolve through the fleet's /etc/hosts"),
    ignored("certificate", "nsfleet issues no certificates"),
    ignored("credentials", "nodes are reached with nsfleet exec"),
    ignored("username", "nodes are reached with nsfleet exec"),
    ignored("password", "nodes are reached with nsfleet exec"),
    ignored("license", "vendor kinds are not run"),
    ignored("position", "graph layout only"),
    ignored("config", "startup-configuration templates are for vendor kinds"),
    ignored("aliases", "names resolve through the fleet's /etc/hosts"),
    ignored("extras", "vendor kinds are not run"),
    ignored("components", "vendor kinds are not run"),
    ignored("link-apply-mode", "links are made when the fleet is"),
    refused("pid-mode", "every node has a PID namespace of its own"),
];

pub(crate) const LINK: &[Key] = &[
    taken("type"),
    taken("endpoints"),
    taken("endpoint"),
    taken("host-interface"),
    taken("remote"),
    taken("vni"),
    taken("dst-port"),
    taken("udp-port"),
    taken("src-port"),
    taken("parent-interface"),
    taken("mtu"),
    taken("vars"),
    taken("labels"),
    ignored("ipv4", NO_LINK_ADDRS),
    ignored("ipv6", NO_LINK_ADDRS),
];

pub(crate) const ENDPOINT: &[Key] = &[
    taken("node"),
    taken("interface"),
    taken("mac"),
    taken("vars"),
    ignored("ipv4", NO_LINK_ADDRS),
    ignored("ipv6", NO_LINK_ADDRS),
];

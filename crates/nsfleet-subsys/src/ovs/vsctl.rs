//! The `ovs-vsctl` transactions on the hub's database: the arguments that make a
//! switch's bridge (its ports with their OpenFlow numbers, its controllers, its
//! settings), change it in place, or delete a port or a bridge, and the running of
//! `ovs-vsctl` itself. It never decides when a bridge is made, changed or deleted (that
//! is `bridges.rs`), and never touches the kernel: Open vSwitch does what it asks.

use super::{bridge_name, in_kernel};
use anyhow::Context;
use nsfleet_core::{Node, Shape};
use nsfleet_sys as sys;
use nsfleet_topology::OvsSwitch;
use std::time::Duration;

/// The `ovs-vsctl` commands that make switch `node`'s bridge, the `k`th of its
/// transaction: its rows created outright (each port's interface, with its OpenFlow
/// number as the topology says, see `OvsSwitch::numbered`; the bridge's own internal
/// port; its controllers) and the bridge added to Open vSwitch, as `add-br`, `add-port`
/// and `set-controller` would. Those look each name up among all rows, for every
/// command: a transaction of Mininet's tree1024 (1,056 ports) took ovs-vsctl 0.5 s of
/// CPU. (A bridge of its name deleted in the same transaction would leave its rows
/// until the transaction ends: `remake` deletes in one of its own.)
pub(super) fn bridge_args(node: &Node, ovs: &OvsSwitch, k: usize) -> anyhow::Result<Vec<String>> {
    let wiring = node.wiring();
    let br = bridge_name(node);
    let mut rows = Rows::default();
    let ports = numbered_ports(ovs, &wiring)?;
    let own = [(br, None)].into_iter();
    let all = own.chain(ports.into_iter().map(|(name, n)| (name, Some(n))));
    let port_ids: Vec<String> = (all.enumerate())
        .map(|(j, (name, number))| rows.port(&format!("{k}_{j}"), name, number))
        .collect();
    let kind = if in_kernel(ovs.datapath) {
        "system"
    } else {
        "netdev"
    };
    let mut columns = vec![
        format!("name={}", quoted(br)),
        format!("ports=[{}]", port_ids.join(",")),
        format!("datapath_type={kind}"),
    ];
    columns.extend(bridge_settings(node, ovs, &mut rows, k));
    let bridge = rows.create(format!("b{k}"), "Bridge", columns);
    let mut args = rows.0;
    args.extend(["--", "add", "Open_vSwitch", ".", "bridges", &bridge].map(String::from));
    Ok(args)
}

/// The ports of `wiring` with their OpenFlow numbers (`OvsSwitch::numbered`). The
/// topology checked the numbers: a clash here would be a bug.
fn numbered_ports<'a>(
    ovs: &OvsSwitch,
    wiring: &'a nsfleet_topology::NodeWiring,
) -> anyhow::Result<Vec<(&'a str, u16)>> {
    (ovs.numbered(wiring.ifaces.iter().map(|i| i.name.as_str())))
        .map_err(|why| anyhow::anyhow!("{why}"))
}

/// The `ovs-vsctl` command that deletes port `name` (and its interface) from whatever
/// bridge has it, if one does.
pub(super) fn del_port_args(name: &str) -> [String; 4] {
    ["--", "--if-exists", "del-port", name].map(String::from)
}

/// A change of a bridge in place: its deletions (maybe none), then the rest.
type Change = (Vec<String>, Vec<String>);

/// The two `ovs-vsctl` transactions that change switch `node`'s bridge in place from
/// its shape `was` (see `in_place` in `bridges.rs`): first every port that is not kept
/// (its link gone or made anew, or its number changed) deleted (none: no first
/// transaction); then every port the switch now has that is not kept created, with its
/// number, and the bridge's settings given as they now are. Ports kept stay open, and
/// the bridge keeps its flows. Two, because ovs-vswitchd knows a port by its name: one of
/// a name deleted and created in one transaction would stay open on the device that is
/// gone. A port is deleted by name wherever it is (`--if-exists`): a switch that an
/// undone `apply` was removing had its ports' rows still, and `was` has none of them.
pub(super) fn change_args(node: &Node, ovs: &OvsSwitch, was: &Shape) -> anyhow::Result<Change> {
    let wiring = node.wiring();
    let old = was
        .config
        .ovs
        .as_ref()
        .context("it was no Open vSwitch switch")?;
    let before = numbered_ports(old, &was.wiring)?;
    let now = numbered_ports(ovs, &wiring)?;
    let kept = |&(name, n): &(&str, u16)| {
        before.contains(&(name, n))
            && wiring
                .iface(name)
                .is_some_and(|i| crate::kept(&was.wiring, i))
    };
    let mut deletions = Vec::new();
    let mut deleted: Vec<&str> = Vec::new();
    for port in before.iter().chain(&now).filter(|p| !kept(p)) {
        if !deleted.contains(&port.0) {
            deleted.push(port.0);
            deletions.extend(del_port_args(port.0));
        }
    }
    let mut rows = Rows::default();
    let added: Vec<String> = (now.iter().filter(|p| !kept(p)).enumerate())
        .map(|(j, (name, n))| rows.port(&format!("0_{j}"), name, Some(*n)))
        .collect();
    let columns = bridge_settings(node, ovs, &mut rows, 0);
    let mut args = rows.0;
    let br = bridge_name(node).to_string();
    for port in added {
        args.extend(["--".to_string(), "add".into(), "Bridge".into(), br.clone()]);
        args.extend(["ports".to_string(), port]);
    }
    args.extend(["--".to_string(), "set".into(), "Bridge".into(), br]);
    args.extend(columns);
    Ok((deletions, args))
}

/// `ovs-vsctl` commands that create rows, each named for the rest of its transaction.
#[derive(Default)]
struct Rows(Vec<String>);

impl Rows {
    /// Creates a row of `table` with `columns`, as `@id`, which it returns.
    fn create(&mut self, id: String, table: &str, columns: Vec<String>) -> String {
        self.0.extend([
            "--".to_string(),
            format!("--id=@{id}"),
            "create".into(),
            table.into(),
        ]);
        self.0.extend(columns);
        format!("@{id}")
    }

    /// Creates port `name` (and its interface) as `@p{id}`, which it returns: with its
    /// OpenFlow number, or without one, the bridge's own internal port.
    fn port(&mut self, id: &str, name: &str, number: Option<u16>) -> String {
        let mut columns = vec![format!("name={}", quoted(name))];
        columns.push(match number {
            Some(n) => format!("ofport_request={n}"),
            None => "type=internal".to_string(),
        });
        let iface = self.create(format!("i{id}"), "Interface", columns);
        let columns = vec![
            format!("name={}", quoted(name)),
            format!("interfaces={iface}"),
        ];
        self.create(format!("p{id}"), "Port", columns)
    }
}

/// A string as ovs-vsctl's values take it: quoted, so that a `:` or `,` in it is not
/// read as a map's or a set's.
fn quoted(s: &str) -> String {
    format!("\"{s}\"")
}

/// The bridge's own columns, as `create` and `set` take them, each one given (empty
/// where the file gives none, so that `set` clears what a change took away); its
/// controllers' rows, the `k`th bridge's of the transaction, made in `rows`. In-band
/// control is off, as Mininet sets it: the controllers are reached out of band (the
/// relays), and in-band control would look for a route to each one's address every
/// second and log that it has none. Its datapath id is always given, so that the relays
/// know its connections.
fn bridge_settings(node: &Node, ovs: &OvsSwitch, rows: &mut Rows, k: usize) -> Vec<String> {
    let controllers: Vec<String> = (ovs.controllers.iter().enumerate())
        .map(|(j, c)| {
            let target = format!("target={}", quoted(&format!("tcp:{c}")));
            rows.create(format!("c{k}_{j}"), "Controller", vec![target])
        })
        .collect();
    let mode = match ovs.fail_mode {
        Some(nsfleet_topology::FailMode::Secure) => "secure",
        Some(nsfleet_topology::FailMode::Standalone) => "standalone",
        None => "[]",
    };
    let dpid = nsfleet_topology::kind::ovs::dpid_of(node.name(), ovs);
    vec![
        "other_config:disable-in-band=true".to_string(),
        format!("controller=[{}]", controllers.join(",")),
        format!("protocols=[{}]", ovs.protocols.join(",")),
        format!("fail_mode={mode}"),
        format!("other_config:datapath-id={dpid:016x}"),
    ]
}

/// How long `ovs-vsctl` waits for the hub's database, which its start line makes.
pub(super) const DB_WAIT: Duration = Duration::from_secs(20);

/// Runs `ovs-vsctl` on database `db` with `args`, and with `wait` until ovs-vswitchd has
/// done what it asks; its message on failure.
pub(super) fn vsctl(db: &str, args: &[String], wait: bool) -> anyhow::Result<()> {
    let mut cmd = std::process::Command::new("ovs-vsctl");
    cmd.arg(format!("--db={db}"))
        .arg("--retry")
        .arg(format!("--timeout={}", DB_WAIT.as_secs()));
    if !wait {
        cmd.arg("--no-wait");
    }
    cmd.args(args);
    let out = sys::output_of(&mut cmd).context("running ovs-vsctl")?;
    match out.status.success() {
        true => Ok(()),
        false => anyhow::bail!(
            "ovs-vsctl: {}",
            String::from_utf8_lossy(&out.stderr).trim_end()
        ),
    }
}

/// Deletes bridge `br`, if there is one (see [`vsctl`] for `wait`).
pub(super) fn del_br(db: &str, br: &str, wait: bool) -> anyhow::Result<()> {
    vsctl(
        db,
        &["--", "--if-exists", "del-br", br].map(String::from),
        wait,
    )
}

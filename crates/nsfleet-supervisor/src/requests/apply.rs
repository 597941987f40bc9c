//! `apply`: the running fleet changed into a file's, only where they differ, all or
//! nothing.

use crate::control::{self, Reply};
use crate::traffic::Traffic;
use crate::{log, watch, Supervisor};
use nsfleet_core::Phase;
use nsfleet_sys as sys;
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

impl Supervisor {
    /// A node of a confined fleet is made confined only if it runs software then (see
    /// ARCHITECTURE.md, "Confinement"): its namespaces belong for ever to the user
    /// namespace they were made in. Giving software to one that ran none would run it as
    /// the host's root, and `privileged` changes nothing of a live node's namespaces:
    /// both refused, naming the way.
    fn refuse_confining(
        &self,
        running: &[nsfleet_topology::NodeSpec],
        plan: &nsfleet_topology::reshape::Reshape,
    ) -> Result<(), String> {
        if self.ids.is_none() {
            return Ok(());
        }
        let was: HashMap<&str, &nsfleet_topology::NodeSpec> =
            running.iter().map(|n| (n.name.as_str(), n)).collect();
        for n in &plan.change {
            let Some(w) = was.get(n.name.as_str()) else {
                continue;
            };
            let (before, now) = (&w.config, &n.config);
            let why = match (before.confined(), now.confined()) {
                (false, true) if before.has_world() => "would be confined, and it was made privileged: its namespaces are the host's user namespace's",
                (false, true) => "would run software, and it was made without: its namespaces are not a user namespace's of its own, and what it ran would be the host's root",
                (true, false) if now.has_world() => "would be privileged, and it was made confined: its namespaces are its own user namespace's",
                _ => continue,
            };
            return Err(format!(
                "node {} {why}, for as long as they live. Remove it in one apply and add it in the next (or bring the fleet up --privileged)",
                n.name
            ));
        }
        Ok(())
    }

    /// `nsfleet apply`: changes the running fleet into `topo` (the client read `file` and
    /// checked it against the kernel), only where they differ, all or nothing; with
    /// `dry_run`, only says what that would change. Once changed, the fleet holds the
    /// images of `hold` (see `Request::Apply`) in place of those it held.
    pub(super) fn apply(
        &self,
        file: &Path,
        topo: nsfleet_topology::Topology,
        dry_run: bool,
        hold: Option<&Path>,
    ) -> anyhow::Result<Reply> {
        if topo.name != self.name {
            anyhow::bail!(
                "{} is fleet {:?}, not {:?}: apply changes the fleet a file names",
                file.display(),
                topo.name,
                self.name
            );
        }
        // Taken before the fleet is read, so that the plan is made against what stays; then
        // the generator's, so that it takes no new node meanwhile (nsfleet-locks' `order`).
        let _change = if dry_run { None } else { Some(self.change()?) };
        let mut traffic = (!dry_run).then(|| self.traffic.lock());
        let running: Vec<nsfleet_topology::NodeSpec> = (self.fleet.nodes().iter())
            .map(|n| {
                let shape = n.shape();
                nsfleet_topology::NodeSpec {
                    name: n.name().to_string(),
                    number: n.number(),
                    config: shape.config.clone(),
                    wiring: shape.wiring.clone(),
                }
            })
            .collect();
        let plan = nsfleet_topology::reshape::reshape(&running, topo.nodes().collect())
            .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        self.refuse_confining(&running, &plan)
            .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        let changes = nsfleet_topology::diff::diff(&running, &plan);
        if dry_run || plan.is_empty() {
            if !dry_run {
                // Nothing to change, but where the file writes things may have moved.
                self.fleet.relabel(&plan.keep);
            }
            return Ok(Reply::Plan {
                changes,
                applied: false,
                report: None,
            });
        }
        self.refuse_removing_exec(&plan.remove)?;
        if let Some(traffic) = traffic.as_mut() {
            self.release_generator(traffic, &plan.remove)?;
        }
        let added: Vec<String> = plan.add.iter().map(|n| n.name.clone()).collect();
        let (changed, removed) = (
            plan.change
                .iter()
                .map(|n| n.name.clone())
                .collect::<Vec<_>>(),
            plan.remove.clone(),
        );
        // Their sockets would keep them from being reclaimed.
        self.watchers.forget_nodes(&removed);
        let mut quiet = |_: Phase, _: usize, _: usize| ControlFlow::Continue(());
        let done = self.fleet.reshape(plan, &mut quiet);
        // Watched again if the change was undone; the new nodes if it was not.
        let watch = if done.is_ok() { &added } else { &removed };
        if let Err(e) = self.watchers.add_nodes(&self.fleet, watch) {
            log(format_args!("events: watching links of {watch:?}: {e:#}"));
        }
        let report = done?;
        self.hold_images(hold);
        let hosts = (self.run_dir.log_dir(&self.name)).join(nsfleet_subsys::world::HOSTS_FILE);
        if hosts.exists() {
            let nodes = self.fleet.nodes();
            if let Err(e) = nsfleet_subsys::world::write_hosts(&hosts, nodes.iter().map(|n| &**n)) {
                log(format_args!("apply: rewriting {}: {e}", hosts.display()));
            }
        }
        self.tell_applied(
            &changes,
            [
                (&added, "added"),
                (&changed, "changed"),
                (&removed, "removed"),
            ],
        );
        Ok(Reply::Plan {
            changes,
            applied: true,
            report: Some(report),
        })
    }

    /// Holds the images the fleet's nodes run now: the client's hold file `hold`, locked
    /// shared as the client locked it, in place of the hold kept so far (whose lock goes
    /// with its descriptor); nothing if they run none. A hold that cannot be taken leaves
    /// the old one, and is logged: the change is made.
    fn hold_images(&self, hold: Option<&Path>) {
        let take = |path: &Path| -> std::io::Result<OwnedFd> {
            let file = std::fs::File::open(path)?;
            sys::flock(file.as_fd(), sys::FlockOp::Shared)?;
            Ok(file.into())
        };
        let held = match hold.map(|path| (path, take(path))) {
            None => None,
            Some((_, Ok(fd))) => Some(fd),
            Some((path, Err(e))) => {
                return log(format_args!("apply: holding {}: {e}", path.display()));
            }
        };
        *self.images.lock() = held;
    }

    /// The generator's sockets in nodes to remove would keep them from being reclaimed:
    /// one that is done lets go of everything (its last results with it); one that is
    /// sending from such a node is not cut off.
    pub(super) fn release_generator(
        &self,
        traffic: &mut Traffic,
        remove: &[String],
    ) -> anyhow::Result<()> {
        let used = traffic.nodes_in_use();
        if !remove.iter().any(|n| used.contains(n)) {
            return Ok(());
        }
        let sending = traffic.sending_nodes();
        if let Some(n) = remove.iter().find(|n| sending.contains(*n)) {
            anyhow::bail!(
                "apply would remove node {n}, which the traffic generator is sending on: `nsfleet gen {} --stop` first; nothing was changed",
                self.name
            );
        }
        traffic.shutdown(&self.fleet);
        Ok(())
    }

    /// A node that `nsfleet exec` runs in is not removed under it. A tenant (an Open
    /// vSwitch switch) takes no namespace with it: what runs "in" it runs in its hub's,
    /// which stays.
    pub(super) fn refuse_removing_exec(&self, remove: &[String]) -> anyhow::Result<()> {
        if remove.is_empty() {
            return Ok(());
        }
        let nodes = self.fleet.nodes();
        let inodes: HashMap<u64, &str> = (remove.iter())
            .filter_map(|n| Some((nodes.get(n).filter(|n| !n.is_tenant())?.inode(), n.as_str())))
            .collect();
        let marker = format!("{}={}", control::EXEC_MARKER, self.name);
        let found = sys::marked_processes(&inodes.keys().copied().collect(), &marker);
        if let Some((ino, who)) = found.first() {
            anyhow::bail!(
                "apply would remove node {}, which nsfleet exec runs in ({who}): nothing was changed",
                inodes[ino]
            );
        }
        Ok(())
    }

    /// Events for what `apply` did: nodes, then interfaces added and removed.
    pub(super) fn tell_applied<'a>(
        &self,
        changes: &[nsfleet_topology::diff::Change],
        nodes: impl IntoIterator<Item = (&'a Vec<String>, &'static str)>,
    ) {
        use nsfleet_topology::diff::Op;
        for (names, action) in nodes {
            for node in names {
                let node = node.clone();
                self.watchers
                    .publish(&watch::FleetEvent::Node { node, action });
            }
        }
        for c in changes {
            let action = match c.op {
                Op::Add => "added",
                Op::Remove => "removed",
                Op::Change => continue,
            };
            // Interfaces are `node:iface` (other objects have a space in their name).
            if let Some((node, iface)) =
                c.object.split_once(':').filter(|_| !c.object.contains(' '))
            {
                self.watchers.publish(&watch::FleetEvent::Interface {
                    node: node.to_string(),
                    iface: iface.to_string(),
                    action,
                });
            }
        }
    }
}

//! A node's cgroup: where its limits hold and what it uses is counted. A fleet is a group
//! of its own below nsfleet's (`nsfleet/FLEET.PID` in every hierarchy it uses, v2's one or
//! v1's several; PID is its supervisor's, as fleets of one name may run from two run
//! folders), each node that runs software one below it (`nsfleet/FLEET.PID/NODE`).
//! nsfleet's folder is at the top of each hierarchy for the host's root, and below the
//! cgroup v2 group delegated to anyone else (a user: see docs/rootless.md).
//!
//! A node's group is made and limited before its init is forked, and the init joins it
//! before anything else, so every process of the node is in it from the first; the
//! node's later processes join it as they start (the spawner), as `nsfleet exec` does.
//! Its limits change in place (`apply`, see [`FleetGroup::relimit`]), as `docker update`
//! changes a container's.
//! It goes once the init is reaped, the fleet's after the last of them, nsfleet's own
//! folder when no fleet is left in it. The fleet's group is journalled in its run folder
//! before it is made: `clean` removes what a killed supervisor left (see [`clean_journal`]).

use anyhow::Context;
use nsfleet_locks::{order, Mutex};
use nsfleet_sys::cgroup::{self, Controller, Group, Hierarchy};
use nsfleet_topology::Limits;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// nsfleet's folder at the top of each hierarchy, as Docker's `docker`: every group
/// nsfleet makes is below it, and nothing else.
pub const BASE: &str = "nsfleet";

/// The controllers a fleet's groups use where the host has them: CPU time counted per
/// node for `stats`, memory per fleet (and per node where limited or `memory =
/// "unlimited"`), and each limited where asked; tasks and CPUs limited where asked.
const CONTROLLERS: [Controller; 5] = [
    Controller::Memory,
    Controller::Cpu,
    Controller::Cpuacct,
    Controller::Pids,
    Controller::Cpuset,
];

/// The controllers a fleet's group hands down to every node's at once (v2; on v1 a node
/// is in the hierarchies it asks for): not memory, which only a node with a memory limit
/// gets, or one that asks (`memory = "unlimited"`; [`FleetGroup::node`]). A memory
/// cgroup's shrinker map has a slot for every superblock on the machine, about 11 per
/// node that runs software (its /proc, /sys, tmpfs...): a group per node made a fleet's
/// kernel memory grow with the square of its size (1.7 MB per node in `kmalloc-1k` where
/// 100,000 superblocks had been; perf of kmem:kmalloc: `alloc_shrinker_info` from
/// `mem_cgroup_css_online`). Another node's memory is counted in its fleet's group.
const HANDED_TO_NODES: [Controller; 3] = [Controller::Cpu, Controller::Pids, Controller::Cpuset];

/// How long a group's removal waits for its last tasks to leave (they leave as they exit;
/// an init's are gone by then).
const PATIENCE: Duration = Duration::from_secs(2);

/// Why a limit's controller (`memory`, `cpu`, `cpuset`, `pids`) cannot be used by the
/// groups nsfleet makes here, if it cannot: the topology's check asks this before
/// anything exists. As [`FleetGroup::make`] places them.
pub fn refusal(controller: &str) -> Option<String> {
    let Some(c) = CONTROLLERS.iter().find(|c| c.name() == controller) else {
        return Some(format!("nsfleet knows no {controller} controller"));
    };
    let all = cgroup::hierarchies().unwrap_or_default();
    match nsfleet_sys::userns::in_host_namespace().unwrap_or(false) {
        true => cgroup::refusal(&all, *c),
        false => cgroup::delegated::refusal(&all, *c),
    }
}

/// The hierarchies a fleet's groups are made in, at their tops, and whether those are a
/// group delegated to us, which we may ready to hand its controllers down: every one
/// mounted, for the host's root; for anyone else (a user, or the root of another user
/// namespace) the cgroup v2 group delegated to them, or none.
fn hierarchies_for_fleets() -> anyhow::Result<Option<(Vec<Hierarchy>, bool)>> {
    let all: Vec<Hierarchy> = cgroup::hierarchies().context("reading the cgroup mounts")?;
    if nsfleet_sys::userns::in_host_namespace()? {
        return Ok(Some((all, false)));
    }
    Ok(cgroup::delegated::delegated(&all)
        .ok()
        .map(|d| (vec![d], true)))
}

/// A fleet's group, removed (with nsfleet's folder, if no other fleet is in it) when
/// this is dropped: after every node's.
pub struct FleetGroup {
    group: Group,
    base: Group,
    journal: PathBuf,
}

impl FleetGroup {
    /// Makes the group of `fleet`, journalled in `journal` first. One that exists is
    /// refused: it is what a killed supervisor of the same pid left, that `clean` has
    /// not removed. A fleet not of the host's root (a user's) makes its groups below the
    /// cgroup v2 group delegated to it, first handing that group's controllers down
    /// (what systemd's user manager does for its own units), and none where nothing is
    /// delegated: its nodes' processes stay in the supervisor's group (what `up` refuses
    /// limits for, see docs/rootless.md).
    pub fn make(fleet: &str, journal: &Path) -> anyhow::Result<Option<FleetGroup>> {
        let Some((all, delegated)) = hierarchies_for_fleets()? else {
            return Ok(None);
        };
        let usable: Vec<Controller> = (CONTROLLERS.iter().copied())
            .filter(|c| cgroup::refusal(&all, *c).is_none())
            .collect();
        if delegated {
            let top = Group::at(&all, &usable, Path::new(""));
            (top.hand_down(&usable)).context("the cgroup delegated to this user")?;
        }
        let base = Group::at(&all, &usable, Path::new(BASE));
        let group = base.child(&format!("{fleet}.{}", nsfleet_sys::host_pid()));
        let mut lines = String::new();
        for p in group.paths() {
            lines.push_str(&format!("{}\n", p.display()));
        }
        std::fs::File::create(journal)
            .and_then(|mut f| f.write_all(lines.as_bytes()))
            .with_context(|| format!("journalling the fleet's cgroup in {}", journal.display()))?;
        if let Some(p) = group.paths().find(|p| p.exists()) {
            anyhow::bail!("the cgroup {} exists already: `nsfleet clean --all` removes what a killed fleet left", p.display());
        }
        make_below(&base, &group)?;
        Ok(Some(FleetGroup {
            group,
            base,
            journal: journal.to_path_buf(),
        }))
    }

    /// The group of node `name`, made and limited as `limits` say: in the hierarchies
    /// that count its memory and CPU time, and in those of the limits it has (on v1, a
    /// folder in each hierarchy is a memory cgroup's cost or a cpuset's copy: a node
    /// without a `pids` limit is in no pids group). What a node of that name left
    /// (one restarted) is removed first.
    pub fn node(&self, name: &str, limits: &Limits) -> anyhow::Result<NodeGroup> {
        let g = self.in_groups_for(name, limits, Vec::new())?;
        let _ = self.group.child(name).remove(PATIENCE);
        g.make(&[]).context("the node's cgroup")?;
        (g.limit(&as_written(limits))).context("limiting the node's cgroup")?;
        Ok(NodeGroup(Arc::new(CurrentGroup(Mutex::new(
            order::NODE_CGROUP,
            g,
        )))))
    }

    /// Changes the limits of the running node `name`, whose group is `group`, to
    /// `limits`, in place (as `docker update`): a limit it had is changed or lifted; one
    /// whose controller its group lacks is given by putting the group in that hierarchy
    /// (v1), its processes moved there, or by handing the controller down to it (v2).
    /// Its group stays in every hierarchy it was in. On an error, what is done stays
    /// done: the caller puts the old limits back the same way.
    pub fn relimit(&self, name: &str, group: &CurrentGroup, limits: &Limits) -> anyhow::Result<()> {
        let was = group.get();
        let now = self.in_groups_for(name, limits, was.controllers())?;
        now.make(&[]).context("the node's cgroup")?;
        // Recorded at once: the node's end removes every folder it has.
        *group.0.lock() = now.clone();
        // Every process of the node is in each folder of its group: moved into the new
        // ones, which limit nothing yet, before the limits are written (which may fail).
        let new: Vec<&Path> = now.beyond(&was).collect();
        if let Some(from) = was.paths().next().filter(|_| !new.is_empty()) {
            (cgroup::move_processes(from, &new))
                .context("moving the node's processes into its new cgroups")?;
        }
        (now.limit(&as_written(limits))).context("limiting the node's cgroup")
    }

    /// Node `name`'s group in the hierarchies a node with `limits` uses (see
    /// [`node`](Self::node)) and those of `also`; a memory limit has the fleet's group
    /// hand memory down (v2).
    fn in_groups_for(
        &self,
        name: &str,
        limits: &Limits,
        also: Vec<Controller>,
    ) -> anyhow::Result<Group> {
        let mut used = also;
        used.push(Controller::Cpuacct);
        if limits.memory_group() {
            used.push(Controller::Memory);
            self.group
                .hand_down(&[Controller::Memory])
                .context("the fleet's cgroup")?;
        }
        used.extend(limits.cpu_milli.map(|_| Controller::Cpu));
        used.extend(limits.cpuset.as_ref().map(|_| Controller::Cpuset));
        used.extend(limits.pids.map(|_| Controller::Pids));
        Ok(self.group.child(name).only(&used))
    }
}

/// Makes nsfleet's folder and `group` below it. Another fleet's end removes the folder
/// when it finds it empty, which it may be between the two: the folder is then made
/// again (a fleet's group, once made, keeps it).
fn make_below(base: &Group, group: &Group) -> anyhow::Result<()> {
    let mut tries = 0;
    loop {
        base.make(&CONTROLLERS).context("nsfleet's cgroup folder")?;
        match group.make(&HANDED_TO_NODES) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 10 => tries += 1,
            made => return made.map(drop).context("the fleet's cgroup"),
        }
    }
}

/// A node's group as it is now: a live change of its limits may put it in more
/// hierarchies (v1) or give it more controllers (v2). Shared by its world, which removes
/// it ([`NodeGroup`]), the starts of its processes, which join it, and its OOM count.
pub struct CurrentGroup(Mutex<Group>);

impl std::fmt::Debug for CurrentGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

impl CurrentGroup {
    pub fn get(&self) -> Group {
        self.0.lock().clone()
    }
}

impl NodeGroup {
    /// The group of a node of a fleet without one (a user's: see [`FleetGroup::make`]).
    pub fn none() -> NodeGroup {
        let group = Mutex::new(order::NODE_CGROUP, Group::none());
        NodeGroup(Arc::new(CurrentGroup(group)))
    }
}

/// A node's group, removed when this is dropped: with its world, after its init is
/// reaped (or when its start fails). At once, without waiting: a group whose last task
/// is still being reaped stays for the fleet's removal (`clean_journal`), or the next
/// start of a node of that name, to take.
pub struct NodeGroup(pub Arc<CurrentGroup>);

impl Drop for NodeGroup {
    fn drop(&mut self) {
        self.0.get().try_remove();
    }
}

impl Drop for FleetGroup {
    fn drop(&mut self) {
        if self.group.remove(PATIENCE).is_ok() {
            self.base.remove_if_empty();
            let _ = std::fs::remove_file(&self.journal);
        }
    }
}

/// A node's limits as its group's files take them.
fn as_written(l: &Limits) -> cgroup::Limits {
    cgroup::Limits {
        memory: l.memory,
        cpu_quota_us: l.cpu_milli.map(|m| m * cgroup::CPU_PERIOD_US / 1000),
        cpuset: l.cpuset.as_deref().map(nsfleet_values::cpu_list_text),
        pids: l.pids,
    }
}

/// Removes the groups a fleet journalled in `journal` (each node's, then the fleet's,
/// then nsfleet's folder if it is empty): what a killed supervisor left. Only folders
/// the journal names and that are cgroups below nsfleet's folder are touched. Returns
/// those removed; one that still holds a process is an error that names it.
pub fn clean_journal(journal: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let text = match std::fs::read_to_string(journal) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        r => r.with_context(|| format!("reading {}", journal.display()))?,
    };
    let all = cgroup::hierarchies().context("reading the cgroup mounts")?;
    let mut removed = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let fleet = Path::new(line);
        let ours = fleet
            .parent()
            .filter(|b| b.file_name() == Some(BASE.as_ref()));
        // At a hierarchy's top (root's), or below it (a user's, in their delegated group).
        let above = ours.and_then(|b| b.parent());
        let in_hierarchy = (all.iter()).any(|h| above.is_some_and(|a| a.starts_with(&h.mount)));
        if ours.is_none() || !in_hierarchy {
            anyhow::bail!(
                "{}: {line} is not a fleet's cgroup in a {BASE} folder of a cgroup hierarchy; not touching it",
                journal.display()
            );
        }
        if !fleet.exists() {
            continue;
        }
        for entry in std::fs::read_dir(fleet)?.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_dir(&entry.path())?;
            }
        }
        remove_dir(fleet)?;
        removed.push(fleet.to_path_buf());
        if let Some(b) = ours {
            let _ = std::fs::remove_dir(b);
        }
    }
    let _ = std::fs::remove_file(journal);
    Ok(removed)
}

/// Removes the (empty) cgroup `dir`, waiting a little for tasks that are exiting.
fn remove_dir(dir: &Path) -> anyhow::Result<()> {
    let until = std::time::Instant::now() + PATIENCE;
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                if std::time::Instant::now() >= until {
                    let procs =
                        std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
                    let pids: Vec<&str> = procs.split_whitespace().collect();
                    anyhow::bail!(
                        "{} still holds processes {}: end them, then clean again",
                        dir.display(),
                        pids.join(" ")
                    );
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e).with_context(|| format!("removing {}", dir.display())),
        }
    }
}

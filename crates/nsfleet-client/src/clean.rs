//! `nsfleet clean`: remove what a crashed fleet left behind. A fleet's namespaces and
//! processes die with its supervisor; what can remain is its run folder (record, stale
//! socket, logs), its cgroup and, if a node was held alive, a journalled host link; and the names of
//! its nodes' namespaces (`deploy --netns-names`), which hold them alive. Only folders
//! with an nsfleet record whose owner is gone are touched, only host interfaces that
//! carry the fleet's token and only names that still hold the namespace journalled with
//! them: never anything matched by name alone.

use anyhow::bail;
use nsfleet::rundir::RunDir;
use std::path::PathBuf;

pub struct CleanArgs {
    pub name: Option<String>,
    pub all: bool,
    pub run_dir: PathBuf,
    /// What the fronts leave under the run directory, swept with `--all` after the
    /// fleets.
    pub sweeps: Vec<Sweep>,
}

/// A front's leftovers under the run directory (a killed run's folder): `sweep` removes
/// those whose process is gone and returns them; each is said as removed, `what` after
/// its path.
pub struct Sweep {
    pub sweep: fn(&RunDir) -> Vec<PathBuf>,
    pub what: &'static str,
}

pub fn clean(a: CleanArgs) -> anyhow::Result<()> {
    let rd = RunDir::new(&a.run_dir);
    let names = match (&a.name, a.all) {
        (Some(_), true) => bail!("give a fleet name or --all, not both"),
        (None, false) => bail!("which fleet? give its name, or --all for every dead fleet"),
        (Some(n), false) => match rd.record(n) {
            None => bail!("no nsfleet fleet named {n:?} under {}", rd.root().display()),
            Some(r) if r.owner_alive() => {
                bail!("fleet {n:?} is running; `nsfleet down {n}` ends it")
            }
            Some(_) => vec![n.clone()],
        },
        (None, true) => rd.fleets(),
    };
    let mut removed = 0;
    for n in names {
        let Some(r) = rd.record(&n) else { continue };
        if r.owner_alive() {
            continue;
        }
        for ifname in nsfleet::subsys::link::host::clean_journal(&rd.host_journal(&n))? {
            println!("removed host interface {ifname} (journalled by fleet {n:?})");
        }
        for dir in nsfleet::subsys::world::cgroups::clean_journal(&rd.cgroup_journal(&n))? {
            println!(
                "removed the cgroup {} (journalled by fleet {n:?})",
                dir.display()
            );
        }
        let names = &rd.netns_journal(&n);
        for name in nsfleet::subsys::netns_names::clean_journal(names)? {
            println!("removed the namespace name /run/netns/{name} (journalled by fleet {n:?})");
        }
        rd.remove(&n, false)?;
        removed += 1;
        let pid = r.supervisor.map_or(r.creator.pid, |s| s.pid);
        println!(
            "removed {} (fleet {n:?}, supervisor pid {pid} gone)",
            rd.fleet_dir(&n).display()
        );
    }
    if a.all {
        for s in &a.sweeps {
            for dir in (s.sweep)(&rd) {
                println!("removed {} ({})", dir.display(), s.what);
                removed += 1;
            }
        }
    }
    if removed == 0 && a.all {
        println!("nothing to clean under {}", rd.root().display());
    }
    Ok(())
}

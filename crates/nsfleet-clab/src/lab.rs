//! containerlab's verbs: `deploy -t FILE`, `destroy -t FILE` and `inspect`, on top of
//! `up`, `down` and `status`. The fleet is the lab: its name is the file's `name`.
//! Without `-t`, the one `*.clab.yml` (or `*.clab.yaml`) of the current folder is used,
//! as containerlab does.

use anyhow::{bail, Context};
use nsfleet::control::{FleetStatus, NodeStatus};
use nsfleet::rundir::RunDir;
use nsfleet::topology::{self, Format};
use nsfleet_client::status::query;
use nsfleet_client::FleetRef;
use std::path::{Path, PathBuf};

/// The topology file: the one given, or the only `*.clab.y*ml` of the current folder
/// (of the folder given).
pub fn topology_file(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    let dir = match given {
        Some(p) if !p.is_dir() => return Ok(p.to_path_buf()),
        Some(d) => d.to_path_buf(),
        None => PathBuf::from("."),
    };
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            n.ends_with(".clab.yml") || n.ends_with(".clab.yaml")
        })
        .collect();
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => bail!(
            "no topology file matching *.clab.yml or *.clab.yaml in {}: give one with -t FILE",
            dir.display()
        ),
        _ => bail!(
            "several topology files in {}: {}; give one with -t FILE",
            dir.display(),
            found
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The lab (fleet) name a containerlab file gives.
pub fn lab_name(file: &Path) -> anyhow::Result<String> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    Ok(topology::clab::lab_name(
        &file.display().to_string(),
        &text,
    )?)
}

pub struct DeployArgs {
    pub topo: Option<PathBuf>,
    pub reconfigure: bool,
    pub up: nsfleet_client::up::UpArgs,
}

/// `deploy`: `up` of a containerlab file; `--reconfigure` destroys a running lab of
/// the same name first. The file is read and checked against the kernel once, before
/// the running lab goes.
pub fn deploy(mut a: DeployArgs) -> anyhow::Result<()> {
    let file = topology_file(a.topo.as_deref())?;
    a.up.file = Some(file.clone());
    a.up.format = Some(Format::Clab);
    let valid = nsfleet_client::up::validate(&a.up)?;
    let name = valid.topo.name.clone();
    let rd = RunDir::new(&a.up.run_dir);
    if rd.record(&name).is_some() && !a.up.dry_run {
        if !a.reconfigure {
            bail!("lab {name:?} is already deployed: `nsfleet destroy -t {}` first, or deploy with --reconfigure", file.display());
        }
        let fleet = FleetRef {
            name: name.clone(),
            run_dir: a.up.run_dir.clone(),
        };
        // With --json, stdout is the new lab's object alone.
        if a.up.json {
            nsfleet_client::down::down_quietly(&fleet)?;
        } else {
            nsfleet_client::down::down(nsfleet_client::down::DownArgs {
                fleet,
                no_wait: false,
                json: false,
            })?;
        }
    }
    if a.up.netns_names {
        names_are_free(&valid.topo)?;
    }
    let (quiet, run_dir) = (a.up.json || a.up.dry_run, a.up.run_dir.clone());
    nsfleet_client::up::start(a.up, valid)?;
    if quiet {
        return Ok(());
    }
    // As containerlab ends a deploy: the lab's table.
    inspect(InspectArgs {
        lab: Lab {
            topo: None,
            name: Some(name),
            all: false,
        },
        json: false,
        wide: false,
        run_dir,
    })
}

/// Refuses, before anything exists, names of namespaces that someone else holds already
/// (`deploy --netns-names`).
fn names_are_free(topo: &topology::Topology) -> anyhow::Result<()> {
    let dir = Path::new(nsfleet::sys::NETNS_DIR);
    let taken: Vec<String> = (topo.groups.iter())
        .filter_map(|g| g.config.clab.as_ref().map(|c| c.container.clone()))
        .filter(|n| dir.join(n).exists())
        .collect();
    if !taken.is_empty() {
        bail!(
            "{} already has {}: another lab's or tool's namespaces, which nsfleet does not take over (`ip netns del NAME` if they are yours and unused)",
            dir.display(),
            taken.join(", ")
        );
    }
    Ok(())
}

/// Which lab: the one a file names, one by name, or every one.
pub struct Lab {
    pub topo: Option<PathBuf>,
    pub name: Option<String>,
    pub all: bool,
}

pub struct DestroyArgs {
    pub lab: Lab,
    pub json: bool,
    pub run_dir: PathBuf,
}

/// `destroy`: `down` of the lab a file names (or `--name`, or every lab with `--all`).
pub fn destroy(a: DestroyArgs) -> anyhow::Result<()> {
    let rd = RunDir::new(&a.run_dir);
    let names = if a.lab.all {
        labs(&rd).into_iter().map(|f| f.name).collect()
    } else {
        vec![match &a.lab.name {
            Some(n) => n.clone(),
            None => lab_name(&topology_file(a.lab.topo.as_deref())?)?,
        }]
    };
    if names.is_empty() {
        eprintln!("nsfleet: no labs are deployed");
    }
    for name in names {
        nsfleet_client::down::down(nsfleet_client::down::DownArgs {
            fleet: FleetRef {
                name,
                run_dir: a.run_dir.clone(),
            },
            no_wait: false,
            json: a.json,
        })?;
    }
    Ok(())
}

pub struct InspectArgs {
    pub lab: Lab,
    pub json: bool,
    pub wide: bool,
    pub run_dir: PathBuf,
}

/// Every running fleet that came from a containerlab file.
pub(crate) fn labs(rd: &RunDir) -> Vec<FleetStatus> {
    (rd.fleets().iter())
        .map(|n| query(rd, n))
        .filter(|f| f.nodes.iter().any(|n| n.clab.is_some()))
        .collect()
}

/// What `graph -t FILE` draws: the lab as it runs when it is deployed (unless
/// `offline`), else the file.
pub fn graph_source(file: &Path, offline: bool, run_dir: &Path) -> anyhow::Result<String> {
    let file = topology_file(Some(file))?;
    let name = lab_name(&file)?;
    if !offline && RunDir::new(run_dir).record(&name).is_some() {
        return Ok(name);
    }
    Ok(file.display().to_string())
}

/// The deployed lab that `name` names, or else the file (`-t`, or the one of the
/// current folder); refused if it is not deployed. Returns its name and status.
pub(crate) fn deployed(
    rd: &RunDir,
    topo: Option<&Path>,
    name: Option<&str>,
) -> anyhow::Result<FleetStatus> {
    let name = match name {
        Some(n) => n.to_string(),
        None => lab_name(&topology_file(topo)?)?,
    };
    if rd.record(&name).is_none() {
        bail!("lab {name:?} is not deployed");
    }
    Ok(query(rd, &name))
}

/// Every node of every deployed lab, with its lab.
pub fn containers(rd: &RunDir) -> Vec<(FleetStatus, NodeStatus)> {
    let mut out = Vec::new();
    for f in labs(rd) {
        for n in f.nodes.iter().filter(|n| n.clab.is_some()) {
            out.push((f.clone(), n.clone()));
        }
    }
    out
}

/// The lab and node that are container `name` (clab-LAB-NODE). The labs whose name the
/// container's contains are asked first, and the search stops at the first that has
/// it: `docker exec` through the stand-in asks this once per call.
pub fn find_container(rd: &RunDir, name: &str) -> anyhow::Result<(FleetStatus, NodeStatus)> {
    let mut fleets = rd.fleets();
    fleets
        .sort_by_key(|f| !name.contains(&format!("-{f}-")) && !name.starts_with(&format!("{f}-")));
    fleets
        .iter()
        .find_map(|f| {
            let status = query(rd, f);
            let node = (status.nodes.iter())
                .find(|n| n.clab.as_ref().is_some_and(|c| c.container == name))?
                .clone();
            Some((status, node))
        })
        .with_context(|| {
            format!("no such container: {name} (no running lab has a node of that name)")
        })
}

/// `inspect`: containerlab's table (Name, Kind/Image, State, IPv4/6 Address), or its
/// JSON (`{"LAB": [{"lab_name", "name", "kind", "image", "state", "ipv4_address", ...}]}`).
pub fn inspect(a: InspectArgs) -> anyhow::Result<()> {
    let rd = RunDir::new(&a.run_dir);
    let wanted = match (&a.lab.name, a.lab.all) {
        (Some(n), _) => Some(n.clone()),
        (None, true) => None,
        (None, false) => match topology_file(a.lab.topo.as_deref()) {
            Ok(f) => Some(lab_name(&f)?),
            Err(_) if a.lab.topo.is_none() => None,
            Err(e) => return Err(e),
        },
    };
    let fleets: Vec<FleetStatus> = match &wanted {
        Some(n) => vec![deployed(&rd, None, Some(n))?],
        None => labs(&rd),
    };
    let rows: Vec<Row> = fleets
        .iter()
        .flat_map(|f| f.nodes.iter().filter_map(|n| Row::of(&rd, f, n)))
        .collect();
    if a.json {
        let mut out = serde_json::Map::new();
        for f in &fleets {
            let nodes: Vec<_> = rows
                .iter()
                .filter(|r| r.lab == f.name)
                .map(Row::json)
                .collect();
            out.insert(f.name.clone(), nodes.into());
        }
        println!("{}", serde_json::Value::Object(out));
        return Ok(());
    }
    if rows.is_empty() {
        println!(
            "no containerlab labs are deployed under {}",
            rd.root().display()
        );
        return Ok(());
    }
    print_table(&rows, wanted.is_none(), a.wide);
    Ok(())
}

/// How long the lab has been up, as Docker says it of a container (`Up 5 minutes`).
pub fn up_since(rd: &RunDir, lab: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let since = rd.record(lab).map_or(now, |r| r.created_unix);
    match now.saturating_sub(since) {
        s if s < 60 => format!("Up {s} seconds"),
        s if s < 3600 => format!("Up {} minutes", s / 60),
        s => format!("Up {} hours", s / 3600),
    }
}

/// One node of `inspect`.
struct Row {
    /// Its namespace's inode, as the stand-in's `docker ps` gives a container's id.
    id: String,
    status: String,
    /// The topology file from the current folder, and absolute.
    lab_path: String,
    abs_lab_path: String,
    lab: String,
    name: String,
    kind: String,
    image: String,
    state: String,
    ipv4: Option<String>,
    ipv6: Option<String>,
}

impl Row {
    fn of(rd: &RunDir, f: &FleetStatus, n: &NodeStatus) -> Option<Row> {
        let c = n.clab.as_ref()?;
        // containerlab's labPath is the file from the current folder, absLabPath as is.
        let abs_lab_path = (c.labels.iter())
            .find(|(k, _)| k == "clab-topo-file")
            .map_or(String::new(), |(_, v)| v.clone());
        let lab_path = std::env::current_dir()
            .ok()
            .and_then(|d| {
                Some(
                    Path::new(&abs_lab_path)
                        .strip_prefix(d)
                        .ok()?
                        .display()
                        .to_string(),
                )
            })
            .unwrap_or_else(|| abs_lab_path.clone());
        let eth0 = n
            .interfaces
            .iter()
            .find_map(|i| i.strip_prefix("eth0 "))
            .unwrap_or("");
        let addr = |v6: bool| {
            eth0.split(' ')
                .find(|a| a.contains(':') == v6 && !a.is_empty())
                .map(str::to_string)
        };
        let state = if f.state == "up" {
            "running"
        } else {
            f.state.as_str()
        };
        Some(Row {
            id: format!("{:x}", n.netns_inode),
            status: up_since(rd, &f.name),
            lab_path,
            abs_lab_path,
            lab: f.name.clone(),
            name: c.container.clone(),
            kind: c.kind.clone(),
            image: c.image.clone().unwrap_or_default(),
            state: state.to_string(),
            ipv4: addr(false),
            ipv6: addr(true),
        })
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "lab_name": self.lab,
            "labPath": self.lab_path,
            "absLabPath": self.abs_lab_path,
            "name": self.name,
            "container_id": self.id,
            "image": self.image,
            "kind": self.kind,
            "state": self.state,
            "status": self.status,
            "ipv4_address": self.ipv4.clone().unwrap_or_default(),
            "ipv6_address": self.ipv6.clone().unwrap_or_default(),
        })
    }

    /// The cells of the row, each a list of lines (containerlab stacks kind over image
    /// and IPv4 over IPv6); `wide` puts each cell on one line.
    fn cells(&self, all: bool, wide: bool) -> Vec<Vec<String>> {
        let bare = |a: &Option<String>| {
            a.as_deref().map_or("N/A".to_string(), |a| {
                a.split('/').next().unwrap_or(a).to_string()
            })
        };
        let mut cells = Vec::new();
        if all {
            cells.push(vec![self.lab.clone()]);
        }
        cells.push(vec![self.name.clone()]);
        cells.push(vec![self.kind.clone(), self.image.clone()]);
        cells.push(vec![self.state.clone()]);
        cells.push(vec![bare(&self.ipv4), bare(&self.ipv6)]);
        if wide {
            cells = cells
                .into_iter()
                .map(|c| vec![c.join(" ").trim().to_string()])
                .collect();
        }
        cells
    }
}

fn print_table(rows: &[Row], all: bool, wide: bool) {
    let mut head = vec!["Lab Name", "Name", "Kind/Image", "State", "IPv4/6 Address"];
    if !all {
        head.remove(0);
    }
    let cells: Vec<Vec<Vec<String>>> = rows.iter().map(|r| r.cells(all, wide)).collect();
    let widths: Vec<usize> = (0..head.len())
        .map(|c| {
            cells
                .iter()
                .flat_map(|r| r[c].iter().map(|l| l.chars().count()))
                .chain([head[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let rule = |l: &str, m: &str, r: &str| {
        let parts: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
        format!("{l}{}{r}", parts.join(m))
    };
    let line = |texts: Vec<&str>| {
        let parts: Vec<String> = texts
            .iter()
            .zip(&widths)
            .map(|(t, w)| format!(" {t:<w$} "))
            .collect();
        format!("│{}│", parts.join("│"))
    };
    println!("{}", rule("╭", "┬", "╮"));
    println!("{}", line(head.clone()));
    for r in &cells {
        println!("{}", rule("├", "┼", "┤"));
        let height = r.iter().map(Vec::len).max().unwrap_or(1);
        for k in 0..height {
            println!(
                "{}",
                line(
                    r.iter()
                        .map(|c| c.get(k).map_or("", String::as_str))
                        .collect()
                )
            );
        }
    }
    println!("{}", rule("╰", "┴", "╯"));
}

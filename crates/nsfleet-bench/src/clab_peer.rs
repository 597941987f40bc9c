//! `nsfleet bench clab --peer containerlab`: the same containerlab files deployed by
//! containerlab (with Docker) and by nsfleet, in the same run, where both are installed
//! (`../shared/notes/containerlab-peer.md` says how on this machine class).
//!
//! - **What each node sees**: a lab of hosts and a router (exec lines, `env`, labels,
//!   `sysctls`, a static `mgmt-ipv4`, a link MTU) is deployed by each tool in turn, and
//!   every node is probed the same way (`docker exec` / `nsfleet exec`): interfaces
//!   (name, MTU, the form of the MAC, state), addresses, routes, hostname, /etc/hosts,
//!   /etc/resolv.conf, containerlab's variables and the names of the others, the exec
//!   lines' effects, forwarding, reachability; and `inspect`'s JSON. Each difference is
//!   printed with the guide's reason when it documents one, or as undocumented.
//! - **Deploy and destroy** of lines of plain linux nodes (20, 100, 200), and FRR OSPF
//!   grids (25, 100) from deploy to converged (every router has a route to every other
//!   router's loopback, read from the kernel's table through a process of each node),
//!   runs alternated, medians and ranges, ratios.
//!
//! nsfleet runs the files with `--host-software`, containerlab with the images the files
//! name (Debian's FRR in both, see the notes). Nothing here asserts anything: it measures
//! and reports.

use crate::daemons::loopback_routes;
use crate::{emit, machine, need_root, note, versus, Cli, Common, Ratio};
use anyhow::{anyhow, bail, Context};
use nsfleet_results::{Better, Results};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub struct ClabPeerArgs {
    /// containerlab's executable.
    pub containerlab: PathBuf,
    pub docker: PathBuf,
    /// Lines of plain linux nodes, by size.
    pub lines: Vec<u64>,
    /// FRR grids, by router count (squares, or as close as the count allows).
    pub grids: Vec<u64>,
    pub timeout: Duration,
    pub common: Common,
}

/// The two tools.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Tool {
    Containerlab,
    Nsfleet,
}

impl Tool {
    fn name(self) -> &'static str {
        match self {
            Tool::Containerlab => "containerlab",
            Tool::Nsfleet => "nsfleet",
        }
    }
}

/// The image containerlab runs for plain nodes and for FRR routers (the peer's set-up
/// imports Debian root filesystems under these names).
const LINUX_IMAGE: &str = "alpine:3";
const FRR_IMAGE: &str = "quay.io/frrouting/frr:10.2.1";

/// Both tools, and a folder of this run's own for the files.
struct Peers<'a> {
    a: &'a ClabPeerArgs,
    cli: Cli,
    dir: PathBuf,
}

pub fn clab_peer(a: ClabPeerArgs) -> anyhow::Result<()> {
    need_root("clab --peer containerlab")?;
    let cli = Cli::new()?;
    let dir = cli.run_dir().join("labs");
    std::fs::create_dir_all(&dir)?;
    let p = Peers { a: &a, cli, dir };
    p.preflight()?;
    let c = &a.common;
    let mut metrics = BTreeMap::new();
    let differences = p.differential()?;
    for d in &differences {
        println!("{d}");
    }
    // A failure half-way (Docker refusing to let go of a network, say) still reports
    // what was measured before it, marked incomplete.
    let measured = (|| -> anyhow::Result<()> {
        for &n in &a.lines {
            let n = c.size(n, 5);
            let file = p.line_lab(n)?;
            p.timed(&format!("line{n}"), &file, None, &mut metrics)?;
        }
        for &n in &a.grids {
            let (rows, cols) = crate::daemons::square(c.size(n, 4));
            let file = p.grid_lab(rows, cols)?;
            let lab = format!("grid{}", rows * cols);
            p.timed(&lab, &file, Some(rows * cols), &mut metrics)?;
        }
        Ok(())
    })();
    let mut results = Results {
        format: nsfleet_results::FORMAT,
        scenario: "clab-peer".into(),
        machine: machine(),
        params: serde_json::json!({
            "lines": a.lines, "grids": a.grids, "runs": c.repetitions(),
            "containerlab": p.version(Tool::Containerlab),
            "differences": differences,
        }),
        metrics,
        charts: Vec::new(),
    };
    // Said only when it is, so that complete results compare with earlier ones.
    if let Err(e) = &measured {
        results.params["incomplete"] = serde_json::json!(format!("{e:#}"));
    }
    emit(
        &results,
        c,
        "the same containerlab files with containerlab (Docker) and nsfleet",
    )?;
    measured.context(
        "the bench stopped before its end; the results above are what it measured until then",
    )
}

impl Peers<'_> {
    /// Docker answers and containerlab runs; the images the files name are there.
    fn preflight(&self) -> anyhow::Result<()> {
        let docker = self.a.docker.display();
        let run = |cmd: &mut Command, what: &str| -> anyhow::Result<Output> {
            let out = cmd.output().with_context(|| format!("running {what}"))?;
            if !out.status.success() {
                bail!("{what}: {}", String::from_utf8_lossy(&out.stderr).trim());
            }
            Ok(out)
        };
        let how =
            "see ../shared/notes/containerlab-peer.md (setup: ../shared/tools/clab-peer/setup.sh)";
        run(
            Command::new(&self.a.docker).arg("info"),
            &format!("{docker} info"),
        )
        .map_err(|e| anyhow!("Docker does not answer ({e}): {how}"))?;
        run(self.clab().arg("version"), "containerlab version")
            .map_err(|e| anyhow!("containerlab does not run ({e}): {how}"))?;
        for image in [LINUX_IMAGE, FRR_IMAGE] {
            run(
                Command::new(&self.a.docker).args(["image", "inspect", image]),
                &format!("{docker} image inspect {image}"),
            )
            .map_err(|_| anyhow!("Docker has no image {image}: {how}"))?;
        }
        if !Path::new("/usr/lib/frr/ospfd").exists() {
            bail!(
                "nsfleet's side runs the host's FRR, which is not installed: apt-get install frr"
            );
        }
        Ok(())
    }

    fn clab(&self) -> Command {
        let mut c = Command::new(&self.a.containerlab);
        c.env("CLAB_VERSION_CHECK", "disable");
        c
    }

    fn version(&self, tool: Tool) -> String {
        let out = match tool {
            Tool::Containerlab => self.clab().arg("version").output(),
            Tool::Nsfleet => self.cli.command(&["--version"]).output(),
        };
        let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
        let text = text.unwrap_or_default();
        (text.lines())
            .find(|l| l.contains("version"))
            .unwrap_or("")
            .split_whitespace()
            .last()
            .unwrap_or("")
            .to_string()
    }

    fn deploy_cmd(&self, tool: Tool, file: &str) -> Command {
        match tool {
            Tool::Containerlab => {
                let mut c = self.clab();
                c.args(["deploy", "-t", file]);
                c
            }
            Tool::Nsfleet => self.cli.command(&["deploy", "--host-software", "-t", file]),
        }
    }

    fn destroy_cmd(&self, tool: Tool, file: &str) -> Command {
        match tool {
            Tool::Containerlab => {
                let mut c = self.clab();
                c.args(["destroy", "-t", file, "--cleanup"]);
                c
            }
            Tool::Nsfleet => self.cli.command(&["destroy", "-t", file]),
        }
    }

    /// containerlab's destroy leaves its management network (Docker's `clab`, routing
    /// 172.20.20.0/24 on the host) behind at times, which the next deploy of the same
    /// files by nsfleet refuses (the host routes that subnet elsewhere). Once no
    /// container uses it, the bench removes it: every deploy starts from the same host.
    fn remove_idle_mgmt_network(&self) -> anyhow::Result<()> {
        let out = Command::new(&self.a.docker)
            .args([
                "network",
                "inspect",
                "clab",
                "--format",
                "{{len .Containers}}",
            ])
            .output()?;
        if out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "0" {
            note("removing containerlab's management network, which its destroy left");
            let rm = Command::new(&self.a.docker)
                .args(["network", "rm", "clab"])
                .output()?;
            if !rm.status.success() {
                bail!(
                    "containerlab's destroy left its management network `clab`, and Docker cannot remove it ({}): restart dockerd, then run the bench again (../shared/notes/containerlab-peer.md)",
                    String::from_utf8_lossy(&rm.stderr).trim()
                );
            }
        }
        Ok(())
    }

    /// Deploys `file` with `tool`; the guard destroys it, whatever happens next.
    fn deploy(&self, tool: Tool, file: &str) -> anyhow::Result<(Deployed<'_>, f64)> {
        let t = Instant::now();
        let out = self.deploy_cmd(tool, file).output()?;
        let secs = t.elapsed().as_secs_f64();
        let guard = Deployed {
            peers: self,
            tool,
            file: file.to_string(),
            done: false,
        };
        if !out.status.success() {
            bail!(
                "{} deploy -t {file}: {}{}",
                tool.name(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok((guard, secs))
    }

    /// A command in a node, as each tool runs one.
    fn in_node(&self, tool: Tool, lab: &str, node: &str, argv: &[&str]) -> Command {
        match tool {
            Tool::Containerlab => {
                let mut c = Command::new(&self.a.docker);
                c.args(["exec", &format!("clab-{lab}-{node}")]).args(argv);
                c
            }
            Tool::Nsfleet => {
                let mut args = vec!["exec", lab, node, "--"];
                args.extend(argv);
                self.cli.command(&args)
            }
        }
    }

    fn write(&self, rel: &str, text: &str) -> anyhow::Result<String> {
        let path = self.dir.join(rel);
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d)?;
        }
        std::fs::write(&path, text)?;
        Ok(path.to_string_lossy().into_owned())
    }

    /// `lineN`: N plain linux nodes, each linked to the next.
    fn line_lab(&self, n: u64) -> anyhow::Result<String> {
        let name = lab_name(&format!("line{n}"));
        let mut y = format!("name: {name}\ntopology:\n  defaults:\n    kind: linux\n    image: {LINUX_IMAGE}\n  nodes:\n");
        for i in 1..=n {
            y.push_str(&format!("    n{i}: {{}}\n"));
        }
        y.push_str("  links:\n");
        for i in 1..n {
            let a = if i == 1 { "eth1" } else { "eth2" };
            y.push_str(&format!(
                "    - endpoints: [\"n{i}:{a}\", \"n{}:eth1\"]\n",
                i + 1
            ));
        }
        self.write(&format!("{name}/{name}.clab.yml"), &y)
    }

    /// `gridN`: FRR routers in a grid, FRR's image with `frr.conf` and `daemons` bound
    /// into /etc/frr, as containerlab users write FRR labs.
    fn grid_lab(&self, rows: u64, cols: u64) -> anyhow::Result<String> {
        let lab = lab_name(&format!("grid{}", rows * cols));
        let g = crate::daemons::grid(rows, cols);
        let mut nodes = String::new();
        for (i, list) in g.ifaces.iter().enumerate() {
            self.write(
                &format!("{lab}/r{i}/frr.conf"),
                &crate::daemons::ospf_conf(i, list),
            )?;
            self.write(&format!("{lab}/r{i}/daemons"), DAEMONS)?;
            nodes.push_str(&format!("    r{i}:\n      binds:\n        - r{i}/daemons:/etc/frr/daemons\n        - r{i}/frr.conf:/etc/frr/frr.conf\n"));
        }
        // containerlab's management /24 has 253 node addresses.
        let mgmt = if rows * cols > 250 {
            "mgmt:\n  ipv4-subnet: 172.20.0.0/16\n  ipv6-subnet: 3fff:172:20:20::/64\n"
        } else {
            ""
        };
        let y = format!("name: {lab}\n{mgmt}topology:\n  defaults:\n    kind: linux\n    image: {FRR_IMAGE}\n  nodes:\n{nodes}  links:\n{}", g.yaml_links);
        self.write(&format!("{lab}/{lab}.clab.yml"), &y)
    }

    /// Deploy and destroy of `file` with both tools, alternated, `runs` times; with
    /// `routers`, the time from deploy's start to every router converged too.
    fn timed(
        &self,
        lab: &str,
        file: &str,
        routers: Option<u64>,
        metrics: &mut BTreeMap<String, nsfleet_results::Metric>,
    ) -> anyhow::Result<()> {
        let name = lab_name(lab);
        let mut samples: BTreeMap<(Tool, &str), Vec<f64>> = BTreeMap::new();
        let ran = self.runs(lab, &name, file, routers, &mut samples);
        self.sample_metrics(lab, &samples, metrics);
        ran
    }

    /// [`Self::timed`]'s runs, each sample kept as it is taken.
    fn runs(
        &self,
        lab: &str,
        name: &str,
        file: &str,
        routers: Option<u64>,
        samples: &mut BTreeMap<(Tool, &str), Vec<f64>>,
    ) -> anyhow::Result<()> {
        for run in 0..self.a.common.repetitions() {
            let order = if run % 2 == 0 {
                [Tool::Containerlab, Tool::Nsfleet]
            } else {
                [Tool::Nsfleet, Tool::Containerlab]
            };
            for tool in order {
                note(&format!("{lab}: {} run {}", tool.name(), run + 1));
                let start = Instant::now();
                let (mut guard, deploy) = self.deploy(tool, file)?;
                samples.entry((tool, "deploy")).or_default().push(deploy);
                if let Some(n) = routers {
                    let conv = self.wait_converged(tool, name, n, start)?;
                    samples
                        .entry((tool, "converged"))
                        .or_default()
                        .push(conv.unwrap_or(f64::NAN));
                    // The protocol's floor, on nsfleet's routers (the same FRR as the
                    // image's): their links pulled and plugged back at once.
                    // A run that did not converge has no floor either (NaN), so that
                    // the floor's samples pair with the converged ones run by run.
                    if tool == Tool::Nsfleet {
                        let floor = match conv {
                            Some(_) => {
                                let pids = self.node_pids(tool, name)?;
                                let again =
                                    || match self.wait_converged(tool, name, n, Instant::now())? {
                                        Some(_) => Ok(()),
                                        None => bail!(
                                            "{lab}: not converged again after the floor's plug"
                                        ),
                                    };
                                crate::daemons::floor(&pids, &["eth0"], self.a.timeout, again)?
                            }
                            None => f64::NAN,
                        };
                        samples.entry((tool, "floor")).or_default().push(floor);
                    }
                }
                let destroy = guard.destroy()?;
                samples.entry((tool, "destroy")).or_default().push(destroy);
            }
        }
        Ok(())
    }

    /// The metrics of a lab's samples: each tool's, and their ratios run by run.
    fn sample_metrics(
        &self,
        lab: &str,
        samples: &BTreeMap<(Tool, &str), Vec<f64>>,
        metrics: &mut BTreeMap<String, nsfleet_results::Metric>,
    ) {
        if let (Some(f), Some(n)) = (
            samples.get(&(Tool::Nsfleet, "floor")),
            samples.get(&(Tool::Nsfleet, "converged")),
        ) {
            versus(
                metrics,
                "s",
                (None, n),
                (Some(&format!("{lab}.protocol_floor_s")), f),
                Ratio::OursPerTheirs(
                    &format!("{lab}.converged.nsfleet_over_floor"),
                    Better::Lower,
                ),
            );
        }
        for what in ["deploy", "destroy", "converged"] {
            let (Some(c), Some(n)) = (
                samples.get(&(Tool::Containerlab, what)),
                samples.get(&(Tool::Nsfleet, what)),
            ) else {
                continue;
            };
            versus(
                metrics,
                "s",
                (Some(&format!("{lab}.{what}.nsfleet_s")), n),
                (Some(&format!("{lab}.{what}.containerlab_s")), c),
                Ratio::TheirsPerOurs(&format!("{lab}.{what}.ratio"), Better::Higher),
            );
        }
    }

    /// Seconds from `start` until every router has a route to every other's loopback;
    /// `None` after the timeout. The processes read through are looked up again when
    /// one has gone (a daemon's launcher ends once the daemon runs).
    fn wait_converged(
        &self,
        tool: Tool,
        lab: &str,
        n: u64,
        start: Instant,
    ) -> anyhow::Result<Option<f64>> {
        let mut pids = self.node_pids(tool, lab)?;
        while start.elapsed() < self.a.timeout {
            let routes: Vec<Option<u64>> = pids.iter().map(|p| loopback_routes(*p)).collect();
            if routes.iter().any(Option::is_none) || (pids.len() as u64) < n {
                pids = self.node_pids(tool, lab)?;
            } else if routes.iter().all(|r| r.is_some_and(|r| r + 1 >= n)) {
                return Ok(Some(start.elapsed().as_secs_f64()));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Ok(None)
    }

    /// A process of each node: Docker's container init, or each node's first process.
    fn node_pids(&self, tool: Tool, lab: &str) -> anyhow::Result<Vec<i64>> {
        match tool {
            Tool::Containerlab => {
                let out = Command::new(&self.a.docker)
                    .args(["ps", "-q", "--filter", &format!("label=containerlab={lab}")])
                    .output()?;
                let ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
                    .split_whitespace()
                    .map(String::from)
                    .collect();
                let out = Command::new(&self.a.docker)
                    .args(["inspect", "-f", "{{.State.Pid}}"])
                    .args(&ids)
                    .output()?;
                Ok(String::from_utf8_lossy(&out.stdout)
                    .split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect())
            }
            Tool::Nsfleet => {
                let v = self.cli.run(&["status", lab, "--json"])?;
                let nodes = v["fleets"][0]["nodes"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                Ok(nodes
                    .iter()
                    // A process that stays (FRR's launcher ends once the daemons run).
                    .filter_map(|n| {
                        let procs = n["processes"].as_array()?;
                        procs.iter().find(|p| p["running"] == true)?["pid"].as_i64()
                    })
                    .collect())
            }
        }
    }

    /// The differential lab, deployed by each tool in turn and probed; returns the
    /// differences, one line each.
    fn differential(&self) -> anyhow::Result<Vec<String>> {
        let file = self.write("pdiff/pdiff.clab.yml", DIFF_LAB)?;
        let mut seen: BTreeMap<Tool, Probed> = BTreeMap::new();
        for tool in [Tool::Containerlab, Tool::Nsfleet] {
            note(&format!("differential lab: {}", tool.name()));
            let (mut guard, _) = self.deploy(tool, &file)?;
            seen.insert(tool, self.probe(tool, &file)?);
            guard.destroy()?;
        }
        Ok(compare(&seen[&Tool::Containerlab], &seen[&Tool::Nsfleet]))
    }

    /// Every node of the differential lab probed, and `inspect`'s JSON.
    fn probe(&self, tool: Tool, file: &str) -> anyhow::Result<Probed> {
        // Reachability first: it also waits for the exec lines to have run.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut reach = String::from("unreachable");
        while Instant::now() < deadline {
            let ok = self
                .in_node(tool, "pdiff", "h1", &["ping", "-c1", "-W1", "10.2.0.1"])
                .output()?;
            if ok.status.success() {
                reach = "h1 reaches h3 through r2".into();
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        let mut nodes = BTreeMap::new();
        for node in ["h1", "r2", "h3"] {
            let out = self
                .in_node(tool, "pdiff", node, &["sh", "-c", PROBE])
                .output()?;
            let mut s = sections(&String::from_utf8_lossy(&out.stdout));
            s.insert("reachability".into(), vec![reach.clone()]);
            nodes.insert(node.to_string(), s);
        }
        let inspect = match tool {
            Tool::Containerlab => self
                .clab()
                .args(["inspect", "-t", file, "--format", "json"])
                .output()?,
            Tool::Nsfleet => self
                .cli
                .command(&["inspect", "-t", file, "--json"])
                .output()?,
        };
        let inspect: serde_json::Value =
            serde_json::from_slice(&inspect.stdout).unwrap_or(serde_json::Value::Null);
        Ok(Probed { nodes, inspect })
    }
}

/// A deployed lab, destroyed by [`Deployed::destroy`] or, failing that, on drop.
struct Deployed<'a> {
    peers: &'a Peers<'a>,
    tool: Tool,
    file: String,
    done: bool,
}

impl Deployed<'_> {
    /// Destroys the lab; returns how long its tool took.
    fn destroy(&mut self) -> anyhow::Result<f64> {
        self.done = true;
        let t = Instant::now();
        let out = self.peers.destroy_cmd(self.tool, &self.file).output()?;
        if !out.status.success() {
            bail!(
                "{} destroy -t {}: {}",
                self.tool.name(),
                self.file,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let took = t.elapsed().as_secs_f64();
        if self.tool == Tool::Containerlab {
            self.peers.remove_idle_mgmt_network()?;
        }
        Ok(took)
    }
}

impl Drop for Deployed<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.peers.destroy_cmd(self.tool, &self.file).output();
        }
    }
}

/// A bench lab's name: its label (`line20`, `grid25`) with a `p` in front, so that its
/// containers (`clab-pline20-n1`) meet none of a lab of the user's.
fn lab_name(label: &str) -> String {
    format!("p{label}")
}

/// What one tool's nodes saw: per node, per section, normalised lines; and `inspect`.
struct Probed {
    nodes: BTreeMap<String, BTreeMap<String, Vec<String>>>,
    inspect: serde_json::Value,
}

/// The probe each node runs (sh, iproute2, coreutils: in both the image and the host).
const PROBE: &str = r#"
echo '## links'; ip -o link
echo '## addresses'; ip -o addr
echo '## routes'; ip route; ip -6 route
echo '## hostname'; hostname
echo '## hosts'; cat /etc/hosts
echo '## resolv.conf'; cat /etc/resolv.conf 2>/dev/null
echo '## environment'; env
echo '## exec lines'; cat /tmp/exec-ran 2>/dev/null
echo '## forwarding'; cat /proc/sys/net/ipv4/ip_forward
"#;

/// The probe's output by section, each normalised so that only what a user would call
/// a difference remains (see [`normalise`]).
fn sections(out: &str) -> BTreeMap<String, Vec<String>> {
    let mut s: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut cur: Option<String> = None;
    for line in out.lines() {
        if let Some(name) = line.strip_prefix("## ") {
            cur = Some(name.to_string());
            s.entry(name.to_string()).or_default();
        } else if let Some(c) = &cur {
            if let Some(n) = normalise(c, line) {
                s.get_mut(c).expect("entered").push(n);
            }
        }
    }
    for v in s.values_mut() {
        v.sort();
        v.dedup();
    }
    s
}

/// One line of a section as compared: interface indexes, peers' indexes, counters,
/// lifetimes and route protocols are not what a node "sees" differently; a MAC is
/// reduced to its form; the environment's variables to their names, but containerlab's
/// (`CLAB_*`) and the file's (`LAB_*`) with their values.
fn normalise(section: &str, line: &str) -> Option<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    match section {
        "links" => {
            let name = words.get(1)?.trim_end_matches(':');
            let name = name.split('@').next()?;
            let at = |k: &str| {
                words
                    .iter()
                    .position(|w| *w == k)
                    .and_then(|i| words.get(i + 1))
            };
            let mac = at("link/ether").map_or("none".into(), |m| mac_form(m));
            let state = at("state").copied().unwrap_or("?");
            Some(format!(
                "{name} mtu {} mac {mac} state {state}",
                at("mtu").copied().unwrap_or("?")
            ))
        }
        "addresses" => {
            let (dev, family, addr) = (words.get(1)?, words.get(2)?, words.get(3)?);
            if addr.starts_with("fe80:") {
                return Some(format!("{dev} {family} link-local"));
            }
            Some(format!("{dev} {family} {addr}"))
        }
        "routes" => {
            let mut keep = Vec::new();
            let mut it = words.iter();
            while let Some(w) = it.next() {
                match *w {
                    // `src` follows the address, which `addresses` compares.
                    "proto" | "metric" | "pref" | "expires" | "src" => {
                        it.next();
                    }
                    "linkdown" | "onlink" => {}
                    "scope" => {
                        it.next();
                    }
                    w => keep.push(w),
                }
            }
            (!keep.is_empty()).then(|| keep.join(" "))
        }
        "environment" => {
            let (k, v) = line.split_once('=')?;
            if k.starts_with("CLAB_") || k.starts_with("LAB_") {
                Some(format!("{k}={v}"))
            } else {
                Some(format!("{k} (set)"))
            }
        }
        "hosts" | "resolv.conf" => {
            let l = words.join(" ");
            (!l.is_empty() && !l.starts_with('#')).then_some(l)
        }
        _ => Some(line.trim().to_string()),
    }
}

/// A MAC's form: Docker's (02:42:...), containerlab's (aa:c1:ab:...), or a random
/// locally administered one.
fn mac_form(mac: &str) -> String {
    let first = u8::from_str_radix(mac.get(..2).unwrap_or("00"), 16).unwrap_or(0);
    match mac {
        m if m.starts_with("02:42:") => "docker-02:42".into(),
        m if m.starts_with("aa:c1:ab:") => "containerlab-aa:c1:ab".into(),
        "00:00:00:00:00:00" => "zero".into(),
        _ if first & 2 != 0 => "random-local".into(),
        _ => "global".into(),
    }
}

/// The guide's reasons (docs/containerlab.md) for the differences it documents, by section.
const DOCUMENTED: [(&str, &str); 6] = [
    ("links", "MACs: Docker's 02:42:... on eth0 and containerlab's aa:c1:ab:... on veths; nsfleet's are the kernel's random locally administered ones (docs/containerlab.md)"),
    ("hosts", "/etc/hosts: containerlab writes localhost, the IPv6 names, the node's own name and nodes with a static mgmt-ipv4; nsfleet every node as NAME and clab-LAB-NAME (docs/containerlab.md)"),
    ("resolv.conf", "DNS: Docker's embedded resolver (127.0.0.11) there; the host's resolv.conf here: nsfleet runs no DNS (docs/containerlab.md)"),
    ("environment", "Docker gives the image's variables (PATH, HOME, HOSTNAME, ...); nsfleet a standard PATH, HOME, HOSTNAME, the file's env, CLAB_* and NSFLEET_* (docs/containerlab.md)"),
    ("addresses", "eth0 addresses: containerlab gives them in container start order, nsfleet in file order after static ones (docs/containerlab.md)"),
    ("inspect", "inspect's JSON: nsfleet gives containerlab's keys for name, kind, image, state and addresses, not Docker's container id, owner or lab paths (docs/containerlab.md)"),
];

/// Each difference between what containerlab's nodes and nsfleet's saw.
fn compare(clab: &Probed, ns: &Probed) -> Vec<String> {
    let reason = |section: &str| {
        DOCUMENTED
            .iter()
            .find(|(s, _)| *s == section)
            .map_or("UNDOCUMENTED".to_string(), |(_, r)| {
                format!("documented: {r}")
            })
    };
    let mut out = Vec::new();
    for (node, a) in &clab.nodes {
        let Some(b) = ns.nodes.get(node) else {
            out.push(format!("{node}: not probed under nsfleet"));
            continue;
        };
        let names: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
        for sec in names {
            let (x, y) = (
                a.get(sec).cloned().unwrap_or_default(),
                b.get(sec).cloned().unwrap_or_default(),
            );
            if x == y {
                continue;
            }
            let only = |p: &[String], q: &[String]| -> Vec<String> {
                p.iter()
                    .filter(|l| !q.contains(l))
                    .take(6)
                    .cloned()
                    .collect()
            };
            out.push(format!(
                "{node} [{sec}] {}\n    containerlab only: {:?}\n    nsfleet only:      {:?}",
                reason(sec),
                only(&x, &y),
                only(&y, &x)
            ));
        }
    }
    let keys = |v: &serde_json::Value| -> Vec<String> {
        let first = v
            .as_object()
            .and_then(|m| m.values().next())
            .and_then(|l| l.get(0));
        let mut k: Vec<String> = first
            .and_then(|e| e.as_object())
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        k.sort();
        k
    };
    let (kc, kn) = (keys(&clab.inspect), keys(&ns.inspect));
    if kc != kn {
        let missing: Vec<&String> = kc.iter().filter(|k| !kn.contains(k)).collect();
        let extra: Vec<&String> = kn.iter().filter(|k| !kc.contains(k)).collect();
        out.push(format!(
            "inspect [keys] {}\n    containerlab only: {missing:?}\n    nsfleet only:      {extra:?}",
            reason("inspect")
        ));
    }
    if out.is_empty() {
        out.push("every node saw the same under both tools".into());
    }
    out
}

/// The differential lab: two hosts and a router between them; exec lines, `env`,
/// labels, `sysctls`, a static `mgmt-ipv4` and a link MTU.
const DIFF_LAB: &str = "name: pdiff
topology:
  defaults:
    kind: linux
    image: alpine:3
    env: {LAB_WHERE: defaults}
    labels: {role: host}
  nodes:
    h1:
      exec:
        - ip addr add 10.1.0.1/24 dev eth1
        - ip route add 10.2.0.0/24 via 10.1.0.2
        - sh -c 'echo h1 ran > /tmp/exec-ran'
    r2:
      mgmt-ipv4: 172.20.20.9
      env: {LAB_WHERE: r2}
      labels: {role: router}
      sysctls: {net.ipv4.ip_forward: 1}
      exec:
        - ip addr add 10.1.0.2/24 dev eth1
        - ip addr add 10.2.0.2/24 dev eth2
        - sh -c 'echo r2 ran > /tmp/exec-ran'
    h3:
      exec:
        - ip addr add 10.2.0.1/24 dev eth1
        - ip route add 10.1.0.0/24 via 10.2.0.2
        - sh -c 'echo h3 ran > /tmp/exec-ran'
  links:
    - endpoints: [h1:eth1, r2:eth1]
    - endpoints: [r2:eth2, h3:eth1]
      mtu: 1400
";

/// FRR's `daemons` for the grid's routers: zebra and ospfd, as FRR's image runs them.
const DAEMONS: &str = "zebra=yes\nbgpd=no\nospfd=yes\nospf6d=no\nripd=no\nripngd=no\nisisd=no\npimd=no\nldpd=no\nnhrpd=no\neigrpd=no\nbabeld=no\nsharpd=no\nstaticd=no\npbrd=no\nbfdd=no\nfabricd=no\nvtysh_enable=yes\nzebra_options=\" -s 90000000 --daemon -A 127.0.0.1\"\nospfd_options=\"  --daemon -A 127.0.0.1\"\nstaticd_options=\"  --daemon -A 127.0.0.1\"\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_are_compared_as_a_user_would() {
        assert_eq!(
            normalise("links", "7: eth1@if8: <BROADCAST,UP> mtu 1400 qdisc noqueue state UP mode DEFAULT link/ether aa:c1:ab:12:34:56 brd ff:ff:ff:ff:ff:ff link-netnsid 0").unwrap(),
            "eth1 mtu 1400 mac containerlab-aa:c1:ab state UP"
        );
        assert_eq!(
            normalise(
                "routes",
                "default via 172.20.20.1 dev eth0 proto static metric 20"
            )
            .unwrap(),
            "default via 172.20.20.1 dev eth0"
        );
        assert_eq!(normalise("environment", "PATH=/bin").unwrap(), "PATH (set)");
        assert_eq!(
            normalise("environment", "CLAB_NODE=x").unwrap(),
            "CLAB_NODE=x"
        );
        assert_eq!(mac_form("02:42:ac:14:14:02"), "docker-02:42");
        assert_eq!(mac_form("9e:11:22:33:44:55"), "random-local");
    }
}

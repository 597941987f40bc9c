//! `nsfleet bench images`: N nodes that run one container image, up and reclaimed,
//! against the same N nodes running the host's software (one process each, as the image
//! nodes have), and against the same image nodes unconfined (`--privileged`: what a
//! confined node's user namespace costs), in the same run, alternated: up and down
//! times, their ratios, memory per
//! node (what the kernel holds once the fleet is up, page cache aside: `memory_held`;
//! each node's writable layer is a tmpfs of its own, counted there;
//! against containerlab, the PSS of the processes each tool runs for the nodes), and
//! what the image costs on disk (its layers once, however many nodes run it). The image is built here (no registry is reachable)
//! from the host's static busybox and a layer of incompressible data, and loaded into a
//! store of the bench's own. And a pull of a 100 MB image from a registry on loopback
//! (Debian's docker-registry, fed by skopeo) into an empty store, against `skopeo copy`
//! of it, alternated (skopeo only writes the blobs; nsfleet also unpacks them). containerlab
//! with Docker on the same nodes is the peer where both are installed; without
//! them it is said, and not measured.

use super::{emit, machine, metric, need_root, note, versus, Cli, Common, Ratio};
use anyhow::{bail, Context};
use nsfleet_image::build::{write_oci_layout, Compression, Entry, ImageSpec, Layer};
use nsfleet_image::local_registry::{missing_tools, LocalRegistry};
use nsfleet_image::RunConfig;
use nsfleet_results::{Better, Results};
use std::path::{Path, PathBuf};
use std::time::Instant;

pub struct ImagesArgs {
    /// Node counts, each measured in turn.
    pub counts: Vec<u64>,
    pub common: Common,
}

/// The image's name in the bench's store.
const IMAGE: &str = "bench/busy:1";

/// The incompressible layer's size: what "on disk once" is measured against.
const DATA_BYTES: usize = 16 << 20;

/// One size's samples over the repetitions.
#[derive(Default)]
struct Samples {
    image_up_s: Vec<f64>,
    plain_up_s: Vec<f64>,
    image_down_s: Vec<f64>,
    plain_down_s: Vec<f64>,
    image_mem_per_node: Vec<f64>,
    plain_mem_per_node: Vec<f64>,
    /// The image nodes `--privileged`.
    privileged_up_s: Vec<f64>,
    privileged_down_s: Vec<f64>,
    privileged_mem_per_node: Vec<f64>,
    layers_bytes: Vec<f64>,
}

/// What one fleet of a run is.
#[derive(Clone, Copy, PartialEq)]
enum Nodes {
    /// The image, confined (the default).
    Image,
    /// The image, `--privileged`.
    Privileged,
    /// The host's software.
    Plain,
}

pub fn images(a: ImagesArgs) -> anyhow::Result<()> {
    need_root("images")?;
    let c = &a.common;
    if !Path::new("/bin/busybox").is_file() {
        bail!("bench images builds its image from the host's static busybox: apt-get install busybox-static");
    }
    let mut counts: Vec<u64> = a.counts.iter().map(|&n| c.size(n, 20)).collect();
    counts.dedup();
    let store = Scratch::new()?;
    let load_s = load_image(&store.0)?;
    let mut res = Results::new(
        "images",
        machine(),
        serde_json::json!({"counts": counts, "runs": c.repetitions(), "workers": c.workers, "quick": c.quick, "data_layer_bytes": DATA_BYTES}),
    );
    res.metric("load_s", metric("s", Better::Lower, vec![load_s]));
    for &count in &counts {
        let s = measure(count, c, &store.0)?;
        metrics(&mut res, count, &s);
    }
    let missing = missing_tools();
    if missing.is_empty() {
        let (nsfleet, skopeo) = pulls(c, &store.0)?;
        let (ours, theirs) = (
            (Some("pull_s"), &nsfleet[..]),
            (Some("skopeo_copy_s"), &skopeo[..]),
        );
        let ratio = Ratio::OursPerTheirs("pull_vs_skopeo", Better::Lower);
        versus(&mut res.metrics, "s", ours, theirs, ratio).target = Some("<= 1.2".into());
    } else {
        note(&format!(
            "{missing:?} not installed: the pull is not measured"
        ));
    }
    match Containerlab::find() {
        Some(clab) => {
            for &count in &counts {
                let p = clab.measure(count, c, &store.0)?;
                peer_metrics(&mut res, count, &p);
            }
        }
        None => note("containerlab with a running Docker is not here: not measured as a peer"),
    }
    emit(
        &res,
        c,
        &format!("nodes of one image vs the same nodes without ({counts:?})"),
    )
}

/// A folder of the bench's own for the image store, removed however the bench ends.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> anyhow::Result<Scratch> {
        let dir = std::env::temp_dir().join(format!("nsfleet-bench-{}-images", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("making {}", dir.display()))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Builds the bench's image as an OCI layout and loads it; the load's seconds.
fn load_image(store: &Path) -> anyhow::Result<f64> {
    let layout = store.join("layout");
    write_oci_layout(&layout, "1", &image())?;
    let cli = Cli::new()?.with_image_store(&store.join("store"));
    let t = Instant::now();
    cli.run(&[
        "image",
        "load",
        &layout.display().to_string(),
        "--name",
        IMAGE,
        "--json",
    ])?;
    Ok(t.elapsed().as_secs_f64())
}

/// busybox and its `sleep`, and a layer of data no node reads: its process sleeps.
fn image() -> ImageSpec {
    let busybox = std::fs::read("/bin/busybox").unwrap_or_default();
    let mut tools = vec![
        Entry::dir("bin"),
        Entry::file("bin/busybox", 0o755, busybox),
    ];
    for t in ["sh", "sleep", "cat", "ls"] {
        tools.push(Entry::symlink(&format!("bin/{t}"), "busybox"));
    }
    let data = vec![
        Entry::dir("data"),
        Entry::file("data/blob", 0o644, noise(DATA_BYTES)),
    ];
    let layer = |entries, compression| Layer {
        entries,
        compression,
    };
    ImageSpec {
        layers: vec![
            layer(tools, Compression::Gzip),
            layer(data, Compression::Gzip),
        ],
        run: RunConfig {
            cmd: vec!["sleep".into(), "1000000".into()],
            env: vec!["PATH=/bin".into()],
            ..RunConfig::default()
        },
        architecture: nsfleet_image::host_arch().to_string(),
    }
}

/// `n` bytes no compressor shrinks (xorshift).
fn noise(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Every repetition at `count` nodes: image nodes and plain ones, who goes first
/// alternating.
fn measure(count: u64, c: &Common, store: &Path) -> anyhow::Result<Samples> {
    let mut s = Samples::default();
    for r in 0..c.repetitions() {
        note(&format!("run {}/{}: {count} nodes", r + 1, c.repetitions()));
        // Alternated: each kind first in turn.
        let mut kinds = [Nodes::Image, Nodes::Privileged, Nodes::Plain];
        kinds.rotate_left(r % 3);
        for nodes in kinds {
            one(count, nodes, c.workers, store, &mut s)?;
        }
    }
    Ok(s)
}

/// One fleet up and down: its times, memory, and (with the image) what it has on disk.
fn one(
    count: u64,
    nodes: Nodes,
    workers: usize,
    store: &Path,
    s: &mut Samples,
) -> anyhow::Result<()> {
    let image = nodes != Nodes::Plain;
    let runs = match image {
        true => format!("image = \"{IMAGE}\""),
        false => "commands = [\"exec sleep 1000000\"]".to_string(),
    };
    let body = format!("[[node]]\nname = \"n{{i}}\"\ncount = {count}\n{runs}\n");
    let before = nsfleet::sys::memory_held();
    let t = Instant::now();
    let mut up = Cli::new()?
        .with_image_store(&store.join("store"))
        .privileged(nodes == Nodes::Privileged)
        .up_with(&body, workers)?;
    let up_s = t.elapsed().as_secs_f64();
    let mem = (nsfleet::sys::memory_held() - before) as f64 / count as f64;
    if image {
        s.layers_bytes.push(du(&store.join("store/layers")) as f64);
    }
    let t = Instant::now();
    up.cli.down()?;
    let down_s = t.elapsed().as_secs_f64();
    let (ups, downs, mems) = match nodes {
        Nodes::Image => (
            &mut s.image_up_s,
            &mut s.image_down_s,
            &mut s.image_mem_per_node,
        ),
        Nodes::Privileged => (
            &mut s.privileged_up_s,
            &mut s.privileged_down_s,
            &mut s.privileged_mem_per_node,
        ),
        Nodes::Plain => (
            &mut s.plain_up_s,
            &mut s.plain_down_s,
            &mut s.plain_mem_per_node,
        ),
    };
    ups.push(up_s);
    downs.push(down_s);
    mems.push(mem);
    Ok(())
}

/// containerlab with Docker: its `containerlab` (on PATH, or `$CLAB_PEER_DIR`'s, as
/// ../shared/tools/clab-peer/setup.sh builds it) and a Docker daemon that answers.
struct Containerlab(PathBuf);

/// The containerlab file's management network (Docker's, under containerlab).
const NETWORK: &str = "benchimg";

/// Both tools' samples of one size, on the same containerlab file.
#[derive(Default)]
struct PeerSamples {
    clab_deploy_s: Vec<f64>,
    clab_destroy_s: Vec<f64>,
    clab_mem_per_node: Vec<f64>,
    nsfleet_deploy_s: Vec<f64>,
    nsfleet_destroy_s: Vec<f64>,
    nsfleet_mem_per_node: Vec<f64>,
}

impl Containerlab {
    fn find() -> Option<Containerlab> {
        let peer_dir = std::env::var("CLAB_PEER_DIR").unwrap_or("/var/tmp/clab-peer".into());
        let exe = nsfleet::sys::host::which("containerlab")
            .or_else(|| Some(Path::new(&peer_dir).join("containerlab")).filter(|p| p.is_file()))?;
        let docker = std::process::Command::new("docker").arg("info").output();
        docker.ok()?.status.success().then_some(Containerlab(exe))
    }

    /// The bench's image in Docker (from skopeo's docker-archive of its layout), then
    /// each repetition deploys and destroys `count` nodes of it with containerlab and
    /// with nsfleet, alternating who goes first.
    fn measure(&self, count: u64, c: &Common, scratch: &Path) -> anyhow::Result<PeerSamples> {
        let archive = scratch.join("docker.tar");
        if !archive.exists() {
            let layout = scratch.join("layout").display().to_string();
            run(std::process::Command::new("skopeo")
                .args(["--insecure-policy", "copy", "--quiet"])
                .arg(format!("oci:{layout}:1"))
                .arg(format!("docker-archive:{}:{IMAGE}", archive.display())))?;
            run(std::process::Command::new("docker")
                .arg("load")
                .arg("-i")
                .arg(&archive))?;
        }
        let nodes: String = (1..=count)
            .map(|i| format!("    n{i}: {{kind: linux, image: {IMAGE}}}\n"))
            .collect();
        // One file each, but for the management subnet: what either tool leaves behind
        // (containerlab's destroy of 1,000 nodes left its network, and its route, in
        // Docker) must not stop the other.
        let file_for = |tool: &str, subnet: &str| -> anyhow::Result<PathBuf> {
            let text = format!("name: benchimg\nmgmt: {{network: {NETWORK}, ipv4-subnet: {subnet}}}\ntopology:\n  nodes:\n{nodes}");
            let file = scratch.join(format!("benchimg-{tool}.clab.yml"));
            std::fs::write(&file, text)?;
            Ok(file)
        };
        let clab_file = file_for("containerlab", "10.231.0.0/16")?;
        let nsfleet_file = file_for("nsfleet", "10.232.0.0/16")?;
        let mut s = PeerSamples::default();
        for r in 0..c.repetitions() {
            note(&format!(
                "containerlab run {}/{}: {count} nodes",
                r + 1,
                c.repetitions()
            ));
            for clab_first in [r % 2 == 0, r % 2 == 1] {
                if clab_first {
                    self.once(&clab_file, count, &mut s)?;
                } else {
                    nsfleet_once(&nsfleet_file, count, c.workers, scratch, &mut s)?;
                }
            }
        }
        Ok(s)
    }

    fn once(&self, file: &Path, count: u64, s: &mut PeerSamples) -> anyhow::Result<()> {
        let clab = |verb: &str| {
            let mut cmd = std::process::Command::new(&self.0);
            cmd.args([verb, "-t"])
                .arg(file)
                .env("CLAB_VERSION_CHECK", "disable");
            if verb == "destroy" {
                cmd.arg("--cleanup");
            }
            cmd
        };
        let t = Instant::now();
        run(&mut clab("deploy"))?;
        s.clab_deploy_s.push(t.elapsed().as_secs_f64());
        // Each container's shim and what it runs.
        let shims = processes()
            .into_iter()
            .filter(|p| p.comm.starts_with("containerd-shim"));
        let pss = pss_of_trees(&shims.map(|p| p.pid).collect::<Vec<_>>());
        s.clab_mem_per_node.push(pss as f64 / count as f64);
        let t = Instant::now();
        run(&mut clab("destroy"))?;
        s.clab_destroy_s.push(t.elapsed().as_secs_f64());
        let inspect = std::process::Command::new("docker")
            .args(["network", "inspect", NETWORK])
            .output();
        if inspect.is_ok_and(|o| o.status.success()) {
            note("containerlab's destroy left its management network in Docker");
        }
        Ok(())
    }
}

/// nsfleet's deploy and destroy of the same containerlab file, timed as containerlab's.
fn nsfleet_once(
    file: &Path,
    count: u64,
    workers: usize,
    scratch: &Path,
    s: &mut PeerSamples,
) -> anyhow::Result<()> {
    let cli = Cli::new()?.with_image_store(&scratch.join("store"));
    let (file, workers) = (file.display().to_string(), workers.to_string());
    let t = Instant::now();
    run(&mut cli.command(&["deploy", "-t", &file, "--workers", &workers]))?;
    s.nsfleet_deploy_s.push(t.elapsed().as_secs_f64());
    // The supervisor, its nodes' inits and what they run.
    let status = cli.run(&["status", "benchimg", "--json"])?;
    let supervisor = status["fleets"][0]["pid"].as_i64().unwrap_or(0) as i32;
    s.nsfleet_mem_per_node
        .push(pss_of_trees(&[supervisor]) as f64 / count as f64);
    let t = Instant::now();
    run(&mut cli.command(&["destroy", "-t", &file]))?;
    s.nsfleet_destroy_s.push(t.elapsed().as_secs_f64());
    Ok(())
}

/// A process as /proc/PID/stat says.
struct Proc {
    pid: i32,
    ppid: i32,
    comm: String,
}

fn processes() -> Vec<Proc> {
    let entries = std::fs::read_dir("/proc").into_iter().flatten().flatten();
    entries
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (head, rest) = stat.rsplit_once(')')?;
            let comm = head.split_once('(')?.1.to_string();
            let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
            Some(Proc { pid, ppid, comm })
        })
        .collect()
}

/// The proportional set size (bytes) of the processes `roots` and all their
/// descendants: what they cost in memory, shared pages split between their users.
fn pss_of_trees(roots: &[i32]) -> u64 {
    let all = processes();
    let mut todo = roots.to_vec();
    let mut total = 0;
    while let Some(pid) = todo.pop() {
        total += pss_of(pid);
        todo.extend(all.iter().filter(|p| p.ppid == pid).map(|p| p.pid));
    }
    total
}

fn pss_of(pid: i32) -> u64 {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let kb = rollup.lines().find_map(|l| l.strip_prefix("Pss:"));
    kb.and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Runs `cmd`, its output kept for the error it may explain.
fn run(cmd: &mut std::process::Command) -> anyhow::Result<()> {
    let out = cmd.stdin(std::process::Stdio::null()).output()?;
    if !out.status.success() {
        bail!(
            "{:?}: {}{}",
            cmd.get_program(),
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn peer_metrics(res: &mut Results, count: u64, s: &PeerSamples) {
    use Better::*;
    use Ratio::*;
    let k = |what: &str| format!("clab{count}_{what}");
    for (figure, ratio, unit, ours, theirs, target) in [
        (
            "deploy_s",
            "deploy",
            "s",
            &s.nsfleet_deploy_s,
            &s.clab_deploy_s,
            Some(">= 50"),
        ),
        (
            "destroy_s",
            "destroy",
            "s",
            &s.nsfleet_destroy_s,
            &s.clab_destroy_s,
            None,
        ),
        (
            "pss_per_node_bytes",
            "memory",
            "bytes",
            &s.nsfleet_mem_per_node,
            &s.clab_mem_per_node,
            Some(">= 10"),
        ),
    ] {
        versus(
            &mut res.metrics,
            unit,
            (Some(&k(&format!("nsfleet_{figure}"))), ours),
            (Some(&k(&format!("containerlab_{figure}"))), theirs),
            TheirsPerOurs(&k(&format!("{ratio}_vs_containerlab")), Higher),
        )
        .target = target.map(String::from);
    }
}

/// The pulled image's size: what a pull's time is against.
const PULL_BYTES: usize = 100 << 20;

/// `nsfleet image pull` into an empty store and `skopeo copy` into an empty OCI layout of
/// one image of [`PULL_BYTES`] from a registry on loopback, alternated: their seconds.
fn pulls(c: &Common, scratch: &Path) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let bytes = c.size(PULL_BYTES as u64, 8 << 20) as usize;
    let registry = LocalRegistry::start(&scratch.join("registry"), None)?;
    let spec = ImageSpec {
        layers: vec![Layer {
            entries: vec![Entry::file("blob", 0o644, noise(bytes))],
            compression: Compression::Gzip,
        }],
        run: RunConfig::default(),
        architecture: nsfleet_image::host_arch().to_string(),
    };
    let layout = scratch.join("big-layout");
    write_oci_layout(&layout, "1", &spec)?;
    let reference = registry.push(&layout, "1", "bench/big:1", None, false)?;
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for r in 0..c.repetitions() {
        note(&format!(
            "pull {}/{}: {} MB",
            r + 1,
            c.repetitions(),
            bytes >> 20
        ));
        for nsfleet_first in [r % 2 == 0, r % 2 == 1] {
            let into = scratch.join("pulled");
            let _ = std::fs::remove_dir_all(&into);
            let t = Instant::now();
            if nsfleet_first {
                let store = into.display().to_string();
                Cli::new()?.run(&["image", "pull", &reference, "--store", &store, "--json"])?;
                ours.push(t.elapsed().as_secs_f64());
            } else {
                skopeo_copy(&reference, &into)?;
                theirs.push(t.elapsed().as_secs_f64());
            }
        }
    }
    let _ = std::fs::remove_dir_all(scratch.join("pulled"));
    Ok((ours, theirs))
}

fn skopeo_copy(reference: &str, into: &Path) -> anyhow::Result<()> {
    let out = std::process::Command::new("skopeo")
        .args([
            "--insecure-policy",
            "copy",
            "--quiet",
            "--src-tls-verify=false",
        ])
        .arg(format!("docker://{reference}"))
        .arg(format!("oci:{}:1", into.display()))
        .output()?;
    if !out.status.success() {
        bail!(
            "skopeo copy: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Bytes of the regular files below `dir` (each inode once).
fn du(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut seen = std::collections::HashSet::new();
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() && seen.insert(m.ino()) {
                total += m.size();
            }
        }
    }
    total
}

fn metrics(res: &mut Results, count: u64, s: &Samples) {
    use Better::*;
    use Ratio::*;
    let k = |what: &str| format!("n{count}_{what}");
    for (what, ours, theirs, target) in [
        ("up", &s.image_up_s, &s.plain_up_s, Some("<= 1.5")),
        ("down", &s.image_down_s, &s.plain_down_s, None),
    ] {
        versus(
            &mut res.metrics,
            "s",
            (Some(&k(&format!("image_{what}_s"))), ours),
            (Some(&k(&format!("plain_{what}_s"))), theirs),
            OursPerTheirs(&k(&format!("image_vs_plain_{what}")), Lower),
        )
        .target = target.map(String::from);
    }
    // What confinement costs: the same image nodes against themselves `--privileged`.
    for (what, unit, ours, theirs, target) in [
        ("up_s", "s", &s.image_up_s, &s.privileged_up_s, "<= 1.1"),
        (
            "down_s",
            "s",
            &s.image_down_s,
            &s.privileged_down_s,
            "<= 1.1",
        ),
        (
            "mem_per_node_bytes",
            "bytes",
            &s.image_mem_per_node,
            &s.privileged_mem_per_node,
            "<= 1.05",
        ),
    ] {
        versus(
            &mut res.metrics,
            unit,
            (None, ours),
            (Some(&k(&format!("privileged_{what}"))), theirs),
            OursPerTheirs(&k(&format!("confined_vs_privileged_{what}")), Lower),
        )
        .target = Some(target.into());
    }
    res.metric(
        &k("image_mem_per_node_bytes"),
        metric("bytes", Lower, s.image_mem_per_node.clone()),
    )
    .metric(
        &k("plain_mem_per_node_bytes"),
        metric("bytes", Neither, s.plain_mem_per_node.clone()),
    )
    .metric(
        &k("image_layers_on_disk_bytes"),
        metric("bytes", Lower, s.layers_bytes.clone())
            .with_target("the image's layers once, whatever the count"),
    );
}

//! Fleets on Kubernetes, on a real cluster on this box: scripts/kube-cluster builds
//! Kubernetes from its Go modules and runs three "machines", each a node of an nsfleet
//! fleet with its own containerd and kubelet; nsfleet is installed in it (its controller
//! and agents in images built here), and one fleet is spread over the machines, its cut
//! links VXLAN tunnels. Bad input, a controller restart, a lost agent and agents all gone
//! are each tried; the cluster's `down` leaves nothing on the host.

mod harness;

use harness::busy::busy_image;
use harness::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The test cluster, taken down (with everything it made) when dropped.
struct Cluster<'a> {
    env: &'a Env,
    name: String,
    dir: PathBuf,
    kubeconfig: String,
    /// What `kube-cluster up` said on stderr.
    said: String,
}

fn script(env: &Env, args: &[&str]) -> std::process::Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    Command::new("bash")
        .arg(root.join("scripts/kube-cluster"))
        .args(args)
        .env("NSFLEET", env!("CARGO_BIN_EXE_nsfleet"))
        .env("NSFLEET_RUN_DIR", &env.run_dir)
        .output()
        .expect("bash runs")
}

impl<'a> Cluster<'a> {
    fn up(env: &'a Env, machines: usize) -> Cluster<'a> {
        let name = format!("t{}", std::process::id());
        let mut c = Cluster {
            env,
            dir: PathBuf::from("/var/lib/nsfleet/kube-clusters").join(&name),
            name,
            kubeconfig: String::new(),
            said: String::new(),
        };
        let out = script(
            env,
            &["up", "--machines", &machines.to_string(), "--name", &c.name],
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "kube-cluster up failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        c.kubeconfig = stdout.lines().last().unwrap().to_string();
        c.said = String::from_utf8_lossy(&out.stderr).into_owned();
        env.set_var("KUBECONFIG", &c.kubeconfig);
        c
    }

    fn nsfleet(&self, args: &[&str]) -> std::process::Output {
        self.env.run(args)
    }

    fn ok(&self, args: &[&str]) -> String {
        self.env.ok(args)
    }

    /// Fails, saying `expected` on stderr.
    fn fails(&self, args: &[&str], expected: &str) {
        self.env.fails(args, expected);
    }

    fn kubectl(&self, args: &[&str]) -> String {
        let out = Command::new(self.dir.join("bin/kubectl"))
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.ok(args)).unwrap()
    }

    /// Waits (a minute at most) until the fleet's phase is `phase`.
    fn wait_phase(&self, fleet: &str, phase: &str) {
        wait_until(phase, Duration::from_secs(60), || {
            let now = self.phase(fleet);
            if now == phase {
                Ok(())
            } else {
                Err(now)
            }
        });
    }

    /// The pod of `machine`'s agent.
    fn agent_pod(&self, machine: &str) -> String {
        let pods = self.kubectl(&[
            "-n",
            "nsfleet-system",
            "get",
            "pods",
            "-o",
            "wide",
            "--no-headers",
        ]);
        let line = (pods.lines())
            .find(|l| l.contains("nsfleet-agent") && l.split_whitespace().nth(6) == Some(machine))
            .unwrap_or_else(|| panic!("no agent pod on {machine}: {pods}"));
        line.split_whitespace().next().unwrap().to_string()
    }

    /// The fleets `machine`'s agent runs, as its `nsfleet status` says.
    fn agent_fleets(&self, machine: &str) -> Vec<String> {
        let pod = self.agent_pod(machine);
        let out = self.kubectl(&[
            "-n",
            "nsfleet-system",
            "exec",
            &pod,
            "--",
            "/nsfleet",
            "status",
            "--json",
        ]);
        let v: Value = serde_json::from_str(&out).unwrap();
        (v["fleets"].as_array().unwrap().iter())
            .map(|f| f["name"].as_str().unwrap().to_string())
            .collect()
    }

    fn phase(&self, fleet: &str) -> String {
        let s = self.json(&["status", fleet, "--kube", "--json"]);
        s["status"]["phase"].as_str().unwrap_or("").to_string()
    }
}

impl Drop for Cluster<'_> {
    fn drop(&mut self) {
        let out = script(self.env, &["down", "--name", &self.name]);
        if !out.status.success() {
            eprintln!(
                "kube-cluster down: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// Why this machine cannot run the test cluster, if it cannot (CI installs all of it).
fn missing() -> Option<String> {
    let have = |p: &str| Path::new(p).exists();
    let on_path = |c: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {c}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    for c in ["containerd", "runc", "openssl", "gcc"] {
        if !on_path(c) {
            return Some(format!("{c} is not installed"));
        }
    }
    if !have("/usr/lib/cni/bridge") {
        return Some("containernetworking-plugins is not installed".into());
    }
    if !on_path("go") && !have("/usr/local/go/bin/go") {
        return Some("no Go toolchain".into());
    }
    None
}

/// A machine's agent stopped (SIGSTOP) until dropped: the machine lost, as the cluster sees
/// it, while its pod stays as it was.
struct Frozen(u32);

impl Frozen {
    fn agent_of(machine: &str) -> Frozen {
        let pid = agent_pid(machine);
        signal(pid, "-STOP");
        Frozen(pid)
    }
}

/// Loads the busy image of `version` into the user's store as `kt/busy:VERSION`: each
/// test that sends one has a version of its own, whose upper layer no machine holds.
fn load_busy(k: &Cluster, version: &str) {
    let oci = k.env.files.join(format!("kbusy-{version}"));
    nsfleet_image::build::write_oci_layout(&oci, version, &busy_image(version)).unwrap();
    let name = format!("kt/busy:{version}");
    k.ok(&["image", "load", oci.to_str().unwrap(), "--name", &name]);
}

/// The file of fleet `name`: `count` nodes running `image`.
fn image_fleet(env: &Env, name: &str, count: usize, image: &str) -> PathBuf {
    let text = format!("[fleet]\nname = \"{name}\"\n\n[[node]]\nname = \"{name}-{{i}}\"\ncount = {count}\nimage = \"{image}\"\n");
    env.file(&format!("{name}.toml"), &text)
}

/// The process of `machine`'s agent, on this host.
fn agent_pid(machine: &str) -> u32 {
    let read =
        |pid: u32, what: &str| std::fs::read(format!("/proc/{pid}/{what}")).unwrap_or_default();
    (std::fs::read_dir("/proc").unwrap().flatten())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|&pid| {
            read(pid, "cmdline").ends_with(b"kube\0agent\0")
                && read(pid, "environ")
                    .split(|&b| b == 0)
                    .any(|v| v == format!("NSFLEET_MACHINE={machine}").as_bytes())
        })
        .unwrap_or_else(|| panic!("no agent of {machine} on this host"))
}

impl Drop for Frozen {
    fn drop(&mut self) {
        signal(self.0, "-CONT");
    }
}

fn signal(pid: u32, sig: &str) {
    let s = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(s.success(), "kill {sig} {pid}");
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// A pcapng file's blocks: each one's type and bytes.
fn pcapng_blocks(mut file: &[u8]) -> Vec<(u32, Vec<u8>)> {
    let mut blocks = Vec::new();
    while file.len() >= 12 {
        let len = u32_at(file, 4) as usize;
        blocks.push((u32_at(file, 0), file[..len].to_vec()));
        file = &file[len..];
    }
    blocks
}

/// The host's processes that are a machine's `capture --kube`.
fn captures() -> Vec<u32> {
    (std::fs::read_dir("/proc").unwrap().flatten())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("--until-stdin-closes"))
        })
        .collect()
}

/// Nodes that name an image run it on their machines, each machine's store sent only the
/// layers it lacks from the user's own (no registry), resumed after a dropped connection,
/// refused and sent again when a stream arrives changed; a second fleet of the image moves
/// nothing; `status --kube` says each machine's images and `image prune --kube` removes
/// them once no fleet uses them. An image the user's store cannot have is refused at its
/// line, and nothing is made.
fn images_reach_the_machines_that_run_them(k: &Cluster) {
    let env = k.env;
    for version in ["1", "2", "3"] {
        load_busy(k, version);
    }
    let fleet = |name: &str, image: &str| image_fleet(env, name, 6, image);
    let up = |file: &Path, fault: Option<&str>, more: &[&str]| -> (Value, String) {
        let mut args = vec!["up", file.to_str().unwrap(), "--kube", "--json"];
        args.extend(more);
        let mut cmd = env.cmd(&args);
        if let Some(f) = fault {
            cmd.env("NSFLEET_FAULT_SEND", f);
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        (serde_json::from_slice(&out.stdout).unwrap(), err)
    };
    let machines_of = |name: &str| -> std::collections::BTreeSet<String> {
        let s = k.json(&["status", name, "--kube", "--json"]);
        (s["nodes"].as_array().unwrap().iter())
            .map(|n| n["machine"].as_str().unwrap().to_string())
            .collect()
    };

    // The first fleet of the image: each machine that runs its nodes takes both layers,
    // once; one stream, dropped after 300 kB, resumes where the machine kept it.
    let (said, err) = up(&fleet("kimg", "kt/busy:1"), Some("drop:300000"), &[]);
    let used = machines_of("kimg");
    let sent = &said["images_sent"];
    assert_eq!(sent.as_object().unwrap().len(), used.len(), "{said}");
    for m in &used {
        assert_eq!(sent[m]["layers"], 2, "{said}");
    }
    let resumed: u64 = (sent.as_object().unwrap().values())
        .map(|m| m["resumed"].as_u64().unwrap())
        .sum();
    assert_eq!(resumed, 1, "{said}\n{err}");
    for i in 1..=6 {
        let out = release_of(k, "kimg", &format!("kimg-{i}"));
        assert_eq!(out, "busy 1\n");
    }
    let status = k.ok(&["status", "kimg", "--kube"]);
    for m in &used {
        assert!(
            status.contains(&format!("images on {m}: docker.io/kt/busy:1")),
            "{status}"
        );
    }

    // A second fleet of the image moves nothing: every machine has its layers. Each
    // machine brings its part up as told (`--workers`, `--wait started`: every node's
    // process runs before its part is Running).
    let more = ["--workers", "2", "--wait", "started"];
    let (said, _) = up(&fleet("kimg2", "kt/busy:1"), None, &more);
    assert_eq!(said["images_sent"], serde_json::json!({}), "{said}");
    let spec = |field: &str| {
        let path = format!("jsonpath={{.items[*].spec.{field}}}");
        k.kubectl(&[
            "get",
            "fleetparts",
            "-l",
            "nsfleet.dev/fleet=kimg2",
            "-o",
            &path,
        ])
    };
    let waits = spec("wait");
    assert!(
        waits.split_whitespace().all(|w| w == "started") && !waits.is_empty(),
        "{waits}"
    );
    // Each machine's agent said its store holds the layers: the plan has nothing to fetch.
    let fetch = spec("fetchBytes");
    assert!(
        fetch.split_whitespace().all(|b| b == "0") && !fetch.is_empty(),
        "{fetch}"
    );

    // Version 2 shares the lower layer: only the upper one moves. Its first stream arrives
    // changed: refused by the machine (its bytes never trusted) and sent again.
    let (said, _) = up(&fleet("kimg3", "kt/busy:2"), Some("corrupt:1000"), &[]);
    let mut tried_again = 0;
    for (m, moved) in said["images_sent"].as_object().unwrap() {
        assert_eq!(moved["layers"], 1, "{m}: {said}");
        tried_again += moved["tried_again"].as_u64().unwrap();
    }
    assert_eq!(tried_again, 1, "{said}");
    let out = release_of(k, "kimg3", "kimg3-1");
    assert_eq!(out, "busy 2\n");

    // A layer that arrives changed every time: refused by the machine three times, and
    // the fleet taken down on every machine, the machine and the layer named.
    let file = fleet("kimg5", "kt/busy:3");
    let out = env
        .cmd(&["up", file.to_str().unwrap(), "--kube"])
        .env("NSFLEET_FAULT_SEND", "corrupt-every:100")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("not taken after 3 tries"), "{err}");
    assert!(err.contains("its stream has digest"), "{err}");
    assert!(
        err.contains("machine m") && err.contains("taken down on every machine"),
        "{err}"
    );
    assert!(!k
        .kubectl(&["get", "fleets", "-o", "name"])
        .contains("kimg5"));

    // The same in a change: the layer is refused every time, and the change is undone on
    // every machine; the nodes run their old image.
    let file = fleet("kimg2", "kt/busy:3");
    let out = env
        .cmd(&["apply", file.to_str().unwrap(), "--kube"])
        .env("NSFLEET_FAULT_SEND", "corrupt-every:100")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("the change was not made") && err.contains("undone on every machine"),
        "{err}"
    );
    for i in 1..=6 {
        let node = format!("kimg2-{i}");
        let out = release_of(k, "kimg2", &node);
        assert_eq!(out, "busy 1\n");
    }

    // An image the user's store lacks, and no registry has: refused at its line.
    k.fails(
        &[
            "up",
            fleet("kimg4", "kt/absent:1").to_str().unwrap(),
            "--kube",
        ],
        "kimg4.toml:",
    );
    assert!(!k
        .kubectl(&["get", "fleets", "-o", "name"])
        .contains("kimg4"));

    // Pruned on every machine once no fleet holds the images; not before.
    let held = k.ok(&["image", "prune", "--kube", "--all"]);
    assert!(held.contains(" 0 images"), "{held}");
    for f in ["kimg", "kimg2", "kimg3"] {
        k.ok(&["down", f, "--kube"]);
    }
    let pruned = k.json(&["image", "prune", "--kube", "--all", "--json"]);
    for m in &used {
        let removed = pruned["pruned"][m]["images"].as_array().unwrap().len();
        assert!(removed >= 1, "{pruned}");
    }
}

/// A machine's agent lost in the middle of a layer, with no other fleet on its machine
/// (a killed agent's container takes its machine's nodes with it).
fn an_agent_lost_in_the_middle_of_a_layer(k: &Cluster) {
    let env = k.env;
    // A machine's agent lost in the middle of a layer (killed while the stream stalls;
    // its container restarts): the layer is sent again to the agent that is back, resuming
    // where the machine's store kept it and checked whole against its digest, and the
    // fleet comes up.
    load_busy(k, "7");
    let file = image_fleet(env, "kimg6", 6, "kt/busy:7");
    let mut up = env
        .cmd(&["up", file.to_str().unwrap(), "--kube", "--json"])
        .env("NSFLEET_FAULT_SEND", "stall:500")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, said) = std::sync::mpsc::channel();
    let stderr = std::io::BufReader::new(up.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut all = String::new();
        for l in stderr.lines().map_while(Result::ok) {
            all.push_str(&l);
            all.push('\n');
            let _ = lines.send(l);
        }
        all
    });
    let stalled = (said.iter()).find_map(|l| {
        Some(
            l.split_once(": the stream stalls after")?
                .0
                .trim()
                .to_string(),
        )
    });
    let Some(stalled) = stalled else {
        let out = up.wait_with_output().unwrap();
        panic!(
            "no stream stalled: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    };
    signal(agent_pid(&stalled), "-KILL");
    let out = up.wait_with_output().unwrap();
    let err = reader.join().unwrap();
    assert!(out.status.success(), "{err}");
    let said: Value = serde_json::from_slice(&out.stdout).unwrap();
    let moved = &said["images_sent"][&stalled];
    assert_eq!(moved["layers"], 1, "{said}\n{err}");
    assert_eq!(moved["resumed"], 1, "{said}\n{err}");
    for i in 1..=6 {
        let out = release_of(k, "kimg6", &format!("kimg6-{i}"));
        assert_eq!(out, "busy 7\n");
    }

    k.ok(&["down", "kimg6", "--kube"]);
}

/// Every machine's store full (a 1 MB tmpfs over it, in each agent's own mount
/// namespace, where its receivers run too): a layer is refused before a byte is kept,
/// and the fleet taken down on every machine, the machine, the layer and its image named.
fn a_full_store_refuses_a_layer(k: &Cluster) {
    let env = k.env;
    load_busy(k, "8");
    let in_agent = |machine: &str, command: &[&str]| {
        let pid = agent_pid(machine).to_string();
        let s = Command::new("nsenter")
            // Its root too: the container's, which its mount namespace's is not.
            .args(["-t", &pid, "-m", "-r", "--"])
            .args(command)
            .status()
            .unwrap();
        assert!(s.success(), "{command:?} in {machine}'s agent");
    };
    let store = "/var/lib/nsfleet/images";
    for m in ["m1", "m2", "m3"] {
        in_agent(
            m,
            &[
                "/usr/bin/mount",
                "-t",
                "tmpfs",
                "-o",
                "size=1m",
                "tmpfs",
                store,
            ],
        );
    }
    let file = image_fleet(env, "kfull", 3, "kt/busy:8");
    let out = env.run(&["up", file.to_str().unwrap(), "--kube"]);
    for m in ["m1", "m2", "m3"] {
        in_agent(m, &["/usr/bin/umount", store]);
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("machine m")
            && err.contains("(of kt/busy:8)")
            && err.contains(&format!("the disk under {store} is full"))
            && err.contains("taken down on every machine"),
        "{err}"
    );
    assert_eq!(
        k.kubectl(&["get", "fleets,fleetparts", "-o", "name"])
            .trim(),
        ""
    );
}

/// `up --kube --privileged`: refused by every agent, and rolled back, until nsfleet is
/// installed with `--allow-privileged`; then its nodes run as their machine's root (the
/// whole id range theirs, where a confined node has a range of its own).
fn privileged_nodes_need_the_installs_consent(k: &Cluster) {
    let env = k.env;
    let text = "[fleet]\nname = \"kpriv\"\n[[node]]\nname = \"kpriv-{i}\"\ncount = 3\ncommands = [\"exec sleep 100000\"]\n";
    let file = env.file("kpriv.toml", text);
    let up = ["up", file.to_str().unwrap(), "--kube", "--privileged"];
    k.fails(&up, "installed in this cluster without --allow-privileged");
    assert_eq!(
        k.kubectl(&["get", "fleets,fleetparts", "-o", "name"])
            .trim(),
        ""
    );
    let read = |f: &str| {
        std::fs::read_to_string(k.dir.join(f))
            .unwrap()
            .trim()
            .to_string()
    };
    let (image, api) = (
        read("images/nsfleet.ref"),
        format!("{}:6443", read("cp-address")),
    );
    // The agents' DaemonSet updates OnDelete (an agent's parts end with it): `install`
    // names the agents still on the earlier install, whose pods are then replaced, and
    // `install` again waits for every machine's agent and names none.
    let install = |more: &[&str]| {
        let args = [
            &["kube", "install", "--image", &image, "--api-server", &api],
            more,
        ]
        .concat();
        let out = env.run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let line = (err.lines())
            .find_map(|l| {
                l.trim()
                    .strip_prefix("kubectl -n nsfleet-system delete pod ")
            })
            .unwrap_or_else(|| panic!("install named no agent behind: {err}"));
        let pods: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(pods.len(), 3, "{err}");
        k.kubectl(&[&["-n", "nsfleet-system", "delete", "pod"], &pods[..]].concat());
        let out = env.run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !err.contains("earlier install"),
            "{err}"
        );
    };
    install(&["--allow-privileged"]);
    let said = k.ok(&up);
    assert!(said.contains("3 nodes on"), "{said}");
    let ids = k.ok(&[
        "exec",
        "kpriv",
        "kpriv-1",
        "--kube",
        "--",
        "cat",
        "/proc/self/uid_map",
    ]);
    assert_eq!(
        ids.split_whitespace().collect::<Vec<_>>(),
        ["0", "0", "4294967295"],
        "{ids}"
    );
    k.ok(&["down", "kpriv", "--kube"]);
    // As the rest of the tests found it.
    install(&[]);
}

/// A registry in the cluster's control-plane node, which asks for a password: the
/// machines reach it at CP:5000, this host at the control plane's host-side address.
/// Killed when dropped (and gone with the cluster in any case).
struct ClusterRegistry {
    child: std::process::Child,
    /// `10.233.0.10:5000`: as the machines (and the fleets' image references) name it.
    inside: String,
    /// As this host pushes to it.
    outside: String,
}

impl ClusterRegistry {
    fn start(k: &Cluster, user: &str, password: &str) -> ClusterRegistry {
        let dir = k.dir.join("registry");
        std::fs::create_dir_all(&dir).unwrap();
        let hash = bcrypt::hash(password, 4).unwrap();
        std::fs::write(dir.join("htpasswd"), format!("{user}:{hash}\n")).unwrap();
        // Seen in the control plane's node at /run/nsfleet-kube (the cluster's folder);
        // its storage in that node's own /tmp.
        let config = "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: /tmp/registry\nhttp:\n  addr: :5000\nauth:\n  htpasswd:\n    realm: nsfleet\n    path: /run/nsfleet-kube/registry/htpasswd\n";
        std::fs::write(dir.join("config.yml"), config).unwrap();
        let log = std::fs::File::create(k.env.files.join("cluster-registry.log")).unwrap();
        let fleet = format!("kube-{}", k.name);
        let child = k
            .env
            .cmd(&[
                "exec",
                &fleet,
                "cp",
                "--",
                "docker-registry",
                "serve",
                "/run/nsfleet-kube/registry/config.yml",
            ])
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let cp = std::fs::read_to_string(k.dir.join("cp-address")).unwrap();
        let net: Vec<&str> = cp.trim().split('.').collect();
        let r = ClusterRegistry {
            child,
            inside: format!("{}:5000", cp.trim()),
            outside: format!("{}.{}.255.2:5000", net[0], net[1]),
        };
        wait_until(
            "the cluster's registry answers",
            Duration::from_secs(20),
            || {
                std::net::TcpStream::connect(&r.outside)
                    .map(drop)
                    .map_err(|e| e.to_string())
            },
        );
        r
    }

    /// The image `tag` of the OCI layout pushed as `name`; its reference as the machines
    /// pull it.
    fn push(&self, layout: &Path, tag: &str, name: &str, creds: &str) -> String {
        let out = Command::new("skopeo")
            .args([
                "--insecure-policy",
                "copy",
                "--quiet",
                "--dest-tls-verify=false",
                "--dest-creds",
                creds,
            ])
            .arg(format!("oci:{}:{tag}", layout.display()))
            .arg(format!("docker://{}/{name}", self.outside))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "skopeo: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        format!("{}/{name}", self.inside)
    }
}

impl Drop for ClusterRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `up --kube --pull-on-machines`: each machine pulls the image from a registry that the
/// cluster reaches (this host does not, by that name), with the user's credentials for it
/// handed over as a Secret the Fleet owns, holding no other registry's. A refused
/// credential and a registry no machine reaches each fail the fleet, the machine and
/// the image named, and leave nothing in the cluster.
fn machines_pull_images_from_a_registry(k: &Cluster) {
    let env = k.env;
    let registry = ClusterRegistry::start(k, "kt", "s3cret");
    let mut pulled = Vec::new();
    for version in ["4", "5", "6"] {
        let oci = env.files.join(format!("kpull-{version}"));
        nsfleet_image::build::write_oci_layout(&oci, version, &busy_image(version)).unwrap();
        pulled.push(registry.push(&oci, version, &format!("kt/pulled:{version}"), "kt:s3cret"));
    }
    let docker_config = |name: &str, password: &str| {
        let auth = |up: &str| base64_of(up.as_bytes());
        let text = serde_json::json!({"auths": {
            &registry.inside: {"auth": auth(&format!("kt:{password}"))},
            "other.example:5000": {"auth": auth("someone:else")},
        }});
        let dir = env.files.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.json"), text.to_string()).unwrap();
        dir
    };
    let fleet = |name: &str, image: &str| image_fleet(env, name, 4, image);
    let up = |file: &Path, docker: &Path| {
        env.cmd(&[
            "up",
            file.to_str().unwrap(),
            "--kube",
            "--pull-on-machines",
            "--insecure-registry",
            &registry.inside,
        ])
        .env("DOCKER_CONFIG", docker)
        .output()
        .unwrap()
    };
    let gone = |what: &str, kind: &str, name: &str| {
        wait_until(what, Duration::from_secs(60), || {
            let all = k.kubectl(&["get", kind, "-o", "name"]);
            if all.contains(name) {
                Err(all)
            } else {
                Ok(())
            }
        });
    };

    // Pulled by the machines: nothing was sent from this host's store.
    let right = docker_config("docker-right", "s3cret");
    let out = up(&fleet("kpull", &pulled[0]), &right);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("images:"),
        "{out:?}"
    );
    for i in 1..=4 {
        let node = format!("kpull-{i}");
        let out = release_of(k, "kpull", &node);
        assert_eq!(out, "busy 4\n");
    }
    // The Secret holds that registry's entry only, and is the Fleet's; the parts name it.
    let secret_field = |path: &str| {
        let path = format!("jsonpath={{{path}}}");
        k.kubectl(&["get", "secret", "nsfleet-pull-kpull", "-o", &path])
    };
    let data = secret_field(".data.\\.dockerconfigjson");
    let secret = String::from_utf8(base64_decoded(data.trim())).unwrap();
    assert!(
        secret.contains(&registry.inside) && !secret.contains("other.example"),
        "{secret}"
    );
    let owner = secret_field(".metadata.ownerReferences[0].kind");
    assert_eq!(owner, "Fleet");
    let parts = k.kubectl(&[
        "get",
        "fleetparts",
        "-l",
        "nsfleet.dev/fleet=kpull",
        "-o",
        "json",
    ]);
    assert!(parts.contains("nsfleet-pull-kpull"), "{parts}");
    assert!(
        !parts.contains("s3cret") && !parts.contains(&base64_of(b"kt:s3cret")),
        "{parts}"
    );
    // A change to another pulled image, the credentials now kept by a credential helper
    // (as Docker Desktop keeps them): the helper is asked here, its answer goes into the
    // Secret, and the machines pull the image too.
    let (helped, path) = helper_config(env, &registry.inside, "kt:s3cret");
    let changed = fleet("kpull", &pulled[2]);
    let out = env
        .cmd(&["apply", changed.to_str().unwrap(), "--kube"])
        .env("DOCKER_CONFIG", &helped)
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let node = release_of(k, "kpull", "kpull-1");
    assert_eq!(node, "busy 6\n");
    let parts = k.kubectl(&["get", "fleetparts", "-o", "json"]);
    assert!(!parts.contains("s3cret"), "{parts}");
    k.ok(&["down", "kpull", "--kube"]);
    gone(
        "the pull Secret goes with its fleet",
        "secrets",
        "nsfleet-pull-kpull",
    );

    // A credential the registry refuses: the fleet fails, taken down everywhere.
    let wrong = docker_config("docker-wrong", "guess");
    let out = up(&fleet("kpull2", &pulled[1]), &wrong);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("machine m") && err.contains(&format!(": pull failed: image {}", pulled[1])),
        "{err}"
    );
    assert!(err.contains("refused access (401 Unauthorized)"), "{err}");
    gone("the refused fleet goes", "fleets", "kpull2");
    gone("its Secret goes", "secrets", "nsfleet-pull-kpull2");

    // A registry no machine reaches: the same.
    let nowhere = pulled[1].replace(":5000/", ":5001/");
    let out = up(&fleet("kpull3", &nowhere), &right);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!("pull failed: image {nowhere}"))
            && err.contains("cannot reach the registry"),
        "{err}"
    );
    gone("the unreachable fleet goes", "fleets", "kpull3");
    drop(registry);
}

/// A Docker config dir whose credentials for `registry` (`user:password`) are kept by a
/// credential helper, `docker-credential-nsfleet-kt`, and the PATH that finds it.
fn helper_config(env: &Env, registry: &str, user_password: &str) -> (PathBuf, String) {
    let (user, password) = user_password.split_once(':').unwrap();
    let bin = env.files.join("helper-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let helper = bin.join("docker-credential-nsfleet-kt");
    let script = format!(
        "#!/bin/sh\n[ \"$1\" = get ] || exit 2\nread -r server\nif [ \"$server\" = \"{registry}\" ]; then\n  echo '{{\"ServerURL\":\"{registry}\",\"Username\":\"{user}\",\"Secret\":\"{password}\"}}'\nelse\n  echo 'credentials not found in native keychain'; exit 1\nfi\n"
    );
    std::fs::write(&helper, script).unwrap();
    std::fs::set_permissions(&helper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let dir = env.files.join("docker-helper");
    std::fs::create_dir_all(&dir).unwrap();
    let config = serde_json::json!({"auths": {registry: {}}, "credsStore": "nsfleet-kt"});
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let path = format!("{}:{}", std::env::var("PATH").unwrap(), bin.display());
    (dir, path)
}

/// A node's limits hold on its machine as on one box: seen inside the node where
/// Docker's containers look for them, and a process over the memory limit killed while
/// the node and its neighbour run on.
fn limits_hold_on_the_machines(k: &Cluster) {
    let text = "[fleet]\nname = \"klim\"\n[[node]]\nname = \"hog\"\nmemory = \"32M\"\npids = 50\ncpu = 0.5\ncommands = [\"exec sleep 1000\"]\n[[node]]\nname = \"calm\"\ncommands = [\"exec sleep 1000\"]\n";
    let file = k.env.file("klim.toml", text);
    k.ok(&["up", file.to_str().unwrap(), "--kube"]);
    let read = |node: &str, script: &str| {
        k.ok(&["exec", "klim", node, "--kube", "--", "sh", "-c", script])
    };
    let memory = read("hog", "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes");
    assert_eq!(memory.trim(), (32u64 << 20).to_string());
    let pids = read(
        "hog",
        "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max",
    );
    assert_eq!(pids.trim(), "50");
    let out = k.nsfleet(&[
        "exec",
        "klim",
        "hog",
        "--kube",
        "--",
        "sh",
        "-c",
        "head -c 300M /dev/zero | tail > /dev/null",
    ]);
    assert!(!out.status.success(), "300 MB fitted in 32: {out:?}");
    assert_eq!(read("hog", "echo alive"), "alive\n");
    assert_eq!(read("calm", "echo alive"), "alive\n");
    k.ok(&["down", "klim", "--kube"]);
}

/// `up --kube --owner PID`: the fleet goes when its owner ends (its watcher deletes it),
/// and when the watcher itself is killed (the controller deletes it once the lease
/// lapses).
fn an_owned_fleet_goes_with_its_owner(k: &Cluster) {
    let file = k.env.file(
        "kown.toml",
        "[fleet]\nname = \"kown\"\n[[node]]\nname = \"a{i}\"\ncount = 2\ncommands = [\"exec sleep 1000\"]\n",
    );
    let gone = |bound: u64| {
        wait_until("the owned fleet goes", Duration::from_secs(bound), || {
            let all = k.kubectl(&["get", "fleets", "-o", "name"]);
            if all.contains("kown") {
                Err(all)
            } else {
                Ok(())
            }
        });
    };
    let up_owned = |owner: u32| -> u32 {
        let out = k.nsfleet(&[
            "up",
            file.to_str().unwrap(),
            "--kube",
            "--owner",
            &owner.to_string(),
        ]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        let said = err.split("watched by process ").nth(1).expect(&err);
        said.split(',').next().unwrap().parse().unwrap()
    };
    let mut owner = Command::new("sleep").arg("1000").spawn().unwrap();
    let watcher = up_owned(owner.id());
    let recorded = k.kubectl(&[
        "get",
        "fleet",
        "kown",
        "-o",
        "jsonpath={.spec.owner.process}",
    ]);
    assert!(
        recorded.starts_with(&format!("process {} on ", owner.id())),
        "{recorded}"
    );
    owner.kill().unwrap();
    owner.wait().unwrap();
    gone(60);
    wait_until("the watcher ends", Duration::from_secs(30), || {
        // Gone, or ended and not yet reaped by whoever adopted it.
        let stat = std::fs::read_to_string(format!("/proc/{watcher}/stat")).unwrap_or_default();
        match stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
        {
            true => Err(format!("process {watcher} runs")),
            false => Ok(()),
        }
    });

    // The watcher killed: the controller takes the fleet down when the lease lapses.
    let mut owner = Command::new("sleep").arg("1000").spawn().unwrap();
    let watcher = up_owned(owner.id());
    signal(watcher, "-KILL");
    gone(120);
    owner.kill().unwrap();
    owner.wait().unwrap();
}

/// What node `node` of `fleet` says its image is (its /etc/image-release).
fn release_of(k: &Cluster, fleet: &str, node: &str) -> String {
    let args = [
        "exec",
        fleet,
        node,
        "--kube",
        "--",
        "cat",
        "/etc/image-release",
    ];
    k.ok(&args)
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn base64_decoded(text: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
}

const RING: &str =
    "[fleet]\nname = \"kring\"\n\n[[generate]]\nkind = \"ring\"\ncount = 30\npool = \"10.0.0.0/16\"\n";

#[test]
fn a_fleet_spreads_over_three_machines_and_comes_back() {
    if let Some(why) = missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let env = Env::new("kube");
    let cluster = Cluster::up(&env, 3);
    let k = &cluster;

    // Before nsfleet is installed, a Fleet is refused with what to do.
    let ring = env.file("kring.toml", RING);
    let ring = ring.to_str().unwrap();
    k.fails(&["up", ring, "--kube"], "nsfleet kube install");

    let image = std::fs::read_to_string(k.dir.join("images/nsfleet.ref")).unwrap();
    let api = format!(
        "{}:6443",
        std::fs::read_to_string(k.dir.join("cp-address"))
            .unwrap()
            .trim()
    );
    let install = [
        "kube",
        "install",
        "--image",
        image.trim(),
        "--api-server",
        &api,
    ];
    // The line `kube-cluster up` printed is the one that installs it.
    assert!(
        k.said.contains(&format!("nsfleet {}", install.join(" "))),
        "{}",
        k.said
    );
    let installed = k.ok(&install);
    assert!(
        installed.contains("3 machines run the agent"),
        "{installed}"
    );

    // Bad input: nothing is made in the cluster.
    let bad = env.file(
        "bad.toml",
        "[fleet]\nname = \"bad\"\n[[node]]\nname = \"a\"\ncount = \"x\"\n",
    );
    k.fails(&["up", bad.to_str().unwrap(), "--kube"], "bad.toml:5");
    let nowhere = env.file(
        "nowhere.kubeconfig",
        &std::fs::read_to_string(&k.kubeconfig)
            .unwrap()
            .replace(":6443", ":1"),
    );
    let out = env
        .cmd(&["status", "x", "--kube"])
        .env("KUBECONFIG", &nowhere)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot be reached"),
        "{out:?}"
    );
    assert_eq!(k.kubectl(&["get", "fleets", "-o", "name"]).trim(), "");
    // RBAC that refuses the controller: said before anything is made.
    k.kubectl(&["delete", "clusterrolebinding", "nsfleet-controller"]);
    k.fails(
        &["up", ring, "--kube"],
        "the cluster's RBAC refuses nsfleet: nsfleet-controller may not get fleets (cluster-wide)",
    );
    assert_eq!(k.kubectl(&["get", "fleets", "-o", "name"]).trim(), "");
    k.ok(&install);

    // A ring of 30 over three machines: three links cut, each a tunnel of MTU 1450.
    let up = k.ok(&["up", ring, "--kube"]);
    assert!(up.contains("30 nodes on 3 machines"), "{up}");
    assert!(
        up.contains("3 links cross machines (VXLAN, MTU 1450)"),
        "{up}"
    );
    let status = k.json(&["status", "kring", "--kube", "--json"]);
    let machine_of = |n: usize| -> String {
        let nodes = status["nodes"].as_array().unwrap();
        let node = nodes.iter().find(|x| x["name"] == format!("r{n}")).unwrap();
        node["machine"].as_str().unwrap().to_string()
    };
    let mut machines: Vec<String> = (1..=30).map(machine_of).collect();
    machines.sort();
    machines.dedup();
    assert_eq!(machines.len(), 3, "{status}");

    // A ping across a cut link, node to node, over the machines' tunnel.
    let cut = (1..30)
        .find(|&i| machine_of(i) != machine_of(i + 1))
        .unwrap();
    let (a, b) = (format!("r{cut}"), format!("r{}", cut + 1));
    let addr = k.ok(&[
        "exec", "kring", &b, "--kube", "--", "ip", "-4", "-o", "addr", "show", "eth0",
    ]);
    let b_addr: std::net::Ipv4Addr = addr
        .split_whitespace()
        .nth(3)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let a_addr = std::net::Ipv4Addr::from(u32::from(b_addr) - 1);
    let eth1 = k.ok(&[
        "exec", "kring", &a, "--kube", "--", "ip", "-d", "link", "show", "eth1",
    ]);
    let a_text = a_addr.to_string();
    // Whether node `from` reaches address `to`: a probe every half second until one is
    // answered, for up to 30 s, and how long it took said. What is asserted is that the
    // nodes are wired, not how fast the first packet crosses: a single probe went
    // unanswered in CI runs with both CPUs busy, and was answered alone.
    let reaches = |from: &str, to: &str| {
        let ping = [
            "exec", "kring", from, "--kube", "--", "ping", "-c1", "-W1", to,
        ];
        let since = std::time::Instant::now();
        while !k.nsfleet(&ping).status.success() {
            assert!(
                since.elapsed() < Duration::from_secs(30),
                "{from} never reached {to}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        eprintln!(
            "{from} reached {to} in {:.1} s",
            since.elapsed().as_secs_f64()
        );
    };
    let ping_across = || reaches(&b, &a_text);
    assert!(
        eth1.contains("vxlan id") && eth1.contains("mtu 1450"),
        "{eth1}"
    );
    ping_across();
    let out = k.nsfleet(&["exec", "kring", &a, "--kube", "--", "sh", "-c", "exit 7"]);
    assert_eq!(
        out.status.code(),
        Some(7),
        "exec's exit code passes through"
    );

    // `link` on the node's machine: the cut link's far end is read on its own machine; a
    // pulled end stops packets both ways.
    let end = format!("{a}:eth1");
    let look = k.json(&["link", "kring", &end, "--kube", "--json"]);
    assert_eq!(look["far"]["node"], b.as_str(), "{look}");
    assert_eq!(look["far_machine"], machine_of(cut + 1).as_str(), "{look}");
    k.ok(&["link", "kring", &end, "down", "--kube"]);
    let out = k.nsfleet(&[
        "exec", "kring", &b, "--kube", "--", "ping", "-c1", "-W1", &a_text,
    ]);
    assert!(!out.status.success(), "a pulled cable still carries pings");
    let look = k.ok(&["link", "kring", &end, "up", "--kube"]);
    assert!(look.contains("across machines"), "{look}");
    ping_across();

    // `capture` on the node's machine, written here; the machine's capture ends with ours.
    // Pings cross the cut link until `count` packets of `targets` are written to a file.
    let capture_pings = |file: &str, targets: &[&str], count: &str| -> Vec<u8> {
        let file = env.file(file, "");
        let mut args = vec!["capture", "kring"];
        args.extend(targets);
        args.extend(["--kube", "-c", count, "-w", file.to_str().unwrap(), "icmp"]);
        let mut capture = env.cmd(&args).spawn().unwrap();
        let done = wait_until(&format!("{count} packets"), Duration::from_secs(30), || {
            ping_across();
            capture.try_wait().unwrap().ok_or("running")
        });
        assert!(done.success(), "capture {targets:?} --kube: {done}");
        std::fs::read(&file).unwrap()
    };
    let magic = capture_pings("a.pcapng", &[&end], "1");
    assert_eq!(&magic[..4], &[0x0a, 0x0d, 0x0d, 0x0a], "pcapng");
    let mut endless = env
        .cmd(&["capture", "kring", &end, "--kube"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until(
        "the machine's capture",
        Duration::from_secs(30),
        || match captures().is_empty() {
            true => Err("none yet"),
            false => Ok(()),
        },
    );
    endless.kill().unwrap();
    endless.wait().unwrap();
    wait_until(
        "the machine's capture to end with ours",
        Duration::from_secs(30),
        || match captures().as_slice() {
            [] => Ok(()),
            left => Err(left.to_vec()),
        },
    );
    // Both ends of the cut link, on two machines: one pcapng, both interfaces described,
    // packets from each machine in time order.
    let far_end = format!("{b}:eth0");
    let both = capture_pings("both.pcapng", &[&end, &far_end], "4");
    let blocks = pcapng_blocks(&both);
    let kinds: Vec<u32> = blocks.iter().map(|(k, _)| *k).collect();
    assert_eq!(
        &kinds[..3],
        &[0x0a0d0d0a, 1, 1],
        "one section, two interfaces: {kinds:?}"
    );
    assert_eq!(kinds.iter().filter(|&&k| k == 6).count(), 4, "{kinds:?}");
    let times: Vec<u64> = (blocks.iter().filter(|(k, _)| *k == 6))
        .map(|(_, b)| u64::from(u32_at(b, 12)) << 32 | u64::from(u32_at(b, 16)))
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "in time order: {times:?}"
    );

    // `apply --kube`: two nodes more, a chain from r1 to r{cut+1} (on another machine):
    // every node stays where it was, x1 joins r1, and one more link crosses machines, with
    // an identifier of its own (the fleet's others are in use on the same machines). A bad
    // file and a change too big for the cluster are refused and change nothing; refused
    // again when applied again (not "nothing to change").
    let far = cut + 1;
    let grown_text = format!(
        "{RING}[[node]]\nname = \"x{{i}}\"\ncount = 2\n\
         [[link]]\na = \"r1:eth2\"\nb = \"x1:eth0\"\npool = \"10.9.0.0/30\"\n\
         [[link]]\na = \"x1:eth1\"\nb = \"x2:eth0\"\npool = \"10.9.2.0/30\"\n\
         [[link]]\na = \"x2:eth1\"\nb = \"r{far}:eth2\"\npool = \"10.9.1.0/30\"\n"
    );
    let grown = env.file("kring-grown.toml", &grown_text);
    let grown = grown.to_str().unwrap();
    let plan = k.ok(&["apply", grown, "--kube", "--dry-run"]);
    assert!(plan.contains("x1") && plan.contains("x2"), "{plan}");
    let bad = bad.to_str().unwrap();
    k.fails(&["apply", bad, "--kube", "--name", "kring"], "bad.toml:5");
    let too_big = env.file(
        "too-big.toml",
        &format!(
            "{grown_text}[[node]]\nname = \"y{{i}}\"\ncount = 4000\ncommands = [\"exec zebra\"]\n"
        ),
    );
    let too_big = too_big.to_str().unwrap();
    for _ in 0..2 {
        let args = ["apply", too_big, "--kube", "--name", "kring"];
        k.fails(&args, "the changed fleet needs about");
    }
    assert_eq!(k.phase("kring"), "Running");
    let applied = k.ok(&["apply", grown, "--kube"]);
    assert!(
        applied.contains("32 nodes on 3 machines; 4 links cross machines"),
        "{applied}"
    );
    let after = k.json(&["status", "kring", "--kube", "--json"]);
    let machine_now = |n: &str| -> String {
        let nodes = after["nodes"].as_array().unwrap();
        let node = nodes.iter().find(|x| x["name"] == n).unwrap();
        node["machine"].as_str().unwrap().to_string()
    };
    for i in 1..=30 {
        assert_eq!(machine_now(&format!("r{i}")), machine_of(i), "r{i} moved");
    }
    assert_eq!(machine_now("x1"), machine_of(1));
    // The nodes `apply` added are reached, though not always at once: twice in CI runs
    // where this test ran fast (62 s), x1 answered none of three pings to 10.9.0.1 just
    // after `apply --kube` returned, and passed in every slower run: `apply --kube` can
    // return before a new node's links forward, which is still to be mended. Until then
    // the wait is bounded and how long it took is said.
    for (from, to) in [("x1", "10.9.0.1"), ("x1", "10.9.2.2"), ("x2", "10.9.1.2")] {
        reaches(from, to);
    }
    ping_across();

    // A change one machine refuses is undone on every machine: z1 (joining r1) asks for
    // a host link named eth0, which r1's machine has already (the controller, which does
    // not look at machines' interfaces, accepts it), so that machine refuses its part of
    // the change; z2 (joining r{far}, on another machine) was made there, and goes again.
    let refused_text = format!(
        "{grown_text}[[node]]\nname = \"z1\"\n\
         host_link = {{ iface = \"up0\", host_iface = \"eth0\", addrs = [\"192.168.251.2/30\"], host_addrs = [\"192.168.251.1/30\"] }}\n\
         [[node]]\nname = \"z2\"\n\
         [[link]]\na = \"r1:eth3\"\nb = \"z1:eth0\"\npool = \"10.9.4.0/30\"\n\
         [[link]]\na = \"r{far}:eth3\"\nb = \"z2:eth0\"\npool = \"10.9.5.0/30\"\n"
    );
    let refused = env.file("kring-refused.toml", &refused_text);
    let args = ["apply", refused.to_str().unwrap(), "--kube"];
    let said = env.fails(
        &args,
        &format!("the change failed on machine {}", machine_of(1)),
    );
    assert!(said.contains("it was undone on every machine"), "{said}");
    let back = k.json(&["status", "kring", "--kube", "--json"]);
    assert_eq!(back["status"]["phase"], "Running", "{back}");
    let names: Vec<&str> = (back["nodes"].as_array().unwrap().iter())
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 32, "{names:?}");
    let z2 = k.nsfleet(&["exec", "kring", "z2", "--kube", "--", "true"]);
    assert!(!z2.status.success(), "z2 is gone");
    ping_across();

    // Two fleets of one name, a machine without the agent, a fleet bigger than the cluster.
    k.fails(&["up", ring, "--kube"], "already in namespace default");
    let ghost = r#"{"apiVersion":"nsfleet.dev/v1alpha1","kind":"Fleet","metadata":{"name":"ghost"},"spec":{"machines":["nope"],"topology":"[fleet]\nname = \"ghost\"\n[[node]]\nname = \"a\"\n"}}"#;
    let ghost_file = env.file("ghost.json", ghost);
    k.kubectl(&["apply", "-f", ghost_file.to_str().unwrap()]);
    k.wait_phase("ghost", "Failed");
    let s = k.json(&["status", "ghost", "--kube", "--json"]);
    assert!(
        s["status"]["message"]
            .as_str()
            .unwrap()
            .contains("machine nope runs no ready nsfleet agent"),
        "{s}"
    );
    assert_eq!(s["nodes"].as_array().unwrap().len(), 0, "no part was made");
    k.ok(&["down", "ghost", "--kube"]);
    let capacity: u64 = k
        .kubectl(&[
            "-n",
            "nsfleet-system",
            "get",
            "pods",
            "-o",
            "jsonpath={.items[*].metadata.annotations.nsfleet\\.dev/capacity}",
        ])
        .split_whitespace()
        .map(|c| c.parse::<u64>().unwrap())
        .sum();
    // Nodes that run FRR weigh about 16 MB each.
    let count = capacity / (16 << 20) + 100;
    let big = env.file("big.toml", &format!("[fleet]\nname = \"big\"\n[[node]]\nname = \"r{{i}}\"\ncount = {count}\ncommands = [\"exec zebra\"]\n"));
    k.fails(
        &["up", big.to_str().unwrap(), "--kube"],
        "the fleet needs about",
    );
    assert!(!k.kubectl(&["get", "fleets", "-o", "name"]).contains("big"));

    images_reach_the_machines_that_run_them(k);
    machines_pull_images_from_a_registry(k);
    limits_hold_on_the_machines(k);
    an_owned_fleet_goes_with_its_owner(k);

    // A restarted controller loses nothing: the state is in the resources.
    k.kubectl(&[
        "-n",
        "nsfleet-system",
        "delete",
        "pod",
        "-l",
        "app.kubernetes.io/name=nsfleet-controller",
    ]);
    ping_across();
    assert_eq!(k.phase("kring"), "Running");

    // An agent lost while running: its machine's nodes are gone, the fleet Degraded, and
    // `down` still takes the rest down.
    let lost_machine = machine_of(cut);
    let agent = k.agent_pod(&lost_machine);
    k.kubectl(&["-n", "nsfleet-system", "delete", "pod", &agent]);
    k.wait_phase("kring", "Degraded");
    let s = k.json(&["status", "kring", "--kube", "--json"]);
    assert!(
        s["status"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("machine {lost_machine}")),
        "{s}"
    );
    let down = k.ok(&["down", "kring", "--kube"]);
    assert!(down.contains("reclaimed on 3 of 3 machines"), "{down}");
    assert_eq!(
        k.kubectl(&["get", "fleets,fleetparts", "-o", "name"])
            .trim(),
        ""
    );

    an_agent_lost_in_the_middle_of_a_layer(k);
    a_full_store_refuses_a_layer(k);
    privileged_nodes_need_the_installs_consent(k);

    // A machine lost while its part deploys (its agent frozen: its pod still looks ready,
    // but its Lease is not renewed): the fleet fails, rolled back on every machine.
    let frozen = Frozen::agent_of("m3");
    let out = k.nsfleet(&["up", ring, "--kube"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "up with a frozen machine succeeded");
    assert!(
        err.contains("machine m3: its agent is gone")
            && err.contains("rolled back on every machine"),
        "{err}"
    );
    assert_eq!(
        k.kubectl(&["get", "fleets,fleetparts", "-o", "name"])
            .trim(),
        ""
    );
    let lease = || {
        k.kubectl(&[
            "-n",
            "nsfleet-system",
            "get",
            "lease",
            "agent-m3",
            "-o",
            "jsonpath={.spec.renewTime}",
        ])
    };
    let stale = lease();
    drop(frozen);
    wait_until(
        "m3's agent to renew its lease",
        Duration::from_secs(30),
        || match lease() {
            now if now != stale => Ok(()),
            now => Err(now),
        },
    );

    // A machine lost while running: `down` lets its part go after the controller's bound,
    // and says so; back, its agent takes down the fleet that no part names any more.
    let up = k.ok(&["up", ring, "--kube"]);
    assert!(up.contains("30 nodes on 3 machines"), "{up}");
    let frozen = Frozen::agent_of("m3");
    k.fails(
        &["down", "kring", "--kube"],
        "1 machine(s) could not say their part was reclaimed",
    );
    drop(frozen);
    wait_until(
        "m3's agent to take down what no part names",
        Duration::from_secs(60),
        || match k.agent_fleets("m3") {
            left if left.is_empty() => Ok(()),
            left => Err(left),
        },
    );

    // Agents all gone: deleting a fleet does not hang; it says which machines could not
    // say their part was reclaimed.
    let up = k.ok(&["up", ring, "--kube"]);
    assert!(up.contains("30 nodes on 3 machines"), "{up}");
    k.kubectl(&[
        "-n",
        "nsfleet-system",
        "delete",
        "daemonset",
        "nsfleet-agent",
        "--cascade=foreground",
    ]);
    k.fails(
        &["down", "kring", "--kube"],
        "3 machine(s) could not say their part was reclaimed",
    );
    assert_eq!(
        k.kubectl(&["get", "fleets,fleetparts", "-o", "name"])
            .trim(),
        ""
    );

    let name = cluster.name.clone();
    let dir = cluster.dir.clone();
    drop(cluster);
    // Nothing of the cluster is left on the host.
    let links = Command::new("ip").args(["-o", "link"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&links.stdout).contains(&format!("nsfk-{name}")));
    assert!(!dir.exists(), "{} is left", dir.display());
    for h in std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        let left = h.path().join("nsfleet-kube").join(&name);
        assert!(!left.exists(), "{} is left", left.display());
    }
}

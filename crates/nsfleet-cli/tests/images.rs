//! Nodes that run container images: images the test builds from files it controls (two
//! layers, a whiteout and an opaque folder among them), loaded as an OCI layout and as a
//! `docker save` archive (made by skopeo, where it is installed), run by nsfleet's own
//! TOML and by a containerlab file. The image's own programs run, the host's files are
//! not there, two nodes of one image do not see each other's writes, and `down` or a
//! killed supervisor leaves no mount, overlay or writable layer behind.

mod harness;

use harness::busy::busy_image;
use harness::*;
use nsfleet_image::build::{write_oci_layout, Compression, Entry, ImageSpec, Layer};
use nsfleet_image::local_registry::{self, LocalRegistry};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A fleet name unique to this process and test.
fn fleet(tag: &str) -> String {
    format!("i{}{tag}", std::process::id() % 100_000)
}

/// Writes the test image as an OCI layout in the test's files.
fn layout(env: &Env, version: &str) -> PathBuf {
    layout_of(env, version, &busy_image(version))
}

fn layout_of(env: &Env, version: &str, image: &ImageSpec) -> PathBuf {
    let dir = env.files.join(format!("busy-{version}"));
    write_oci_layout(&dir, version, image).unwrap();
    dir
}

/// Runs `cmd` in `node` and returns its output, failing the test if it fails.
fn in_node(env: &Env, fleet: &str, node: &str, cmd: &[&str]) -> String {
    let mut args = vec!["exec", fleet, node, "--"];
    args.extend(cmd);
    env.ok(&args)
}

/// Whether `cmd` succeeds in `node`.
fn succeeds(env: &Env, fleet: &str, node: &str, cmd: &[&str]) -> bool {
    let mut args = vec!["exec", fleet, node, "--"];
    args.extend(cmd);
    env.run(&args).status.success()
}

/// Waits until `path` exists in `node` (what a node's process makes once it runs).
fn appears(env: &Env, fleet: &str, node: &str, path: &str) {
    wait_until(path, Duration::from_secs(10), || {
        succeeds(env, fleet, node, &["test", "-e", path])
            .then_some(())
            .ok_or("not yet")
    });
}

/// The overlay mounts in the mount namespaces of `inits` (a node's root, each).
fn overlays_of(inits: &[i32]) -> usize {
    (inits.iter())
        .map(|p| std::fs::read_to_string(format!("/proc/{p}/mountinfo")).unwrap_or_default())
        .map(|info| info.lines().filter(|l| l.contains(" - overlay ")).count())
        .sum()
}

#[test]
fn nodes_run_their_image_in_its_own_root() {
    let env = Env::new("imgrun");
    let name = fleet("run");
    let oci = layout(&env, "1");
    let loaded = env.ok(&[
        "image",
        "load",
        oci.to_str().unwrap(),
        "--name",
        "test/busy:1",
    ]);
    assert!(loaded.contains("test/busy:1"), "{loaded}");
    let text = format!(
        r#"[fleet]
name = "{name}"

[[node]]
name = "a"
image = "test/busy:1"

[[node]]
name = "b"
image = "test/busy:1"

[[link]]
a = {{ at = "a:eth0", addrs = ["10.77.0.1/24"] }}
b = {{ at = "b:eth0", addrs = ["10.77.0.2/24"] }}
"#
    );
    let guard = env.up(&text);
    let run = |node: &str, cmd: &[&str]| in_node(&env, &name, node, cmd);
    // The image's files, with its second layer's whiteout and opaque folder applied.
    assert_eq!(run("a", &["cat", "/etc/image-release"]), "busy 1\n");
    assert!(!succeeds(&env, &name, "a", &["test", "-e", "/old.txt"]));
    assert_eq!(run("a", &["ls", "/opq"]).trim(), "b");
    // None of the host's: Debian's own files are not there.
    assert!(!succeeds(
        &env,
        &name,
        "a",
        &["test", "-e", "/etc/debian_version"]
    ));
    assert!(!succeeds(
        &env,
        &name,
        "a",
        &["test", "-e", "/usr/bin/nsenter"]
    ));
    // Its process ran, with the image's environment and working directory, as exec has.
    appears(&env, &name, "a", "/tmp/started");
    assert_eq!(run("a", &["sh", "-c", "echo $IMG_VAR"]), "from-image\n");
    assert_eq!(run("a", &["pwd"]), "/work\n");
    // Docker's /etc files: its host name, the fleet's hosts.
    assert_eq!(run("a", &["cat", "/etc/hostname"]), "a\n");
    assert!(run("a", &["cat", "/etc/hosts"]).contains("10.77.0.2\tb"));
    // Each node writes to a layer of its own.
    run("a", &["sh", "-c", "echo mine > /work/note"]);
    assert_eq!(run("a", &["cat", "/work/note"]), "mine\n");
    assert!(!succeeds(&env, &name, "b", &["test", "-e", "/work/note"]));
    // Wired as any node.
    run("a", &["ping", "-c1", "-W2", "10.77.0.2"]);
    // The layers are in use: `prune --all` leaves the image.
    let pruned = env.ok(&["image", "prune", "--all", "--json"]);
    assert!(env.ok(&["image", "ls"]).contains("test/busy:1"), "{pruned}");
    // Each node's root is an overlay in its own mount namespace, its writable layer a
    // tmpfs there: both go with the node's init.
    let inits = inits_of(guard.pid());
    assert_eq!(overlays_of(&inits), 2, "{inits:?}");
    let spaces = mount_namespaces(&inits);
    drop(guard);
    assert_eq!(mount_namespaces_in_use(&spaces), 0);
    // Nothing holds the image now.
    env.ok(&["image", "prune", "--all"]);
    assert!(!env.ok(&["image", "ls"]).contains("test/busy:1"));
}

#[test]
fn images_that_apply_brings_are_held_by_the_fleet_and_let_go_once_unused() {
    let env = Env::new("imgapply");
    let name = fleet("apply");
    for v in ["1", "2"] {
        let oci = layout(&env, v);
        let tag = format!("test/busy:{v}");
        env.ok(&["image", "load", oci.to_str().unwrap(), "--name", &tag]);
    }
    let file = |nodes: &str| format!("[fleet]\nname = \"{name}\"\n{nodes}");
    let one = file("[[node]]\nname = \"a\"\nimage = \"test/busy:1\"\n");
    let two = file(
        "[[node]]\nname = \"a\"\nimage = \"test/busy:1\"\n[[node]]\nname = \"c\"\nimage = \"test/busy:2\"\n",
    );
    let guard = env.up(&one);
    let listed = |tag: &str| env.ok(&["image", "ls"]).contains(tag);
    // busy:2 came with `apply`: the fleet holds it as it holds busy:1.
    env.ok(&["apply", env.file("two.toml", &two).to_str().unwrap()]);
    assert_eq!(
        in_node(&env, &name, "c", &["cat", "/etc/image-release"]),
        "busy 2\n"
    );
    env.ok(&["image", "prune", "--all"]);
    assert!(listed("test/busy:1") && listed("test/busy:2"));
    // Its node gone, nothing holds busy:2 any more; busy:1 is still used.
    env.ok(&["apply", env.file("one.toml", &one).to_str().unwrap()]);
    env.ok(&["image", "prune", "--all"]);
    assert!(listed("test/busy:1") && !listed("test/busy:2"));
    drop(guard);
    env.ok(&["image", "prune", "--all"]);
    assert!(!listed("test/busy:1"));
}

#[test]
fn a_killed_supervisor_leaves_no_overlay_and_clean_takes_the_layers() {
    let env = Env::new("imgkill");
    let name = fleet("kill");
    env.ok(&[
        "image",
        "load",
        layout(&env, "1").to_str().unwrap(),
        "--name",
        "busy",
    ]);
    let text = format!(
        "[fleet]\nname = \"{name}\"\n\n[[node]]\nname = \"n{{i}}\"\ncount = 3\nimage = \"busy:1\"\n"
    );
    let guard = env.up(&text);
    let pid = guard.pid();
    let inits = inits_of(pid);
    assert_eq!(overlays_of(&inits), 3);
    let spaces = mount_namespaces(&inits);
    signal(pid, libc::SIGKILL);
    wait_gone(pid);
    // The nodes' mount namespaces went with their inits, and their overlays with them.
    wait_until(
        "no overlay left",
        Duration::from_secs(10),
        || match mount_namespaces_in_use(&spaces) {
            0 => Ok(()),
            n => Err(n),
        },
    );
    // The image is free again: its hold went with the supervisor.
    let out = env.run(&["image", "rm", "busy:1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    env.ok(&["clean", &name]);
    assert!(!env.run_dir.join(&name).exists());
    std::mem::forget(guard);
}

#[test]
fn a_containerlab_node_runs_its_image_with_exec_lines_cmd_and_user() {
    let env = Env::new("imgclab");
    let name = fleet("clab");
    env.ok(&[
        "image",
        "load",
        layout(&env, "2").to_str().unwrap(),
        "--name",
        "test/busy:2",
    ]);
    let motd = env.file("motd", "from the host\n").display().to_string();
    let data = env.files.join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("shared"), "").unwrap();
    let data = data.display().to_string();
    let text = format!(
        r#"name: {name}
mgmt: {{ipv4-subnet: 172.31.90.0/24}}
topology:
  nodes:
    h1:
      kind: linux
      image: test/busy:2
      cmd: sleep 999999
      user: app
      env: {{GREETING: hello}}
      binds:
        - {motd}:/etc/motd:ro
        - {data}:/data/in/image
      exec:
        - sh -c "echo $GREETING > /tmp/exec-ran"
    h2:
      kind: linux
      image: test/busy:2
  links:
    - endpoints: ["h1:eth1", "h2:eth1"]
"#
    );
    let file = env.file(&format!("{name}.clab.yml"), &text);
    let guard = Fleet {
        env: &env,
        name: name.clone(),
    };
    env.ok(&["deploy", "-t", file.to_str().unwrap()]);
    // Binds land in the image's root, where the image has nothing (and the host neither).
    assert_eq!(
        in_node(&env, &name, "h1", &["cat", "/etc/motd"]),
        "from the host\n"
    );
    assert_eq!(
        in_node(&env, &name, "h1", &["ls", "/data/in/image"]),
        "shared\n"
    );
    assert!(!succeeds(
        &env,
        &name,
        "h1",
        &["sh", "-c", "echo x > /etc/motd"]
    ));
    appears(&env, &name, "h1", "/tmp/exec-ran");
    assert_eq!(
        in_node(&env, &name, "h1", &["cat", "/tmp/exec-ran"]),
        "hello\n"
    );
    // `cmd` replaced the image's, and runs as the image's user `app`.
    let status = env.status(&name);
    let h1 = (status["nodes"].as_array().unwrap().iter())
        .find(|n| n["name"] == "h1")
        .unwrap();
    let commands: Vec<&str> = (h1["processes"].as_array().unwrap().iter())
        .filter_map(|p| p["command"].as_str())
        .collect();
    assert!(commands.contains(&"sleep 999999"), "{commands:?}");
    assert_eq!(in_node(&env, &name, "h1", &["id", "-u"]), "1000\n");
    // By containerlab's container name too, as `docker exec`.
    let long = format!("clab-{name}-h2");
    assert_eq!(
        in_node(&env, &name, &long, &["cat", "/etc/image-release"]),
        "busy 2\n"
    );
    env.ok(&["destroy", "-t", file.to_str().unwrap()]);
    std::mem::forget(guard);
}

#[test]
fn a_docker_archive_from_skopeo_runs_as_the_layout_does() {
    let env = Env::new("imgskopeo");
    let Some(archive) = docker_archive(&env, "3") else {
        return;
    };
    let name = fleet("sko");
    let loaded = env.ok(&["image", "load", archive.to_str().unwrap()]);
    assert!(loaded.contains("test/busy:3"), "{loaded}");
    let text =
        format!("[fleet]\nname = \"{name}\"\n\n[[node]]\nname = \"a\"\nimage = \"test/busy:3\"\n");
    let _guard = env.up(&text);
    assert_eq!(
        in_node(&env, &name, "a", &["cat", "/etc/image-release"]),
        "busy 3\n"
    );
}

/// Makes a docker-archive of the test image with skopeo; None (and a note) without it.
fn docker_archive(env: &Env, version: &str) -> Option<PathBuf> {
    let Ok(skopeo) = which("skopeo") else {
        eprintln!("skopeo is not installed: the docker-archive test is skipped");
        return None;
    };
    // Docker's archives have no zstd layers.
    let mut image = busy_image(version);
    image.layers[1].compression = Compression::Gzip;
    let oci = layout_of(env, version, &image);
    let archive = env.files.join(format!("busy-{version}.tar"));
    let out = std::process::Command::new(skopeo)
        .args(["copy", "--quiet"])
        .arg(format!("oci:{}:{version}", oci.display()))
        .arg(format!(
            "docker-archive:{}:test/busy:{version}",
            archive.display()
        ))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(archive)
}

#[test]
fn an_image_podman_holds_is_taken_from_it_without_a_registry() {
    let Ok(podman) = which("podman") else {
        eprintln!("podman is not installed: taking an image from it is not tested");
        return;
    };
    let env = Env::new("imgpodman");
    let Some(archive) = docker_archive(&env, "4") else {
        return;
    };
    // A podman storage of the test's own, and everything else podman writes (its locks,
    // in files not in /dev/shm; its temporary files; its HOME's configuration) in the
    // test's folder: the machine's is not touched, and nothing stays.
    let storage = env.files.join("podman");
    let conf = env.file(
        "storage.conf",
        &format!(
            "[storage]\ndriver = \"vfs\"\ngraphroot = \"{0}/graph\"\nrunroot = \"{0}/run\"\n",
            storage.display()
        ),
    );
    let engine = env.file(
        "containers.conf",
        &format!(
            "[engine]\nlock_type = \"file\"\ntmp_dir = \"{}/tmp\"\n",
            storage.display()
        ),
    );
    let podman_env = [
        ("CONTAINERS_STORAGE_CONF", conf.as_os_str()),
        ("CONTAINERS_CONF", engine.as_os_str()),
        ("HOME", storage.as_os_str()),
    ];
    let podman_load = std::process::Command::new(&podman)
        .envs(podman_env)
        .args(["load", "-q", "-i"])
        .arg(&archive)
        .output()
        .unwrap();
    assert!(
        podman_load.status.success(),
        "{}",
        String::from_utf8_lossy(&podman_load.stderr)
    );
    let out = env
        .cmd(&["image", "load", "--from", "podman", "test/busy:4"])
        .envs(podman_env)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let name = fleet("pod");
    let text =
        format!("[fleet]\nname = \"{name}\"\n\n[[node]]\nname = \"a\"\nimage = \"test/busy:4\"\n");
    let guard = env.up(&text);
    assert_eq!(
        in_node(&env, &name, "a", &["cat", "/etc/image-release"]),
        "busy 4\n"
    );
    drop(guard);
    // podman's own storage is the test's to remove: vfs layers are plain folders.
    let _ = std::process::Command::new(&podman)
        .envs(podman_env)
        .args(["system", "reset", "--force"])
        .output();
}

#[test]
fn up_pulls_an_image_the_store_lacks_from_its_registry() {
    let missing = local_registry::missing_tools();
    if !missing.is_empty() {
        eprintln!("{missing:?} not installed: up's pull is not tested");
        return;
    }
    let env = Env::new("imgpull");
    let registry = LocalRegistry::start(&env.files.join("registry"), None).unwrap();
    let mut image = busy_image("6");
    image.layers[1].compression = Compression::Gzip;
    let oci = layout_of(&env, "6", &image);
    let reference = registry
        .push(&oci, "6", "test/busy:6", None, false)
        .unwrap();
    let name = fleet("pull");
    let text =
        format!("[fleet]\nname = \"{name}\"\n\n[[node]]\nname = \"a\"\nimage = \"{reference}\"\n");
    let guard = env.up(&text);
    assert_eq!(
        in_node(&env, &name, "a", &["cat", "/etc/image-release"]),
        "busy 6\n"
    );
    assert!(env.ok(&["image", "ls"]).contains(&reference));
    drop(guard);
}

#[test]
fn an_image_the_store_lacks_is_refused_at_its_line_and_nothing_starts() {
    let env = Env::new("imgmissing");
    let name = fleet("miss");
    let f = env.file(
        "missing.toml",
        &format!(
            "[fleet]\nname = \"{name}\"\n\n[[node]]\nname = \"a\"\nimage = \"127.0.0.1:9/nosuch/image:1\"\n"
        ),
    );
    // Not in the store, and its registry (a closed port) cannot be reached.
    let args = ["up", f.to_str().unwrap()];
    env.refused(
        "missing image",
        &args,
        &f,
        6,
        "is not in nsfleet's image store",
    );
    let err = String::from_utf8_lossy(&env.run(&args).stderr).into_owned();
    assert!(err.contains("--host-software"), "{err}");
    assert!(
        err.contains("pulling it failed") && err.contains("127.0.0.1:9"),
        "{err}"
    );
    // A reference that cannot be one.
    let f = env.file(
        "bad.toml",
        &format!("[fleet]\nname = \"{name}\"\n\n[[node]]\nname = \"a\"\nimage = \"Not A/Ref\"\n"),
    );
    env.refused(
        "bad reference",
        &["up", f.to_str().unwrap()],
        &f,
        6,
        "image \"Not A/Ref\"",
    );
    // The host's software, when asked for: the image is only recorded.
    let f = env.file(
        "host.toml",
        &format!("[fleet]\nname = \"{name}\"\n\n[[node]]\nname = \"a\"\nimage = \"nosuch/image:1\"\ncommands = [\"exec sleep 100000\"]\n"),
    );
    let guard = Fleet {
        env: &env,
        name: name.clone(),
    };
    env.ok(&["up", "--host-software", f.to_str().unwrap()]);
    assert!(succeeds(
        &env,
        &name,
        "a",
        &["test", "-e", "/etc/debian_version"]
    ));
    drop(guard);
}

/// A tmpfs of `bytes` mounted at `dir` for one test, unmounted by its guard.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn new(dir: PathBuf, bytes: u64) -> SmallDisk {
        std::fs::create_dir_all(&dir).unwrap();
        let out = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={bytes},mode=0700"),
                "nsfleet-test",
            ])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        SmallDisk(dir)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_layer_bigger_than_the_disk_is_refused_and_leaves_nothing_half_written() {
    let env = Env::new("imgfull");
    // A store on a disk of 4 MiB, and an image whose second layer is 8 MiB of data.
    let disk = SmallDisk::new(env.images(), 4 << 20);
    let mut image = busy_image("5");
    let mut x: u32 = 1;
    let noise: Vec<u8> = (0..8 << 20)
        .map(|_| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (x >> 24) as u8
        })
        .collect();
    image.layers.push(Layer {
        entries: vec![Entry::file("big", 0o644, noise)],
        compression: Compression::Gzip,
    });
    image.layers[0].entries.clear();
    image.layers[0].entries.push(Entry::dir("etc"));
    let oci = layout_of(&env, "5", &image);
    let out = env.run(&["image", "load", oci.to_str().unwrap(), "--name", "big:5"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("big:5") || err.contains("No space left"),
        "{err}"
    );
    // Nothing of it stays: no layer, no image, no name, no work in progress.
    for sub in ["layers", "images", "tmp"] {
        let left: Vec<_> = std::fs::read_dir(disk.0.join(sub))
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{sub}: {left:?}");
    }
    assert!(!env.ok(&["image", "ls"]).contains("big"));
}

/// `program` on PATH.
fn which(program: &str) -> Result<PathBuf, ()> {
    let path = std::env::var("PATH").unwrap_or_default();
    (path.split(':').map(|d| Path::new(d).join(program)))
        .find(|p| p.is_file())
        .ok_or(())
}

/// What the hostile image's entrypoint runs: each escape, its outcome a line (see the
/// file), then `done`. Shared with scripts/escape-table.
const ESCAPES: &str = include_str!("escapes.sh");

/// The escapes' names, as `ESCAPES` prints them.
fn escape_names() -> Vec<String> {
    (ESCAPES.lines())
        .filter_map(|l| l.strip_prefix("try "))
        .map(|l| match l.chars().next() {
            Some(q @ ('\'' | '"')) => l[1..].split(q).next().unwrap().to_string(),
            _ => l.split(' ').next().unwrap().to_string(),
        })
        .collect()
}

/// An image whose entrypoint tries every escape of [`ESCAPES`], each outcome a line of
/// /tmp/escapes.
fn hostile_image() -> ImageSpec {
    let mut image = busy_image("hostile");
    let tools = [
        "mknod", "mkdir", "mount", "insmod", "reboot", "date", "dd", "mkswap", "swapon", "dmesg",
        "head", "grep",
    ];
    for tool in tools {
        let link = Entry::symlink(&format!("bin/{tool}"), "busybox");
        image.layers[0].entries.push(link);
    }
    image.layers[0].entries.push(Entry::dir("dev"));
    let script = format!("{{\n{ESCAPES}\n}} > /tmp/escapes 2>&1\nexec sleep 1000000\n");
    image.run.cmd = vec!["/bin/sh".into(), "-c".into(), script];
    image
}

#[test]
fn a_hostile_image_gets_the_kernels_refusal_for_each_escape_and_the_host_is_as_before() {
    let env = Env::new("imghostile");
    let name = fleet("hst");
    let oci = layout_of(&env, "hostile", &hostile_image());
    env.ok(&[
        "image",
        "load",
        oci.to_str().unwrap(),
        "--name",
        "test/hostile:1",
    ]);
    let sysctl = "/proc/sys/kernel/printk_ratelimit";
    let before = std::fs::read_to_string(sysctl).unwrap();
    let mounts = || std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let debugfs_before = mounts().matches(" - debugfs ").count();
    let swaps_before = std::fs::read_to_string("/proc/swaps").unwrap();
    let text =
        format!("[fleet]\nname = \"{name}\"\n[[node]]\nname = \"h\"\nimage = \"test/hostile:1\"\n");
    let guard = env.up(&text);
    let tried = wait_until("its escapes", Duration::from_secs(20), || {
        let out = env.run(&["exec", &name, "h", "--", "cat", "/tmp/escapes"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.contains("done").then_some(text).ok_or("not yet")
    });
    eprintln!("{tried}");
    let names = escape_names();
    assert_eq!(names.len(), 13, "{names:?}");
    for what in &names {
        let line = (tried.lines())
            .find(|l| l.starts_with(&format!("{what}: ")))
            .unwrap_or_else(|| panic!("{what} not tried: {tried}"));
        assert!(line.starts_with(&format!("{what}: refused")), "{line}");
    }
    // The kernel's own words, where the tool says them.
    for (what, refusal) in [
        ("mknod", "Operation not permitted"),
        ("module", "Operation not permitted"),
        ("clock", "Operation not permitted"),
        ("swap", "Operation not permitted"),
        ("kernel log", "Operation not permitted"),
        ("init's environment", "Permission denied"),
    ] {
        let line = tried.lines().find(|l| l.starts_with(what)).unwrap();
        assert!(line.contains(refusal), "{line}");
    }
    // The node lives on (reboot did not end it), and the host is as it was.
    assert!(env
        .ok(&["exec", &name, "h", "--", "cat", "/etc/hostname"])
        .contains('h'));
    assert_eq!(std::fs::read_to_string(sysctl).unwrap(), before);
    assert_eq!(mounts().matches(" - debugfs ").count(), debugfs_before);
    assert_eq!(
        std::fs::read_to_string("/proc/swaps").unwrap(),
        swaps_before
    );
    let year: u64 = (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH))
        .unwrap()
        .as_secs()
        / 31_557_600;
    assert!(year >= 2024 - 1970, "the host's clock was set");
    drop(guard);
}

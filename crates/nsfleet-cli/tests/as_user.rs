//! nsfleet as an ordinary user: no sudo, no setuid. Each test makes a user of its own
//! (`useradd`, with subordinate ids or without), runs the real `nsfleet` as that user
//! from its default run folder (/tmp/nsfleet-UID: the test gives it no session), and
//! checks what it leaves: no process of the user, no fleet folder. The user's guard
//! kills whatever the user still runs and removes the user, home and all, even when the
//! test fails.

mod harness;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;

/// useradd and userdel lock /etc/passwd and fail at once when another holds it: one at a
/// time in this binary.
static ACCOUNTS: Mutex<()> = Mutex::new(());

/// A user made for one test, removed (with everything they run) when dropped.
struct User {
    name: String,
    uid: u32,
    gid: u32,
    home: PathBuf,
    /// The nsfleet under test, linked or copied where the user may run it (the build's
    /// folder is root's alone).
    bin: PathBuf,
}

impl User {
    /// A new user; `subordinate` gives them ranges in /etc/subuid and /etc/subgid (as
    /// `useradd` gives every ordinary user on Debian), else none (a system user's lot).
    fn new(tag: &str, subordinate: bool) -> User {
        let name = format!("nsf{tag}{}", std::process::id() % 100_000);
        let home = PathBuf::from(format!("/tmp/{name}-home"));
        {
            let _one = ACCOUNTS.lock().unwrap_or_else(|e| e.into_inner());
            let mut add = Command::new("useradd");
            add.args(["-m", "-d"]).arg(&home).args(["-s", "/bin/sh"]);
            if !subordinate {
                add.arg("-r");
            }
            let out = add.arg(&name).output().expect("useradd runs");
            assert!(
                out.status.success(),
                "useradd: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let ids = |flag: &str| -> u32 {
            let out = Command::new("id").args([flag, &name]).output().unwrap();
            String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
        };
        let (uid, gid) = (ids("-u"), ids("-g"));
        let bin = home.join("nsfleet");
        if std::fs::hard_link(env!("CARGO_BIN_EXE_nsfleet"), &bin).is_err() {
            std::fs::copy(env!("CARGO_BIN_EXE_nsfleet"), &bin).unwrap();
        }
        let user = User {
            name,
            uid,
            gid,
            home,
            bin,
        };
        std::os::unix::fs::chown(&user.home, Some(uid), Some(gid)).unwrap();
        user
    }

    /// `nsfleet ARGS` as the user, in their home, with a login's bare environment.
    fn run(&self, args: &[&str]) -> Output {
        self.run_where(Where::Host, args)
    }

    /// As [`run`](Self::run), as `place` says.
    fn run_where(&self, place: Where, args: &[&str]) -> Output {
        (self.command(&self.bin, place).args(args))
            .output()
            .expect("nsfleet runs")
    }

    /// `program` as the user, in their home, with a login's bare environment and the
    /// user's nsfleet for the Python package. With [`Where::UsersTun`], in a mount
    /// namespace of the test's own where /dev/net/tun is a device file of the user's, as
    /// on hosts whose /dev/net/tun is 0666 (most distributions'); this machine's is
    /// root's alone, and the host's is not the test's to change.
    fn command(&self, program: &Path, place: Where) -> Command {
        let mut c = match place {
            Where::Host => {
                let mut c = Command::new(program);
                c.uid(self.uid).gid(self.gid);
                c
            }
            Where::UsersTun => {
                let device = self.home.join("tun");
                if !device.exists() {
                    let made = (Command::new("mknod").arg(&device))
                        .args(["c", "10", "200"])
                        .status();
                    assert!(made.unwrap().success(), "mknod");
                    std::os::unix::fs::chown(&device, Some(self.uid), Some(self.gid)).unwrap();
                }
                let mut c = Command::new("unshare");
                c.args(["--mount", "--propagation", "private", "--"]);
                self.after_root(c, r#"mount --bind "$0" /dev/net/tun"#, &device, program)
            }
            Where::InGroup(group) => {
                let c = Command::new("env");
                self.after_root(c, r#"echo 0 > "$0/cgroup.procs""#, group, program)
            }
        };
        c.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
            .env("HOME", &self.home)
            .env("USER", &self.name)
            .env("NSFLEET_BIN", &self.bin)
            .current_dir(&self.home)
            .stdin(Stdio::null());
        c
    }

    /// `c` (a command that runs what follows it: `env`, or `unshare ... --`) running, as
    /// root, the shell line `first` with `$0` = `arg`, then `program` as the user.
    fn after_root(&self, mut c: Command, first: &str, arg: &Path, program: &Path) -> Command {
        let then = r#"u=$1 g=$2 && shift 2 && exec setpriv --reuid="$u" --regid="$g" --clear-groups -- "$@""#;
        c.args(["sh", "-c"])
            .arg(format!("{first} && {then}"))
            .arg(arg)
            .args([self.uid.to_string(), self.gid.to_string()])
            .arg(program);
        c
    }

    /// nsfleet's Python package, copied where the user may read it: the folder to put
    /// on PYTHONPATH.
    fn python_package(&self) -> PathBuf {
        let package = self.home.join("python");
        let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/nsfleet");
        std::fs::create_dir_all(&package).unwrap();
        let copied = Command::new("cp")
            .arg("-r")
            .arg(&from)
            .arg(package.join("nsfleet"))
            .status();
        assert!(copied.unwrap().success());
        package
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "nsfleet {args:?} as {} failed: {}{}",
            self.name,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// A file the user may read, in their home.
    fn file(&self, name: &str, text: &str) -> String {
        let p = self.home.join(name);
        std::fs::write(&p, text).unwrap();
        std::os::unix::fs::chown(&p, Some(self.uid), Some(self.gid)).unwrap();
        p.display().to_string()
    }

    /// The user's run folder, as nsfleet finds it without a session.
    fn run_dir(&self) -> PathBuf {
        PathBuf::from(format!("/tmp/nsfleet-{}", self.uid))
    }

    /// The pids of every process the user runs.
    fn processes(&self) -> Vec<i32> {
        let out = Command::new("pgrep")
            .args(["-U", &self.uid.to_string()])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Waits (up to 10 s) until the user runs no process: a killed supervisor's last
    /// ones take a moment to be reaped.
    fn wait_until_idle(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !self.processes().is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// Brings up [`hosts`]' fleet `name` of two as the user; its supervisor's pid.
    fn up_hosts(&self, name: &str) -> i32 {
        let file = self.file(&format!("{name}.toml"), &hosts(name, 2));
        self.ok(&["up", &file]);
        supervisor_pid(self, name)
    }

    /// That nothing of the user's is left: no process (a killed supervisor's last ones
    /// take a moment to be reaped), no fleet folder.
    fn assert_nothing_left(&self) {
        self.wait_until_idle();
        assert_eq!(
            self.processes(),
            Vec::<i32>::new(),
            "processes of {} left",
            self.name
        );
        let left: Vec<_> = std::fs::read_dir(self.run_dir())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(
            left.is_empty(),
            "left in {}: {left:?}",
            self.run_dir().display()
        );
    }
}

impl Drop for User {
    fn drop(&mut self) {
        let _ = Command::new("pkill")
            .args(["-9", "-U", &self.uid.to_string()])
            .status();
        self.wait_until_idle();
        let _ = std::fs::remove_dir_all(self.run_dir());
        let _one = ACCOUNTS.lock().unwrap_or_else(|e| e.into_inner());
        let _ = Command::new("userdel")
            .args(["-r", &self.name])
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

/// Whose /dev/net/tun a user's command sees, and in which cgroup it runs (see
/// [`User::command`]).
#[derive(Clone, Copy)]
enum Where<'a> {
    /// The host's /dev/net/tun (root's alone on this machine), in the test's cgroup.
    Host,
    /// A /dev/net/tun the user may open.
    UsersTun,
    /// The host's, in this cgroup (v2), moved there by root before it is the user's.
    InGroup(&'a Path),
}

/// Two hosts on a link, each running a loop: worlds of their own, wired.
fn hosts(name: &str, count: u32) -> String {
    format!(
        r#"[fleet]
name = "{name}"

[[node]]
name = "h{{i}}"
count = {count}
commands = ["while sleep 1; do :; done"]

[[link]]
a = "h1:eth0"
b = "h2:eth0"
pool = "10.77.0.0/30"
"#
    )
}

fn supervisor_pid(user: &User, fleet: &str) -> i32 {
    let status: serde_json::Value =
        serde_json::from_str(&user.ok(&["status", fleet, "--json"])).unwrap();
    status["fleets"][0]["pid"]
        .as_i64()
        .expect("a supervisor pid") as i32
}

#[test]
fn a_user_brings_up_a_wired_fleet_changes_it_and_takes_it_down() {
    let user = User::new("w", true);
    // The supervisor is the user's, root of a user namespace the user owns: their own id
    // as its root, their subordinate ones after it.
    let sup = user.up_hosts("w");
    let map = std::fs::read_to_string(format!("/proc/{sup}/uid_map")).unwrap();
    let lines: Vec<Vec<&str>> = map
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0], ["0", &user.uid.to_string(), "1"], "{map}");
    assert_eq!(lines.len(), 2, "{map}");
    assert_ne!(
        std::fs::read_link(format!("/proc/{sup}/ns/net")).unwrap(),
        std::fs::read_link("/proc/self/ns/net").unwrap(),
        "a user's fleet lives in a network namespace of its own"
    );

    let ping = ["exec", "w", "h1", "--", "ping", "-c1", "-W2", "10.77.0.2"];
    user.ok(&ping);
    assert_eq!(user.ok(&["exec", "w", "h2", "--", "id", "-u"]).trim(), "0");
    user.ok(&["link", "w", "h1:eth0", "down"]);
    assert!(
        !user.run(&ping).status.success(),
        "a pulled cable still carries"
    );
    user.ok(&["link", "w", "h1:eth0", "up"]);
    user.ok(&["impair", "w", "h1:eth0", "--rate", "10mbit"]);
    user.ok(&["node", "w", "h2", "restart"]);
    user.ok(&["exec", "w", "h1", "--", "ping", "-c1", "-W2", "10.77.0.2"]);
    let three = user.file("w3.toml", &hosts("w", 3));
    user.ok(&["apply", &three]);
    let status: serde_json::Value =
        serde_json::from_str(&user.ok(&["status", "w", "--json"])).unwrap();
    assert_eq!(status["fleets"][0]["node_count"], 3, "{status}");
    user.ok(&["exec", "w", "h3", "--", "true"]);
    user.ok(&["down", "w"]);
    user.assert_nothing_left();
}

#[test]
fn a_user_without_subordinate_ids_runs_a_fleet_as_their_id_alone() {
    let user = User::new("s", false);
    let sup = user.up_hosts("s");
    let map = std::fs::read_to_string(format!("/proc/{sup}/uid_map")).unwrap();
    assert_eq!(
        map.split_whitespace().collect::<Vec<_>>(),
        ["0", &user.uid.to_string(), "1"],
        "{map}"
    );
    user.ok(&["exec", "s", "h1", "--", "ping", "-c1", "-W2", "10.77.0.2"]);
    user.ok(&["down", "s"]);
    user.assert_nothing_left();
}

#[test]
fn a_users_killed_supervisor_leaves_only_a_folder_that_clean_removes() {
    let user = User::new("k", true);
    let sup = user.up_hosts("k");
    // SAFETY: kill(2) of the user's supervisor, which this test started.
    assert_eq!(unsafe { libc::kill(sup, libc::SIGKILL) }, 0);
    user.wait_until_idle();
    assert!(user.ok(&["status"]).contains("dead"));
    user.ok(&["clean", "k"]);
    user.assert_nothing_left();
}

#[test]
fn a_user_neither_sees_nor_takes_down_roots_fleet() {
    let env = harness::Env::new("as-user-root");
    let fleet = env.up("[fleet]\nname = \"rootsown\"\n\n[[node]]\nname = \"n{i}\"\ncount = 2\n");
    let user = User::new("r", true);
    assert!(!user.ok(&["status"]).contains("rootsown"));
    let theirs = env.run_dir.display().to_string();
    for args in [
        vec!["--run-dir", &theirs, "status"],
        vec!["--run-dir", &theirs, "down", "rootsown"],
        vec!["--run-dir", &theirs, "exec", "rootsown", "n1", "--", "true"],
    ] {
        let out = user.run(&args);
        assert!(!out.status.success(), "{args:?} as a user succeeded");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains("not uid") || said.contains("Permission denied"),
            "{args:?}: {said}"
        );
    }
    env.ok(&["status", "rootsown"]);
    drop(fleet);
    user.assert_nothing_left();
}

#[test]
fn what_needs_the_hosts_root_is_refused_at_its_line_before_anything_exists() {
    let user = User::new("b", true);
    let host_link = user.file(
        "hl.toml",
        "[fleet]\nname = \"hl\"\n\n[[node]]\nname = \"a\"\nhost_link = { iface = \"up0\", host_iface = \"nsfu-up0\" }\n",
    );
    let out = user.run(&["up", &host_link]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        said.contains("hl.toml:6:") && said.contains("a link to the host"),
        "{said}"
    );
    let limited = user.file(
        "m.toml",
        "[fleet]\nname = \"m\"\n\n[[node]]\nname = \"a\"\ncommands = [\"sleep 60\"]\nmemory = \"64M\"\n",
    );
    let out = user.run(&["up", &limited]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("m.toml:7:") && said.contains("delegated"),
        "{said}"
    );
    // Open vSwitch's userspace datapath needs /dev/net/tun, where the user may open it.
    let tun_open = Command::new("sh")
        .args(["-c", "exec 3<>/dev/net/tun"])
        .stderr(Stdio::null())
        .uid(user.uid)
        .gid(user.gid)
        .status()
        .unwrap()
        .success();
    let ovs = user.file(
        "ovs.toml",
        "[fleet]\nname = \"ovs\"\n\n[[node]]\nname = \"h{i}\"\ncount = 2\n\n[[switch]]\nname = \"s1\"\nkind = \"ovs\"\ndatapath = \"user\"\npool = \"10.80.0.0/24\"\n",
    );
    if !tun_open {
        let out = user.run(&["up", &ovs]);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && said.contains("/dev/net/tun"),
            "{said}"
        );
    }
    let plain = user.file("p.toml", &hosts("p", 2));
    // A run folder someone else made for the user (before their first fleet) is theirs.
    std::fs::create_dir(user.run_dir()).unwrap();
    std::os::unix::fs::chown(user.run_dir(), Some(65534), Some(65534)).unwrap();
    let out = user.run(&["up", &plain]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("owned by uid 65534"),
        "{said}"
    );
    std::fs::remove_dir(user.run_dir()).unwrap();
    let out = user.run(&["up", &plain, "--privileged"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("host's root"),
        "{said}"
    );
    assert!(!Path::new(&user.run_dir()).join("hl").exists());
    user.assert_nothing_left();
}

/// The first of `name`'s subordinate uids, as /etc/subuid gives it.
fn subordinate_first(name: &str) -> u32 {
    let text = std::fs::read_to_string("/etc/subuid").unwrap();
    (text.lines())
        .find_map(|l| {
            l.strip_prefix(&format!("{name}:"))?
                .split(':')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("{name} has no line in /etc/subuid"))
}

/// busybox (Debian's static one) as an image: its files root's, as most images' are, but
/// one of uid 1000's.
fn busybox_image() -> nsfleet_image::build::ImageSpec {
    use nsfleet_image::build::{Compression, Entry, ImageSpec, Layer};
    let busybox = std::fs::read("/bin/busybox").expect("busybox-static is installed");
    let mut entries = vec![
        Entry::dir("bin"),
        Entry::dir("etc"),
        Entry::Dir {
            path: "tmp".into(),
            mode: 0o1777,
        },
        Entry::file("bin/busybox", 0o755, busybox),
        Entry::file("etc/image-release", 0o644, "busy 1\n"),
        Entry::owned_file("etc/app.conf", 0o644, "the app's\n", 1000, 1000),
    ];
    for tool in ["sh", "cat", "id", "sleep", "ping", "stat"] {
        entries.push(Entry::symlink(&format!("bin/{tool}"), "busybox"));
    }
    ImageSpec {
        layers: vec![Layer {
            entries,
            compression: Compression::Gzip,
        }],
        run: nsfleet_image::RunConfig {
            cmd: ["sleep", "1000000"].map(String::from).to_vec(),
            env: vec!["PATH=/bin".into()],
            ..Default::default()
        },
        architecture: nsfleet_image::host_arch().to_string(),
    }
}

#[test]
fn a_user_loads_an_image_into_their_own_store_and_runs_it() {
    let user = User::new("i", true);
    let layout = user.home.join("busy");
    nsfleet_image::build::write_oci_layout(&layout, "1", &busybox_image()).unwrap();
    user.ok(&[
        "image",
        "load",
        &layout.display().to_string(),
        "--name",
        "busy:1",
    ]);
    // The user's own store, its files the user's (the image's root is the user's id).
    let store = user.home.join(".local/share/nsfleet/images");
    let layers: Vec<_> = std::fs::read_dir(store.join("layers"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(layers.len(), 1);
    let release = layers[0].path().join("etc/image-release");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&release).unwrap().uid(), user.uid);
    // A file of the image's uid 1000 is the user's subordinate id 999 after their first.
    let app = std::fs::metadata(layers[0].path().join("etc/app.conf")).unwrap();
    let first = subordinate_first(&user.name);
    assert_eq!(app.uid(), first + 999);
    let file = user.file(
        "img.toml",
        "[fleet]\nname = \"img\"\n\n[[node]]\nname = \"b{i}\"\ncount = 2\nimage = \"busy:1\"\n\n[[link]]\na = \"b1:eth0\"\nb = \"b2:eth0\"\npool = \"10.78.0.0/30\"\n",
    );
    user.ok(&["up", &file]);
    assert_eq!(
        user.ok(&["exec", "img", "b1", "--", "cat", "/etc/image-release"]),
        "busy 1\n"
    );
    assert_eq!(
        user.ok(&[
            "exec",
            "img",
            "b1",
            "--",
            "stat",
            "-c",
            "%u",
            "/bin/busybox"
        ])
        .trim(),
        "0"
    );
    let stat = [
        "exec",
        "img",
        "b1",
        "--",
        "stat",
        "-c",
        "%u:%g",
        "/etc/app.conf",
    ];
    assert_eq!(user.ok(&stat).trim(), "1000:1000");
    user.ok(&["exec", "img", "b1", "--", "ping", "-c1", "-W2", "10.78.0.2"]);
    user.ok(&["down", "img"]);
    user.ok(&["image", "rm", "busy:1"]);
    user.assert_nothing_left();
}

#[test]
fn a_user_deploys_a_containerlab_file_whose_management_network_stays_in_the_fleet() {
    let user = User::new("c", true);
    let file = user.file(
        "u.clab.yml",
        "name: ulab\ntopology:\n  nodes:\n    a: {kind: linux, image: alpine:3}\n    b: {kind: linux, image: alpine:3}\n  links:\n    - endpoints: [\"a:eth1\", \"b:eth1\"]\n",
    );
    user.ok(&["deploy", "-t", &file, "--host-software"]);
    assert!(user.ok(&["inspect", "-t", &file]).contains("172.20.20.3"));
    // Each other over the management network, and its gateway: the fleet's own end of it.
    user.ok(&[
        "exec",
        "ulab",
        "a",
        "--",
        "ping",
        "-c1",
        "-W2",
        "172.20.20.3",
    ]);
    user.ok(&[
        "exec",
        "ulab",
        "a",
        "--",
        "ping",
        "-c1",
        "-W2",
        "172.20.20.1",
    ]);
    // The network's host end is in the fleet's namespace, and no such name in the host's.
    let sup = supervisor_pid(&user, "ulab").to_string();
    let ip = |netns: &[&str]| -> String {
        let out = Command::new("nsenter")
            .args(netns)
            .args(["ip", "-o", "link", "show"])
            .output();
        String::from_utf8_lossy(&out.unwrap().stdout).into_owned()
    };
    let fleets = ip(&["-t", &sup, "-n"]);
    let end = (fleets.split_whitespace())
        .find(|w| w.starts_with("clab-"))
        .unwrap_or_else(|| panic!("no management end in the fleet's namespace: {fleets}"))
        .trim_end_matches(':')
        .split('@')
        .next()
        .unwrap()
        .to_string();
    let hosts = Command::new("ip")
        .args(["link", "show", &end])
        .output()
        .unwrap();
    assert!(
        !hosts.status.success(),
        "{end} is in the host's namespace too"
    );
    user.ok(&["destroy", "-t", &file]);
    user.assert_nothing_left();
}

#[test]
fn a_users_published_port_is_forwarded_from_the_hosts_and_goes_with_the_lab() {
    let user = User::new("p", true);
    let port = std::net::TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let lab = |ports: &str| {
        format!("name: uport\nmgmt: {{ipv4-subnet: 172.31.79.0/24}}\ntopology:\n  nodes:\n    web:\n      kind: linux\n      ports: [\"{ports}\"]\n      exec: [\"python3 -m http.server 80 --bind 172.31.79.2 --directory /etc/nsfleet-no-such\"]\n")
    };
    // Below the host's floor for users: refused at its line, before anything exists.
    let low = user.file("low.clab.yml", &lab("81:80"));
    let out = user.run(&["deploy", "--host-software", "-t", &low]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("low.clab.yml:7") && said.contains("ip_unprivileged_port_start"),
        "{said}"
    );
    let file = user.file("p.clab.yml", &lab(&format!("{port}:80")));
    user.ok(&["deploy", "--host-software", "-t", &file]);
    // python's server answers 404 for a folder it cannot list: the node answered, through
    // the user's forwarder on the host's port and the fleet's own rules.
    let reply = harness::http_get_until_ok(port, std::time::Duration::from_secs(20));
    assert!(reply.starts_with("HTTP/1.0 404"), "{reply}");
    user.ok(&["destroy", "-t", &file]);
    user.assert_nothing_left();
    std::net::TcpListener::bind(("0.0.0.0", port)).expect("the host's port is free again");
}

#[test]
fn the_python_api_runs_a_users_fleet() {
    let user = User::new("y", true);
    let package = user.python_package();
    let script = r#"
import nsfleet
topology = {
    "fleet": {"name": "py"},
    "node": [{"name": "h{i}", "count": 2, "commands": ["while sleep 1; do :; done"]}],
    "link": [{"a": "h1:eth0", "b": "h2:eth0", "pool": "10.79.0.0/30"}],
}
with nsfleet.Fleet.from_dict(topology) as fleet:
    fleet.node("h1").cmd("ping", "-c1", "-W2", "10.79.0.2")
    fleet.link("h1:eth0").down()
    fleet.link("h1:eth0").up()
    print(len(fleet.status().nodes))
"#;
    let out = (user.command(Path::new("python3"), Where::Host))
        .args(["-c", script])
        .env("PYTHONPATH", &package)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "2", "{said}");
    user.assert_nothing_left();
}

#[test]
fn an_image_of_other_owners_is_refused_to_a_user_without_subordinate_ids_saying_what_to_add() {
    let user = User::new("o", false);
    let layout = user.home.join("busy");
    nsfleet_image::build::write_oci_layout(&layout, "1", &busybox_image()).unwrap();
    let out = user.run(&[
        "image",
        "load",
        &layout.display().to_string(),
        "--name",
        "busy:1",
    ]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("uid 1000") && said.contains("usermod --add-subuids"),
        "{said}"
    );
    user.assert_nothing_left();
}

/// A Mininet script of Mininet's defaults: an Open vSwitch switch, driven by
/// ovs-testcontroller, which Mininet starts on the host.
const MININET_SCRIPT: &str = r#"
from mininet.net import Mininet
from mininet.topo import SingleSwitchTopo
net = Mininet(topo=SingleSwitchTopo(2))
net.start()
print("dropped", net.pingAll())
net.stop()
"#;

#[test]
fn a_user_runs_a_mininet_script_on_open_vswitch_driven_by_a_controller_on_the_host() {
    let user = User::new("m", true);
    let package = user.python_package();
    let script = user.file("two.py", MININET_SCRIPT);
    let mn = |place| {
        let out = (user.command(&user.bin, place))
            .args(["mn", &script])
            .env("PYTHONPATH", &package)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
        (out.status.success(), said.into_owned())
    };
    // The switch's controller is the user's process in the host's namespace, which the
    // fleet's switch reaches through the fleet's forwarder there.
    let (ok, said) = mn(Where::UsersTun);
    assert!(ok && said.contains("dropped 0.0"), "{said}");
    user.assert_nothing_left();
    // Where the user may not open /dev/net/tun, refused before anything exists.
    let (ok, said) = mn(Where::Host);
    assert!(!ok, "{said}");
    assert!(said.contains("/dev/net/tun"), "{said}");
    user.assert_nothing_left();
}

/// The host's default gateway (`ip route`'s), which pasta makes the host's loopback as
/// seen from the fleet.
fn default_gateway() -> String {
    let out = Command::new("ip")
        .args(["-4", "route", "show", "default"])
        .output()
        .unwrap();
    let routes = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut words = routes.split_whitespace().skip_while(|w| *w != "via");
    (words.nth(1).map(str::to_string))
        .unwrap_or_else(|| panic!("pasta needs the host to have a default route: {routes:?}"))
}

#[test]
fn a_users_management_network_reaches_the_world_through_pasta() {
    let user = User::new("t", true);
    // The world: a server on the host's loopback, which pasta gives the fleet at the
    // host's gateway's address.
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut conn in server.incoming().flatten() {
            let _ = conn.read(&mut [0u8; 1024]);
            let _ = conn.write_all(b"HTTP/1.0 200 OK\r\n\r\nfrom the host\n");
        }
    });
    let file = user.file(
        "o.clab.yml",
        "name: olab\ntopology:\n  nodes:\n    a: {kind: linux, image: alpine:3}\n",
    );
    let out = user.run_where(Where::UsersTun, &["deploy", "-t", &file, "--host-software"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(!said.contains("warning"), "{said}");
    let url = format!("http://{}:{port}/", default_gateway());
    let got = user.ok(&["exec", "olab", "a", "--", "curl", "-sS", "-m5", &url]);
    assert_eq!(got.trim(), "from the host");
    user.ok(&["destroy", "-t", &file]);
    user.assert_nothing_left();
    // Where the user may not open /dev/net/tun, the lab comes up without the world, and
    // says why.
    let out = user.run(&["deploy", "-t", &file, "--host-software"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("pasta needs /dev/net/tun"), "{said}");
    user.ok(&["destroy", "-t", &file]);
    user.assert_nothing_left();
}

#[test]
fn a_users_node_gets_a_host_device_the_user_may_open_and_is_refused_one_at_its_line() {
    let user = User::new("d", true);
    let file = user.file(
        "dev.toml",
        "[fleet]\nname = \"dev\"\n\n[[node]]\nname = \"a\"\ncommands = [\"sleep 60\"]\ndevices = [\"/dev/net/tun\"]\n",
    );
    // The host's file, bound: the user's own here (see `User::command`).
    let out = user.run_where(Where::UsersTun, &["up", &file]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    user.ok(&["exec", "dev", "a", "--", "test", "-c", "/dev/net/tun"]);
    user.ok(&["down", "dev"]);
    user.assert_nothing_left();
    // Where the user may not open it (root's alone, as on this machine), refused at its
    // line before anything exists.
    let out = user.run(&["up", &file]);
    let said = String::from_utf8_lossy(&out.stderr);
    let tun_open = said.is_empty() && out.status.success();
    if !tun_open {
        assert!(
            said.contains("dev.toml:7:") && said.contains("may not open it for writing"),
            "{said}"
        );
    } else {
        user.ok(&["down", "dev"]);
    }
    user.assert_nothing_left();
}

#[test]
fn a_user_serves_their_own_fleets_and_a_shell_in_one_over_http() {
    use harness::serve::{closed, type_and_see, Server};
    use std::os::unix::fs::MetadataExt;
    let env = harness::Env::new("as-user-serve");
    let roots = env.up("[fleet]\nname = \"rootsown\"\n\n[[node]]\nname = \"n{i}\"\ncount = 1\n");
    let user = User::new("v", true);
    let mut serve = user.command(&user.bin, Where::Host);
    serve.args(["serve", "--json"]);
    let s = Server::spawn(serve, |port| format!("http://127.0.0.1:{port}"));
    assert!(
        s.folder.starts_with(user.run_dir()),
        "{}",
        s.folder.display()
    );

    // A fleet brought up over HTTP is the user's, as `up` makes it.
    let up = serde_json::json!({ "topology": hosts("v", 2), "file": "v.toml" });
    s.expect(201, "POST", "/api/v1/fleets", &up.to_string());
    let fleets = s.expect(200, "GET", "/api/v1/fleets", "");
    let names: Vec<&str> = (fleets["fleets"].as_array().unwrap().iter())
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["v"], "{fleets}");
    let sup = supervisor_pid(&user, "v");
    let owner = |pid: i32| std::fs::metadata(format!("/proc/{pid}")).unwrap().uid();
    assert_eq!(owner(sup), user.uid);

    // A shell in a node: root of the fleet's user namespace, the user on the host.
    let mut t = s.terminal("v", "h1", None).unwrap();
    let ping = "id -u; ping -c1 -W2 10.77.0.2 >/dev/null 2>&1 && echo reached-$((6*7))\r";
    let seen = type_and_see(&mut t, ping, "reached-42");
    assert!(seen.contains("0\r\nreached-42"), "{seen}");
    let shells = s.children();
    assert_eq!(shells.len(), 1, "{shells:?}");
    assert_eq!(owner(shells[0].0), user.uid, "{shells:?}");
    t.send(tungstenite::Message::binary(b"exit 4\r".to_vec()))
        .unwrap();
    assert_eq!(closed(&mut t), "the shell in h1 ended (exit status 4)");
    s.wait_childless("the shell ends with its terminal");

    s.expect(200, "DELETE", "/api/v1/fleets/v", "");
    drop(s);

    // Root's fleets are not the user's to serve: a server of root's run folder is
    // refused before it answers anything (`timeout`, should it serve).
    let theirs = env.run_dir.display().to_string();
    let bin = user.bin.display().to_string();
    let out = (user.command(Path::new("timeout"), Where::Host))
        .args(["20", &bin, "--run-dir", &theirs, "serve", "--json"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && (said.contains("not uid") || said.contains("Permission denied")),
        "{out:?}"
    );
    user.assert_nothing_left();
    env.ok(&["status", "rootsown"]);
    drop(roots);
}

#[test]
fn a_user_waits_on_watches_measures_draws_captures_and_loads_their_fleet() {
    let user = User::new("e", true);
    // Commands that settle, for `wait started` (a loop never does).
    let settled = hosts("e", 2).replace("while sleep 1; do :; done", "sleep 600");
    user.ok(&["up", &user.file("e.toml", &settled)]);
    let spawn = |args: &[&str]| {
        (user.command(&user.bin, Where::Host).args(args))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let events = spawn(&["events", "e", "--json"]);
    user.ok(&["wait", "e", "started", "--timeout", "10"]);
    let stats = user.ok(&["stats", "e", "--json"]);
    serde_json::from_str::<serde_json::Value>(&stats).expect("stats --json is JSON");
    assert!(stats.contains("h1") && stats.contains("h2"), "{stats}");
    let dot = user.ok(&["graph", "e", "--dot"]);
    assert!(dot.contains("h1") && dot.contains("h2"), "{dot}");
    let sent = user.ok(&[
        "gen",
        "e",
        "--dev",
        "h1:eth0",
        "--dst",
        "10.77.0.2",
        "--count",
        "100",
    ]);
    assert!(sent.contains("100"), "{sent}");
    // One ICMP packet, captured in h2 while h1 pings it (until the capture has started).
    let capture = spawn(&["capture", "e", "h2:eth0", "-c", "1", "icmp"]);
    let ping = ["exec", "e", "h1", "--", "ping", "-c1", "-W1", "10.77.0.2"];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut capture = capture;
    while capture.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
        user.run(&ping);
    }
    let captured = capture.wait_with_output().unwrap();
    let line = String::from_utf8_lossy(&captured.stdout);
    assert!(
        captured.status.success() && line.contains("ICMP"),
        "{line}{}",
        String::from_utf8_lossy(&captured.stderr)
    );
    user.ok(&["node", "e", "h2", "restart"]);
    user.ok(&["down", "e"]);
    // The events of the fleet's life, until it went.
    let told = events.wait_with_output().unwrap();
    let told = String::from_utf8_lossy(&told.stdout);
    assert!(told.contains("h2"), "{told}");
    user.assert_nothing_left();
}

#[test]
fn a_user_with_subordinate_ids_and_no_newuidmap_is_told_what_to_install() {
    let user = User::new("n", true);
    let plain = user.file("n.toml", &hosts("n", 2));
    // No newuidmap on PATH, as on a machine without Debian's uidmap.
    let out = (user.command(&user.bin, Where::Host))
        .args(["up", &plain])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("newuidmap is not installed") && said.contains("apt-get install uidmap"),
        "{said}"
    );
    user.assert_nothing_left();
}

#[test]
fn root_of_a_user_namespace_not_the_hosts_runs_fleets_as_a_user_does() {
    // Root in a user namespace of its own (`unshare -Ur`, a rootless container's root):
    // the host's namespaces, cgroups and /run are not its own.
    let folder = PathBuf::from(format!("/tmp/nsfru-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let write = |name: &str, text: &str| {
        let p = folder.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let fleet = write("ru.toml", &hosts("ru", 2));
    let limited = write(
        "lim.toml",
        "[fleet]\nname = \"lim\"\n\n[[node]]\nname = \"a\"\ncommands = [\"sleep 60\"]\nmemory = \"64M\"\n",
    );
    let run_dir = Path::new("/tmp/nsfleet-0");
    let had_run_dir = run_dir.exists();
    let bin = env!("CARGO_BIN_EXE_nsfleet");
    let script = format!(
        "{bin} up {fleet} && {bin} exec ru h1 -- ping -c1 -W2 10.77.0.2 && {bin} down ru && ! {bin} up {limited}"
    );
    let out = Command::new("unshare")
        .args(["-Ur", "sh", "-c", &script])
        .env_remove("NSFLEET_RUN_DIR")
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    let left: Vec<_> = std::fs::read_dir(run_dir).unwrap().flatten().collect();
    if !had_run_dir {
        let _ = std::fs::remove_dir(run_dir);
    }
    let _ = std::fs::remove_dir_all(&folder);
    assert!(out.status.success(), "{said}");
    // Its limits are refused at their line (no cgroup would hold them), and its fleets
    // live in a run folder of its own, not the host's root's /run/nsfleet.
    assert!(
        said.contains("lim.toml:7:") && said.contains("delegated"),
        "{said}"
    );
    assert!(left.is_empty(), "left in /tmp/nsfleet-0: {left:?}");
}

/// A cgroup v2 group handed to a user as systemd's `Delegate=yes` hands one (the folder,
/// `cgroup.procs`, `cgroup.subtree_control` and `cgroup.threads` theirs), removed with
/// every group below it when dropped.
struct Delegated {
    path: PathBuf,
}

impl Delegated {
    /// A group of the test's own at the top of the v2 hierarchy, handed to `user`.
    fn to(user: &User) -> Delegated {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let mount = (mountinfo.lines())
            .find(|l| l.contains(" - cgroup2 ") && l.split(' ').nth(3) == Some("/"))
            .and_then(|l| l.split(' ').nth(4))
            .expect("a cgroup v2 hierarchy is mounted");
        let path = Path::new(mount).join(format!("nsfleet-test-{}", user.name));
        std::fs::create_dir(&path).unwrap();
        for f in [
            "",
            "cgroup.procs",
            "cgroup.subtree_control",
            "cgroup.threads",
        ] {
            std::os::unix::fs::chown(path.join(f), Some(user.uid), Some(user.gid)).unwrap();
        }
        Delegated { path }
    }
}

impl Drop for Delegated {
    fn drop(&mut self) {
        // Whatever still runs in it (a failed test's fleet) first: the user is removed
        // after this guard.
        let _ = std::fs::write(self.path.join("cgroup.kill"), "1");
        // Deepest first; a group whose last task is being reaped is tried again.
        let out = Command::new("find")
            .arg(&self.path)
            .args(["-depth", "-type", "d"])
            .output()
            .unwrap();
        for dir in String::from_utf8_lossy(&out.stdout).lines() {
            for _ in 0..100 {
                if std::fs::remove_dir(dir).is_ok() || !Path::new(dir).exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
}

/// Where a cgroup v2 group is delegated to the user, their fleet's groups are made below
/// it: each node in its own (its processes there, `exec` joining it from within the
/// subtree and refused from outside it with why), and a `kill -9` of the supervisor
/// leaves groups that `clean` removes. This machine's v2 hierarchy has no controllers
/// (they are v1's): a limit is refused at its line, saying so.
#[test]
fn a_users_fleet_makes_its_groups_in_the_cgroup_v2_group_delegated_to_them() {
    let user = User::new("dg", false);
    let group = Delegated::to(&user);
    let inside = Where::InGroup(&group.path);
    let ok = |args: &[&str]| {
        let out = user.run_where(inside, args);
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "nsfleet {args:?}: {said}");
        String::from_utf8(out.stdout).unwrap()
    };
    let v1_pids = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.contains(" - cgroup ") && l.ends_with(",pids"));
    if v1_pids {
        let limited = user.file(
            "lim.toml",
            "[fleet]\nname = \"lim\"\n[[node]]\nname = \"a\"\npids = 50\n",
        );
        let out = user.run_where(inside, &["up", &limited]);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{said}");
        assert!(
            said.contains("lim.toml:5:8: `pids` limits a node through a cgroup"),
            "{said}"
        );
        assert!(said.contains("on a cgroup v1 hierarchy"), "{said}");
        assert!(
            !group.path.join("nsfleet").exists(),
            "a refused fleet made a group"
        );
    }

    let file = user.file("dg.toml", &hosts("dg", 2));
    ok(&["up", &file]);
    let status: serde_json::Value = serde_json::from_str(&ok(&["status", "dg", "--json"])).unwrap();
    let sup = status["fleets"][0]["pid"].as_i64().unwrap();
    let fleet = group.path.join(format!("nsfleet/dg.{sup}"));
    for node in ["h1", "h2"] {
        let procs = std::fs::read_to_string(fleet.join(node).join("cgroup.procs"));
        assert!(
            !procs.unwrap_or_default().trim().is_empty(),
            "{node}'s group holds its processes"
        );
    }
    // In the node's cgroup namespace, whose root is its group (v1's lines beside it).
    let seen = ok(&["exec", "dg", "h1", "--", "cat", "/proc/self/cgroup"]);
    assert!(seen.lines().any(|l| l == "0::/"), "{seen}");
    let outside = user.run(&["exec", "dg", "h1", "--", "true"]);
    let said = String::from_utf8_lossy(&outside.stderr);
    assert!(
        !outside.status.success(),
        "exec joined from outside: {said}"
    );
    assert!(said.contains("subtree delegated to them"), "{said}");

    // SAFETY: kill(2) of the user's supervisor, which this test started.
    assert_eq!(unsafe { libc::kill(sup as i32, libc::SIGKILL) }, 0);
    user.wait_until_idle();
    let cleaned = ok(&["clean", "dg"]);
    assert!(
        cleaned.contains(&format!("removed the cgroup {}", fleet.display())),
        "{cleaned}"
    );
    assert!(
        !group.path.join("nsfleet").exists(),
        "nsfleet's group is left"
    );
    user.assert_nothing_left();
}

#[test]
fn a_user_runs_a_scenario_on_their_fleet_and_it_puts_back_what_it_changed() {
    let user = User::new("sc", true);
    user.up_hosts("sc");
    let scenario = user.file(
        "story.toml",
        r#"[scenario]
name = "a user's story"

[[step]]
expect = "ping h1 10.77.0.2"
within = 5

[[step]]
do = "link h1:eth0 down"

[[step]]
expect = "no route h1 10.77.0.0/30"
within = 5

[[step]]
do = "node h2 stop"

[[step]]
expect = "exec h1 -- ip -o link show eth0"
output = "state DOWN"
"#,
    );
    let out = user.run(&["scenario", "run", &scenario, "--fleet", "sc", "--json"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&said).unwrap();
    assert_eq!(v["ok"], true, "{v}");
    let restored = v["restored"].to_string();
    assert!(
        restored.contains("node h2 started") && restored.contains("cable h1:eth0 plugged back"),
        "{v}"
    );
    user.ok(&["exec", "sc", "h1", "--", "ping", "-c1", "-W2", "10.77.0.2"]);
    let status: serde_json::Value =
        serde_json::from_str(&user.ok(&["status", "sc", "--json"])).unwrap();
    assert!(
        status.to_string().contains("running"),
        "h2 runs again: {status}"
    );
    user.ok(&["down", "sc"]);
    user.assert_nothing_left();
}

//! Running the real `nsfleet` binary as root against the real kernel. Every test gets its
//! own run directory, so tests in parallel never see each other's fleets; every fleet is
//! ended by its guard (down, else kill -9 and clean) even when the test panics.

#![allow(dead_code)]

pub mod busy;
pub mod serve;

use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub struct Env {
    pub run_dir: PathBuf,
    pub files: PathBuf,
    /// Variables every nsfleet of the test gets besides the run folder's (a cluster's
    /// KUBECONFIG, once the cluster is up).
    vars: std::sync::Mutex<Vec<(String, String)>>,
}

impl Env {
    pub fn new(test: &str) -> Self {
        let base = std::env::temp_dir().join(format!("nsfleet-cli-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let env = Env {
            run_dir: base.join("run"),
            files: base.join("files"),
            vars: Default::default(),
        };
        std::fs::create_dir_all(&env.files).unwrap();
        env
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_nsfleet"));
        c.args(args)
            .env("NSFLEET_RUN_DIR", &self.run_dir)
            .env("NSFLEET_IMAGES", self.images())
            .envs(self.vars.lock().unwrap().iter().cloned());
        // With SIGINT's default action: a suite started where it is ignored (a background
        // job of a shell without job control) must still see what Ctrl-C does to nsfleet.
        // SAFETY: signal(2) between fork and exec, async-signal-safe; it touches no
        // memory of the parent.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut c, || {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            });
        }
        c
    }

    /// Gives every nsfleet the test runs from now on `key=value`.
    pub fn set_var(&self, key: &str, value: &str) {
        self.vars.lock().unwrap().push((key.into(), value.into()));
    }

    /// The test's own image store (empty until a test loads an image).
    pub fn images(&self) -> PathBuf {
        self.run_dir.with_file_name("images")
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args)
            .stdin(Stdio::null())
            .output()
            .expect("nsfleet runs")
    }

    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "nsfleet {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Starts nsfleet in the background, its standard streams closed.
    pub fn spawn(&self, args: &[&str]) -> std::process::Child {
        self.cmd(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nsfleet runs")
    }

    pub fn run_with_stdin(&self, args: &[&str], input: &[u8]) -> Output {
        let mut child = self
            .cmd(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        child.wait_with_output().unwrap()
    }

    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.files.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// Brings a fleet up from `topology` and returns its guard.
    pub fn up(&self, topology: &str) -> Fleet<'_> {
        let name = topology
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("name = \"")
                    .and_then(|r| r.strip_suffix('"'))
            })
            .unwrap()
            .to_string();
        let file = self.file(&format!("{name}.toml"), topology);
        let guard = Fleet { env: self, name };
        self.ok(&["up", file.to_str().unwrap()]);
        guard
    }

    /// Checks that `args` (naming `file`) fails with one error at `file:line` that says
    /// `expected`, as text and as JSON (see [`Env::refused_in_place`]), and creates
    /// nothing; `tag` names the case.
    pub fn refused(&self, tag: &str, args: &[&str], file: &Path, line: usize, expected: &str) {
        let out = self.run(args);
        if out.status.success() {
            // Accepted after all: take down what it made before failing the test.
            for name in self.fleet_dirs() {
                self.run(&["down", &name]);
            }
        }
        says_in_place(tag, &out, file, line, expected);
        assert!(self.fleet_dirs().is_empty(), "{tag}: nothing created");
        self.says_in_place_as_json(tag, args, file, line, expected);
        assert!(
            self.fleet_dirs().is_empty(),
            "{tag} --json: nothing created"
        );
    }

    /// Checks that `args` fails with one error at `file:line:COLUMN:` that says
    /// `expected`; and with `--json`, with one JSON object on stderr whose file, line and
    /// column are fields, not text to parse.
    pub fn refused_in_place(
        &self,
        tag: &str,
        args: &[&str],
        file: &Path,
        line: usize,
        expected: &str,
    ) {
        says_in_place(tag, &self.run(args), file, line, expected);
        self.says_in_place_as_json(tag, args, file, line, expected);
    }

    fn says_in_place_as_json(
        &self,
        tag: &str,
        args: &[&str],
        file: &Path,
        line: usize,
        expected: &str,
    ) {
        let out = self.run(&[args, &["--json"]].concat());
        assert_eq!(out.status.code(), Some(1), "{tag} --json");
        let err = String::from_utf8_lossy(&out.stderr);
        let e: serde_json::Value = serde_json::from_str(err.trim())
            .unwrap_or_else(|x| panic!("{tag} --json: one JSON object, not {err:?}: {x}"));
        let e = &e["error"];
        assert_eq!(e["file"], file.display().to_string(), "{tag}: {e}");
        assert_eq!(e["line"], line as u64, "{tag}: {e}");
        assert!(e["column"].as_u64().is_some_and(|c| c >= 1), "{tag}: {e}");
        let message = e["message"].as_str().unwrap_or_default();
        assert!(message.contains(expected), "{tag}: {expected:?} in {e}");
    }

    /// Runs `args`, which must fail with exit status 1 and an error that says `expected`;
    /// returns what it said.
    pub fn fails(&self, args: &[&str], expected: &str) -> String {
        let out = self.run(args);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains(expected),
            "{args:?}: expected {expected:?} in {err}"
        );
        err
    }

    pub fn status(&self, name: &str) -> Value {
        let v: Value = serde_json::from_str(&self.ok(&["status", name, "--json"])).unwrap();
        v["fleets"][0].clone()
    }

    pub fn fleet_dirs(&self) -> Vec<String> {
        std::fs::read_dir(&self.run_dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.run_dir.parent().unwrap());
    }
}

pub struct Fleet<'a> {
    pub env: &'a Env,
    pub name: String,
}

impl Fleet<'_> {
    pub fn pid(&self) -> i32 {
        self.env.status(&self.name)["pid"].as_i64().unwrap() as i32
    }

    /// Every node's namespace inode and every process pid, as status reports them.
    pub fn footprint(&self) -> (Vec<u64>, Vec<i32>) {
        let s = self.env.status(&self.name);
        let nodes = s["nodes"].as_array().unwrap();
        let inodes = nodes
            .iter()
            .map(|n| n["netns_inode"].as_u64().unwrap())
            .collect();
        let pids = nodes
            .iter()
            .flat_map(|n| {
                n["processes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p["pid"].as_i64().unwrap() as i32)
            })
            .collect();
        (inodes, pids)
    }
}

impl Drop for Fleet<'_> {
    fn drop(&mut self) {
        if self.env.run(&["down", &self.name]).status.success() {
            return;
        }
        // The supervisor did not answer: end it the hard way; its namespaces and
        // processes go with it, and clean removes its folder.
        if let Ok(text) =
            std::fs::read_to_string(self.env.run_dir.join(&self.name).join("fleet.json"))
        {
            if let Ok(v) = serde_json::from_str::<Value>(&text) {
                if let Some(pid) = v["supervisor"]["pid"].as_i64() {
                    signal(pid as i32, libc::SIGKILL);
                    wait_gone(pid as i32);
                }
            }
        }
        let _ = self.env.run(&["clean", &self.name]);
    }
}

/// Runs the bash `script` in a mount namespace of its own (`unshare -m`), with NSFLEET
/// (this nsfleet) and `vars` in its environment; it must succeed. What it printed.
pub fn in_own_mount_namespace(script: &str, vars: &[(&str, &Path)]) -> String {
    let out = Command::new("unshare")
        .args(["-m", "bash", "-c", script])
        .env("NSFLEET", env!("CARGO_BIN_EXE_nsfleet"))
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The children of `parent` (a host pid) named `comm`, by their host pids.
pub fn children_named(parent: i32, comm: &str) -> Vec<i32> {
    (children_of(parent).into_iter())
        .filter(|(_, name)| name == comm)
        .map(|(pid, _)| pid)
        .collect()
}

/// The children of `parent` (a host pid), by their host pids, with their names.
pub fn children_of(parent: i32) -> Vec<(i32, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<i32>().ok());
        let Some((_, name)) = head.split_once('(') else {
            continue;
        };
        if ppid == Some(parent) {
            out.push((pid, name.to_string()));
        }
    }
    out
}

/// The inits of a fleet's nodes that run software (host pids): its supervisor's children
/// named `nsfleet-node`.
pub fn inits_of(supervisor: i32) -> Vec<i32> {
    children_named(supervisor, "nsfleet-node")
}

/// The mount namespaces of `pids` (their nsfs inodes).
pub fn mount_namespaces(pids: &[i32]) -> Vec<u64> {
    use std::os::unix::fs::MetadataExt;
    (pids.iter())
        .filter_map(|p| std::fs::metadata(format!("/proc/{p}/ns/mnt")).ok())
        .map(|m| m.ino())
        .collect()
}

/// How many of the mount namespaces `spaces` some process is still in.
pub fn mount_namespaces_in_use(spaces: &[u64]) -> usize {
    let pids: Vec<i32> = (std::fs::read_dir("/proc").unwrap().flatten())
        .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
        .collect();
    let live = mount_namespaces(&pids);
    spaces.iter().filter(|s| live.contains(s)).count()
}

pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}

pub fn wait_gone(pid: i32) {
    for _ in 0..200 {
        if !alive(pid) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    panic!("pid {pid} is still alive");
}

/// Polls `probe` every 25 ms until it returns `Ok`, and returns what it returned; after
/// `timeout`, fails the test with `what` and the last state `probe` saw (its `Err`). For
/// what the kernel or a supervisor does asynchronously: a deadline, never a fixed sleep.
pub fn wait_until<T, S: std::fmt::Debug>(
    what: &str,
    timeout: std::time::Duration,
    mut probe: impl FnMut() -> Result<T, S>,
) -> T {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match probe() {
            Ok(v) => return v,
            Err(last) if std::time::Instant::now() >= deadline => {
                panic!("waited {timeout:?} for {what}; last seen: {last:?}")
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(25)),
        }
    }
}

/// `nsfleet events FLEET --json`, subscribed (its first line said so: nothing is missed
/// from there on), its events read as they come on a thread of their own so that waiting
/// for one has a deadline. Killed by its guard if the fleet outlives the test's interest.
pub struct Events {
    watcher: std::process::Child,
    rx: std::sync::mpsc::Receiver<Value>,
    reader: Option<std::thread::JoinHandle<()>>,
    /// Every event received so far, in order.
    pub seen: Vec<Value>,
    /// Where the next `wait_for` looks from: past the event the last one found.
    cursor: usize,
}

impl Env {
    pub fn events(&self, fleet: &str) -> Events {
        use std::io::{BufRead, BufReader};
        let mut watcher = self
            .cmd(&["events", fleet, "--json"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = BufReader::new(watcher.stdout.take().unwrap()).lines();
        let (tx, rx) = std::sync::mpsc::channel::<Value>();
        let reader = std::thread::spawn(move || {
            for l in lines {
                let event = serde_json::from_str(&l.unwrap()).unwrap();
                if tx.send(event).is_err() {
                    break;
                }
            }
        });
        let first = rx.recv_timeout(std::time::Duration::from_secs(30));
        let Ok(first) = first else {
            let _ = watcher.kill();
            panic!("nsfleet events {fleet}: no first line within 30 s");
        };
        assert_eq!(first["event"], "watching", "nothing is missed from here on");
        Events {
            watcher,
            rx,
            reader: Some(reader),
            seen: Vec::new(),
            cursor: 0,
        }
    }
}

impl Events {
    /// Waits until an event after the last one waited for matches `wanted` (events in
    /// the order they happen); returns it.
    pub fn wait_for(
        &mut self,
        what: &str,
        timeout: std::time::Duration,
        wanted: impl Fn(&Value) -> bool,
    ) -> Value {
        let from = self.cursor;
        let at = wait_until(what, timeout, || {
            self.seen.extend(self.rx.try_iter());
            (self.seen[from..].iter())
                .position(&wanted)
                .map(|i| from + i)
                .ok_or_else(|| self.seen.clone())
        });
        self.cursor = at + 1;
        self.seen[at].clone()
    }

    /// Waits for the stream to end (the fleet went down), with every event it carried.
    pub fn finish(mut self) -> Vec<Value> {
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        self.seen.extend(self.rx.try_iter());
        assert!(self.watcher.wait().unwrap().success());
        std::mem::take(&mut self.seen)
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        let _ = self.watcher.kill();
        let _ = self.watcher.wait();
    }
}

/// Sends `sig` to process `pid` (a process the test started, or a fleet's supervisor it
/// reads from the fleet's record); a process already gone is no error here.
pub fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    unsafe { libc::kill(pid, sig) };
}

/// The network namespace inode of process `pid`, if it still exists.
pub fn netns_inode_of(pid: u32) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}/ns/net"))
        .ok()
        .map(|m| m.ino())
}

/// Weak references (nsfs handles) to every network namespace a process holds open, but
/// our own. Unlike inode numbers, which parallel tests' new namespaces reuse at once, a
/// handle names one namespace only.
pub fn netns_held_by(pid: i32) -> Vec<nsfleet::sys::NsHandle> {
    let own = std::fs::read_link("/proc/self/ns/net").unwrap();
    let mut v = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
    {
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        if !target.to_string_lossy().starts_with("net:[") || target == own {
            continue;
        }
        if let Ok(f) = std::fs::File::open(e.path()) {
            use std::os::fd::AsFd;
            v.push(nsfleet::sys::ns_handle(f.as_fd()).expect("nsfs handles (Linux 6.18+)"));
        }
    }
    v
}

/// Waits until the kernel has freed every namespace of `handles` (a dead owner's go a
/// moment after it).
pub fn wait_freed(handles: &[nsfleet::sys::NsHandle]) {
    wait_until(
        "every namespace freed",
        std::time::Duration::from_secs(20),
        || match still_alive(handles) {
            0 => Ok(()),
            n => Err(n),
        },
    );
}

/// How many of these namespaces still exist (anything at all still holds them).
pub fn still_alive(handles: &[nsfleet::sys::NsHandle]) -> usize {
    use std::os::fd::AsFd;
    let nsfs = std::fs::File::open("/proc/self/ns/net").unwrap();
    handles
        .iter()
        .filter(|h| nsfleet::sys::reopen_ns(nsfs.as_fd(), h).unwrap().is_some())
        .count()
}

pub fn exists(p: &Path) -> bool {
    p.exists()
}

/// How many network namespaces the processes of this machine are in: enough to spot a
/// leak (a namespace no process is in and nothing holds is already freed).
pub fn netns_count() -> usize {
    let mut set = std::collections::HashSet::new();
    for p in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(l) = std::fs::read_link(p.path().join("ns/net")) {
            set.insert(l);
        }
    }
    set.len()
}

/// Checks that `out` is a failure with one line of error, at `file:line:COLUMN:`, that
/// says `expected`.
fn says_in_place(tag: &str, out: &Output, file: &Path, line: usize, expected: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{tag}: {err}");
    let at = format!("{}:{line}:", file.display());
    let column = (err.split(&at).nth(1)).and_then(|r| r.split(':').next()?.parse::<u32>().ok());
    assert!(column.is_some(), "{tag}: expected {at}COLUMN: in {err}");
    assert!(
        err.contains(expected),
        "{tag}: expected {expected:?} in {err}"
    );
    // One line of error; a progress line ("applying ...") may come before it.
    let said = err.trim().lines().filter(|l| !l.ends_with("...")).count();
    assert_eq!(said, 1, "{tag}: one line: {err}");
}

/// An HTTP GET of `/` from the host to 127.0.0.1:`port`, retried until it answers.
pub fn http_get_until_ok(port: u16, within: std::time::Duration) -> String {
    use std::io::{Read, Write};
    let deadline = std::time::Instant::now() + within;
    loop {
        let got = std::net::TcpStream::connect(("127.0.0.1", port)).and_then(|mut s| {
            s.set_read_timeout(Some(std::time::Duration::from_secs(2)))?;
            s.write_all(b"GET / HTTP/1.0\r\n\r\n")?;
            let mut out = String::new();
            s.read_to_string(&mut out)?;
            Ok(out)
        });
        match got {
            Ok(text) if text.starts_with("HTTP/") => return text,
            _ if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(300))
            }
            other => panic!("127.0.0.1:{port} does not answer after {within:?}: {other:?}"),
        }
    }
}

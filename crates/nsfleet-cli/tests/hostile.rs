//! Hostile input to a running fleet: its control socket is private, and malformed,
//! truncated, oversized and nonsensical requests each get an error without crashing or
//! wedging the supervisor.

mod harness;

use harness::*;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// Sends `bytes`, closes the sending side, and returns whatever the supervisor answers.
fn ask(sock: &std::path::Path, bytes: &[u8]) -> String {
    let mut c = UnixStream::connect(sock).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    // The supervisor may stop reading (and close) before an oversized request is all sent.
    let _ = c.write_all(bytes);
    let _ = c.shutdown(std::net::Shutdown::Write);
    let mut reply = String::new();
    let _ = c.read_to_string(&mut reply);
    reply
}

#[test]
fn the_control_socket_is_private_and_survives_bad_requests() {
    let env = Env::new("ctlsock");
    let _f = env.up("[fleet]\nname = \"cs\"\n[[node]]\nname = \"a\"\n");
    let sock = env.run_dir.join("cs/control.sock");
    let meta = std::fs::metadata(&sock).unwrap();
    assert_eq!(
        meta.permissions().mode() & 0o777,
        0o600,
        "the socket is for root only"
    );
    assert_eq!(meta.uid(), 0);

    let oversized = vec![b'x'; nsfleet::control::MAX_REQUEST + 4096];
    let cases: [(&str, &[u8], &str); 6] = [
        ("garbage", b"hello there\n", "malformed request"),
        ("truncated", b"{\"op\": \"sta", "malformed request"),
        ("empty", b"\n", "malformed request"),
        (
            "unknown op",
            b"{\"op\": \"format_disk\"}\n",
            "malformed request",
        ),
        (
            "wrong type",
            b"{\"op\": \"netns\", \"node\": 7}\n",
            "malformed request",
        ),
        ("oversized", &oversized, "longer than"),
    ];
    for (what, bytes, expect) in cases {
        let reply = ask(&sock, bytes);
        assert!(
            reply.contains("\"error\"") && reply.contains(expect),
            "{what}: {reply}"
        );
    }
    // A node that does not exist, and a connection that says nothing at all.
    let reply = ask(&sock, b"{\"op\": \"netns\", \"node\": \"../../etc\"}\n");
    assert!(reply.contains("has no node"), "{reply}");
    drop(UnixStream::connect(&sock).unwrap());
    // Still answering, and the fleet is intact.
    let status = env.ok(&["status", "cs", "--json"]);
    assert!(status.contains("\"a\""), "{status}");
    env.ok(&["exec", "cs", "a", "--", "true"]);
}

#[test]
fn a_fleet_the_machine_cannot_hold_is_refused_before_anything_is_created() {
    let env = Env::new("preflight");
    let file = env.file(
        "huge.toml",
        "[fleet]\nname = \"huge\"\n[[node]]\nname = \"n{i}\"\ncount = 200000\n",
    );
    let out = env.run(&["up", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("was not started (nothing was created)"),
        "{err}"
    );
    assert!(
        err.contains("max_net_namespaces") || err.contains("GiB"),
        "{err}"
    );
    assert!(
        !env.run_dir.join("huge").exists(),
        "the name was not even claimed"
    );
}

/// A host-side thing made by the test that looks like nsfleet's, removed by the test.
struct LookAlikes {
    netns: String,
    link: String,
    sleeper: std::process::Child,
}

impl Drop for LookAlikes {
    fn drop(&mut self) {
        let _ = self.sleeper.kill();
        let _ = self.sleeper.wait();
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.netns])
            .status();
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.link])
            .status();
    }
}

#[test]
fn down_and_clean_never_touch_look_alikes_of_what_nsfleet_makes() {
    let env = Env::new("lookalike");
    let tag = std::process::id() % 100_000;
    let ip = |args: &[&str]| {
        assert!(std::process::Command::new("ip")
            .args(args)
            .status()
            .unwrap()
            .success())
    };
    let mut look = LookAlikes {
        netns: format!("nsfla{tag}-a"),
        link: format!("nsfla{tag}"),
        sleeper: std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .unwrap(),
    };
    ip(&["netns", "add", &look.netns]);
    ip(&[
        "link",
        "add",
        "name",
        &look.link,
        "type",
        "veth",
        "peer",
        "name",
        &format!("{}p", look.link),
    ]);
    // A fleet whose names and processes look just like them.
    let f = env.up(&format!(
        "[fleet]\nname = \"nsfla{tag}\"\n[[node]]\nname = \"a\"\ncommands = [\"exec sleep 600\"]\n"
    ));
    drop(f);
    env.ok(&["clean", "--all"]);
    let netns = String::from_utf8_lossy(
        &std::process::Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned();
    assert!(netns.contains(&look.netns), "{netns}");
    ip(&["link", "show", &look.link]);
    let running = look.sleeper.try_wait().unwrap().is_none();
    assert!(running, "the look-alike process survives");
}

#[test]
fn a_run_directory_someone_else_could_prepare_is_refused() {
    use std::os::unix::fs::{chown, symlink};
    let env = Env::new("rundirs");
    let topo = env.file(
        "rd.toml",
        "[fleet]\nname = \"rd\"\n[[node]]\nname = \"a\"\n",
    );
    let base = env.files.join("rundirs");
    std::fs::create_dir(&base).unwrap();
    let file = base.join("a-file");
    std::fs::write(&file, "").unwrap();
    let open = base.join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let theirs = base.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    chown(&theirs, Some(65534), Some(65534)).unwrap();
    let good = base.join("good");
    std::fs::create_dir(&good).unwrap();
    let link = base.join("link");
    symlink(&good, &link).unwrap();
    for (dir, expected) in [
        (&file, "not a directory"),
        (&open, "writable by its group or others (mode 777)"),
        (&theirs, "owned by uid 65534, not root"),
        (&link, "a symlink"),
    ] {
        for args in [vec!["up", topo.to_str().unwrap()], vec!["status"]] {
            let out = (env.cmd(&args))
                .env("NSFLEET_RUN_DIR", dir)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{dir:?} {args:?}: {err}");
            assert!(err.contains(expected), "{dir:?} {args:?}: {err}");
        }
    }
    assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0, "nothing made");
    assert_eq!(std::fs::read_dir(&good).unwrap().count(), 0, "nothing made");
}

#[test]
fn the_supervisor_answers_only_root_whoever_reaches_its_socket() {
    use std::os::unix::process::CommandExt;
    let env = Env::new("peercred");
    let _f = env.up("[fleet]\nname = \"pc\"\n[[node]]\nname = \"a\"\n");
    // As if the folder and socket had been opened up: the kernel still says who connects.
    let chmod = |p: &std::path::Path, mode| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    for dir in [
        env.run_dir.parent().unwrap(),
        &env.run_dir,
        &env.run_dir.join("pc"),
    ] {
        chmod(dir, 0o755);
    }
    chmod(&env.run_dir.join("pc/control.sock"), 0o666);
    // uid 65534 may not reach the build's own binary (a build folder under root's 0700
    // home, as .ci/run's cache is): it runs a link, or a copy, in the test's folder.
    let exe = env.run_dir.parent().unwrap().join("nsfleet");
    let built = env!("CARGO_BIN_EXE_nsfleet");
    (std::fs::hard_link(built, &exe).or_else(|_| std::fs::copy(built, &exe).map(drop))).unwrap();
    chmod(&exe, 0o755);
    // The run folder as if it were the user's, so that their nsfleet trusts it (a user
    // trusts only a folder of their own) and asks the supervisor, whose answer is the
    // test: root's again before the fleet goes down.
    struct RootsAgain<'a>(&'a std::path::Path);
    impl Drop for RootsAgain<'_> {
        fn drop(&mut self) {
            let _ = std::os::unix::fs::chown(self.0, Some(0), Some(0));
        }
    }
    let roots_again = RootsAgain(&env.run_dir);
    std::os::unix::fs::chown(&env.run_dir, Some(65534), Some(65534)).unwrap();
    // `link` only reads, and asks the supervisor straight away.
    let out = (std::process::Command::new(&exe))
        .args(["link", "pc", "a:eth0"])
        .env("NSFLEET_RUN_DIR", &env.run_dir)
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    drop(roots_again);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("only root controls a fleet, and this is uid 65534"),
        "{err}"
    );
    assert_eq!(env.status("pc")["nodes"].as_array().unwrap().len(), 1);
}

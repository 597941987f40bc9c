//! `nsfleet vm`: a Debian kernel fetched and booted under QEMU, a command run inside on the
//! host's filesystem with its output and exit status; netem, which this machine's kernel
//! lacks, tested for real in the guest; and what cannot be booted, refused with nothing
//! left behind. Each boot takes seconds (TCG where KVM does not work).

mod harness;

use harness::*;

/// One guest at a time: each uses both cores, and each test checks that no QEMU is left.
static ONE_GUEST: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `nsfleet vm --debian 6.12 ARGS`, the kernel cached in this test's folder; a
/// kernel it fetched is kept for the next tests (see [`shared_kernels`]).
fn vm(env: &Env, args: &[&str]) -> std::process::Output {
    let out = vm_cmd(env, args).output().unwrap();
    link_kernels(&env.files.join("cache/nsfleet/kernels"), &shared_kernels());
    out
}

/// Where the tests keep the Debian kernels they fetched, across tests and runs: the
/// machine's cache (`~/.cache/nsfleet-tests/kernels`), as CI keeps its other downloads.
/// Each test still has a cache of its own, `nsfleet vm`'s as a user has it; it starts
/// with these kernels in it, hard links of the complete entries only.
fn shared_kernels() -> std::path::PathBuf {
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    std::path::Path::new(&home).join(".cache/nsfleet-tests/kernels")
}

/// Hard-links each complete kernel entry of `from` (a partial one's name begins with a
/// dot) that `to` lacks into `to`; what cannot be linked is left to be fetched again.
fn link_kernels(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).into_iter().flatten().flatten() {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') || to.join(&name).exists() {
            continue;
        }
        let _ = std::fs::create_dir_all(to);
        // Into a partial name first, then renamed: a test reading `to` sees whole entries.
        let partial = to.join(format!(".{}.linking", name.to_string_lossy()));
        let linked = std::process::Command::new("cp")
            .arg("-al")
            .arg(entry.path())
            .arg(&partial)
            .status()
            .is_ok_and(|s| s.success());
        if !(linked && std::fs::rename(&partial, to.join(&name)).is_ok()) {
            let _ = std::fs::remove_dir_all(&partial);
        }
    }
}

/// The command of [`vm`]: the accelerator is nsfleet's choice (`auto`), whatever the
/// developer's environment says.
fn vm_cmd(env: &Env, args: &[&str]) -> std::process::Command {
    let bound: &[&str] = match args.contains(&"--timeout") {
        true => &[],
        false => &["--timeout", "300"],
    };
    let mut c = env.cmd(&[&["vm", "--debian", "6.12"], bound, args].concat());
    link_kernels(&shared_kernels(), &env.files.join("cache/nsfleet/kernels"));
    c.env("XDG_CACHE_HOME", env.files.join("cache"))
        .env_remove("NSFLEET_VM_ACCEL")
        .stdin(std::process::Stdio::null());
    c
}

/// [`vm`], which must succeed: what the guest printed. A guest whose kernel oopsed is
/// booted once more: Debian's 6.12 under TCG was seen to stop on an `int3` in the
/// scheduler (`dequeue_entities`, during a 9p page fault), the guest kernel's trouble, not
/// what the test asks of nsfleet. A second oops fails the test.
fn vm_ok(env: &Env, args: &[&str]) -> String {
    let mut out = vm(env, args);
    let oopsed = |o: &std::process::Output| {
        [&o.stdout, &o.stderr]
            .iter()
            .any(|b| String::from_utf8_lossy(b).contains("] Oops: "))
    };
    if out.status.code() != Some(0) && oopsed(&out) {
        out = vm(env, args);
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}{err}");
    text
}

/// The guest's lines, trimmed, each of `wants` asserted to be one of them.
fn said_lines<'a>(text: &'a str, wants: &[&str]) -> Vec<&'a str> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    for want in wants {
        assert!(lines.contains(want), "{want:?} in {text}");
    }
    lines
}

/// Leftovers of any `nsfleet vm` run: QEMU processes (a zombie is not one: it has
/// ended, its parent gone) and scratch folders.
fn leftovers() -> Vec<String> {
    let mut left: Vec<String> = (std::fs::read_dir(std::env::temp_dir()).unwrap().flatten())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("nsfleet-vm-"))
        .collect();
    for p in std::fs::read_dir("/proc").unwrap().flatten() {
        let stat = std::fs::read_to_string(p.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(") ")
            .is_some_and(|(_, r)| r.starts_with('Z'));
        if stat.contains("(qemu-system") && !zombie {
            left.push(format!("qemu pid {}", p.file_name().to_string_lossy()));
        }
    }
    left
}

#[test]
fn a_debian_kernel_runs_a_command_whose_status_and_files_come_back() {
    let _one = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("vm");
    // Any exit status comes back whole (above 127 too); a --rwdir is written through.
    let rw = env.files.join("rw");
    std::fs::create_dir_all(&rw).unwrap();
    let script = format!(
        "uname -r; id -u; echo from the guest > {}/out; exit 200",
        rw.display()
    );
    let out = vm(
        &env,
        &["--rwdir", rw.to_str().unwrap(), "--", "sh", "-c", &script],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(200), "{text}{err}");
    assert_eq!(
        std::fs::read_to_string(rw.join("out")).unwrap(),
        "from the guest\n"
    );
    assert!(text.contains("6.12."), "the guest's kernel: {text}");
    assert!(
        text.lines().any(|l| l.trim() == "0"),
        "root in the guest: {text}"
    );

    assert!(leftovers().is_empty(), "{:?}", leftovers());
}

#[test]
fn an_open_vswitch_switch_forwards_on_the_kernel_datapath_in_a_debian_guest() {
    let _one = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("vm-ovs");
    let nsfleet = env!("CARGO_BIN_EXE_nsfleet");
    // This machine's kernel has no openvswitch module; Debian's has, and the guest
    // loads it: datapath "auto" is the kernel's there.
    let topo = env.file(
        "ov.toml",
        "[fleet]\nname = \"ov\"\n[[node]]\nname = \"h{i}\"\ncount = 2\n[[switch]]\nname = \"s1\"\nkind = \"ovs\"\npool = \"10.0.0.0/24\"\n[[link]]\na = \"h1:eth0\"\nb = \"s1\"\n[[link]]\na = \"h2:eth0\"\nb = \"s1\"\n",
    );
    // The same switch speaking OpenFlow 1.3 only: a change that adds no port.
    let text = std::fs::read_to_string(&topo).unwrap();
    let changed = env.file(
        "ov2.toml",
        &text.replace(
            "kind = \"ovs\"\n",
            "kind = \"ovs\"\nprotocols = [\"OpenFlow13\"]\n",
        ),
    );
    let script = format!(
        "export NSFLEET_RUN_DIR=/run/nsf; N={nsfleet}; $N up {} >/dev/null 2>&1 || exit 3; $N exec ov s1 -- ovs-vsctl get bridge s1 datapath_type; $N exec ov h1 -- ping -c 2 -W 5 10.0.0.2 >/dev/null && echo pinged; $N exec ov s1 -- ovs-dpctl show; $N apply {} --name ov >/dev/null && $N exec ov s1 -- ovs-vsctl get bridge s1 protocols && $N exec ov h1 -- ping -c 2 -W 5 10.0.0.2 >/dev/null && echo remade; $N down ov >/dev/null",
        topo.display(),
        changed.display()
    );
    let text = vm_ok(&env, &["--", "sh", "-c", &script]);
    // The bridge's datapath type, the ping, and the kernel datapath holding its ports.
    // Then `apply` changes the switch, which makes its bridge again in the fleet's Open
    // vSwitch: it returns once ovs-vswitchd has taken the ports again, and the first
    // ping across the new bridge is answered.
    // The fleet comes up in the guest's first 10 s, where Open vSwitch 3.1 would start
    // no upcall handler and lose the ping (see `EARLY_BOOT` in nsfleet-subsys's ovs.rs).
    let lines = said_lines(
        &text,
        &[
            "system",
            "pinged",
            "system@ovs-system:",
            "[OpenFlow13]",
            "remade",
        ],
    );
    for port in [": s1-p1", ": s1-p2"] {
        assert!(
            lines.iter().any(|l| l.ends_with(port)),
            "{port:?} in {text}"
        );
    }
    assert!(leftovers().is_empty(), "{:?}", leftovers());
}

/// Two nodes under limits: `hog` takes more than its memory once /run/go exists, `calm`
/// is limited in CPU and tasks.
const LIMITED: &str = "[fleet]\nname = \"v2\"\n[[node]]\nname = \"hog\"\nmemory = \"32M\"\ncommands = [\"while [ ! -e /run/go ]; do sleep 0.1; done; head -c 300M /dev/zero | tail > /dev/null; exec sleep 1000\"]\n[[node]]\nname = \"calm\"\ncpu = 0.5\npids = 50\ncommands = [\"exec sleep 1000\"]\n";

/// cgroup v2 alone, as most hosts have it (this machine's controllers are v1's): the
/// guest mounts the unified hierarchy only, and its root hands its controllers down as
/// systemd's does. Limits are written in v2's words, a node over its memory is killed
/// alone and said so as it happens (its command runs on: only the kill tells it), `exec`
/// runs in the node's group, and nothing is left.
#[test]
fn limits_hold_on_cgroup_v2_in_a_debian_guest() {
    let _one = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("vm-cgroup2");
    let nsfleet = env!("CARGO_BIN_EXE_nsfleet");
    let topo = env.file("v2.toml", LIMITED);
    // A fleet without a memory limit hands its nodes no memory controller: each memory
    // cgroup costs the kernel a slot per superblock on the machine.
    let unlimited = env.file(
        "unlimited.toml",
        "[fleet]\nname = \"unlimited\"\n[[node]]\nname = \"a\"\ncpu = 0.5\ncommands = [\"exec sleep 1000\"]\n",
    );
    let script = format!(
        "export NSFLEET_RUN_DIR=/run/nsf; N={nsfleet}; G=/sys/fs/cgroup/nsfleet; \
         echo '+memory +cpu +pids +cpuset' > /sys/fs/cgroup/cgroup.subtree_control || exit 3; \
         $N up {} >/dev/null 2>&1 || exit 4; \
         echo memory.max $(cat $G/v2.*/hog/memory.max) swap $(cat $G/v2.*/hog/memory.swap.max); \
         echo cpu.max $(cat $G/v2.*/calm/cpu.max) pids.max $(cat $G/v2.*/calm/pids.max); \
         echo exec in $($N exec v2 calm -- cat /proc/self/cgroup); \
         echo seen $($N exec v2 calm -- cat /sys/fs/cgroup/cpu.max /sys/fs/cgroup/pids.max); \
         $N exec v2 hog -- touch /run/go; \
         for i in $(seq 100); do $N status v2 | grep -q 'killed: out of memory' && break; sleep 0.1; done; \
         $N status v2 | grep 'killed: out of memory'; \
         for i in $(seq 50); do grep -qs 'killed: out' /run/nsf/v2/logs/hog.log && break; sleep 0.1; done; \
         echo log: $(grep -h 'killed: out' /run/nsf/v2/logs/hog.log); \
         $N status v2 --json | grep -o '\"oom_kills\":[0-9]*' | tr '\\n' ' '; echo; \
         echo down $($N down v2 --json | grep -o '\"reclaimed\":[0-9]*'); \
         $N up {} >/dev/null 2>&1 || exit 5; \
         echo handed to nodes: $(cat $G/unlimited.*/cgroup.subtree_control); \
         $N down unlimited >/dev/null; \
         ls $G 2>/dev/null || echo no nsfleet cgroup left",
        topo.display(),
        unlimited.display()
    );
    let text = vm_ok(&env, &["--", "sh", "-c", &script]);
    said_lines(
        &text,
        &[
            "memory.max 33554432 swap 0",
            "cpu.max 50000 100000 pids.max 50",
            "exec in 0::/",
            "seen 50000 100000 50",
            "killed: out of memory, limit 32 MB",
            "log: nsfleet: killed: out of memory, limit 32 MB",
            "\"oom_kills\":1 \"oom_kills\":0",
            "down \"reclaimed\":2",
            "handed to nodes: cpuset cpu pids",
            "no nsfleet cgroup left",
        ],
    );
    assert!(leftovers().is_empty(), "{:?}", leftovers());
}

/// Limits on a cgroup v2 machine of Kubernetes: nsfleet's agent in a container whose own
/// group (a pod's, as the kubelet makes it, shown whole in the container's cgroup
/// namespace) holds its processes, from which v2 hands no controller down. `up` there is
/// refused the limits; the agent at its start moves the container's processes into a
/// leaf and has the group hand its controllers down (it then fails, having no cluster to
/// reach); `up` from the same container then limits its nodes below that group, a node
/// over its memory is killed alone, and `down` leaves no group.
#[test]
fn limits_hold_in_a_pods_cgroup_v2_group_once_the_agent_readies_it_in_a_debian_guest() {
    let _one = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("vm-pod-v2");
    let nsfleet = env!("CARGO_BIN_EXE_nsfleet");
    let topo = env.file("v2.toml", LIMITED);
    // Inside the container: its cgroup namespace's view of the hierarchy, mounted anew.
    let inside = env.file(
        "inside.sh",
        &format!(
            "N={nsfleet}; C=/sys/fs/cgroup; export NSFLEET_RUN_DIR=/run/nsf\n\
             umount -l $C && mount -t cgroup2 none $C || exit 3\n\
             echo own $(cat /proc/self/cgroup)\n\
             $N up {topo} >/tmp/refused.log 2>&1 && echo up was not refused; tr -s ' \\n' ' ' </tmp/refused.log | grep -o 'needs the memory cgroup controller, which this host does not give nsfleet' | sort -u | sed 's/^/refused: /'\n\
             ls $C | grep -q nsfleet && echo made a group when refused\n\
             NSFLEET_MACHINE=m NSFLEET_POD=p NSFLEET_POD_NAMESPACE=n $N kube agent 2>&1 | grep -o 'moved this container.s processes into [^ ,]*'\n\
             echo now in $(cat /proc/self/cgroup)\n\
             echo handed $(cat $C/cgroup.subtree_control)\n\
             $N up {topo} >/tmp/up.log 2>&1 || {{ echo up failed:; cat /tmp/up.log; exit 4; }}\n\
             echo memory.max $(cat $C/nsfleet/v2.*/hog/memory.max) pids.max $(cat $C/nsfleet/v2.*/calm/pids.max)\n\
             $N exec v2 hog -- touch /run/go\n\
             for i in $(seq 100); do $N status v2 | grep -q 'killed: out of memory' && break; sleep 0.1; done\n\
             $N status v2 | grep 'killed: out of memory'\n\
             echo down $($N down v2 --json | grep -o '\"reclaimed\":[0-9]*')\n\
             ls $C | grep -q nsfleet || echo no nsfleet group left\n",
            topo = topo.display()
        ),
    );
    // The kubelet's groups for a pod and its container (v2 hands controllers down to a
    // pod's, as the kubelet has it), the container's process put in the container's.
    let script = format!(
        "C=/sys/fs/cgroup; P=$C/kubepods/pod1; mkdir -p $P/ctr || exit 3; \
         for g in $C $C/kubepods $P; do echo '+memory +cpu +pids +cpuset' > $g/cgroup.subtree_control || exit 3; done; \
         sh -c 'echo 0 > $0/cgroup.procs && exec unshare --cgroup --mount sh $1' $P/ctr {}",
        inside.display()
    );
    let text = vm_ok(&env, &["--", "sh", "-c", &script]);
    said_lines(
        &text,
        &[
            "own 0::/",
            "refused: needs the memory cgroup controller, which this host does not give nsfleet",
            "moved this container's processes into /sys/fs/cgroup/agent",
            "now in 0::/agent",
            "handed cpuset cpu memory pids",
            "memory.max 33554432 pids.max 50",
            "killed: out of memory, limit 32 MB",
            "down \"reclaimed\":2",
            "no nsfleet group left",
        ],
    );
    assert!(!text.contains("made a group when refused"), "{text}");
    assert!(leftovers().is_empty(), "{:?}", leftovers());
}

/// A Kubernetes cluster whose machines run cgroup v2, as most do today: scripts/
/// kube-cluster's cluster of one machine in a Debian guest (its groups made by the kubelet
/// on v2, the agent's container made by containerd and runc), nsfleet installed in it. A fleet's limits hold on the machine: written where
/// Docker's containers look, a node over its memory killed and its neighbour running on.
/// The cluster goes with nothing left.
///
/// In CI, emulated beside the other lanes, the machine's kubelet has run without ever
/// registering (3 of 11 runs; never when run alone or under a CPU load here): the
/// cluster is made once more if the first does not become Ready, its logs' ends printed.
/// The failed cluster's kubelet was seen to outlive its fleet's teardown (`down` says
/// so) and to leave the fleet's cgroups once it ended: they are removed, once empty,
/// before the second try, so that the check that nothing is left holds for that one.
/// A retry around an unexplained failure, and a known leak of a failed `up`: neither is
/// fixed here.
#[test]
fn a_kubernetes_clusters_cgroup_v2_machines_hold_a_fleets_limits_in_a_debian_guest() {
    let _one = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("vm-kube-v2");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // Kubernetes' programs built on this host (once, cached), for the guest to find.
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let cache = std::env::var("XDG_CACHE_HOME").unwrap_or_else(|_| format!("{home}/.cache"));
    let built = std::process::Command::new("bash")
        .arg(root.join("scripts/kube-build"))
        .env("XDG_CACHE_HOME", &cache)
        .output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
    let topo = env.file(
        "klim.toml",
        "[fleet]\nname = \"klim\"\n[[node]]\nname = \"hog\"\nmemory = \"32M\"\npids = 50\ncommands = [\"exec sleep 1000\"]\n[[node]]\nname = \"calm\"\ncommands = [\"exec sleep 1000\"]\n",
    );
    let script = env.file(
        "guest.sh",
        &format!(
            "export XDG_CACHE_HOME={cache} NSFLEET={nsfleet}; N={nsfleet}; C=v2\n\
             echo top $(stat -f -c %T /sys/fs/cgroup)\n\
             cluster() {{ bash {root}/scripts/kube-cluster up --machines 1 --name $C --install --ready-within 360 >/tmp/kc.log 2>&1; }}\n\
             settle() {{ for i in $(seq 90); do find /sys/fs/cgroup/nsfleet -mindepth 1 -depth -type d -path '*/kube-v2.*' -exec rmdir {{}} + 2>/dev/null; [ -z \"$(find /sys/fs/cgroup/nsfleet -maxdepth 1 -name 'kube-v2.*' 2>/dev/null)\" ] && return; sleep 1; done; }}\n\
             cluster || {{ echo kube-cluster failed once, tried again:; tail -80 /tmp/kc.log; settle; C=v2again; cluster; }} || {{ echo kube-cluster failed:; tail -80 /tmp/kc.log; exit 3; }}\n\
             D=/var/lib/nsfleet/kube-clusters/$C\n\
             export KUBECONFIG=$D/admin.kubeconfig\n\
             $N up {topo} --kube >/tmp/up.log 2>&1 || {{ echo up failed:; cat /tmp/up.log; exit 4; }}\n\
             echo hog groups $(find /sys/fs/cgroup -type d -name hog | wc -l)\n\
             echo hog group $(find /sys/fs/cgroup -type d -name hog | sed 's|^/sys/fs/cgroup||')\n\
             echo memory.max $($N exec klim hog --kube -- cat /sys/fs/cgroup/memory.max)\n\
             echo pids.max $($N exec klim hog --kube -- cat /sys/fs/cgroup/pids.max)\n\
             $N exec klim hog --kube -- sh -c 'head -c 300M /dev/zero | tail >/dev/null' 2>/dev/null || echo hog failed\n\
             echo hog $($N exec klim hog --kube -- grep -w oom_kill /sys/fs/cgroup/memory.events)\n\
             echo calm $($N exec klim calm --kube -- echo alive)\n\
             $N down klim --kube >/dev/null 2>&1 && echo down\n\
             bash {root}/scripts/kube-cluster down --name $C >/dev/null 2>&1 && echo cluster down\n\
             ls /sys/fs/cgroup | grep -q nsfleet || echo no nsfleet group left\n",
            nsfleet = env!("CARGO_BIN_EXE_nsfleet"),
            root = root.display(),
            topo = topo.display(),
        ),
    );
    let text = vm_ok(
        &env,
        &[
            "--mem",
            "6144",
            "--timeout",
            "1200",
            "--",
            "bash",
            script.to_str().unwrap(),
        ],
    );
    let lines = said_lines(
        &text,
        &[
            "top cgroup2fs",
            "memory.max 33554432",
            "pids.max 50",
            "hog failed",
            "hog groups 1",
            "calm alive",
            "down",
            "cluster down",
            "no nsfleet group left",
        ],
    );
    // containerd runs a privileged container (the agent) in the machine's own cgroup
    // namespace on v2: the nodes' groups are nsfleet's at the machine's top, as a local
    // nsfleet's are (not below the agent's container, as on v1 and in a private one).
    let killed = (lines.iter()).find_map(|l| l.strip_prefix("hog oom_kill "));
    assert!(
        killed.is_some_and(|n| n.parse::<u64>().is_ok_and(|n| n >= 1)),
        "the memory limit killed nothing: {text}"
    );
    let group = (lines.iter()).find_map(|l| l.strip_prefix("hog group "));
    assert!(
        group.is_some_and(|g| g.starts_with("/nsfleet/klim.") && g.ends_with("/hog")),
        "{text}"
    );
    assert!(leftovers().is_empty(), "{:?}", leftovers());
}

/// A user's limits on cgroup v2, in the subtree delegated to them as systemd delegates
/// `user@UID.service` (`Delegate=yes`): the guest's root makes the slices and hands the
/// user their group, its files theirs, and runs the user's commands in its `init.scope`.
/// nsfleet as that user hands the group's controllers down and makes the fleet's groups
/// below it; limits are written and hold (a node over its memory killed alone), `stats`
/// counts each node's memory, `exec` runs in the node's group, and `down` leaves no
/// group. A user whose commands run in a group of root's (a login's session scope) is
/// refused the limit at its line, told which group is not theirs, with nothing made.
#[test]
fn a_users_limits_hold_in_the_cgroup_v2_subtree_delegated_to_them_in_a_debian_guest() {
    let _one = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("vm-delegated");
    let nsfleet = env!("CARGO_BIN_EXE_nsfleet");
    let topo = env.file("v2.toml", LIMITED);
    // The user's nsfleet and file in a folder of theirs: the test's are root's alone.
    // As the user, from group $1 (its cgroup.procs written by root first).
    let script = format!(
        "C=/sys/fs/cgroup; useradd -r -M nsfv2 || exit 3; U=$(id -u nsfv2); \
         install -d -o nsfv2 /tmp/u && cp {nsfleet} {} /tmp/u/ && chown -R nsfv2 /tmp/u || exit 3; \
         as_user() {{ g=$1; shift; sh -c 'echo 0 > \"$0/cgroup.procs\" && cd /tmp/u && exec setpriv --reuid=nsfv2 --regid=nsfv2 --clear-groups -- env -i PATH=/usr/bin:/bin:/usr/sbin:/sbin HOME=/tmp/u ./nsfleet \"$@\"' $g \"$@\"; }}; \
         S=$C/user.slice/user-$U.slice; A=$S/user@$U.service; mkdir -p $A/init.scope $S/session-1.scope || exit 3; \
         for g in $C $C/user.slice $S; do echo '+memory +cpu +pids +cpuset' > $g/cgroup.subtree_control || exit 3; done; \
         chown nsfv2 $A $A/cgroup.procs $A/cgroup.threads $A/cgroup.subtree_control && chown -R nsfv2 $A/init.scope || exit 3; \
         echo refused $(as_user $S/session-1.scope up v2.toml 2>&1 | grep -o 'session-1.scope) and those above it are not this user.s' | sort -u); \
         ls $A | grep -q nsfleet && echo made a group when refused; \
         as_user $A/init.scope up v2.toml >/tmp/u/up.log 2>&1 || {{ echo up as the user failed:; cat /tmp/u/up.log; exit 4; }}; \
         echo handed $(cat $A/cgroup.subtree_control); \
         echo memory.max $(cat $A/nsfleet/v2.*/hog/memory.max) swap $(cat $A/nsfleet/v2.*/hog/memory.swap.max); \
         echo cpu.max $(cat $A/nsfleet/v2.*/calm/cpu.max) pids.max $(cat $A/nsfleet/v2.*/calm/pids.max); \
         echo exec in $(as_user $A/init.scope exec v2 calm -- cat /proc/self/cgroup); \
         echo counted $(as_user $A/init.scope stats v2 --json | grep -o '\"memory_bytes\":[0-9][0-9]*' | wc -l); \
         as_user $A/init.scope exec v2 hog -- touch /run/go; \
         for i in $(seq 100); do as_user $A/init.scope status v2 | grep -q 'killed: out of memory' && break; sleep 0.1; done; \
         as_user $A/init.scope status v2 | grep 'killed: out of memory'; \
         echo down $(as_user $A/init.scope down v2 --json | grep -o '\"reclaimed\":[0-9]*'); \
         ls $A | grep -q nsfleet || echo no nsfleet group left",
        topo.display(),
    );
    let text = vm_ok(&env, &["--", "sh", "-c", &script]);
    said_lines(
        &text,
        &[
            "refused session-1.scope) and those above it are not this user's",
            "handed cpuset cpu memory pids",
            "memory.max 33554432 swap 0",
            "cpu.max 50000 100000 pids.max 50",
            "exec in 0::/",
            "counted 1",
            "killed: out of memory, limit 32 MB",
            "down \"reclaimed\":2",
            "no nsfleet group left",
        ],
    );
    assert!(!text.contains("made a group when refused"), "{text}");
    assert!(leftovers().is_empty(), "{:?}", leftovers());
}

/// Image nodes on a kernel whose overlayfs refuses layers that are not mounted (Debian's
/// 6.12; detached layers came in 6.15): a confined node's root is made the older way, in a
/// mount namespace of the host's root's own, and a `--privileged` one's in its own mount
/// namespace. Both run their image, the confined one as the first id of its fleet's range
/// with the image's files as the node's root's, and `down` reclaims both.
#[test]
fn image_nodes_run_on_a_kernel_whose_overlayfs_takes_only_mounted_layers() {
    use nsfleet_image::build::{write_oci_layout, Compression, Entry, ImageSpec, Layer};
    let _one = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("vm-image");
    let nsfleet = env!("CARGO_BIN_EXE_nsfleet");
    let busybox = std::fs::read("/bin/busybox").expect("busybox-static is installed");
    let mut entries = vec![
        Entry::dir("bin"),
        Entry::dir("etc"),
        Entry::file("bin/busybox", 0o755, busybox),
        Entry::file("etc/image-release", 0o644, "busy 1\n"),
    ];
    for tool in ["sh", "cat", "sleep", "stat", "grep"] {
        entries.push(Entry::symlink(&format!("bin/{tool}"), "busybox"));
    }
    let image = ImageSpec {
        layers: vec![Layer {
            entries,
            compression: Compression::Gzip,
        }],
        run: nsfleet_image::RunConfig {
            cmd: ["/bin/sleep", "1000000"].map(String::from).to_vec(),
            env: vec!["PATH=/bin".into()],
            ..Default::default()
        },
        architecture: nsfleet_image::host_arch().to_string(),
    };
    let layout = env.files.join("busy");
    write_oci_layout(&layout, "1", &image).unwrap();
    let topo = env.file(
        "img.toml",
        "[fleet]\nname = \"img\"\n[[node]]\nname = \"c\"\nimage = \"busy:1\"\n[[node]]\nname = \"p\"\nimage = \"busy:1\"\nprivileged = true\n",
    );
    // The store on the guest's tmpfs: its 9p root takes no idmapped mount.
    let script = format!(
        "export NSFLEET_RUN_DIR=/run/nsf NSFLEET_IMAGES=/run/img; N={nsfleet}; \
         $N image load {} --name busy >/dev/null || exit 3; \
         $N up {} >/dev/null 2>&1 || exit 4; \
         for n in c p; do \
           echo $n $($N exec img $n -- cat /etc/image-release) \
             $($N exec img $n -- stat -c %u /etc/image-release) \
             $($N exec img $n -- grep -c 'upperdir=/run/upper' /proc/self/mountinfo); \
         done; \
         echo uid $(stat -c %u /proc/$(pgrep -x sleep | head -1)) $(stat -c %u /proc/$(pgrep -x sleep | tail -1)); \
         echo down $($N down img --json | grep -o '\"reclaimed\":[0-9]*')",
        layout.display(),
        topo.display()
    );
    let text = vm_ok(&env, &["--", "sh", "-c", &script]);
    // Each node's root made by the older way (its writable layer at /run/upper in the
    // node's mount namespace: a detached one is not named by a path there).
    let lines = said_lines(
        &text,
        &["c busy 1 0 1", "p busy 1 0 1", "down \"reclaimed\":2"],
    );
    let uids = (lines.iter().find_map(|l| l.strip_prefix("uid ")))
        .unwrap_or_else(|| panic!("no uid line in {text}"));
    // One sleep is the confined node's, of nsfleet's block; the other the host's root's.
    let mut uids: Vec<u64> = uids.split(' ').map(|u| u.parse().unwrap()).collect();
    uids.sort();
    assert!(uids[0] == 0 && uids[1] >= 0x7000_0000, "{text}");
    assert!(leftovers().is_empty(), "{:?}", leftovers());
}

/// Six pairs of nodes, each joined by a link with one impairment (`p` by none).
fn impaired_pairs() -> String {
    let links = [
        ("j", "delay = \"10ms\", jitter = \"5ms\""),
        ("l", "loss = \"20%\""),
        ("d", "duplicate = \"50%\""),
        ("c", "corrupt = \"50%\""),
        ("r", "rate = \"1mbit\""),
        ("p", ""),
        ("o", "delay = \"10ms\", reorder = \"50%\""),
    ];
    let mut t = String::from("[fleet]\nname = \"im\"\n");
    for (k, (n, impair)) in links.iter().enumerate() {
        let net = k + 1;
        t += &format!("[[node]]\nname = \"{n}1\"\n[[node]]\nname = \"{n}2\"\n[[link]]\n");
        for (end, host) in [("a", 1), ("b", 2)] {
            t += &format!(
                "{end} = {{ at = \"{n}{host}:eth0\", addrs = [\"10.{net}.0.{host}/24\"], mac = \"{}\" }}\n",
                pair_mac(net, host)
            );
        }
        if !impair.is_empty() {
            t += &format!("impair = {{ {impair} }}\n");
        }
    }
    t
}

/// The MAC of host `host` (1 or 2) of pair `net` of [`impaired_pairs`].
fn pair_mac(net: usize, host: usize) -> String {
    format!("02:00:00:00:{net:02x}:{host:02x}")
}

/// The number just before `key` in `line` (`45.3` of `"..., 45.3% packet loss"`).
fn number_before(line: &str, key: &str) -> f64 {
    let head = line.split(key).next().unwrap_or("");
    let word = head.rsplit([' ', ',']).next().unwrap_or("");
    word.trim_end_matches('%')
        .parse()
        .unwrap_or_else(|_| panic!("{key:?} in {line:?}"))
}

/// Two nodes with 20 ms of delay each way between them, and a dummy device behind `b`.
const NETEM_PAIR_AND_DUMMY: &str = "[fleet]\nname = \"nm\"\n[[node]]\nname = \"a\"\nroutes = [\"10.255.0.0/24 via 10.0.0.2\"]\n[[node]]\nname = \"b\"\n[[link]]\na = { at = \"a:eth0\", addrs = [\"10.0.0.1/24\"] }\nb = { at = \"b:eth0\", addrs = [\"10.0.0.2/24\"] }\nimpair = { delay = \"20ms\" }\n[[dummy]]\nat = \"b:dum0\"\naddrs = [\"10.255.0.2/32\"]\n";

#[test]
fn every_netem_impairment_shows_in_pings_inside_a_guest() {
    let _one = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("vmimpair");
    let nsfleet = env!("CARGO_BIN_EXE_nsfleet");
    let topo = env.file("im.toml", &impaired_pairs());
    // Every ping has a deadline: corrupted replies confuse ping's clock.
    let ping = |node: &str, args: &str, to: &str, pick: &str| {
        format!("echo \"{node} $({nsfleet} exec im {node} -- ping -q {args} -w 20 {to} 2>/dev/null | {pick})\"\n")
    };
    let mut script = format!(
        "export NSFLEET_RUN_DIR=/run/nsf\n{nsfleet} up {} >/dev/null 2>&1 || exit 3\n",
        topo.display()
    );
    script += &ping("j1", "-c 30 -i 0.05", "10.1.0.2", "tail -1");
    // On the lossy links, no neighbour discovery: ARP lost three times in a row leaves the
    // neighbour failed for a while (once reachable, it is probed again later), and every
    // ping of the count unanswered. Both ends know each other for good.
    for (n, net) in [("l", 2), ("c", 4)] {
        for (me, peer) in [(1, 2), (2, 1)] {
            script += &format!(
                "{nsfleet} exec im {n}{me} -- ip neigh replace 10.{net}.0.{peer} lladdr {} dev eth0 nud permanent\n",
                pair_mac(net, peer)
            );
        }
    }
    script += &ping("l1", "-c 300 -i 0.01 -W 1", "10.2.0.2", "grep loss");
    script += &format!(
        "echo \"d1 $({nsfleet} exec im d1 -- ping -c 40 -i 0.02 -w 20 10.3.0.2 | grep -c DUP)\"\n"
    );
    script += &ping("c1", "-c 200 -i 0.01 -W 1", "10.4.0.2", "grep loss");
    script += &ping("r1", "-f -c 200 -s 1400", "10.5.0.2", "grep loss");
    script += &ping("p1", "-f -c 200 -s 1400", "10.6.0.2", "grep loss");
    script += &format!("echo \"o1 $({nsfleet} exec im o1 -- ping -c 100 -i 0.002 -w 20 10.7.0.2 | grep -o 'icmp_seq=[0-9]*' | cut -d= -f2 | tr '\\n' ' ')\"\n");
    script += &format!("{nsfleet} down im >/dev/null\n");
    // A delay of 20 ms each way on a pair of its own, and a dummy device (this host's
    // kernel may have none), reached through the pair: in the same guest, one boot less.
    let nm = env.file("nm.toml", NETEM_PAIR_AND_DUMMY);
    script += &format!(
        "{nsfleet} up {} >/dev/null 2>&1 || exit 6\necho \"nm $({nsfleet} exec nm a -- ping -c 5 -i 0.2 10.0.0.2 | tail -1)\"\necho \"dum $({nsfleet} exec nm a -- ping -c 1 -W 2 10.255.0.2 >/dev/null && echo reached) $({nsfleet} exec nm b -- ip -d link show dum0 | grep -c dummy)\"\n{nsfleet} down nm >/dev/null\n",
        nm.display()
    );
    let file = env.file("im.sh", &script);
    let text = vm_ok(&env, &["--", "sh", file.to_str().unwrap()]);
    let line = |node: &str| -> String {
        (text.lines())
            .find_map(|l| l.strip_prefix(&format!("{node} ")))
            .unwrap_or_else(|| panic!("no {node} in {text}"))
            .to_string()
    };
    // Jitter: 10 ms each way, +-5 ms: RTTs spread, none below 10 ms.
    let rtt: Vec<f64> = (line("j1").split(" = ").nth(1).unwrap_or(""))
        .split(['/', ' '])
        .filter_map(|x| x.parse().ok())
        .collect();
    assert!(
        rtt.len() >= 4 && rtt[0] >= 9.0 && rtt[3] >= 1.0,
        "min/avg/max/mdev {rtt:?}"
    );
    // Loss: 20% each way is 36% of round trips; 300 of them keep it well within 20-60%.
    let loss = number_before(&line("l1"), " packet loss");
    assert!((20.0..60.0).contains(&loss), "loss {loss}%");
    // Duplicates: ping counts the replies it gets twice.
    let dups: u64 = line("d1").trim().parse().unwrap();
    assert!(dups >= 5, "{dups} duplicates");
    // Corruption: a flipped bit fails a checksum, and the packet is lost.
    let corrupt = number_before(&line("c1"), " packet loss");
    assert!(corrupt >= 10.0, "corrupt: {corrupt}% lost");
    // Rate: 200 packets of 1,442 bytes at 1 Mbit/s take 2.3 s; unlimited, far less.
    let (limited, free) = (
        number_before(&line("r1"), "ms"),
        number_before(&line("p1"), "ms"),
    );
    assert!(
        limited >= 2000.0 && limited > 1.5 * free,
        "1mbit {limited} ms, unlimited {free} ms"
    );
    // Reorder: half the packets go at once, ahead of those held 10 ms.
    let seqs: Vec<u64> = line("o1")
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    let ahead = seqs.windows(2).filter(|w| w[1] < w[0]).count();
    assert!(seqs.len() >= 50 && ahead >= 1, "replies in order {seqs:?}");
    // 20 ms each way; emulation adds to it, never takes away.
    let rtt = (line("nm").split(" = ").nth(1))
        .and_then(|r| r.split('/').next())
        .and_then(|m| m.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no rtt in {text}"));
    assert!((40.0..80.0).contains(&rtt), "minimum RTT {rtt} ms");
    assert_eq!(
        line("dum"),
        "reached 1",
        "a dummy device, reached through the pair: {text}"
    );
    assert!(leftovers().is_empty(), "{:?}", leftovers());
}

#[test]
fn what_cannot_be_booted_is_refused_and_nothing_is_left() {
    let _one = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("vmbad");
    let not_kernel = env.file("bzImage", "#!/bin/sh\necho not a kernel\n");
    let modules = env.files.join("lib/modules/5.10.0-test");
    std::fs::create_dir_all(&modules).unwrap();
    let nsfleet = |args: &[&str]| {
        env.cmd(args)
            .env("XDG_CACHE_HOME", env.files.join("cache"))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let cases: [(Vec<&str>, &str); 5] = [
        (
            vec!["vm", "--kernel", not_kernel.to_str().unwrap(), "--", "true"],
            "not a kernel image",
        ),
        (
            vec!["vm", "--kernel", "/no/such/bzImage", "--", "true"],
            "cannot read the kernel",
        ),
        (
            vec!["vm", "--debian", "9.99", "--", "true"],
            "have no kernel 9.99",
        ),
        (
            vec![
                "vm",
                "--debian",
                "6.12",
                "--rwdir",
                "/no/such/dir",
                "--",
                "true",
            ],
            "--rwdir /no/such/dir: not a folder",
        ),
        // Debian's cloud kernels have no 9p: refused from their config, before booting.
        (
            vec!["vm", "--debian", "6.12-cloud", "--", "true"],
            "cannot boot into the host's filesystem: it lacks CONFIG_NET_9P_VIRTIO",
        ),
    ];
    for (args, expected) in cases {
        let out = nsfleet(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains(expected),
            "{args:?}: expected {expected:?} in {err}"
        );
    }
    // `--kernel host` where this machine does not keep its kernel's image (its class
    // boots from an image outside it).
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let release = release.trim();
    let kept = [
        format!("/boot/vmlinuz-{release}"),
        format!("/lib/modules/{release}/vmlinuz"),
    ];
    if !kept.iter().any(|p| std::path::Path::new(p).exists()) {
        let out = nsfleet(&["vm", "--kernel", "host", "--", "true"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains("--kernel host: the running kernel's image"),
            "{err}"
        );
    }
    // The same cloud kernel without its config: booted, it cannot mount the host's
    // filesystem, and says so.
    let cloud = (std::fs::read_dir(env.files.join("cache/nsfleet/kernels"))
        .unwrap()
        .flatten())
    .find(|e| e.file_name().to_string_lossy().contains("-cloud-"))
    .expect("the cloud kernel was fetched");
    let image = (std::fs::read_dir(cloud.path().join("boot"))
        .unwrap()
        .flatten())
    .find(|e| e.file_name().to_string_lossy().starts_with("vmlinuz-"))
    .unwrap();
    let alone = env.files.join("alone/vmlinuz");
    std::fs::create_dir_all(alone.parent().unwrap()).unwrap();
    std::fs::copy(image.path(), &alone).unwrap();
    let out = nsfleet(&["vm", "--kernel", alone.to_str().unwrap(), "--", "true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the guest could not be set up: the guest cannot mount the host's filesystem"),
        "{err}"
    );
    // Modules of another kernel, and a guest that hangs.
    let out = vm(
        &env,
        &["--modules", modules.to_str().unwrap(), "--", "true"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("these are modules of \"5.10.0-test\""),
        "{err}"
    );
    let out = env
        .cmd(&[
            "vm",
            "--debian",
            "6.12",
            "--timeout",
            "3",
            "--",
            "sleep",
            "600",
        ])
        .env("XDG_CACHE_HOME", env.files.join("cache"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("did not finish within 3 s"), "{err}");
    assert!(leftovers().is_empty(), "{:?}", leftovers());
    let cache = env.files.join("cache/nsfleet/kernels");
    let partial: Vec<_> = (std::fs::read_dir(&cache).unwrap().flatten())
        .filter(|e| e.file_name().to_string_lossy().contains(".partial"))
        .collect();
    assert!(partial.is_empty(), "no half-written cache entry");
}

/// The result file at `path`, as JSON.
fn result(path: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_scenario_runs_on_the_host_and_in_a_guest_and_the_report_sets_them_side_by_side() {
    let _one = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("vmbench");
    let dir = env.files.join("results");
    let bench = |args: &[&str]| {
        env.cmd(args)
            .env("XDG_CACHE_HOME", env.files.join("cache"))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let teardown_on = |kernels: &str| {
        let d = dir.to_str().unwrap();
        bench(&[
            "bench",
            "teardown",
            "--count",
            "20",
            "--runs",
            "1",
            "--kernels",
            kernels,
            "--dir",
            d,
        ])
    };
    // A version Debian lacks ends the run before anything is measured.
    let out = teardown_on("host,debian:9.99");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("have no kernel 9.99"), "{err}");
    assert!(!dir.join("teardown-host.json").exists(), "nothing measured");
    let out = bench(&["bench", "teardown", "--kernels", "hots", "--dir", "x"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("expected `host`, `debian:VERSION`"), "{err}");

    let out = teardown_on("host,debian:6.12");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let host = result(&dir.join("teardown-host.json"));
    let guest = result(&dir.join("teardown-debian-6.12.json"));
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(host["machine"]["kernel"], release.trim());
    let kernel = guest["machine"]["kernel"].as_str().unwrap();
    assert!(kernel.starts_with("6.12."), "{kernel}");
    let cpu = guest["machine"]["cpu_model"].as_str().unwrap();
    assert!(cpu.contains("QEMU"), "an emulated CPU: {cpu}");
    assert!(
        guest["machine"]["config"]["CONFIG_HZ"].is_string(),
        "the guest kernel's config is read inside: {}",
        guest["machine"]
    );
    assert!(
        guest["metrics"]["nsfleet_vs_one_at_a_time"]["median"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(page.contains("teardown-host") && page.contains("teardown-debian-6.12"));

    // The README's table: a column per kernel.
    let readme = env.file(
        "README.md",
        "# x\n<!-- kernels:begin (nsfleet report --readme) -->\n<!-- kernels:end -->\n",
    );
    let out = bench(&[
        "report",
        dir.join("teardown-host.json").to_str().unwrap(),
        dir.join("teardown-debian-6.12.json").to_str().unwrap(),
        "-o",
        env.files.join("r.html").to_str().unwrap(),
        "--readme",
        readme.to_str().unwrap(),
        "--section",
        "kernels",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = std::fs::read_to_string(&readme).unwrap();
    let header = format!(
        "| teardown | teardown-host<br>{} | teardown-debian-6.12<br>{kernel} | target |",
        release.trim()
    );
    assert!(table.contains(&header), "{table}");
    assert!(table.contains("| nsfleet vs one at a time | "), "{table}");
    assert!(leftovers().is_empty(), "{:?}", leftovers());
}

/// One of the project's scripts.
fn script(name: &str) -> String {
    format!("{}/../../scripts/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// An `nsfleet` for `kernel-bisect-step` whose `bench` measures nothing: for `--kernels K
/// --dir D` it puts the result planted for K (`planted/K.json`, `:` as `-`) in D and notes
/// K in `measured`; every other command is the real nsfleet's (`bench compare` judges).
fn planted_nsfleet(env: &Env) -> std::path::PathBuf {
    let stub = env.files.join("nsfleet-planted");
    let files = env.files.display();
    let real = env!("CARGO_BIN_EXE_nsfleet");
    std::fs::write(
        &stub,
        format!(
            r#"#!/bin/sh
if [ "$1" = bench ] && [ "$2" != compare ]; then
  scenario=$2
  while [ $# -gt 0 ]; do
    case $1 in --kernels) kernel=$(echo "$2" | tr : -) ;; --dir) dir=$2 ;; esac
    shift
  done
  echo "$kernel" >>"{files}/measured"
  mkdir -p "$dir" && exec cp "{files}/planted/$kernel.json" "$dir/$scenario-$kernel.json"
fi
exec {real} "$@"
"#
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
    stub
}

/// The bisect's mechanics, not an emulated kernel's speed: `kernel-history` makes a
/// history of four Debian builds, and `git bisect run` with `kernel-bisect-step` (its
/// candidates measured by a planted result each: the 6.1 builds slow, the 6.12 builds
/// fast, as seed 001 measures them) names the first fast build. The step's own boot,
/// `bench --kernels` in a guest, is `a_scenario_runs_on_the_host_and_in_a_guest...`'s.
#[test]
fn git_bisect_run_finds_the_debian_build_that_made_teardown_faster() {
    let env = Env::new("vmbisect");
    let nsfleet = env!("CARGO_BIN_EXE_nsfleet");
    let history = env.files.join("history");
    let kernels = [
        "debian:6.1.0-55",
        "debian:6.1.0-56",
        "debian:6.12.107",
        "debian:6.12.117",
    ];
    let stub = planted_nsfleet(&env);
    let sh = |cmd: &mut std::process::Command| {
        let out = cmd
            .env("NSFLEET", &stub)
            .env("NSFLEET_RUN_DIR", env.files.join("run"))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{cmd:?}: {text}");
        text
    };
    sh(std::process::Command::new(script("kernel-history"))
        .arg(&history)
        .args(kernels));
    // A real result file of this machine, then one per build with the figure bisected
    // planted: 1 s from a fleet's `down` to its reclamation on 6.1, 0.2 s on 6.12.
    let scenario = ["teardown", "--count", "5", "--runs", "1"];
    let real = env.files.join("real.json");
    sh(std::process::Command::new(nsfleet)
        .arg("bench")
        .args(scenario)
        .args(["-o", real.to_str().unwrap()]));
    let real: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&real).unwrap()).unwrap();
    let planted = env.files.join("planted");
    std::fs::create_dir_all(&planted).unwrap();
    for k in kernels {
        let seconds = if k.starts_with("debian:6.1.") {
            1.0
        } else {
            0.2
        };
        let mut result = real.clone();
        let metric = &mut result["metrics"]["nsfleet_down_to_reclaimed_s"];
        for field in ["median", "min", "max"] {
            metric[field] = seconds.into();
        }
        metric["samples"] = serde_json::json!([seconds]);
        let file = planted.join(format!("{}.json", k.replace(':', "-")));
        std::fs::write(file, result.to_string()).unwrap();
    }
    let git = |args: &[&str]| {
        let mut c = std::process::Command::new("git");
        c.args(args).current_dir(&history);
        c
    };
    let first = sh(&mut git(&["rev-list", "--max-parents=0", "HEAD"]));
    sh(&mut git(&[
        "bisect",
        "start",
        "--term-old=slow",
        "--term-new=fast",
        "HEAD",
        first.trim(),
    ]));
    let baseline = planted.join("debian-6.1.0-55.json");
    let step = script("kernel-bisect-step");
    let mut run = git(&[
        "bisect",
        "run",
        &step,
        baseline.to_str().unwrap(),
        "--improvement",
    ]);
    run.args([
        "--metric",
        "nsfleet_down_to_reclaimed_s",
        "--threshold",
        "50%",
        "--",
    ])
    .args(scenario);
    let text = sh(&mut run);
    let found = (text.lines())
        .find(|l| l.contains("is the first fast commit"))
        .unwrap_or_else(|| panic!("no verdict in {text}"));
    let commit = found.split_whitespace().next().unwrap();
    let named = sh(&mut git(&["show", "-s", "--format=%s", commit]));
    assert_eq!(named.trim(), kernels[2], "{text}");
    // The step measured candidates between the two ends, never the known ones.
    let measured = std::fs::read_to_string(env.files.join("measured")).unwrap();
    assert!(
        (measured.lines()).all(|k| ["debian-6.1.0-56", "debian-6.12.107"].contains(&k)),
        "{measured}"
    );
    sh(&mut git(&["bisect", "reset"]));
}

/// A folder of `PATH` that holds one `qemu-system-x86_64`: QEMU itself, except that under
/// `-accel kvm` it stalls forever, as a KVM that hangs does (the guest never runs).
fn hanging_kvm(env: &Env) -> std::path::PathBuf {
    let bin = env.files.join("hang-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let real = std::process::Command::new("sh")
        .args(["-c", "command -v qemu-system-x86_64"])
        .output()
        .unwrap();
    let real = String::from_utf8(real.stdout).unwrap();
    let wrapper = bin.join("qemu-system-x86_64");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\ncase \" $* \" in *\" -accel kvm \"*) exec sleep 1000 ;; esac\nexec {} \"$@\"\n",
            real.trim()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// The verdict files kept in `env`'s cache.
fn verdicts(env: &Env) -> Vec<(std::path::PathBuf, String)> {
    let dir = env.files.join("cache/nsfleet/accel");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    (entries.flatten())
        .map(|e| (e.path(), std::fs::read_to_string(e.path()).unwrap()))
        .collect()
}

#[test]
fn a_kvm_that_hangs_is_left_for_tcg_after_the_watchdog_and_the_verdict_is_kept() {
    let _one = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("vmhang");
    let path = format!(
        "{}:{}",
        hanging_kvm(&env).display(),
        std::env::var("PATH").unwrap()
    );
    let timed = |args: &[&str]| {
        let started = std::time::Instant::now();
        let out = vm_cmd(&env, args).env("PATH", &path).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (out, err, started.elapsed().as_secs_f64())
    };
    // The first run tries KVM, whose guest never speaks: the watchdog kills it and the
    // same boot runs under TCG, said in one line.
    let (out, err, first) = timed(&["--", "uname", "-r"]);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("6.12."));
    let fallback: Vec<&str> = (err.lines())
        .filter(|l| l.contains("no sign of life within 10 s"))
        .collect();
    assert_eq!(fallback.len(), 1, "{err}");
    assert!(fallback[0].contains("booting it under TCG"), "{err}");
    assert!(first >= 10.0, "the watchdog waited its 10 s: {first:.1} s");
    let kept = verdicts(&env);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(kept[0].1.starts_with("tcg\n"), "{kept:?}");
    // The next run goes to TCG at once, saying why.
    let (out, err, second) = timed(&["--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        !err.contains("booting it under TCG"),
        "no watchdog this time: {err}"
    );
    assert!(
        err.contains("booting under TCG (emulation): KVM did not run a guest on this host"),
        "{err}"
    );
    eprintln!("a hanging KVM: first run {first:.1} s (watchdog and TCG), the next {second:.1} s (TCG at once)");
    // A cache entry that is not a verdict is said, ignored and left as it is: auto
    // tries KVM again (the watchdog once more). --accel kvm overrides the verdict, and
    // without a fallback it ends at the watchdog, not at --timeout; so does the
    // environment variable. The three wait out their watchdogs side by side: a forced
    // KVM keeps no verdict, so none of them changes what the others read.
    std::fs::write(&kept[0].0, "perhaps\n").unwrap();
    let started = std::time::Instant::now();
    let spawn = |args: &[&str], accel: Option<&str>| {
        let mut cmd = vm_cmd(&env, args);
        cmd.env("PATH", &path);
        if let Some(accel) = accel {
            cmd.env("NSFLEET_VM_ACCEL", accel);
        }
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let forced = spawn(&["--accel", "kvm", "--", "true"], None);
    let by_env = spawn(&["--", "true"], Some("kvm"));
    let again = spawn(&["--", "true"], None);
    let ended = |child: std::process::Child| {
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), err)
    };
    // All three ended before any is judged: a failed assertion leaves no run behind.
    let (forced, forced_took) = (ended(forced), started.elapsed().as_secs_f64());
    let (by_env, again) = (ended(by_env), ended(again));
    let (code, err) = forced;
    let forced = forced_took;
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(
            "KVM does not run this guest here: the guest showed no sign of life within 10 s"
        ),
        "{err}"
    );
    assert!(
        forced < 60.0,
        "ended by the watchdog, not --timeout: {forced:.1} s"
    );
    let (code, err) = by_env;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("KVM does not run this guest here"), "{err}");
    let (code, err) = again;
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("is not a verdict"), "{err}");
    assert!(err.contains("no sign of life within 10 s"), "{err}");
    assert_eq!(std::fs::read_to_string(&kept[0].0).unwrap(), "perhaps\n");

    // Bad input: another word, refused before anything runs.
    let out = vm_cmd(&env, &["--accel", "fast", "--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("\"fast\": expected kvm, tcg or auto"), "{err}");
    let out = vm_cmd(&env, &["--", "true"])
        .env("NSFLEET_VM_ACCEL", "KVM")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("NSFLEET_VM_ACCEL=\"KVM\": expected kvm, tcg or auto"),
        "{err}"
    );
    assert!(leftovers().is_empty(), "{:?}", leftovers());
}

#[test]
fn sigterm_and_sigint_stop_every_phase_at_once_and_leave_nothing() {
    use std::io::BufRead;
    let _one = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("vmsig");
    // Starts the run, waits until `ready` holds of its pid and what it printed (both
    // streams), sends `sig`; the exit status and how long the run took to end.
    type Ready = dyn Fn(u32, &str) -> bool;
    let stopped = |cmd: &mut std::process::Command, ready: &Ready, sig: i32| {
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let streams: [Box<dyn std::io::Read + Send>; 2] = [
            Box::new(child.stdout.take().unwrap()),
            Box::new(child.stderr.take().unwrap()),
        ];
        for stream in streams {
            let said = said.clone();
            std::thread::spawn(move || {
                for l in std::io::BufReader::new(stream)
                    .lines()
                    .map_while(Result::ok)
                {
                    said.lock().unwrap().push_str(&(l + "\n"));
                }
            });
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
        while !ready(child.id(), &said.lock().unwrap()) {
            assert!(
                std::time::Instant::now() < deadline,
                "never ready: {}",
                said.lock().unwrap()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let sent = std::time::Instant::now();
        // Our own child's pid, which it still is: it has not been waited for.
        signal(child.id() as i32, sig);
        let status = child.wait().unwrap();
        (status.code(), sent.elapsed().as_secs_f64())
    };
    // While the kernel is fetched (into a cache of its own, still empty).
    let mut fetching = vm_cmd(&env, &["--", "true"]);
    fetching.env("XDG_CACHE_HOME", env.files.join("cold"));
    let (code, took) = stopped(
        &mut fetching,
        &|_, said| said.contains("fetching"),
        libc::SIGTERM,
    );
    assert_eq!(code, Some(128 + libc::SIGTERM), "while fetching");
    assert!(took < 5.0, "stopped while fetching in {took:.2} s");
    let kernels = env.files.join("cold/nsfleet/kernels");
    let left: Vec<_> = std::fs::read_dir(&kernels).unwrap().flatten().collect();
    assert!(
        left.is_empty(),
        "a half-fetched kernel is removed: {left:?}"
    );
    // While the guest runs its command (under TCG: the watchdog is another test's).
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let mut running = vm_cmd(
            &env,
            &["--accel", "tcg", "--", "sh", "-c", "echo ready; sleep 1000"],
        );
        let (code, took) = stopped(&mut running, &|_, said| said.contains("ready"), sig);
        assert_eq!(code, Some(128 + sig), "signal {sig}");
        assert!(took < 5.0, "signal {sig} ended the run in {took:.2} s");
        eprintln!("signal {sig}: the run ended {took:.3} s after it");
        assert!(leftovers().is_empty(), "{:?}", leftovers());
    }
    // While it boots: under a KVM that hangs, before any sign of life.
    let path = format!(
        "{}:{}",
        hanging_kvm(&env).display(),
        std::env::var("PATH").unwrap()
    );
    let mut booting = vm_cmd(&env, &["--accel", "kvm", "--", "true"]);
    booting.env("PATH", &path);
    // Booting: QEMU (here, the stalled wrapper's sleep) runs, the guest has not spoken.
    let booted = |pid: u32, _: &str| {
        let children = format!("/proc/{pid}/task/{pid}/children");
        let children = std::fs::read_to_string(children).unwrap_or_default();
        (children.split_whitespace()).any(|c| {
            std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|n| n.trim() == "sleep")
        })
    };
    let (code, took) = stopped(&mut booting, &booted, libc::SIGTERM);
    assert_eq!(code, Some(128 + libc::SIGTERM), "while booting");
    assert!(took < 5.0, "stopped while booting in {took:.2} s");
    assert!(leftovers().is_empty(), "{:?}", leftovers());
}

#[test]
fn a_killed_runs_qemu_dies_with_it_and_its_folder_goes_with_the_next_run() {
    use std::io::BufRead;
    let _one = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("vmkill");
    let tmp = std::env::temp_dir();
    let killed = || {
        let mut child = vm_cmd(
            &env,
            &["--accel", "tcg", "--", "sh", "-c", "echo ready; sleep 1000"],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        assert!(out.lines().map_while(Result::ok).any(|l| l == "ready"));
        child.kill().unwrap();
        child.wait().unwrap();
        // Named for the run's pid and start time.
        let prefix = format!("nsfleet-vm-{}-", child.id());
        let folder = (std::fs::read_dir(&tmp).unwrap().flatten())
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&prefix)
            })
            .unwrap_or_else(|| panic!("no {prefix}* folder in {}", tmp.display()));
        // QEMU dies with it (SIGKILL from the kernel, PR_SET_PDEATHSIG): no cleanup of
        // ours could run.
        let gone = (0..100).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(50));
            leftovers().iter().all(|l| !l.starts_with("qemu"))
        });
        assert!(gone, "{:?}", leftovers());
        assert!(
            folder.is_dir(),
            "a SIGKILL leaves the folder for the next run"
        );
        folder
    };
    // Folders that are not a dead run's: one of a live process (this test), one without
    // a record. Both are left alone.
    let live = tmp.join(format!("nsfleet-vm-live-{}", std::process::id()));
    let bare = tmp.join(format!("nsfleet-vm-bare-{}", std::process::id()));
    for d in [&live, &bare] {
        std::fs::create_dir_all(d).unwrap();
    }
    // Removed however the test ends: left behind, they fail every later vm test's
    // leftover check.
    let planted = Planted(vec![live.clone(), bare.clone()]);
    let me = std::fs::read_to_string("/proc/self/stat").unwrap();
    let since = me
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .nth(19)
        .unwrap();
    std::fs::write(
        live.join("owner"),
        format!("{} {since}\n", std::process::id()),
    )
    .unwrap();

    let folder = killed();
    let out = vm_cmd(&env, &["--accel", "tcg", "--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        !folder.exists(),
        "the next run removed {}",
        folder.display()
    );
    assert!(
        err.contains(&format!("removed {}", folder.display())),
        "{err}"
    );
    let folder = killed();
    let out = env.ok(&["clean", "--all"]);
    assert!(!folder.exists(), "nsfleet clean removed it: {out}");
    assert!(out.contains(&folder.display().to_string()), "{out}");
    assert!(
        live.is_dir() && bare.is_dir(),
        "what is not a dead run's stays"
    );
    drop(planted);
    assert!(leftovers().is_empty(), "{:?}", leftovers());
}

/// Folders a test planted, removed when it ends, passed or failed.
struct Planted(Vec<std::path::PathBuf>);

impl Drop for Planted {
    fn drop(&mut self) {
        for d in &self.0 {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

# nsfleet bench mininet's driver: Mininet's TreeNet(depth, fanout) with Linux bridges or
# Open vSwitch (KIND "bridge", "ovs": OVSBridge, standalone, no controller, or
# "ovs-controller": OVSSwitch, secure, under OVSController), from
# start to pingAll-ready (the first host reaches the last) and stop, through the modules
# under PREFIX (`mininet`: Mininet itself; `nsfleet.mininet`: nsfleet's API). With TOPO,
# nsfleet's API also writes the network as an nsfleet topology file there (fleet
# "bench"), for `nsfleet up` of the same thing. Prints one JSON line of seconds (and, for
# Open vSwitch, its daemons' memory per switch). NSFLEET_BENCH_OVS_TSO=0 runs nsfleet's
# Open vSwitch without TSO support (the API's ovsTso=False).
import importlib
import json
import sys
import time

import functools
import os

prefix, depth, fanout, kind = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
topo_out = sys.argv[5] if len(sys.argv) > 5 else None
net_mod = importlib.import_module(prefix + ".net")
topolib = importlib.import_module(prefix + ".topolib")
node = importlib.import_module(prefix + ".node")
controller = None
if kind == "ovs":
    # Standalone (no controller), on the userspace datapath: this kernel has no
    # openvswitch module, and the same datapath on both sides.
    bridge = functools.partial(node.OVSBridge, datapath="user")
elif kind == "ovs-controller":
    # Secure, under Open vSwitch's test controller: the first ping needs its flows.
    bridge = functools.partial(node.OVSSwitch, datapath="user")
    controller = node.OVSController
else:
    bridge = getattr(node, "LinuxBridge", None) \
        or importlib.import_module(prefix + ".nodelib").LinuxBridge
importlib.import_module(prefix + ".log").setLogLevel("error")


def ovs_daemons(skip):
    """Open vSwitch's daemons on this machine (their pids) but those whose mount
    namespace is one of `skip`."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/comm" % pid) as f:
                if f.read().strip() not in ("ovsdb-server", "ovs-vswitchd"):
                    continue
            if os.readlink("/proc/%s/ns/mnt" % pid) not in skip:
                out.append(pid)
        except OSError:
            continue
    return out


def ovs_memory_mb():
    """Open vSwitch's daemons' memory, those of the network under test only (daemons in
    the host's own mount namespace, an Open vSwitch the machine runs, are not counted,
    as both sides run theirs in mount namespaces of their own; any other was refused
    before the start): proportional (PSS: a
    page shared by N processes, shared libraries among them, counts 1/N to each) and
    anonymous (heaps, stacks, caches: what no file backs, and the kernel cannot take
    back without swap). A library's clean pages count in PSS only while the process
    maps them: a daemon that forks after loading them (`--detach`, as Mininet's are
    started) does not count those its parent touched, one in the foreground does."""
    pss = anon = 0
    for pid in ovs_daemons({host_mnt}):
        try:
            with open("/proc/%s/smaps_rollup" % pid) as f:
                for line in f:
                    if line.startswith("Pss:"):
                        pss += int(line.split()[1])
                    elif line.startswith("Anonymous:"):
                        anon += int(line.split()[1])
        except OSError:
            continue
    return pss / 1024.0, anon / 1024.0


host_mnt = os.environ.get("NSFLEET_BENCH_HOST_MNT")
if kind != "bridge":
    # Daemons of another network (a run that did not end, a lab in a namespace of its
    # own) would be counted as this one's: refused before it starts. Mininet's side
    # runs in the mount namespace of its own daemons, started before this.
    others = ovs_daemons({host_mnt, os.readlink("/proc/self/ns/mnt")})
    if others:
        sys.exit("Open vSwitch daemons of another network run on this machine (pids %s): "
                 "their memory would be counted as this network's; stop them first"
                 % ", ".join(others))


# nsfleet's API only: its Open vSwitch without TSO support, as Mininet's runs.
lean = prefix == "nsfleet.mininet" and os.environ.get("NSFLEET_BENCH_OVS_TSO") == "0"
extra = {"ovsTso": False} if lean else {}
t0 = time.monotonic()
net = net_mod.Mininet(topo=topolib.TreeTopo(depth=depth, fanout=fanout), switch=bridge,
                      controller=controller, **extra)
net.start()
t1 = time.monotonic()
first, last = net.hosts[0], net.hosts[-1]
for _ in range(60):
    if "1 received" in first.cmd("ping -c1 -W1 %s" % last.IP()):
        break
else:
    net.stop()
    sys.exit("%s never reached %s" % (first.name, last.name))
t2 = time.monotonic()
pss, anon = ovs_memory_mb() if kind != "bridge" else (None, None)
per_switch = (lambda mb: mb / len(net.switches)) if kind != "bridge" else (lambda mb: None)
if topo_out:
    from nsfleet import _toml
    doc = net.topology()
    doc["fleet"]["name"] = "bench"
    with open(topo_out, "w") as f:
        f.write(_toml.dumps(doc))
    if kind != "bridge":
        # The same network on Linux bridges, for an OVS fleet against a bridge fleet.
        for sw in doc.get("switch", []):
            for key in list(sw):
                if key != "name":
                    del sw[key]
        with open(topo_out + ".bridge.toml", "w") as f:
            f.write(_toml.dumps(doc))
t3 = time.monotonic()
net.stop()
t4 = time.monotonic()
print(json.dumps({"start_s": t1 - t0, "ready_s": t2 - t0, "stop_s": t4 - t3,
                  "hosts": len(net.hosts), "switches": len(net.switches),
                  "ovs_pss_mb_per_switch": per_switch(pss),
                  "ovs_anon_mb_per_switch": per_switch(anon)}))

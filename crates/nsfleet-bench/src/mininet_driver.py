# nsfleet bench mininet's driver: Mininet's TreeNet(depth, fanout) with Linux bridges and no
# controller, from start to pingAll-ready (the first host reaches the last) and stop,
# through the modules under PREFIX (`mininet`: Mininet itself; `nsfleet.mininet`: nsfleet's
# API). With TOPO, nsfleet's API also writes the network as an nsfleet topology file there
# (fleet "bench"), for `nsfleet up` of the same thing. Prints one JSON line of seconds.
import importlib
import json
import sys
import time

prefix, depth, fanout = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
topo_out = sys.argv[4] if len(sys.argv) > 4 else None
net_mod = importlib.import_module(prefix + ".net")
topolib = importlib.import_module(prefix + ".topolib")
bridge = getattr(importlib.import_module(prefix + ".node"), "LinuxBridge", None) \
    or importlib.import_module(prefix + ".nodelib").LinuxBridge
importlib.import_module(prefix + ".log").setLogLevel("error")

t0 = time.monotonic()
net = net_mod.Mininet(topo=topolib.TreeTopo(depth=depth, fanout=fanout), switch=bridge,
                      controller=None)
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
if topo_out:
    from nsfleet import _toml
    doc = net.topology()
    doc["fleet"]["name"] = "bench"
    with open(topo_out, "w") as f:
        f.write(_toml.dumps(doc))
t3 = time.monotonic()
net.stop()
t4 = time.monotonic()
print(json.dumps({"start_s": t1 - t0, "ready_s": t2 - t0, "stop_s": t4 - t3,
                  "hosts": len(net.hosts), "switches": len(net.switches)}))

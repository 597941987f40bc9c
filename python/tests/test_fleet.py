"""nsfleet's Python API against the real kernel: a fleet from a dict and from a file,
commands in its nodes, links pulled, impairments, status, down with reclamation, and
errors carrying the engine's messages."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import nsfleet
from nsfleet import _toml


def test_a_fleet_from_a_dict_runs_commands_and_comes_down_reclaimed(run_dir: Path, pair: dict) -> None:
    with nsfleet.up(pair) as fleet:
        assert fleet.report is not None and fleet.report.nodes == 2
        assert [n.name for n in fleet.nodes] == ["a", "b"]
        out = fleet.node("a").cmd("ping -c 1 -W 2 10.0.0.2")
        assert "1 received" in out, out
        assert fleet.node("b").cmd("ip", "-br", "addr", "show", "eth0").split()[2] == "10.0.0.2/24"
        p = fleet.node("a").popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert p.communicate("through the node\n")[0] == "through the node\n"
        status = fleet.status()
        assert status.state == "up" and [n.name for n in status.nodes] == ["a", "b"]
        assert status.nodes[0].interfaces == ["eth0 10.0.0.1/24"]
    report = fleet.down_report
    assert report is not None and report.nodes == 2 and report.reclaimed == 2


def test_links_are_pulled_and_impaired(run_dir: Path, pair: dict) -> None:
    with nsfleet.up(pair) as fleet:
        state = fleet.link("a:eth0").down()
        assert not state.end.up and state.far is not None and not state.far.carrier
        assert "1 received" not in fleet.node("a").cmd("ping -c 1 -W 1 10.0.0.2")
        assert fleet.link("a:eth0").up().end.up
        assert "1 received" in fleet.node("a").cmd("ping -c 1 -W 2 10.0.0.2")
        imp = fleet.impair("a:eth0", rate="10mbit")
        assert imp is not None and imp.rate_bps == 10_000_000
        assert fleet.link("a:eth0").state().impair == imp
        assert fleet.impair("a:eth0", clear=True) is None


def test_a_topology_error_names_file_and_line(run_dir: Path, tmp_path: Path, name: str) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(f'[fleet]\nname = "{name}"\n[[node]]\nname = "a b"\n')
    with pytest.raises(nsfleet.TopologyError) as e:
        nsfleet.Fleet.from_file(bad)
    assert e.value.file == str(bad) and e.value.line == 4
    assert "node name \"a b\"" in e.value.message
    with pytest.raises(nsfleet.TopologyError) as e:
        nsfleet.up({"fleet": {"name": name}, "node": [{"name": "a", "colour": "red"}]})
    assert e.value.file == "<topology dict>" and "colour" in e.value.message
    assert e.value.message.endswith('in: colour = "red"'), e.value.message
    with pytest.raises(nsfleet.NsfleetError, match="no fleet"):
        nsfleet.Fleet.attach(f"{name}-none")


def test_a_kernel_refusal_names_its_place_as_fields(run_dir: Path, tmp_path: Path,
                                                    name: str) -> None:
    # The kernel refuses an IPv6 MTU above eth0's once eth0 exists (a scratch namespace's
    # `lo` takes it when the file is checked): the engine's error comes back with its
    # file, line and column as fields.
    mtu = tmp_path / "mtu.toml"
    mtu.write_text(f'[fleet]\nname = "{name}"\n[[generate]]\nkind = "line"\ncount = 2\n'
                   'node = { sysctls = { "net.ipv6.conf.eth0.mtu" = 9000 } }\n')
    with pytest.raises(nsfleet.TopologyError) as e:
        nsfleet.Fleet.from_file(mtu)
    assert (e.value.file, e.value.line, e.value.column) == (str(mtu), 6, 49), e.value.message
    assert "sysctl net.ipv6.conf.eth0.mtu = 9000" in e.value.message


def test_a_dict_is_written_as_toml() -> None:
    text = _toml.dumps({"fleet": {"name": "x"}, "node": [{"name": "a", "sysctl": {"net.ipv4.ip_forward": 1}}],
                        "flag": True})
    assert text == ('flag = true\n\n[fleet]\nname = "x"\n\n[[node]]\nname = "a"\n'
                    'sysctl = { "net.ipv4.ip_forward" = 1 }\n')
    with pytest.raises(TypeError):
        _toml.dumps({"node": [{"name": object()}]})


def test_expectations_hold_time_the_recovery_and_fail_with_what_was_seen(run_dir: Path, pair: dict) -> None:
    pair["node"][1]["commands"] = ["exec sleep 600"]
    with nsfleet.up(pair) as fleet:
        assert fleet.expect_ping("a", "10.0.0.2", within=5) < 5
        fleet.link("a:eth0").down()
        assert fleet.expect_no_ping("a", "10.0.0.2", within=5) < 5
        assert fleet.expect_no_route("a", "10.0.0.0/24", within=5) < 5
        with pytest.raises(nsfleet.ExpectationFailed) as failed:
            fleet.expect_ping("a", "10.0.0.2", within=1)
        assert "no answer from 10.0.0.2" in failed.value.seen and failed.value.took_s >= 1
        fleet.link("a:eth0").up()
        assert fleet.expect_route("b", "10.0.0.0/24", within=5) < 5
        assert fleet.expect_exec("b", "ip -o link show eth0", output="state UP", within=5) < 5
        assert fleet.expect_exec("a", ["true"]) >= 0
        # A node of the fleet's own (a pattern): every node that matches.
        assert fleet.expect_route("*", "10.0.0.0/24", within=5) < 5
        with pytest.raises(nsfleet.NsfleetError) as refused:
            fleet.expect_ping("nosuch", "10.0.0.2")
        assert refused.value.exit_status == 2 and 'has no node "nosuch"' in refused.value.message
        assert fleet.node("b").stop() == []
        assert len(fleet.node("b").start()) == 1

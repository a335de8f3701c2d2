"""Two nodes that are really apart: each ``neuron-watch torchrun`` in its own network namespace with
its own IP address and hostname, joined by a bridge the test creates and
removes. Only addresses inside those namespaces are used."""

from __future__ import annotations

import json
import secrets
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.conftest import require_binary
from tests.fixtures.procs import NEURON_WATCH, TOY, force_cleanup, kill_group, pids_with_env

pytestmark = pytest.mark.integration

SUBNET = "10.215.{}.".format  # a /24 of our own; .1 is the bridge, .11/.12 the nodes


def sh(*argv: str) -> None:
    subprocess.run(list(argv), check=True, capture_output=True, text=True, timeout=30)


@pytest.fixture
def two_hosts(tmp_path: Path) -> Iterator[list[tuple[str, str]]]:
    """[(namespace/hostname, ip)] for two hosts on a private bridge; torn down afterwards."""
    for tool in ("ip", "nsenter", "unshare", "mount"):
        require_binary(tool)
    tag = secrets.token_hex(2)
    net = SUBNET(100 + int(tag, 16) % 100)
    bridge = f"nwbr{tag}"
    hosts = [(f"nwh{tag}a", net + "11"), (f"nwh{tag}b", net + "12")]
    (tmp_path / "hosts").write_text("127.0.0.1 localhost\n" + "".join(f"{ip} {name}\n" for name, ip in hosts))
    (tmp_path / "resolv.conf").write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
    made: list[str] = []
    try:
        sh("ip", "link", "add", bridge, "type", "bridge")
        made.append("bridge")
        sh("ip", "addr", "add", net + "1/24", "dev", bridge)
        sh("ip", "link", "set", bridge, "up")
        for i, (name, ip) in enumerate(hosts):
            sh("ip", "netns", "add", name)
            made.append(name)
            veth = f"nwv{tag}{i}"
            sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", name)
            sh("ip", "link", "set", veth, "master", bridge, "up")
            sh("ip", "-n", name, "addr", "add", ip + "/24", "dev", "eth0")
            sh("ip", "-n", name, "link", "set", "eth0", "up")
            sh("ip", "-n", name, "link", "set", "lo", "up")
        yield hosts
    finally:
        for name, _ip in hosts:
            if name in made:
                subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
        if "bridge" in made:
            subprocess.run(["ip", "link", "del", bridge], capture_output=True, timeout=30)


def in_host(name: str, tmp_path: Path, argv: list[str]) -> list[str]:
    """argv run inside host ``name``: its network namespace, its own hostname, its own /etc/hosts."""
    script = (f"hostname {name} && mount --bind {tmp_path}/hosts /etc/hosts && "
              f"mount --bind {tmp_path}/resolv.conf /etc/resolv.conf && exec \"$@\"")
    return ["nsenter", f"--net=/var/run/netns/{name}", "unshare", "--uts", "--mount", "--propagation", "private",
            "sh", "-c", script, "sh", *argv]


def test_two_hosts_hang_on_the_second_restarts_both_from_one_checkpoint(
    tmp_path: Path, two_hosts: list[tuple[str, str]], toy_env: dict[str, str]
) -> None:
    ip0 = two_hosts[0][1]
    job_id, ckpt = f"ns-{secrets.token_hex(3)}", tmp_path / "ckpt"
    nodes = []
    with ExitStack() as stack:
        for i, (name, _ip) in enumerate(two_hosts):
            run_dir = tmp_path / name
            argv = [NEURON_WATCH, "--quiet", "--job-id", job_id, "--run-dir", str(run_dir), "--checkpoint-dir",
                    str(ckpt), "--coordinator", f"{ip0}:29510", "--hang-timeout", "6",
                    "torchrun", "--nnodes", "2", "--node_rank", str(i), "--nproc_per_node", "1",
                    "--master_addr", ip0, "--master_port", "29500",
                    TOY, "--checkpoint-dir", str(ckpt), "--steps", "14", "--hang-at", "8", "--hang-rank", "1"]
            env = dict(toy_env, NEURON_WATCH_SECRET="n" * 32, GLOO_SOCKET_IFNAME="eth0")
            out = open(tmp_path / f"{name}.out", "w")  # noqa: SIM115 - closed by the stack
            stack.callback(out.close)
            p = subprocess.Popen(in_host(name, tmp_path, argv), cwd=tmp_path, env=env, stdout=out,
                                 stderr=subprocess.STDOUT, text=True, start_new_session=True)
            stack.callback(force_cleanup, str(run_dir))
            stack.callback(kill_group, p)
            nodes.append((p, run_dir, name))
        deadline = time.monotonic() + 300
        codes = [p.wait(max(1.0, deadline - time.monotonic())) for p, _, _ in nodes]
        logs = "".join((tmp_path / f"{n}.out").read_text()[-2000:] for _, _, n in nodes)
        assert codes == [0, 0], logs
        evs = [json.loads(x) for x in (nodes[0][1] / "events.jsonl").read_text().splitlines()]
        hellos = {e["node"]: e["hostname"] for e in evs if e["event"] == "node_hello"}
        assert sorted(hellos.values()) == sorted(n for n, _ in two_hosts)  # each agent on its own host
        hang = [e for e in evs if e["event"] == "verdict" and e["label"] == "collective_hang"]
        assert len(hang) == 1 and hang[0]["culprit"]["rank"] == 1  # the second host's one rank
        restart = [e for e in evs if e["event"] == "restart"]
        assert len(restart) == 1
        node_of_host = {host: node for node, host in hellos.items()}  # the name each agent announced
        for _p, run_dir, name in nodes:
            gen1 = json.loads((run_dir / "gen-1" / f"command-{node_of_host[name]}.json").read_text())
            assert gen1["checkpoint"] == restart[0]["checkpoint"] and gen1["checkpoint"].endswith("step_5")
        for _p, run_dir, _n in nodes:
            assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []

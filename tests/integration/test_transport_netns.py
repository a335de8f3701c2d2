"""Agent and coordinator on two "hosts": two network namespaces joined by a veth pair.

The test creates both namespaces (own interface, own IP; no change to the root namespace),
runs ``neuron-watch coordinator`` in one and a plain-python agent in the other via
``nsenter --net=``, checks the lines arrive tagged with the agent's node, and removes both
namespaces. Every process it starts is in its own group, stopped with one deadline and reaped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require_binary
from tests.fixtures.procs import kill_group

pytestmark = pytest.mark.integration

SECRET = "netns secret with enough bytes 0123456789"
JOB = "ns-job"
# A /30 only inside the namespaces this test makes (never routed anywhere else).
COORD_IP, AGENT_IP = "10.214.44.1", "10.214.44.2"

AGENT = r"""
import sys, time
from neuron_watch.events import LogLine, RankKey
from neuron_watch.node.agent_link import AgentLink, new_session
from neuron_watch.diagnosis.kb import default_knowledge_base
endpoint, secret, n = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])
link = AgentLink(endpoint, secret, job="ns-job", node="nsnode", session=new_session(time.time()),
                 kb=default_knowledge_base())
link.hello("nsnode", 1, [0, 1], time.monotonic(), time.time())
for i in range(n):
    link.add_line(LogLine(RankKey("nsnode", i % 2), f"step {i} loss 1.0", time.monotonic(), time.time()))
link.flush_lines(time.monotonic(), time.time())
end = time.monotonic() + 30
while len(link.outbox) and time.monotonic() < end:
    link.tick(time.monotonic(), time.time())
    link.sock.poll(20)
print("acked" if not len(link.outbox) else f"unacked {len(link.outbox)}", link.summary()["sent"], flush=True)
link.close()
"""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=10)


@pytest.fixture
def two_hosts() -> Iterator[tuple[str, str]]:
    """Two network namespaces linked by a veth pair; yields their netns paths; removes them."""
    require_binary("ip")
    require_binary("nsenter")
    if os.geteuid() != 0:
        from tests.conftest import IN_CI

        if IN_CI:
            pytest.fail("network namespaces need root, and CI runs as root: something is wrong with the runner")
        pytest.skip("network namespaces need root")
    tag = f"nwh4{os.getpid() % 100000}"
    coord, agent = f"{tag}c", f"{tag}a"
    made: list[str] = []
    try:
        for ns in (coord, agent):
            _ip("netns", "add", ns)
            made.append(ns)
        # The veth pair is created inside the coordinator's namespace: nothing touches the root one.
        _ip("-n", coord, "link", "add", "v0", "type", "veth", "peer", "name", "v1", "netns", agent)
        _ip("-n", coord, "addr", "add", f"{COORD_IP}/30", "dev", "v0")
        _ip("-n", agent, "addr", "add", f"{AGENT_IP}/30", "dev", "v1")
        for ns, dev in ((coord, "v0"), (agent, "v1")):
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        yield f"/var/run/netns/{coord}", f"/var/run/netns/{agent}"
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10).stdout
    assert coord not in out and agent not in out




def test_agent_and_coordinator_in_separate_namespaces(two_hosts: tuple[str, str], tmp_path: Path) -> None:
    coord_ns, agent_ns = two_hosts
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON_WATCH_")}
    env["NEURON_WATCH_SECRET"] = SECRET
    run_dir = tmp_path / "coord"
    coord = subprocess.Popen(
        ["nsenter", f"--net={coord_ns}", sys.executable, "-m", "neuron_watch.cli", "--run-dir", str(run_dir),
         "--job-id", JOB, "coordinator", "--bind", f"{COORD_IP}:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    agent: subprocess.Popen[str] | None = None
    try:
        assert coord.stdout is not None
        banner = coord.stdout.readline()
        endpoint = banner.split(" on ", 1)[1].split(" ", 1)[0]
        assert endpoint.startswith(f"tcp://{COORD_IP}:"), banner
        agent = subprocess.Popen(
            ["nsenter", f"--net={agent_ns}", sys.executable, "-c", AGENT, endpoint, SECRET, "300"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
        out, err = agent.communicate(timeout=60)
        assert agent.returncode == 0, err
        assert out.startswith("acked"), out + err
        end = time.monotonic() + 20
        merged = run_dir / "merged.log"
        while not merged.exists() or len(merged.read_text().splitlines()) < 300:
            assert time.monotonic() < end, "lines did not reach merged.log"
            time.sleep(0.1)
        lines = merged.read_text().splitlines()
        for r in (0, 1):  # each rank's lines in order (a batch groups them per rank)
            assert [ln.split(" | ", 1)[1] for ln in lines if f" nsnode/rank{r} | " in ln] == [
                f"step {i} loss 1.0" for i in range(r, 300, 2)]
        assert len(lines) == 300
        # The agent classified its lines; the coordinator took its matches instead of classifying.
        summary = run_dir / "coordinator.json"
        while not summary.exists() or json.loads(summary.read_text())["lines"] < 300:
            assert time.monotonic() < end, "the summary never counted the lines"
            time.sleep(0.1)
        assert json.loads(summary.read_text())["unclassified_batches"] == 0
    finally:
        if agent is not None and agent.poll() is None:
            kill_group(agent)
        code = kill_group(coord)
    assert code == 128 + signal.SIGTERM
    for p in (coord, agent):
        assert p is not None
        with pytest.raises(ProcessLookupError):
            os.killpg(p.pid, 0)

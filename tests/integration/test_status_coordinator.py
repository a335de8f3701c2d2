"""`neuron-watch status --coordinator HOST:PORT`: the job's status asked of a live coordinator over its
authenticated socket (a read-only query), from another process, as an operator would."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from neuron_watch.config import WatchConfig
from neuron_watch.events import LogLine, RankKey
from neuron_watch.job.coordinator import Coordinator, CoordinatorSettings
from neuron_watch.node.agent_link import AgentLink, new_session
from neuron_watch.runtime import default_judge_factory
from tests.fixtures.procs import NEURON_WATCH

pytestmark = pytest.mark.integration

SECRET = "a status secret of enough bytes 42"
JOB = "job-status"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Coordinator]:
    """A coordinator with one agent that reported two ranks: rank 0 compiling, rank 1 waiting."""
    coord = Coordinator("127.0.0.1:0", SECRET.encode(), str(tmp_path / "coord"), job=JOB,
                        settings=CoordinatorSettings(expected_nodes=1, silence=1e6),
                        judge_factory=default_judge_factory(WatchConfig(hang_timeout=600.0)), announce=False)
    link = AgentLink(coord.endpoint, SECRET.encode(), job=JOB, node="trn-1", session=new_session(time.time()))
    now, wall = time.monotonic(), time.time()
    link.hello("trn-1", 1, [0, 1], now, wall)
    for r in (0, 1):
        link.add_line(LogLine(RankKey(link.node, r), "step 3 loss 0.5 step_time 0.1s", now, wall))
    link.add_line(LogLine(RankKey(link.node, 0),
                          "2024-04-12 07:13:06.000297:  271334  INFO ||NEURON_CC_WRAPPER||: Call compiler with cmd: "
                          "neuronx-cc compile --target=trn1 --framework=XLA "
                          "/tmp/w/model.MODULE_1+d41d8cd9.hlo_module.pb",
                          now, wall))
    link.add_line(LogLine(RankKey(link.node, 1),
                          "2023-Aug-01 16:14:43.0241 332066:332494 [29] include/socket.h:579 CCOM WARN Timeout waiting "
                          "for RX (waited 120 sec) - retrying", now + 1.0, wall + 1.0))  # after its last step
    link.flush_lines(now + 1.0, wall + 1.0)
    stop = threading.Event()

    def serve() -> None:  # the coordinator is single-threaded: this thread is its only user
        while not stop.is_set():
            m, w = time.monotonic(), time.time()
            link.tick(m, w)
            coord.poll(0.01)
            coord.tick(time.monotonic())

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    deadline = time.monotonic() + 15
    while coord.counters.lines < 4:
        assert time.monotonic() < deadline, "lines never arrived"
        time.sleep(0.02)
    try:
        yield coord
    finally:
        stop.set()
        t.join(10)
        link.close()
        coord.close()


def status(address: str, secret: str) -> subprocess.CompletedProcess[str]:
    env = {"NEURON_WATCH_SECRET": secret, "PATH": "/usr/bin:/bin"}
    return subprocess.run([NEURON_WATCH, "status", "--coordinator", address, "--once", "--json"], env=env,
                          capture_output=True, text=True, timeout=60)


def test_status_from_the_coordinator_shows_compiling_and_waiting(served: Coordinator) -> None:
    r = status(served.endpoint.replace("tcp://", ""), SECRET)
    assert r.returncode == 0, r.stderr
    view = json.loads(r.stdout)
    states = {(x["node"], x["rank"]): x["state"] for x in view["ranks"]}
    assert states == {("trn-1", 0): "compiling", ("trn-1", 1): "waiting"}
    assert served.counters.status_queries == 1


def test_a_wrong_secret_gets_no_answer(served: Coordinator) -> None:
    r = status(served.endpoint.replace("tcp://", ""), "not the job secret, but long enough")
    assert r.returncode == 3  # unobserved, never "healthy"
    assert "no answer from a coordinator" in r.stdout + r.stderr
    assert served.counters.status_queries == 0 and served.counters.bad_total() >= 1

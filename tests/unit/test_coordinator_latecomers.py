"""A node first heard after the running generation was launched is adopted by it (job/latecomers.py),
through :meth:`Coordinator.handle` as its agent signs its words (the socket is bound on loopback, never
used); fake clock. Found by hand: ``torchrun --nnodes 1:2`` on one node, a second node joining 20 s
later, torch 2.13's scale-up rendezvous stuck (its shared TCPStore: the new node waits for a MASTER_ADDR
the old rank 0 never sets again), the watchdog restarting the hung job as generation 1 on node 0 alone,
and the second node's torchrun timing out only then: its first words were of generation 0, its launcher
ended, and both the coordinator and that node waited for each other for ever. And with the scale-up
working (``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``), a node joining a restarted job trained unjudged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from neuron_watch.config import WatchConfig
from neuron_watch.events import LauncherExit, NodeStatus, StopReport
from neuron_watch.job.coordinator import Coordinator, CoordinatorSettings
from neuron_watch.recovery.policy import JobState
from neuron_watch.runtime import default_judge_factory
from neuron_watch.wire.auth import Signer
from neuron_watch.wire.protocol import Header, Msg, Status, encode, kind_of

SECRET = b"a latecomers' secret of enough bytes"
JOB = "job-late"
SESSION = 77


@pytest.fixture
def coord(tmp_path: Path) -> Iterator[Coordinator]:
    c = Coordinator("127.0.0.1:0", SECRET, str(tmp_path / "run"), job=JOB,
                    settings=CoordinatorSettings(silence=1e6, settle=1.0),
                    judge_factory=default_judge_factory(WatchConfig()), announce=False, session=SESSION)
    yield c
    c.close()


class Node:
    """One agent's words, numbered as its link numbers them."""

    def __init__(self, coord: Coordinator, name: str) -> None:
        self.coord, self.name, self.seq = coord, name, 0

    def say(self, state: NodeStatus, now: float, generation: int,
            report: StopReport | LauncherExit | None = None) -> None:
        body = Status(state.value, "", report={} if report is None else report.to_wire())
        h = Header(kind=kind_of(body), job=JOB, node=self.name, session=7, generation=generation, seq=self.seq,
                   base=self.seq, mono=now, wall=now, sent=now, echo=SESSION)
        self.seq += 1
        self.coord.handle(self.name.encode(), Signer.for_agent(SECRET, JOB).sign(encode(Msg(h, body))), now)


def restarted_on_a_alone(coord: Coordinator) -> Node:
    """Node a's launcher fails in generation 0; the job is restarted as generation 1 on a alone."""
    a = Node(coord, "a")
    a.say(NodeStatus.LAUNCHED, 1.0, 0)
    a.say(NodeStatus.FAILED, 2.0, 0, LauncherExit(1))
    now = 2.0
    while coord.recovery.state is not JobState.CAPTURING and now < 30:
        now += 0.5
        coord.tick(now)
    a.say(NodeStatus.EVIDENCE_DONE, now, 0)
    coord.tick(now + 0.1)
    assert coord.recovery.state is JobState.STOPPING
    a.say(NodeStatus.STOPPED, now + 0.2, 0, StopReport(rung="sigterm", seconds=0.1))
    coord.tick(now + 0.3)
    coord.tick(now + 0.4)
    assert coord.generation == 1 and coord.latecomers.launched_on == {"a"}
    return a


def warnings(coord: Coordinator, kind: str) -> list[dict[str, object]]:
    coord.events.flush()
    path = Path(coord.run_dir) / "events.jsonl"
    evs = [json.loads(line) for line in path.read_text().splitlines()]
    return [e for e in evs if e["event"] == "warning" and e.get("kind") == kind]


def test_a_node_whose_launcher_fails_joining_a_restarted_job_is_its_failure_and_the_job_restarts(
        coord: Coordinator) -> None:
    a = restarted_on_a_alone(coord)
    a.say(NodeStatus.LAUNCHED, 20.0, 1)
    b = Node(coord, "b")
    b.say(NodeStatus.LAUNCHED, 21.0, 0)  # its hello's generation (a status carries the same header)
    (said,) = warnings(coord, "node_adopted")
    assert said["node"] == "b" and said["generation"] == 1 and "generation 1's" in str(said["message"])
    assert coord.nodes["b"].generation == 1 and coord.nodes["b"].adopted == (0, 1)
    b.say(NodeStatus.FAILED, 21.5, 0, LauncherExit(1))  # its torchrun's rendezvous failed
    assert coord.nodes["b"].status is NodeStatus.FAILED  # generation 1's failure, not a late word
    now = 21.5
    while coord.recovery.state is not JobState.CAPTURING and now < 40:
        now += 0.5
        coord.tick(now)
    assert coord.recovery.state is JobState.CAPTURING  # it used to wait for b for ever
    assert len(warnings(coord, "node_adopted")) == 1


def test_a_node_that_joins_a_restarted_job_and_trains_is_judged_and_its_end_counted(coord: Coordinator) -> None:
    a = restarted_on_a_alone(coord)
    a.say(NodeStatus.LAUNCHED, 20.0, 1)
    b = Node(coord, "b")
    b.say(NodeStatus.LAUNCHED, 21.0, 0)
    a.say(NodeStatus.FINISHED, 30.0, 1, LauncherExit(0))
    coord.tick(30.1)
    assert coord.recovery.live  # b, a member of generation 1, still trains
    b.say(NodeStatus.FINISHED, 31.0, 0, LauncherExit(0))
    coord.tick(31.1)
    assert coord.recovery.state is JobState.FINISHED


def test_a_node_the_relaunch_reached_is_not_adopted_and_its_late_word_stays_late(coord: Coordinator) -> None:
    """The usual race: the relaunch's launch reached b, whose failure of generation 0 comes first."""
    a = Node(coord, "a")
    b = Node(coord, "b")
    a.say(NodeStatus.LAUNCHED, 1.0, 0)
    b.say(NodeStatus.LAUNCHED, 1.0, 0)
    a.say(NodeStatus.FAILED, 2.0, 0, LauncherExit(1))
    b.say(NodeStatus.FINISHING, 2.0, 0)
    now = 2.0
    while coord.recovery.state is not JobState.CAPTURING and now < 30:
        now += 0.5
        coord.tick(now)
    a.say(NodeStatus.EVIDENCE_DONE, now, 0)
    b.say(NodeStatus.EVIDENCE_DONE, now, 0)
    coord.tick(now + 0.1)
    a.say(NodeStatus.STOPPED, now + 0.2, 0, StopReport(rung="sigterm", seconds=0.1))
    b.say(NodeStatus.STOPPED, now + 0.2, 0, StopReport(rung="sigterm", seconds=0.1))
    coord.tick(now + 0.3)
    coord.tick(now + 0.4)
    assert coord.generation == 1 and coord.latecomers.launched_on == {"a", "b"}
    b.say(NodeStatus.FAILED, now + 0.5, 0, LauncherExit(-15))  # its stopped torchrun's end, late
    coord.tick(now + 0.6)
    assert warnings(coord, "node_adopted") == [] and coord.nodes["b"].status is NodeStatus.STOPPED
    assert coord.recovery.state is not JobState.CAPTURING


def test_in_generation_0_nobody_is_adopted(coord: Coordinator) -> None:
    Node(coord, "a").say(NodeStatus.LAUNCHED, 1.0, 0)
    Node(coord, "b").say(NodeStatus.LAUNCHED, 5.0, 0)
    assert coord.nodes["b"].adopted is None and warnings(coord, "node_adopted") == []

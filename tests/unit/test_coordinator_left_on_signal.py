"""A node's word that it stopped on its own signal and leaves (``stopped`` with ``own_signal``, then
``exited``), handed to :meth:`Coordinator.handle` as its agent signs it (the socket is bound on
loopback and never used); fake clock. Said in the current generation, it ends the job on that word;
said by an agent of another generation (an srun step's agents, ended by us at a restart), it is no
node leaving the job."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from neuron_watch.config import WatchConfig
from neuron_watch.events import NodeStatus, StopReport
from neuron_watch.job.coordinator import Coordinator, CoordinatorSettings
from neuron_watch.runtime import default_judge_factory
from neuron_watch.wire.auth import Signer
from neuron_watch.wire.protocol import Header, Msg, Status, encode, kind_of

SECRET = b"a left-on-signal secret of enough bytes"
JOB = "job-left"
SESSION = 99


@pytest.fixture
def coord(tmp_path: Path) -> Iterator[Coordinator]:
    c = Coordinator("127.0.0.1:0", SECRET, str(tmp_path / "run"), job=JOB, settings=CoordinatorSettings(silence=1e6),
                    judge_factory=default_judge_factory(WatchConfig()), announce=False, session=SESSION)
    yield c
    c.close()


def say(coord: Coordinator, node: str, seq: int, state: NodeStatus, now: float, generation: int = 0,
        report: StopReport | None = None) -> None:
    body = Status(state.value, "stopped by its own SIGTERM" if report else "", report={} if report is None
                  else report.to_wire())
    h = Header(kind=kind_of(body), job=JOB, node=node, session=7, generation=generation, seq=seq, base=seq,
               mono=now, wall=now, sent=now, echo=SESSION)
    coord.handle(node.encode(), Signer.for_agent(SECRET, JOB).sign(encode(Msg(h, body))), now)


OWN = StopReport(rung="sigterm", seconds=0.4, own_signal=15)


def test_a_node_that_left_on_its_own_signal_in_this_generation_stops_the_job(coord: Coordinator) -> None:
    say(coord, "a", 0, NodeStatus.LAUNCHED, 1.0)
    say(coord, "b", 0, NodeStatus.LAUNCHED, 1.0)
    say(coord, "b", 1, NodeStatus.STOPPED, 2.0, report=OWN)
    say(coord, "b", 2, NodeStatus.EXITED, 2.0)
    view = coord.nodes["b"]
    assert view.stop_report is not None and view.stop_report.own_signal == 15
    coord.tick(2.1)
    assert coord.interrupted


def test_the_same_word_from_an_agent_of_another_generation_is_not_a_node_leaving(coord: Coordinator) -> None:
    say(coord, "a", 0, NodeStatus.LAUNCHED, 1.0)
    say(coord, "b", 0, NodeStatus.LAUNCHED, 1.0)
    say(coord, "b", 1, NodeStatus.STOPPED, 2.0, generation=1, report=OWN)
    say(coord, "b", 2, NodeStatus.EXITED, 2.0, generation=1)
    view = coord.nodes["b"]
    assert view.stop_report is not None and view.stop_report.own_signal == 0
    coord.tick(2.1)
    assert not coord.interrupted

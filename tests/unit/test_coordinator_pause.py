"""A pause of the coordinator itself (SIGSTOP of its wrapper, a console nobody reads) is not silence
of the job: the coordinator notices the jump of its clock between ticks, keeps its nodes observed,
and gives no verdict until what the nodes buffered meanwhile has arrived (a verdict that ran
before the pending batch would restart a healthy job). Fake clock; signed messages are handed to
:meth:`Coordinator.handle` directly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from neuron_watch.config import WatchConfig
from neuron_watch.job.coordinator import Coordinator, CoordinatorSettings, NodeState
from neuron_watch.runtime import default_judge_factory
from neuron_watch.wire.protocol import Heartbeat
from tests.unit.test_coordinator_progress import COORDINATOR_SESSION, JOB, SECRET, STEP, Agent, Clock


def make(tmp_path: Path, clock: Clock, pause_jump: float | None) -> Coordinator:
    return Coordinator("127.0.0.1:0", SECRET, str(tmp_path / "run"), job=JOB,
                       settings=CoordinatorSettings(expected_nodes=1, silence=10.0, pause_jump=pause_jump,
                                                    pause_grace=6.0),
                       judge_factory=default_judge_factory(WatchConfig(hang_timeout=5.0)), clock=clock.mono,
                       wall=clock.wall, announce=False, session=COORDINATOR_SESSION)  # the session Agent echoes


def named(coord: Coordinator, name: str) -> list[dict[str, Any]]:
    return [e for e in coord.events.history if e["event"] == name]


def ticks(coord: Coordinator, clock: Clock, start: float, end: float) -> None:
    t = start
    while t <= end:
        clock.now = t
        coord.tick(t)
        t += 0.1


def scenario(coord: Coordinator, clock: Clock) -> None:
    """Steps every second until 1010; the coordinator is away 1010..1060 while the job trains on;
    the batches buffered meanwhile arrive one turn after it is back (the agent reads, then sends);
    then steps every second again. Without pause detection, the heartbeat that arrives before the
    batches makes the node observed again and the verdict runs on a 50 s old last step."""
    agent = Agent()
    for step in range(1, 11):
        at = 1000.0 + step
        coord.handle(b"agent", agent.lines(0, STEP.format(step), at, at, True), at)
        ticks(coord, clock, at, at + 0.9)
    clock.now = 1060.0
    coord.tick(1060.0)  # the first turn after the pause: nothing read yet
    # the agent's heartbeat comes first (its lines wait for the batch age): the race a pause opens
    coord.handle(b"agent", agent.frames(Heartbeat(0, 0, 0), 1060.15), 1060.15)
    clock.now = 1060.15  # past the verdict interval
    coord.tick(1060.15)
    for step in range(11, 61):  # printed during the pause, read and sent now
        coord.handle(b"agent", agent.lines(0, STEP.format(step), 1000.0 + step, 1060.3, True), 1060.3)
    ticks(coord, clock, 1060.3, 1060.9)
    for step in range(61, 71):  # and the job goes on
        at = 1000.0 + step
        coord.handle(b"agent", agent.lines(0, STEP.format(step), at, at, True), at)
        ticks(coord, clock, at, at + 0.9)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_after_its_own_pause_the_coordinator_judges_only_once_the_buffered_batches_are_in(
    tmp_path: Path, clock: Clock
) -> None:
    coord = make(tmp_path, clock, pause_jump=5.0)
    try:
        scenario(coord, clock)
        assert not named(coord, "command")  # no capture_evidence: the job was never judged hung
        assert not [v for v in named(coord, "verdict") if v["label"] != "healthy"]
        (paused,) = [w for w in named(coord, "warning") if w["kind"] == "coordinator_paused"]
        assert 45.0 < paused["seconds"] < 51.0
        assert not named(coord, "node_unobserved")  # we were deaf; the node was not silent
        assert all(v.state is NodeState.CONNECTED for v in coord.nodes.values())
        assert coord.last_verdict is not None and coord.last_verdict.label.value == "healthy"
    finally:
        coord.close()


def test_without_pause_detection_the_same_story_is_judged_a_hang(tmp_path: Path, clock: Clock) -> None:
    """The control: what the coordinator did before (and what a fast-forwarded test clock still gets)."""
    coord = make(tmp_path, clock, pause_jump=None)
    try:
        scenario(coord, clock)
        assert [c["command"] for c in named(coord, "command")][:1] == ["capture_evidence"]
    finally:
        coord.close()

"""A coordinator behind the nodes' messages says so (events, console), by how much and what it shed,
sheds the work off the verdict's path (the ranks' tails, status.json writes), tells the agents in
its acks, and says when it has caught up. Fake clock; signed messages handed to ``handle``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from neuron_watch.config import WatchConfig
from neuron_watch.events import RankKey
from neuron_watch.job.coordinator import Coordinator, CoordinatorSettings
from neuron_watch.outputs.console import ConsoleSink
from neuron_watch.runtime import default_judge_factory
from tests.unit.test_coordinator_progress import COORDINATOR_SESSION, JOB, NODE, SECRET, STEP, Agent, Clock


def named(coord: Coordinator, name: str) -> list[dict[str, Any]]:
    return [e for e in coord.events.history if e["event"] == name]


def test_a_coordinator_behind_says_it_sheds_the_tails_and_says_when_it_caught_up(tmp_path: Path) -> None:
    clock = Clock()
    coord = Coordinator("127.0.0.1:0", SECRET, str(tmp_path / "run"), job=JOB,
                        settings=CoordinatorSettings(expected_nodes=1, silence=1e6),
                        judge_factory=default_judge_factory(WatchConfig()), clock=clock.mono, wall=clock.wall,
                        announce=False, session=COORDINATOR_SESSION)
    try:
        agent = Agent()
        key = RankKey(NODE, 0)
        # prompt: each batch handled 10 ms after it was sent (the node's transit)
        for step in range(1, 4):
            at = 1000.0 + step
            coord.handle(b"agent", agent.lines(0, STEP.format(step), at, at, True), at + 0.01)
            clock.now = at + 0.1
            coord.tick(clock.now)
        assert coord.behind < 0.1 and not named(coord, "coordinator_behind")
        assert len(coord.tail(key)) == 3
        # the next batches waited 5 s in the queue: handled at 1010, sent at 1005
        for step in range(4, 7):
            coord.handle(b"agent", agent.lines(0, STEP.format(step), 1005.0, 1005.0, True), 1010.0)
        clock.now = 1010.1
        coord.tick(clock.now)
        assert 4.9 < coord.behind < 5.1
        said = named(coord, "coordinator_behind")
        assert len(said) == 1 and said[0]["behind"] == 5.0 and said[0]["nodes"] == 1
        # while behind, the tails are shed (counted), the judge still takes every step
        coord.handle(b"agent", agent.lines(0, STEP.format(7), 1005.5, 1005.5, True), 1010.2)
        assert coord.counters.tail_lines_shed == 1 and len(coord.tail(key)) == 6
        assert coord.judge is not None and coord.judge.max_step == 7
        line = ConsoleSink().format(said[0])
        assert line is not None and "5.0s behind" in line
        # prompt again: caught up, said once, with what was shed
        coord.handle(b"agent", agent.lines(0, STEP.format(8), 1011.0, 1011.0, True), 1011.01)
        for t in (1011.1, 1011.2):  # the ack interval that held the late message, then a prompt one
            clock.now = t
            coord.tick(t)
        assert coord.behind < 0.1
        up = named(coord, "coordinator_caught_up")
        assert len(up) == 1 and up[0]["tail_lines_shed"] == coord.counters.tail_lines_shed == 2  # (1011.01 too)
        assert len(named(coord, "coordinator_behind")) == 1
    finally:
        coord.close()


def test_two_hosts_clocks_drifting_apart_are_not_a_backlog(tmp_path: Path) -> None:
    # the node's monotonic clock runs 1,000 ppm slow against ours for two hours: 7.2 s apart at the
    # end, which a transit measured once would read as 7.2 s behind
    clock = Clock()
    coord = Coordinator("127.0.0.1:0", SECRET, str(tmp_path / "run"), job=JOB,
                        settings=CoordinatorSettings(expected_nodes=1, silence=1e6), clock=clock.mono,
                        wall=clock.wall, announce=False, session=COORDINATOR_SESSION)
    try:
        agent = Agent()
        worst = 0.0
        for k in range(720):
            at = 1000.0 + 10 * k
            sent = at - 0.01 - 0.001 * (at - 1000.0)  # its clock, behind ours by the drift
            coord.handle(b"agent", agent.lines(0, STEP.format(k), sent, sent, True), at)
            clock.now = at + 0.1
            coord.tick(clock.now)
            worst = max(worst, coord.behind)
        assert worst < 0.7 and not named(coord, "coordinator_behind")
    finally:
        coord.close()

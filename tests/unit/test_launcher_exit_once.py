"""A node's launcher exit is reported once: by the node's ``finished``/``failed`` status, which
carries its code. The coordinator gives it to the judge and to events.jsonl as the exit of the
node's rank -1, exactly once; the agent's observer sends no separate rank -1 exit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from neuron_watch.events import LauncherExit, NodeStatus
from neuron_watch.job.coordinator import Coordinator
from neuron_watch.node.observations import RanksExited, StatusSeen
from neuron_watch.wire.protocol import Hello, Status
from tests.unit.test_coordinator_progress import COORDINATOR_SESSION, JOB, NODE, SECRET, Agent, Clock


def named(c: Coordinator, name: str) -> list[dict[str, Any]]:
    return [e for e in c.events.history if e["event"] == name]


def _coordinator(tmp_path: Path, clock: Clock) -> Coordinator:
    from neuron_watch.config import WatchConfig
    from neuron_watch.job.coordinator import CoordinatorSettings
    from neuron_watch.runtime import default_judge_factory

    return Coordinator("127.0.0.1:0", SECRET, str(tmp_path / "run"), job=JOB,
                       settings=CoordinatorSettings(expected_nodes=1, silence=1e6),
                       judge_factory=default_judge_factory(WatchConfig()), clock=clock.mono, wall=clock.wall,
                       announce=False, session=COORDINATOR_SESSION)


def test_a_failed_status_is_the_launchers_one_exit(tmp_path: Path) -> None:
    clock = Clock()
    coord = _coordinator(tmp_path, clock)
    try:
        _one_exit(coord, clock)
    finally:
        coord.close()


def _one_exit(coord: Coordinator, clock: Clock) -> None:
    agent = Agent()
    coord.handle(b"agent", agent.frames(Hello("h", 1, (0,), "x", 0), 1000.0), 1000.0)
    clock.now = 1001.0
    coord.handle(b"agent", agent.frames(Status(NodeStatus.FAILED.value, "exit code 3", "",
                                               report=LauncherExit(3).to_wire()), 1001.0), 1001.0)
    exits = named(coord, "rank_exit")
    assert [(e["rank"], e["exit_code"]) for e in exits] == [(-1, 3)]
    assert coord.judge is not None and coord.judge.launcher_exit is not None  # type: ignore[attr-defined]
    assert coord.judge.launcher_exit.exit_code == 3  # type: ignore[attr-defined]
    assert coord.nodes[NODE].launcher_code == 3


def test_the_launchers_exit_is_kept_once_in_the_node_view_and_the_judge_reads_it(tmp_path: Path) -> None:
    """One record: the node's view holds the exit; the judge reads it there, so a new generation
    that clears the view clears what the judge sees, and the judge keeps no copy of its own."""
    coord = _coordinator(tmp_path, Clock())
    try:
        agent = Agent()
        coord.handle(b"agent", agent.frames(Hello("h", 1, (0,), "x", 0), 1000.0), 1000.0)
        coord.handle(b"agent", agent.frames(Status(NodeStatus.FAILED.value, "exit code 3", "",
                                                   report=LauncherExit(3).to_wire()), 1001.0), 1001.0)
        judge = coord.judge
        assert judge is not None and judge.launchers is coord.registry
        assert judge._launcher_exit is None  # type: ignore[attr-defined]  # no copy in the judge
        view = coord.nodes[NODE]
        assert view.launcher_exit is not None and view.launcher_exit.key.rank == -1
        assert judge.launcher_exit is view.launcher_exit  # type: ignore[attr-defined]
        view.launcher_exit = None  # what a new generation does to every view
        assert judge.launcher_exit is None and view.launcher_code is None  # type: ignore[attr-defined]
    finally:
        coord.close()


class FakeLauncher:
    """A launcher that has exited with 3; a task launcher (``own_rank``) when given one."""

    name = "fake"
    pid = None
    gave_up_code = 1

    def __init__(self, own_rank: int | None) -> None:
        self.own_rank = own_rank

    def poll(self) -> int | None:
        return 3

    def read_output(self, final: bool) -> Iterator[str]:
        return iter(())


def _observed(tmp_path: Path, own_rank: int | None) -> list[Any]:
    from neuron_watch.config import WatchConfig
    from neuron_watch.iofaults import IOHealth
    from neuron_watch.node.generation import Generations, NodeCheckpoints, NodeContext
    from neuron_watch.node.observations import EarlyObservations
    from neuron_watch.node.observer import Observer

    ctx = NodeContext(WatchConfig(no_rank_probe=True), FakeLauncher(own_rank), "j", "n0", 0,  # type: ignore[arg-type]
                      str(tmp_path), {}, IOHealth("n0"), clock=lambda: 5.0, wall=lambda: 6.0)
    checkpoints = NodeCheckpoints(ctx)
    early = EarlyObservations()
    observer = Observer(ctx, Generations(ctx, checkpoints), checkpoints, lambda: early)
    gen = type("Gen", (), {"exit_code": None, "gave_up": False, "checkpoint": "", "probe_dir": None,
                           "worker_pids": {}, "ended_pids": {}})()
    observer.check_exit(gen, 5.0, 6.0)  # type: ignore[arg-type]
    assert gen.exit_code == 3
    return early.seen


def test_the_observer_reports_the_launchers_exit_in_its_status_only(tmp_path: Path) -> None:
    seen = _observed(tmp_path, None)
    assert [type(s).__name__ for s in seen] == ["StatusSeen"]
    status = seen[0]
    assert isinstance(status, StatusSeen) and status.state is NodeStatus.FAILED and status.report == LauncherExit(3)


def test_a_task_that_is_a_rank_reports_that_ranks_exit_and_the_status(tmp_path: Path) -> None:
    seen = _observed(tmp_path, 4)
    assert [type(s).__name__ for s in seen] == ["RanksExited", "StatusSeen"]
    assert isinstance(seen[0], RanksExited) and [(r, c) for r, c, _t in seen[0].exits] == [(4, 3)]

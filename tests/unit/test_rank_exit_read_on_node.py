"""A rank's clean exit read on the node (torchrun reports failed ranks only): the observer reports,
once, a rank whose process is gone and whose own record (the rank bootstrap's status file) says its
interpreter finished normally with no uncaught exception, as exited with code 0 *presumed*; the
coordinator gives it to the judge and to events.jsonl as such, and an exit status reported after it
(torchrun's failure report) replaces it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from neuron_watch.events import RankKey
from neuron_watch.job.coordinator import Coordinator
from neuron_watch.node.observations import RanksExited
from neuron_watch.wire.protocol import ExitInfo, Exits, Hello
from tests.unit.test_coordinator_progress import Agent, Clock
from tests.unit.test_launcher_exit_once import FakeLauncher, _coordinator, named


class NoStreams:
    """A generation's rank files with nothing left to read."""

    skipped_lines = cut_lines = cut_bytes = 0

    def poll(self, now: float, wall: float, final: bool, to_eof: bool) -> list[Any]:
        return []


def observer_and_gen(tmp_path: Path, records: dict[int, dict[str, Any]]) -> tuple[Any, Any, list[Any]]:
    from neuron_watch.config import WatchConfig
    from neuron_watch.iofaults import IOHealth
    from neuron_watch.node.generation import Generations, NodeCheckpoints, NodeContext
    from neuron_watch.node.observations import EarlyObservations
    from neuron_watch.node.observer import Observer

    probe = tmp_path / "probe"
    probe.mkdir()
    for rank, doc in records.items():
        (probe / f"r{rank}.json").write_text(json.dumps(doc))
    ctx = NodeContext(WatchConfig(), FakeLauncher(None), "j", "n0", 0,  # type: ignore[arg-type]
                      str(tmp_path), {}, IOHealth("n0"), clock=lambda: 5.0, wall=lambda: 6.0)
    checkpoints = NodeCheckpoints(ctx)
    early = EarlyObservations()
    observer = Observer(ctx, Generations(ctx, checkpoints), checkpoints, lambda: early)
    gen = type("Gen", (), {"probe_dir": str(probe), "exits_told": set(), "streams": NoStreams()})()
    return observer, gen, early.seen


def test_a_rank_gone_with_its_record_of_a_normal_exit_is_reported_once_as_a_presumed_clean_exit(
        tmp_path: Path) -> None:
    observer, gen, seen = observer_and_gen(tmp_path, {
        0: {"state": "exited", "uncaught": ""},  # its interpreter finished normally
        1: {"state": "exited", "uncaught": "RuntimeError"},  # an uncaught exception ended it: exit 1
        2: {"state": "listening"},  # gone without its exit handlers (SIGKILL, os._exit)
        # 3: no record at all (no torch.distributed, no bootstrap)
        4: {"state": "exited"},  # a record of an older bootstrap: no exception said
    })
    observer._clean_exits(gen, [0, 1, 2, 3, 4], 5.0, 6.0)
    assert seen == [RanksExited(((0, 0, 5.0), (4, 0, 5.0)), 5.0, 6.0, presumed=True)]
    observer._clean_exits(gen, [0, 1, 2, 3, 4], 7.0, 8.0)  # the next sample: said once
    assert len(seen) == 1


def test_a_rank_whose_exit_the_launcher_reported_first_is_not_presumed_after(tmp_path: Path) -> None:
    observer, gen, seen = observer_and_gen(tmp_path, {0: {"state": "exited", "uncaught": ""}})
    gen.exits_told.add(0)  # torchrun's failure report named it (observer._parse_launcher_line)
    observer._clean_exits(gen, [0], 5.0, 6.0)
    assert seen == []


def test_at_the_launchers_exit_the_ranks_ended_since_the_last_sample_are_read_before_its_status(
        tmp_path: Path) -> None:
    """torchrun exits 0.1 s after its last worker, before the next process sample (1 s) sees them gone."""
    observer, gen, seen = observer_and_gen(tmp_path, {0: {"state": "exited", "uncaught": ""}})
    for name, value in (("exit_code", None), ("gave_up", False), ("checkpoint", ""),
                        ("worker_pids", {0: 11, 1: 12}), ("ended_pids", {})):
        setattr(gen, name, value)
    observer.check_exit(gen, 5.0, 6.0)  # the launcher exited with 3 (FakeLauncher): rank 1 failed
    assert [type(s).__name__ for s in seen] == ["RanksExited", "StatusSeen"]
    assert seen[0] == RanksExited(((0, 0, 5.0),), 5.0, 6.0, presumed=True)


def test_the_coordinator_gives_a_presumed_exit_to_the_judge_and_an_exit_status_replaces_it(tmp_path: Path) -> None:
    clock = Clock()
    coord: Coordinator = _coordinator(tmp_path, clock)
    try:
        agent = Agent()
        coord.handle(b"agent", agent.frames(Hello("h", 1, (0, 1), "x", 0), 1000.0), 1000.0)
        clock.now = 1001.0
        coord.handle(b"agent", agent.frames(Exits((ExitInfo(1, 0, 0.5, presumed=True),)), 1001.0), 1001.0)
        exits = named(coord, "rank_exit")
        assert [(e["rank"], e["exit_code"], e.get("presumed")) for e in exits] == [(1, 0, True)]
        judge = coord.judge
        assert judge is not None
        st = judge.ranks[RankKey(exits[0]["node"], 1)]  # type: ignore[attr-defined]
        assert (st.exit_code, st.exit_presumed) == (0, True)
        clock.now = 1002.0
        coord.handle(b"agent", agent.frames(Exits((ExitInfo(1, 3, 0.0),)), 1002.0), 1002.0)
        exits = named(coord, "rank_exit")
        assert [(e["rank"], e["exit_code"], e.get("presumed")) for e in exits] == [(1, 0, True), (1, 3, None)]
        assert (st.exit_code, st.exit_presumed) == (3, False)
    finally:
        coord.close()

"""When the coordinator freezes its heap (every announced rank held) and unfreezes it (a new judge,
the coordinator closing); a real freeze keeps the frozen state out of a collection's walk."""

from __future__ import annotations

import gc
from pathlib import Path

from neuron_watch.config import WatchConfig
from neuron_watch.events import RankKey
from neuron_watch.job.coordinator import Coordinator
from neuron_watch.job.heapfreeze import FREEZE_RANKS, OLDEST_LESS_OFTEN, Collector, HeapFreeze
from neuron_watch.runtime import default_judge_factory


class Recorder:
    """A collector that records what it was asked to do, in order (its thresholds kept apart)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.threshold = (700, 10, 10)

    def set_threshold(self, young: int, middle: int, oldest: int) -> None:
        self.threshold = (young, middle, oldest)

    def collector(self) -> Collector:
        return Collector(collect=lambda: self.calls.append("collect"), freeze=lambda: self.calls.append("freeze"),
                         unfreeze=lambda: self.calls.append("unfreeze"), get_threshold=lambda: self.threshold,
                         set_threshold=self.set_threshold)


def test_frozen_once_every_announced_rank_is_held_after_a_collection() -> None:
    rec = Recorder()
    heap = HeapFreeze(floor=100, collector=rec.collector())
    judge = object()
    assert not heap.turn(judge, 150, 200)  # 50 announced ranks not yet held: their state is still to come
    assert rec.calls == []
    assert heap.turn(judge, 200, 200)
    assert rec.calls == ["collect", "freeze"]  # no garbage of the start-up frozen with the state
    assert not heap.turn(judge, 200, 200)  # nothing new to freeze
    assert rec.calls == ["collect", "freeze"]
    assert heap.frozen_ranks == 200 and heap.freezes == 1
    assert rec.threshold == (700, 10, 10 * OLDEST_LESS_OFTEN)  # the oldest generation walked less often


def test_a_node_that_joins_later_is_frozen_with_the_rest_once_held() -> None:
    rec = Recorder()
    heap = HeapFreeze(floor=100, collector=rec.collector())
    judge = object()
    heap.turn(judge, 200, 200)
    assert not heap.turn(judge, 200, 264)  # a node announced 64 ranks the judge does not hold yet
    assert heap.turn(judge, 264, 264)
    assert rec.calls == ["collect", "freeze"] * 2 and heap.frozen_ranks == 264
    assert rec.threshold == (700, 10, 10 * OLDEST_LESS_OFTEN)  # raised once, not again


def test_a_small_job_is_left_as_it_is() -> None:
    rec = Recorder()
    heap = HeapFreeze(collector=rec.collector())
    judge = object()
    assert not heap.turn(judge, FREEZE_RANKS - 1, FREEZE_RANKS - 1)
    assert not heap.turn(None, 0, 0)
    assert rec.calls == []


def test_a_new_judge_unfreezes_the_old_state_then_freezes_its_own_when_complete() -> None:
    rec = Recorder()
    heap = HeapFreeze(floor=100, collector=rec.collector())
    old, new = object(), object()
    heap.turn(old, 200, 200)
    assert not heap.turn(new, 10, 200)  # the new generation's ranks are still arriving
    assert rec.calls == ["collect", "freeze", "unfreeze"] and heap.frozen_ranks == 0
    assert rec.threshold == (700, 10, 10)  # as before the freeze while nothing is frozen
    assert heap.turn(new, 200, 200)
    assert rec.calls[-2:] == ["collect", "freeze"] and heap.unfreezes == 1


def test_release_unfreezes_only_what_it_froze() -> None:
    rec = Recorder()
    heap = HeapFreeze(floor=100, collector=rec.collector())
    heap.release()
    heap.turn(object(), 50, 50)  # below the floor: nothing frozen
    heap.release()
    assert rec.calls == []
    heap.turn(object(), 200, 200)
    heap.release()
    heap.release()
    assert rec.calls == ["collect", "freeze", "unfreeze"] and rec.threshold == (700, 10, 10)


def test_the_real_collector_keeps_frozen_state_out_of_a_collection_and_gives_it_back() -> None:
    assert gc.get_freeze_count() == 0, "another test left the heap frozen"
    before = gc.get_threshold()
    heap = HeapFreeze(floor=1)
    state = [[i] for i in range(1000)]  # long-lived containers, as a judge's per-rank state
    try:
        assert heap.turn(state, len(state), len(state))
        frozen = gc.get_freeze_count()
        assert frozen >= len(state)
        walked = {id(o) for o in gc.get_objects()}  # what a collection walks: the frozen state is not in it
        assert not walked & {id(x) for x in state}
    finally:
        heap.release()
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before
    walked = {id(o) for o in gc.get_objects()}
    assert {id(x) for x in state} <= walked


def test_the_coordinator_freezes_at_a_heap_turn_once_its_judge_holds_every_announced_rank(tmp_path: Path) -> None:
    rec = Recorder()
    c = Coordinator("127.0.0.1:0", b"a heap freeze secret of enough bytes", str(tmp_path), job="job-heap",
                    judge_factory=default_judge_factory(WatchConfig()), announce=False)
    try:
        c.heap = HeapFreeze(floor=4, collector=rec.collector())
        view, _ = c.registry.join("trn-1", 7, b"r1", 0, 10.0)
        view.ranks = (0, 1, 2, 3)  # as its hello announced them
        judge = c.judge
        assert judge is not None
        judge.expect([RankKey("trn-1", r) for r in range(3)], 10.0)
        c.tick(10.0)  # writes status.json: the heap is looked at in another turn
        c.tick(10.5)
        assert rec.calls == []  # a rank of the four is not held yet
        judge.expect([RankKey("trn-1", 3)], 11.0)
        c.tick(11.0)
        assert rec.calls == []  # looked at once a second
        c.tick(11.6)
        assert rec.calls == ["collect", "freeze"]
        c.judge = c._new_judge(1, 12.0)  # a new generation's judge
        c.tick(12.0)
        c.tick(12.7)
        assert rec.calls == ["collect", "freeze", "unfreeze"]
        # the loop never looks at the heap in the turn that writes status.json (each costs 0.2-0.4 s at tens
        # of thousands of ranks)
        wrote: list[float] = []
        real_write = c.write_status
        c.write_status = lambda now: (wrote.append(now), real_write(now))[-1]  # type: ignore[method-assign]
        looked: list[float] = []
        turn_at = [0.0]
        real_turn = c.heap.turn
        c.heap.turn = lambda *a: (looked.append(turn_at[0]), real_turn(*a))[-1]  # type: ignore[method-assign]
        for i in range(20):
            turn_at[0] = 20.0 + 0.3 * i
            c.tick(turn_at[0])
        assert len(looked) >= 3 and wrote and not set(looked) & set(wrote)
    finally:
        c.close()
    assert rec.threshold == (700, 10, 10)

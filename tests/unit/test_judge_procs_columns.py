"""A node's procs reading taken by column (:meth:`Judge.observe_worker_columns`,
:meth:`Judge.observe_readings`) leaves the judge as the per-rank calls do, and the per-process
rules hold: a stopped process or an open recompile makes the rank's compile evidence count again,
only CPU growth moves the time the process tree last grew."""

from __future__ import annotations

import random

from neuron_watch.diagnosis.flight_recorder import GroupProgress
from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import RankKey, WorkerSample

KB = default_knowledge_base()


def state(j: Judge) -> dict[RankKey, tuple[object, ...]]:
    return {k: (st.tree_cpu, st.tree_cpu_grew, st.stopped, st.last_collective, st.collective_advances,
                dict(st.collectives), st.order, st.first_seen)
            for k, st in j.ranks.items()}


def test_readings_by_column_agree_with_one_call_per_rank() -> None:
    rng = random.Random(7)
    keys = [RankKey(f"n{i // 8}", i) for i in range(32)]
    one, many = Judge(KB, JudgeSettings(), start=0.0), Judge(KB, JudgeSettings(), start=0.0)
    for turn in range(40):
        now = 10.0 + turn
        read = rng.sample(keys, rng.randint(1, len(keys)))  # ranks new to the judge among them
        groups = [tuple(GroupProgress(str(g), rng.randint(-1, turn), turn, turn, "nccl:all_reduce", "completed",
                                      1.8e9 + turn, turn, "[[8]] Float") for g in range(rng.randint(0, 2)))
                  for _ in read]
        times = [now - rng.random() for _ in read]
        for k, g, t in zip(read, groups, times, strict=True):
            one.observe_collectives(k, g, t)
        many.observe_readings(read, groups, times)
        assert state(many) == state(one)
        assert many._progress_seen == one._progress_seen and many._latest_work() == one._latest_work()
        assert {st.key for st in many.take_touched()} == {st.key for st in one.take_touched()}


def test_workers_by_column_agree_with_samples() -> None:
    rng = random.Random(11)
    keys = [RankKey("n0", i) for i in range(16)]
    by_sample, by_column = Judge(KB, JudgeSettings(), start=0.0), Judge(KB, JudgeSettings(), start=0.0)
    cpu = dict.fromkeys(keys, 0.0)
    for turn in range(30):
        now = 5.0 + turn
        seen = rng.sample(keys, rng.randint(1, len(keys)))
        for k in seen:
            cpu[k] += rng.choice((0.0, 0.0, 0.5))  # a process tree that did not grow, or did
        stopped = [rng.random() < 0.2 for _ in seen]
        by_sample.observe_workers([WorkerSample(k, cpu[k], s, now) for k, s in zip(seen, stopped, strict=True)], now)
        by_column.observe_worker_columns(seen, [cpu[k] for k in seen], stopped, [now] * len(seen), now)
        assert state(by_column) == state(by_sample)
        assert set(by_column._may_compile) == set(by_sample._may_compile)
        assert {st.key for st in by_column.take_touched()} == {st.key for st in by_sample.take_touched()}


def test_a_stopped_process_counts_again_and_only_growth_moves_its_time() -> None:
    j = Judge(KB, JudgeSettings(), start=0.0)
    k = RankKey("n0", 3)
    j.observe_worker_columns([k], [4.0], [False], [10.0], 10.0)
    st = j.ranks[k]
    assert (st.tree_cpu, st.tree_cpu_grew, st.stopped) == (4.0, 10.0, False)
    j.take_touched()
    j._may_compile.clear()
    j.observe_worker_columns([k], [4.0], [False], [11.0], 11.0)  # no growth, same state: nothing moves
    assert (st.tree_cpu_grew, j.take_touched(), k in j._may_compile) == (10.0, [], False)
    j.observe_worker_columns([k], [4.0], [True], [12.0], 12.0)  # stopped by a signal
    assert st.stopped and k in j._may_compile and j.take_touched() == [st]
    j.observe_worker_columns([k], [6.5], [True], [13.0], 13.0)
    # still stopped: what its tree burns (its compile workers finishing) is noted, not its work
    assert (st.tree_cpu, st.tree_cpu_grew, st.stopped_since) == (6.5, 10.0, 12.0)
    j.observe_worker_columns([k], [7.0], [False], [14.0], 14.0)  # continued: it computes again
    assert (st.tree_cpu, st.tree_cpu_grew, st.stopped, st.stopped_since) == (7.0, 14.0, False, None)

"""A big job's status summary kept by changes (``StatusBook``) says what ``summarise`` says of the
document listing every rank, built from scratch, after every change of a long random sequence:
the table's example lines and progress in batches, exits, compilers, stopped workers, flight
recorder readings, cache locks, nodes going silent and back, time passing, the job's end."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from neuron_watch.diagnosis.flight_recorder import GroupProgress
from neuron_watch.diagnosis.judge import STEADY_COLLECTIVES, Judge, JudgeSettings, RankState
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import CompilerSample, LogLine, NodeStatus, RankExit, RankKey, WorkerSample
from neuron_watch.job.statusbook import StatusBook
from neuron_watch.job.statusdoc import NodeState, status_document
from neuron_watch.outputs.status import summarise

from .scenario_lines import BASE
from .test_judge_batch import batch_args

KB = default_knowledge_base()
EXAMPLES = [e for s in KB.signatures for e in s.examples]
NODES, RANKS = 3, 4  # ranks per node


@dataclass
class View:
    """A node as the document reads it (the coordinator's NodeView)."""

    state: NodeState = NodeState.CONNECTED
    status: NodeStatus = "running"  # type: ignore[assignment]
    last_heard: float = BASE
    worker_pids: dict[int, int] = field(default_factory=dict)
    recorder: dict[int, str] = field(default_factory=dict)


def from_scratch(judge: Judge, now: float, nodes: dict[str, View], live: bool, job_state: str,
                 limit: int) -> dict[str, Any]:
    doc = status_document(job_id="j", generation=0, restarts=0, state=job_state, live=live, label=None, wall=now,
                          now=now, ranks=list(judge.rank_summaries(now)), hang_timeout=None, hang_timeout_kind=None,
                          progress={}, nodes=nodes, watchdog_io={})  # type: ignore[arg-type]
    return summarise(doc, limit)


def kept(book: StatusBook, judge: Judge, now: float, nodes: dict[str, View], live: bool, job_state: str,
         limit: int) -> dict[str, Any]:
    book.refresh(judge, now)
    return book.summary(now, nodes, judge.unobserved, live, job_state, limit)  # type: ignore[arg-type]


RANK_PART = ("ranks", "ranks_total", "ranks_by_state", "node_ranks", "ranks_omitted", "ranks_file")


def run(seed: int, judge: Judge, steps: int = 1500) -> list[int]:
    """Random changes to ``judge`` and its nodes; after each, both documents at ``now``. Returns the
    steps at which they differ."""
    rng = random.Random(seed)
    book = StatusBook()
    keys = [RankKey(f"n{n}", n * RANKS + r) for n in range(NODES) for r in range(RANKS)]
    nodes = {f"n{n}": View(worker_pids={n * RANKS + r: 1000 + n * RANKS + r for r in range(RANKS)})
             for n in range(NODES)}
    t, step, seq = BASE, 0, 0
    cpu: dict[RankKey, float] = {}
    differ: list[int] = []
    for i in range(steps):
        t += rng.choice((0.0, 0.1, 0.5, 2.0, 30.0, 61.0, 200.0))
        k = rng.random()
        if k < 0.5:  # a batch: progress, example lines, chatter
            lines = []
            for key in rng.sample(keys, rng.randrange(1, len(keys) + 1)):
                for _ in range(rng.randrange(1, 4)):
                    j = rng.random()
                    if j < 0.6:
                        step += rng.choice((0, 1, 1, 2, -3))
                        text = f"step {max(step, 0)} loss 2.{rng.randrange(9999):04d} lr 1e-4"
                    elif j < 0.85:
                        text = rng.choice(EXAMPLES)
                    else:
                        text = f"chatter {i}"
                    lines.append(LogLine(key, text, t - rng.choice((0.0, 0.2, 5.0)), t, f"/logs/{key.rank}.log", i))
            lines.sort(key=lambda ln: ln.mono)
            judge.observe_batch(*batch_args(judge, lines))
        elif k < 0.55:
            judge.observe_exit(RankExit(rng.choice(keys), rng.choice((0, 1, -9)), t))
        elif k < 0.63:
            some = rng.sample(keys, rng.randrange(0, 3))
            for key in some:
                cpu[key] = cpu.get(key, 0.0) + rng.choice((0.0, 5.0))
            node = rng.choice((None, *nodes))
            judge.observe_compilers([CompilerSample(key, 7000 + key.rank, cpu[key], t) for key in some
                                     if node is None or key.node == node], t, node)
        elif k < 0.7:
            judge.observe_workers([WorkerSample(key, rng.random() * 100, rng.random() < 0.2, t)
                                   for key in rng.sample(keys, rng.randrange(1, 5))], t)
        elif k < 0.8:
            seq += rng.choice((0, 1, 3))
            for key in rng.sample(keys, rng.randrange(1, 6)):
                judge.observe_collectives(key, [GroupProgress("0", seq, seq, seq)], t)
        elif k < 0.84:
            judge.observe_cache_locks(rng.sample(["/c/a.lock", "/c/b.lock"], rng.randrange(0, 3)), t)
        elif k < 0.9:
            node = rng.choice(list(nodes))
            if rng.random() < 0.5:
                judge.mark_unobserved(node, t)
            else:
                judge.mark_observed(node)
        elif k < 0.94:
            view = rng.choice(list(nodes.values()))
            view.state = rng.choice(list(NodeState))
        # else: time passes and nothing is seen
        live, job_state = (True, "running") if i < steps - 20 else (False, rng.choice(("finished", "failed")))
        limit = rng.choice((3, 256))
        a = kept(book, judge, t, nodes, live, job_state, limit)
        b = from_scratch(judge, t, nodes, live, job_state, limit)
        if {f: a[f] for f in RANK_PART} != {f: b[f] for f in RANK_PART}:
            differ.append(i)
    return differ


@pytest.mark.parametrize("seed", range(4))
def test_the_kept_summary_is_the_summary_from_scratch_after_every_change(seed: int) -> None:
    judge = Judge(KB, JudgeSettings(), BASE)
    assert run(seed, judge) == []
    states = {st.state_name(BASE, judge.settings) for st in judge.ranks.values()}
    assert len(judge.ranks) == NODES * RANKS and states  # the sequence did reach every rank


class Forgetful(Judge):
    """A judge that forgets to say one rank in three was touched (a missed update)."""

    def take_touched(self) -> list[RankState]:
        return [st for st in super().take_touched() if st.key.rank % 3]


def test_a_missed_update_is_caught() -> None:
    assert run(0, Forgetful(KB, JudgeSettings(), BASE), steps=400) != []


def test_steady_training_reads_no_rank_again() -> None:
    """Every rank printing steps (progress rows, as the agents send them) changes no rank's state:
    the book reads again only the rank that showed the job's new step first (it takes the judge's
    full path), and the document still moves every rank's step."""
    judge, book = Judge(KB, JudgeSettings(), BASE), StatusBook()
    keys = [RankKey(f"n{n}", n * 64 + r) for n in range(4) for r in range(64)]
    nodes = {f"n{n}": View() for n in range(4)}
    for s in range(1, 30):
        t = BASE + s
        lines = [LogLine(key, f"step {s} loss 2.5", t, t, "", s) for key in keys]
        judge.observe_batch(*batch_args(judge, lines))
        doc = kept(book, judge, t, nodes, True, "running", 256)
        if s > 5:  # past the starting ranks' first progress
            assert book.reread == 1, s
    assert doc["ranks_by_state"] == {"progressing": 256} and doc["ranks"] == []
    assert doc["node_ranks"]["n3"]["last_step"] == [29, 29]
    t += 3600.0  # an hour of silence: every rank is read again, and is silent
    doc = kept(book, judge, t, nodes, True, "running", 256)
    assert book.reread == 256 and doc["ranks_by_state"] == {"silent": 256}
    assert doc == {**doc, **{f: from_scratch(judge, t, nodes, True, "running", 256)[f] for f in RANK_PART}}


def test_a_rank_progressing_only_by_its_collectives_is_read_again_when_they_stop_completing() -> None:
    # Its lines keep coming (so it is not among the quiet ranks), none of them progress: once its
    # collectives are older than silent_after, time alone makes it starting or printing.
    judge, book = Judge(KB, JudgeSettings(), BASE), StatusBook()
    key, nodes = RankKey("n0", 0), {"n0": View(worker_pids={0: 1000})}
    _, silent_after, _ = judge.state_namer(BASE)
    states = []
    # (collectives that keep completing, STEADY_COLLECTIVES readings: one completion at start-up is not progress)
    for i, t in enumerate((BASE, BASE + 1.0, BASE + 2.0, BASE + 2.0 + silent_after + 2.0)):
        judge.observe_batch(*batch_args(judge, [LogLine(key, f"chatter {i}", t, t, "/logs/0.log", i)]))
        if i < STEADY_COLLECTIVES:
            judge.observe_collectives(key, [GroupProgress("0", i + 1, i + 1, i + 1)], t)
        a, b = kept(book, judge, t, nodes, True, "running", 256), from_scratch(judge, t, nodes, True, "running", 256)
        assert {f: a[f] for f in RANK_PART} == {f: b[f] for f in RANK_PART}, i
        states.append(next(iter(b["ranks_by_state"])))
    assert states[2] == "progressing" and states[3] != "progressing", states  # the sequence did reach both

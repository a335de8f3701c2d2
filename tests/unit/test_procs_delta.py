"""A node's procs readings say only what changed since the one the coordinator acknowledged
(``Procs.same_as``), and the judge ends in the same state, with the same verdicts, as with whole
readings. A lost message is never acknowledged, so never referred to; a new coordinator session or
a new generation gets a whole reading. Readings built by the node's :class:`ProcReadings`, signed
and handed to :meth:`Coordinator.handle` (the socket is bound on loopback and never used); fake
clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from neuron_watch.config import WatchConfig
from neuron_watch.diagnosis.flight_recorder import GroupProgress
from neuron_watch.diagnosis.judge import Judge
from neuron_watch.events import LogLine, RankKey
from neuron_watch.job.coordinator import Coordinator, CoordinatorSettings
from neuron_watch.node.proc_readings import ProcReadings
from neuron_watch.runtime import default_judge_factory
from neuron_watch.wire.auth import Signer
from neuron_watch.wire.protocol import Header, Msg, Procs, WorkerActivity, decode_body, encode, encode_body, kind_of

SECRET = b"a delta secret of enough bytes 12345"
JOB = "job-delta"
SESSION = 77
NODE = "n0"
RANKS = 4


def coordinator(path: Path) -> Coordinator:
    return Coordinator("127.0.0.1:0", SECRET, str(path), job=JOB, settings=CoordinatorSettings(silence=1e6),
                       judge_factory=default_judge_factory(WatchConfig()), announce=False, session=SESSION)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Coordinator, Coordinator]]:
    whole, delta = coordinator(tmp_path / "whole"), coordinator(tmp_path / "delta")
    yield whole, delta
    whole.close()
    delta.close()


def send(coord: Coordinator, seq: int, body: Procs, now: float, generation: int = 0) -> None:
    h = Header(kind=kind_of(body), job=JOB, node=NODE, session=5, generation=generation, seq=seq, base=seq,
               mono=now, wall=now, sent=now, echo=SESSION)
    coord.handle(NODE.encode(), Signer.for_agent(SECRET, JOB).sign(encode(Msg(h, body))), now)


def reading(t: int) -> dict[str, Any]:
    """The node's reading at second ``t``: rank 0 trains (CPU and collectives move), rank 1 is stuck
    from t=4 (nothing moves), rank 2 idles from t=5 to t=8 and is stopped by a signal at t=6 and 7
    (its tree's CPU grows at 7 all the same: its compile workers finish what it gave them),
    rank 3 leaves at t=9 and comes back with a new pid at t=11; every rank's flight recorder read
    each second."""
    workers, activity, collectives = [], [], []
    for r in range(RANKS):
        if r == 3 and 9 <= t < 11:
            continue
        cpu = {0: 10.0 + t, 1: 10.0 + min(t, 4), 2: 10.0 + min(t, 5) + max(0, t - 8) + 0.5 * (t >= 7), 3: 1.0 * t}[r]
        workers.append((r, (3000 if r == 3 and t >= 11 else 1000) + r))
        activity.append(WorkerActivity(r, cpu, "T" if r == 2 and t in (6, 7) else "S"))
        done = {0: t, 1: min(t, 4), 2: min(t, 6) + max(0, t - 8), 3: t}[r]
        groups = (GroupProgress("0", done, done, done, "gloo:all_reduce", "completed", 1e9 + done, done, "[[8]] Float"),
                  GroupProgress("1", 3, 3, 3, "gloo:barrier", "completed", 1e9, 3, "[] "))
        collectives.append((r, groups, "", float(t) - 0.1))
    return {"samples": [], "locks": (), "always": True, "workers": workers, "collectives": collectives,
            "activity": activity}


def state(judge: Judge) -> dict[RankKey, tuple[Any, ...]]:
    return {k: (st.tree_cpu, st.tree_cpu_grew, st.stopped, st.stopped_since, dict(st.collectives), st.last_collective,
                st.collective_advances, st.last_progress) for k, st in judge.ranks.items()}


def run(pair: tuple[Coordinator, Coordinator], lost: frozenset[int] = frozenset(),
        late_acks: bool = False) -> list[Procs]:
    """Both coordinators get the same readings, one whole, one as the node's deltas (``lost``: the
    seconds whose message is lost; ``late_acks``: each ack comes after the next reading is built);
    after each the two judges hold the same. Returns the deltas."""
    nodes = (ProcReadings(delta=False), ProcReadings())
    deltas: list[Procs] = []
    judges = [c.judge for c in pair]
    assert isinstance(judges[0], Judge) and isinstance(judges[1], Judge)
    for t in range(14):
        now = 100.0 + t
        for coord, node in zip(pair, nodes, strict=True):
            if late_acks and t >= 2 and t - 2 not in lost:
                node.acked(t - 2)
            body = node.add(now=now, job_nodes=1, **reading(t))
            assert body is not None
            node.enqueued(t)
            body = decode_body(kind_of(body), encode_body(body))  # as it crosses the wire
            assert isinstance(body, Procs)
            if node.delta:
                deltas.append(body)
            if t == 0:
                judge = coord.judge
                assert isinstance(judge, Judge)
                judge.observe_lines([LogLine(RankKey(NODE, 0), "step 1 loss 2.0", now, now)])
            if t in lost:
                continue  # lost on the way: never acknowledged
            send(coord, t, body, now)
            if not late_acks:
                node.acked(t)
        assert state(judges[1]) == state(judges[0]), f"after the reading of t={t}"
        assert pair[1].nodes[NODE].worker_pids == pair[0].nodes[NODE].worker_pids
    return deltas


def verdicts(coord: Coordinator) -> list[tuple[str, str | None]]:
    judge = coord.judge
    assert isinstance(judge, Judge)
    out = []
    for dt in (0.0, 30.0, 200.0, 900.0, 4000.0):
        v = judge.verdict(113.0 + dt)
        out.append((v.label.value, None if v.culprit is None else str(v.culprit)))
    return out


def test_deltas_leave_the_judge_as_whole_readings_do(pair: tuple[Coordinator, Coordinator]) -> None:
    deltas = run(pair)
    whole_c, delta_c = pair
    assert isinstance(whole_c.judge, Judge) and isinstance(delta_c.judge, Judge)
    assert state(delta_c.judge) == state(whole_c.judge)
    assert delta_c.nodes[NODE].worker_pids == whole_c.nodes[NODE].worker_pids == {0: 1000, 1: 1001, 2: 1002, 3: 3003}
    assert verdicts(delta_c) == verdicts(whole_c)
    # They said less: the first one whole, then only what moved.
    assert deltas[0].same_as == -1 and all(d.same_as == t - 1 for t, d in enumerate(deltas) if t)
    assert {a.rank for a in deltas[6].activity} == {0, 2, 3}  # rank 1 stuck: its row did not change
    assert [c.rank for c in deltas[6].collectives] == [0, 2, 3]
    assert all(len(c.groups) == 1 for c in deltas[6].collectives)  # group 1 never moves
    assert deltas[9].gone == (3,) and {r for r, _pid in deltas[11].workers} == {0, 2, 3}
    assert (3, 3003) in deltas[11].workers
    assert sum(len(c.groups) for d in deltas for c in d.collectives) < 0.5 * 14 * RANKS * 2
    assert delta_c.counters.procs_unresolved == 0


def test_a_lost_reading_is_never_referred_to(pair: tuple[Coordinator, Coordinator]) -> None:
    deltas = run(pair, lost=frozenset({5, 9}))
    whole_c, delta_c = pair
    assert isinstance(whole_c.judge, Judge) and isinstance(delta_c.judge, Judge)
    assert deltas[6].same_as == 4 and deltas[10].same_as == 8  # the lost ones were never acknowledged
    assert state(delta_c.judge) == state(whole_c.judge)
    assert delta_c.nodes[NODE].worker_pids == whole_c.nodes[NODE].worker_pids
    assert verdicts(delta_c) == verdicts(whole_c)


def test_the_reading_that_first_shows_a_rank_stopped_is_said_again_when_it_is_lost(
        pair: tuple[Coordinator, Coordinator]) -> None:
    """Rank 2's state T is no change the node sends once: a delta says what differs from the reading
    the coordinator acknowledged, and a lost one is never acknowledged. So the next reading says it
    again, and the judge holds the rank stopped from then on (no full reading needed for it)."""
    deltas = run(pair, lost=frozenset({6}))
    assert deltas[7].same_as == 5 and (2, 15.5, "T") in deltas[7].activity
    assert (2, 15.5, "S") in deltas[8].activity  # continued: said too


def test_late_acks_compare_with_what_the_judge_holds(pair: tuple[Coordinator, Coordinator]) -> None:
    deltas = run(pair, late_acks=True)
    whole_c, delta_c = pair
    assert isinstance(whole_c.judge, Judge) and isinstance(delta_c.judge, Judge)
    assert all(d.same_as == t - 2 for t, d in enumerate(deltas) if t >= 2)  # two behind: an older base
    assert state(delta_c.judge) == state(whole_c.judge)
    assert delta_c.nodes[NODE].worker_pids == whole_c.nodes[NODE].worker_pids
    assert verdicts(delta_c) == verdicts(whole_c)


def test_reset_and_an_unknown_base() -> None:
    node = ProcReadings()
    r = reading(3)
    first = node.add(now=1.0, job_nodes=1, **r)
    assert first is not None and first.same_as == -1
    node.enqueued(0)
    node.acked(0)
    second = node.add(now=2.0, job_nodes=1, **r)
    assert second is not None and second.same_as == 0 and second.workers == () and second.collectives == ()
    node.enqueued(1)
    node.reset()  # a new coordinator session, a new generation: whole again, whatever was acknowledged
    node.acked(1)
    third = node.add(now=3.0, job_nodes=1, **r)
    assert third is not None and third.same_as == -1 and len(third.workers) == RANKS


def test_a_reading_that_refers_to_one_not_held_is_counted_and_taken_as_far_as_it_goes(tmp_path: Path) -> None:
    """(Sent to a coordinator before it restarted.) What it carries reaches the judge; the count is
    in coordinator.json's summary."""
    c = coordinator(tmp_path / "c")
    try:
        body = Procs((), (), ((0, 1000),), (), (WorkerActivity(0, 12.5, "S"),), same_as=41)
        send(c, 0, body, 50.0)
        judge = c.judge
        assert isinstance(judge, Judge)
        assert c.summary(50.0)["procs_unresolved"] == 1
        assert judge.ranks[RankKey(NODE, 0)].tree_cpu == 12.5 and c.nodes[NODE].worker_pids == {0: 1000}
    finally:
        c.close()

"""The job's fresh compile-cache locks are those of every node's latest reading: the coordinator keeps
the nodes that have any (not a union over every node at every node's reading, 1,024 x 1,024 a second
on 1,024 nodes). Signed procs messages handed to :meth:`Coordinator.handle` directly (the socket is
bound on loopback and never used); fake clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from neuron_watch.config import WatchConfig
from neuron_watch.diagnosis.judge import Judge
from neuron_watch.job.coordinator import Coordinator, CoordinatorSettings
from neuron_watch.runtime import default_judge_factory
from neuron_watch.wire.auth import Signer
from neuron_watch.wire.protocol import Header, Msg, Procs, encode, kind_of

SECRET = b"a locks secret of enough bytes 1234"
JOB = "job-locks"
SESSION = 99


@pytest.fixture
def coord(tmp_path: Path) -> Iterator[Coordinator]:
    c = Coordinator("127.0.0.1:0", SECRET, str(tmp_path / "run"), job=JOB, settings=CoordinatorSettings(silence=1e6),
                    judge_factory=default_judge_factory(WatchConfig()), announce=False, session=SESSION)
    yield c
    c.close()


def report(coord: Coordinator, node: str, seq: int, locks: tuple[str, ...], now: float) -> None:
    """``node``'s procs reading with these fresh lock files, as its agent signs it."""
    body = Procs((), locks, ((0, 11),))
    h = Header(kind=kind_of(body), job=JOB, node=node, session=7, generation=0, seq=seq, base=seq, mono=now,
               wall=now, sent=now, echo=SESSION)
    coord.handle(node.encode(), Signer.for_agent(SECRET, JOB).sign(encode(Msg(h, body))), now)


def test_the_jobs_locks_are_the_union_of_the_nodes_latest_readings(coord: Coordinator) -> None:
    judge = coord.judge
    assert isinstance(judge, Judge)
    report(coord, "a", 0, ("/cache/x.lock",), 10.0)
    report(coord, "b", 0, ("/cache/y.lock",), 11.0)
    assert set(judge.locks) == {"/cache/x.lock", "/cache/y.lock"} and judge.last_lock_seen == 11.0
    report(coord, "c", 0, (), 12.0)  # a node without locks changes nothing, and still refreshes them
    assert set(judge.locks) == {"/cache/x.lock", "/cache/y.lock"} and judge.last_lock_seen == 12.0
    report(coord, "b", 1, (), 13.0)
    assert set(judge.locks) == {"/cache/x.lock"}
    assert judge.locks["/cache/x.lock"] == 10.0  # first seen when node a first reported it
    report(coord, "a", 1, (), 14.0)
    assert judge.locks == {} and judge.last_lock_seen == 13.0
    report(coord, "c", 1, (), 15.0)
    assert judge.locks == {}
    report(coord, "c", 2, ("/cache/z.lock",), 16.0)
    assert set(judge.locks) == {"/cache/z.lock"} and judge.last_lock_seen == 16.0

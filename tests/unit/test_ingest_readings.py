"""A node's flight recorder readings on the coordinator (:meth:`Ingest.procs`, taken by column): which
ranks' recorders answered (``NodeView.recorder``, status.json's ``flight_recorder``), and only the readings
without a problem reach the judge, each with its own time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from neuron_watch.config import WatchConfig
from neuron_watch.diagnosis.flight_recorder import GroupProgress
from neuron_watch.events import RankKey
from neuron_watch.job.coordinator import Coordinator, CoordinatorSettings
from neuron_watch.runtime import default_judge_factory
from neuron_watch.wire.auth import Signer
from neuron_watch.wire.protocol import Header, Hello, Msg, Procs, RankCollectives, encode, kind_of

SECRET = b"a readings secret of enough bytes 0123"
NODE = "n0"


@pytest.fixture
def coord(tmp_path: Path) -> Iterator[Coordinator]:
    c = Coordinator("127.0.0.1:0", SECRET, str(tmp_path), job="j", settings=CoordinatorSettings(expected_nodes=1),
                    judge_factory=default_judge_factory(WatchConfig()), announce=False, session=99)
    try:
        yield c
    finally:
        c.close()


class Node:
    def __init__(self, coord: Coordinator) -> None:
        self.coord, self.signer, self.seq = coord, Signer.for_agent(SECRET, "j"), 0

    def send(self, body: Hello | Procs, at: float) -> None:
        h = Header(kind=kind_of(body), job="j", node=NODE, session=7, generation=0, seq=self.seq, base=self.seq,
                   mono=at, wall=at, sent=at, echo=99)
        self.seq += 1
        self.coord.handle(b"agent", self.signer.sign(encode(Msg(h, body))), at)


def reading(rank: int, completed: int, problem: str = "", age: float = 0.0) -> RankCollectives:
    groups = () if problem else (GroupProgress("0", completed, completed, completed, "nccl:all_reduce", "completed",
                                               0.0, completed, "[[8]] Float"),)
    return RankCollectives(rank, groups, problem, age)


def test_readings_by_column_keep_the_recorders_state_and_give_the_judge_the_good_ones(coord: Coordinator) -> None:
    node = Node(coord)
    node.send(Hello("h", 1, (0, 1, 2)), 100.0)
    node.send(Procs((), collectives=(reading(0, 5, age=0.5), reading(1, 0, "connection refused"),
                                     reading(2, 7, age=1.0))), 101.0)
    view, judge = coord.nodes[NODE], coord.judge
    assert judge is not None and view.recorder == {0: "on", 1: "connection refused", 2: "on"}
    ranks = {k.rank: st for k, st in judge.ranks.items()}
    assert ranks[0].last_collective == 100.5 and ranks[2].last_collective == 100.0  # each reading's own time
    assert RankKey(NODE, 1) not in judge.ranks or not judge.ranks[RankKey(NODE, 1)].collectives
    # every recorder answered before, none with a problem (the usual message): all of them to the judge
    node.send(Procs((), collectives=(reading(0, 6), reading(1, 3), reading(2, 8))), 102.0)
    assert view.recorder == {0: "on", 1: "on", 2: "on"}
    ranks = {k.rank: st for k, st in judge.ranks.items()}
    assert [ranks[r].last_collective for r in (0, 1, 2)] == [102.0, 102.0, 102.0]
    # once read, a recorder stays available: a later problem (an ending rank stops answering) is not
    # recorded, and its reading does not reach the judge
    node.send(Procs((), collectives=(reading(0, 7), reading(1, 0, "timed out"))), 103.0)
    assert view.recorder == {0: "on", 1: "on", 2: "on"}
    ranks = {k.rank: st for k, st in judge.ranks.items()}
    assert ranks[0].last_collective == 103.0 and ranks[1].last_collective == 102.0

"""Urgent messages first (node/urgent.py, job/intake.py, ``Header.urgent``): a node flags what may make a
verdict (a failure's line, "training finished", an exit, its status); the coordinator takes what waits on its
socket and handles each urgent message, with its node's messages before it, ahead of the steady ones. A
node's messages keep their order; the judge reaches the same verdict, culprit and evidence as when every
message is handled as it came. Fake clock and a fake socket; the messages are signed as an agent signs them."""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from neuron_watch.config import WatchConfig
from neuron_watch.diagnosis.classify import kb_fingerprint
from neuron_watch.diagnosis.judge import Verdict
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Label, LogLine, NodeStatus, RankKey
from neuron_watch.job.coordinator import Coordinator, CoordinatorSettings, next_due
from neuron_watch.job.intake import Intake, UrgentGate
from neuron_watch.job.nodes import NodeView
from neuron_watch.node.agent_link import AgentLink
from neuron_watch.node.urgent import is_urgent, urgent_signatures
from neuron_watch.runtime import default_judge_factory
from neuron_watch.wire.auth import Signer
from neuron_watch.wire.protocol import (
    COORDINATOR_QUEUE_BYTES,
    ExitInfo,
    Exits,
    Header,
    Heartbeat,
    Hello,
    Kind,
    LineMatch,
    Lines,
    Msg,
    Procs,
    RankLines,
    Status,
    decode_header,
    encode,
    kind_of,
)
from tests.fixtures.nosocket import NoSocket
from tests.unit.test_coordinator_progress import COORDINATOR_SESSION, JOB, SECRET, STEP, W0, Clock

KB = default_knowledge_base()
URGENT = urgent_signatures(KB)
#: the Neuron runtime's line that makes a hang verdict at once (the one bench_scale.py injects)
HANG_LINE = ("(FATAL-RT-UNDEFINED-STATE) missing collectives status on Neuron Device 0 NC 0, model 0 - "
             "suspected hang in collectives operation 0 out of 100")


def _header(node: str, seq: int, urgent: bool = False) -> Header:
    return Header(kind=Kind.HEARTBEAT, job=JOB, node=node, session=7, generation=0, seq=seq, urgent=urgent)


# -- the node's side: what is urgent ---------------------------------------------------------------


def _lines(*texts: str) -> Lines:
    matches = []
    for i, text in enumerate(texts):
        m = KB.classify(text)
        if m is not None:
            matches.append(LineMatch(i, m.signature.id, m.step, m.loss, 0.0, text))
    return Lines(tuple(RankLines(i, 1, 0.0, 0.0, 0.0, t) for i, t in enumerate(texts)), tuple(matches),
                 kb_fingerprint(KB))


def test_what_may_make_a_verdict_is_urgent_and_steady_work_is_not() -> None:
    assert is_urgent(_lines(STEP.format(1), HANG_LINE), URGENT)
    assert is_urgent(_lines("`Trainer.fit` stopped: `max_steps=40` reached."), URGENT)  # train_end: it may leave
    assert is_urgent(_lines("RuntimeError: something no rule explains happened here"), URGENT)
    assert not is_urgent(_lines(STEP.format(1), STEP.format(2)), URGENT)
    assert not is_urgent(_lines("2024-Jan-01 00:00:00 WARN  ... Timeout waiting for RX (waited 120 sec) - retrying"),
                         URGENT)
    assert is_urgent(Exits((ExitInfo(3, 1, 0.0),)), URGENT)
    assert is_urgent(Status(NodeStatus.FAILED.value), URGENT)
    assert not is_urgent(Procs(()), URGENT)
    assert not is_urgent(Heartbeat(), URGENT)
    # without a knowledge base the node cannot tell (the coordinator classifies): nothing is urgent by its lines
    assert urgent_signatures(None) == frozenset()
    assert not is_urgent(_lines(HANG_LINE), urgent_signatures(None))


def test_the_agent_flags_the_batch_of_a_failure_line_and_its_exit() -> None:
    link = AgentLink("tcp://127.0.0.1:1", b"s" * 32, job="j", node="n0", session=1, kb=KB,
                     socket=NoSocket())  # type: ignore[arg-type]
    link.add_line(LogLine(RankKey("n0", 0), STEP.format(1), 10.0, W0 + 10.0))
    link.flush_lines(11.0, W0 + 11.0)
    link.add_line(LogLine(RankKey("n0", 1), HANG_LINE, 12.0, W0 + 12.0))
    link.flush_lines(13.0, W0 + 13.0)
    link.add_exits([(1, 134, 13.5)], 14.0, W0 + 14.0)
    flags = []
    while (p := link.outbox.unsent()) is not None:
        flags.append((p.header.kind, p.header.urgent))
        link.outbox.mark_sent()
    assert flags == [(Kind.LINES, False), (Kind.LINES, True), (Kind.EXITS, True)]


def test_the_flag_travels_in_the_header() -> None:
    for urgent in (False, True):
        frames = encode(Msg(_header("n0", 3, urgent), Heartbeat()))
        assert decode_header(frames[0]).urgent is urgent


# -- the coordinator's queue -----------------------------------------------------------------------


def test_an_urgent_message_goes_first_with_its_nodes_messages_before_it() -> None:
    intake = Intake()
    order = [("a", 0, False), ("b", 0, False), ("a", 1, False), ("b", 1, False), ("b", 2, True), ("a", 2, False),
             ("b", 3, False)]
    for node, seq, urgent in order:
        intake.put(node.encode(), [b"h", b"body", b"mac"], _header(node, seq, urgent))
    intake.put(b"x", [b"not a message"], None)  # an unreadable one waits its turn (refused when handled)
    first = [(t.header.node, t.header.seq) for t in intake.urgent() if t.header is not None]
    assert first == [("b", 0), ("b", 1), ("b", 2)]
    assert intake.urgent() == []  # taken once
    rest = []
    while (t := intake.next()) is not None:
        rest.append((t.header.node, t.header.seq) if t.header is not None else ("?", -1))
    assert rest == [("a", 0), ("a", 1), ("a", 2), ("b", 3), ("?", -1)]
    assert len(intake) == 0


@pytest.mark.parametrize("seed", range(20))
def test_generated_queues_keep_every_nodes_order_and_put_every_urgent_message_first(seed: int) -> None:
    rnd = random.Random(seed)
    intake = Intake()
    seqs = {n: 0 for n in "abcde"}
    came = []
    for _ in range(rnd.randint(1, 120)):
        node = rnd.choice("abcde")
        h = _header(node, seqs[node], rnd.random() < 0.05)
        seqs[node] += 1
        intake.put(node.encode(), [b"h", b"b" * rnd.randint(0, 50), b"m"], h)
        came.append(h)
    handed = [t.header for t in intake.urgent()]
    first = len(handed)
    while (t := intake.next()) is not None:
        handed.append(t.header)
    assert sorted(handed, key=id) == sorted(came, key=id)  # each exactly once
    for node in "abcde":  # a node's messages in the order they came
        assert [h.seq for h in handed if h is not None and h.node == node] == \
               [h.seq for h in came if h.node == node]
    urgent_places = [i for i, h in enumerate(handed) if h is not None and h.urgent]
    assert all(i < first for i in urgent_places)  # every urgent message before any steady one


def test_what_is_taken_is_bounded_in_bytes() -> None:
    assert Intake().max_bytes == COORDINATOR_QUEUE_BYTES  # what the nodes' windows allow them in all
    intake = Intake(max_bytes=100)
    intake.put(b"a", [b"x" * 60], None)
    assert intake.room()
    intake.put(b"a", [b"x" * 60], None)
    assert not intake.room() and intake.most_bytes == 120
    assert intake.next() is not None and intake.room()


# -- the judge: the same verdict, culprit and evidence -----------------------------------------------


class _Node:
    """One node's agent: signed messages, each flagged as the agent flags it."""

    def __init__(self, node: str, ranks: tuple[int, ...]) -> None:
        self.node, self.ranks, self.seq, self.signer = node, ranks, 0, Signer.for_agent(SECRET, JOB)

    def frames(self, body: Any, at: float) -> list[bytes]:
        h = Header(kind=kind_of(body), job=JOB, node=self.node, session=7, generation=0, seq=self.seq, base=self.seq,
                   mono=at, wall=W0 + at, sent=at, echo=COORDINATOR_SESSION, urgent=is_urgent(body, URGENT))
        self.seq += 1
        return self.signer.sign(encode(Msg(h, body)))

    def hello(self, at: float) -> list[bytes]:
        return self.frames(Hello(self.node, 1, self.ranks, "test"), at)

    def lines(self, rank: int, text: str, at: float) -> list[bytes]:
        m = KB.classify(text)
        matches = () if m is None else (LineMatch(0, m.signature.id, m.step, m.loss, 0.0, text),)
        return self.frames(Lines((RankLines(rank, 1, 0.0, 0.0, 0.0, text),), matches, kb_fingerprint(KB)), at)


class _Socket:
    """What waits on the coordinator's socket, in the order it came."""

    def __init__(self, items: list[tuple[bytes, list[bytes]]]) -> None:
        self.items = deque(items)

    def poll(self, timeout_ms: int) -> bool:
        return bool(self.items)

    def recv(self) -> tuple[bytes, list[bytes]] | None:
        return self.items.popleft() if self.items else None


def _job(every_rank_printed: bool) -> tuple[list[tuple[bytes, list[bytes]]], list[tuple[bytes, list[bytes]]]]:
    """Two nodes of two ranks: what came before (each node's hello; with ``every_rank_printed``, a step of
    every rank), and the queue: both nodes training, then node b's rank 3 prints the runtime's hang line.
    Node b's messages wait behind node a's (a coordinator behind: b's older steady lines still queued)."""
    a, b = _Node("a", (0, 1)), _Node("b", (2, 3))
    before = [(b"ra", a.hello(999.0)), (b"rb", b.hello(999.0))]
    if every_rank_printed:
        before += [(b"ra", a.lines(r, STEP.format(0), 1000.0)) for r in (0, 1)]
        before += [(b"rb", b.lines(r, STEP.format(0), 1000.0)) for r in (2, 3)]
    queue: list[tuple[bytes, list[bytes]]] = []
    for step in range(1, 6):
        at = 1000.0 + step
        queue += [(b"ra", a.lines(0, STEP.format(step), at)), (b"ra", a.lines(1, STEP.format(step), at))]
    for step in range(1, 6):
        at = 1000.0 + step + 0.5
        queue += [(b"rb", b.lines(2, STEP.format(step), at)), (b"rb", b.lines(3, STEP.format(step), at))]
    queue.append((b"rb", b.lines(3, HANG_LINE, 1006.0)))
    queue += [(b"ra", a.lines(0, STEP.format(6), 1006.2)), (b"rb", b.lines(2, STEP.format(6), 1006.3))]
    return before, queue


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[Coordinator, Coordinator, Clock]]:
    clock = Clock()
    made = [Coordinator("127.0.0.1:0", SECRET, str(tmp_path / name), job=JOB,
                        settings=CoordinatorSettings(expected_nodes=2, silence=1e6),
                        judge_factory=default_judge_factory(WatchConfig()), clock=clock.mono, wall=clock.wall,
                        announce=False, session=COORDINATOR_SESSION) for name in ("as-they-came", "urgent-first")]
    try:
        yield made[0], made[1], clock
    finally:
        for c in made:
            c.close()


def _said(v: Verdict | None) -> tuple[Any, ...]:
    assert v is not None
    return v.label, v.culprit, v.reason, tuple(e.to_dict() for e in v.evidence), v.ranks, v.culprit_source


def _run(two: tuple[Coordinator, Coordinator, Clock],
         every_rank_printed: bool) -> tuple[list[str], Verdict, Verdict]:
    """The queue handled as it came by one coordinator, through the other's poll; returns the nodes in the
    order the second handled the queue, its verdict after the first poll (a budget of nothing) and at the
    end (the same as the first coordinator's)."""
    came, first, clock = two
    before, queue = _job(every_rank_printed)
    clock.now = 1007.0
    for c in (came, first):
        for routing_id, frames in before:
            c.handle(routing_id, frames, clock.now)
        c.tick(clock.now)
    for routing_id, frames in queue:
        came.handle(routing_id, frames, clock.now)
    handled: list[str] = []
    inner = first.received

    def spy(view: Any, msg: Msg, now: float, frame: bytes = b"") -> None:
        handled.append(msg.header.node)
        inner(view, msg, now, frame)
    first.received = spy  # type: ignore[method-assign]
    real = first.wire.sock
    first.wire.sock = _Socket(queue)  # type: ignore[assignment]
    try:
        first.poll(0.0, budget=0.0)
        assert first.wire.waiting and next_due(first, clock.now) == clock.now  # the loop does not sleep on them
        assert first.judge is not None and came.judge is not None
        early = first.judge.verdict(clock.now)
        assert early is not None
        while first.wire.waiting:
            first.poll(0.0)
    finally:
        first.wire.sock = real
    assert handled.count("a") == 11 and handled.count("b") == 12
    assert first.wire.counters.early == came.wire.counters.early == 0  # none came before its node's turn
    final, reference = first.judge.verdict(clock.now), came.judge.verdict(clock.now)
    assert final is not None and reference is not None and final.to_dict() == reference.to_dict()
    assert final.culprit == RankKey("b", 3)
    return handled, early, final


def test_the_urgent_lane_gives_the_same_verdict_culprit_and_evidence(
        two: tuple[Coordinator, Coordinator, Clock]) -> None:
    handled, early, final = _run(two, every_rank_printed=True)
    # b's older lines first, in order, then its hang line, and nothing else within a budget of nothing
    assert handled[:11] == ["b"] * 11
    assert early.label is Label.COLLECTIVE_HANG and _said(early) == _said(final)


def test_the_lane_is_shut_until_the_judge_knows_every_rank(two: tuple[Coordinator, Coordinator, Clock]) -> None:
    # Node a's ranks have printed nothing yet: its first lines, overtaken, would leave b's rank 2 the one rank
    # that "alone reported nothing" (the culprit of a hang the others report). As they came, then.
    handled, early, _final = _run(two, every_rank_printed=False)
    assert handled[:10] == ["a"] * 10
    assert early.label is Label.HEALTHY  # nothing jumped the queue within a budget of nothing
    came, first, clock = two
    gate = UrgentGate()
    assert first.judge is not None
    assert gate.open(first.judge, first.nodes, True, clock.now)  # every rank printed since: open
    assert not gate.open(first.judge, first.nodes, False, clock.now)  # a node the job expects is missing
    joining = NodeView("c", 7, b"rc", 1000.0, 1000.0, ranks=(4,))  # a node whose ranks printed nothing yet
    assert not UrgentGate().open(came.judge, {**first.nodes, "c": joining}, True, clock.now)

"""Faults of the wire over real ZeroMQ sockets on loopback.

1. A batch over the frame limit (16 ranks printing megabyte lines) would wedge the agent's link
   for good (the coordinator drops the frame, the agent resends it forever, later messages are
   "early" yet keep the node looking alive): batches are split under the schema's frame limit, a
   longer line is cut and counted, and everything arrives.
4. A replayed captured frame would move the coordinator's route to the node (acks and commands
   to the attacker) and keep a dead node looking alive: nothing about a node changes before a
   message is proven fresh.

The coordinator and the agent link run in this process (no child processes); each test still
checks that it leaves none behind.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zmq

from neuron_watch.events import LogLine, NodeStatus, RankKey
from neuron_watch.job.coordinator import Coordinator, CoordinatorSettings, NodeState
from neuron_watch.node.agent_link import AgentLink, new_session
from neuron_watch.wire.auth import Signer
from neuron_watch.wire.protocol import MAX_BODY_BYTES, MAX_FRAME_BYTES, MAX_LINE_BYTES, Ack, Msg, Stop, decode

pytestmark = pytest.mark.integration

SECRET = b"a job secret of enough bytes 0123456789"
JOB = "job-wire"


def children() -> list[int]:
    """This process's live child processes (these tests start none; a leak would show here; servers
    of session fixtures started by other tests are there before and after)."""
    out = []
    for task in os.listdir(f"/proc/{os.getpid()}/task"):
        with open(f"/proc/{os.getpid()}/task/{task}/children") as f:
            out += [int(x) for x in f.read().split()]
    return out


def pump(coord: Coordinator, links: list[AgentLink], until: Callable[[], bool], deadline: float = 60.0,
         commands: list[Msg] | None = None) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        for link in links:
            got = link.tick(time.monotonic(), time.time())
            if commands is not None:
                commands.extend(got)
        coord.poll(0.005)
        coord.tick(time.monotonic())
        if until():
            return
    raise AssertionError("condition not reached before the deadline")


@pytest.fixture
def coord(tmp_path: Path) -> Iterator[Coordinator]:
    before = set(children())
    c = Coordinator("127.0.0.1:0", SECRET, str(tmp_path / "coord"), job=JOB,
                    settings=CoordinatorSettings(silence=3.0))
    yield c
    c.close()
    assert set(children()) - before == set()


def link_to(coord: Coordinator, node: str = "node1") -> AgentLink:
    return AgentLink(coord.endpoint, SECRET, job=JOB, node=node, session=new_session(time.time()))


def merged_by_rank(run_dir: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    with open(run_dir / "merged.log", encoding="utf-8") as f:
        for line in f:
            tag, text = line.rstrip("\n").split(" | ", 1)
            out.setdefault(tag.rsplit(" ", 1)[1], []).append(text)
    return out


def test_sixteen_ranks_of_megabyte_lines_arrive_whole_split_and_counted(coord: Coordinator, tmp_path: Path) -> None:
    link = link_to(coord)
    try:
        now, wall = time.monotonic(), time.time()
        link.hello("host", 1, range(16), now, wall)
        mib = "x" * (1 << 20)
        # 16 ranks x 5 lines of 1 MiB: one flush of 80 MiB, over the 64 MiB frame limit (the wedge).
        for i in range(5):
            for r in range(16):
                link.add_line(LogLine(RankKey(link.node, r), f"r{r} l{i} {mib}", now, wall))
        huge = "y" * (MAX_LINE_BYTES + (4 << 20))  # one line longer than the wire's line limit
        link.add_line(LogLine(RankKey(link.node, 0), "huge " + huge, now, wall))
        for r in range(16):
            link.add_line(LogLine(RankKey(link.node, r), f"training done r{r}", now, wall))
        link.flush_lines(now, wall)
        assert link.counters.split_batches >= 2 and link.counters.truncated_lines == 1
        assert all(len(p.body) <= MAX_BODY_BYTES for p in link.outbox._q)
        pump(coord, [link], lambda: coord.counters.lines == 16 * 6 + 1 and len(link.outbox) == 0)
        # The link is not wedged: what comes later arrives too, and the loss report is heard.
        link.add_line(LogLine(RankKey(link.node, 3), "after the flood", time.monotonic(), time.time()))
        link.status(NodeStatus.LAUNCHED, time.monotonic(), time.time())
        pump(coord, [link], lambda: coord.counters.lines == 16 * 6 + 2 and len(link.outbox) == 0
             and coord.nodes["node1"].status == "launched")
        coord.tick(time.monotonic())
        by_rank = merged_by_rank(tmp_path / "coord")
        for r in range(16):
            texts = by_rank[f"node1/rank{r}"]
            want = [f"r{r} l{i} {mib}" for i in range(5)] + [f"training done r{r}"]
            if r == 0:
                want.insert(5, texts[5])
            if r == 3:
                want.append("after the flood")
            assert texts == want  # every line, whole and in order
        cut = by_rank["node1/rank0"][5]
        assert cut.startswith("huge yyyy") and cut.endswith(f"of {len(huge) + 5} bytes not sent]")
        assert len(cut.encode()) <= MAX_LINE_BYTES
        # Nothing lost uncounted: no drops, one cut line reported and recorded.
        assert link.outbox.dropped_lines == 0 and link.outbox.dropped_msgs == 0
        assert coord.counters.bad == {} and coord.counters.early == 0
        s = coord.summary(time.monotonic())
        assert s["nodes"]["node1"]["agent_truncated_lines"] == 1 and s["nodes"]["node1"]["seq"]["lost"] == 0
        assert [(e["node"], e["lines"], e["limit_bytes"]) for e in coord.events.history
                if e["event"] == "lines_truncated"] == [("node1", 1, MAX_LINE_BYTES)]
        assert coord.nodes["node1"].state is NodeState.CONNECTED
    finally:
        link.close()


def test_an_unsplittable_message_is_dropped_and_counted_never_resent_forever(coord: Coordinator) -> None:
    link = link_to(coord)
    try:
        now, wall = time.monotonic(), time.time()
        link.status(NodeStatus.LAUNCHED, now, wall, detail="z" * MAX_FRAME_BYTES)  # e.g. a monstrous capture detail
        assert link.counters.oversize_dropped == 1 and link.outbox.dropped_msgs == 1
        link.add_line(LogLine(RankKey(link.node, 0), "still flowing", now, wall))
        pump(coord, [link], lambda: coord.counters.lines == 1 and len(link.outbox) == 0)
        link.status(NodeStatus.LAUNCHED, time.monotonic(), time.time())
        pump(coord, [link], lambda: coord.nodes["node1"].reported_dropped_msgs == 1)
    finally:
        link.close()


class Tap:
    """Records every frame list the agent hands to its socket (what a network attacker can capture)."""

    def __init__(self, link: AgentLink) -> None:
        self.frames: list[list[bytes]] = []
        send = link.sock.send

        def spy(frames: list[bytes]) -> bool:
            self.frames.append(list(frames))
            return send(frames)

        link.sock.send = spy  # type: ignore[method-assign]


def test_a_replayed_captured_frame_changes_nothing(coord: Coordinator, tmp_path: Path) -> None:
    link = link_to(coord)
    tap = Tap(link)
    ctx = zmq.Context()
    attacker = ctx.socket(zmq.DEALER)
    attacker.setsockopt(zmq.LINGER, 0)
    try:
        now, wall = time.monotonic(), time.time()
        link.hello("host", 1, [0], now, wall)
        link.add_line(LogLine(RankKey(link.node, 0), "step 1 loss 2.0", now, wall))
        pump(coord, [link], lambda: coord.counters.lines == 1 and len(link.outbox) == 0)
        assert tap.frames[0] != tap.frames[-1]
        view = coord.nodes["node1"]
        route, session = view.routing_id, view.session
        attacker.connect(coord.endpoint)
        # Every captured frame, replayed 200 times a second for 1.5 s (before the handshake, after it).
        end = time.monotonic() + 1.5
        replays = 0
        while time.monotonic() < end:
            for frames in tap.frames[:4] + tap.frames[-4:]:
                attacker.send_multipart(frames)
                replays += 1
            pump(coord, [link], lambda: True)
            time.sleep(0.04)
        pump(coord, [link], lambda: True)
        assert replays >= 100
        assert view is coord.nodes["node1"] and view.routing_id == route and view.session == session
        assert coord.counters.lines == 1 and coord.counters.duplicates + coord.counters.unechoed >= replays // 2
        # Commands go to the node, never to the attacker, and the attacker got nothing at all.
        got: list[Msg] = []
        assert coord.send("node1", Stop("meant for the node", 5.0))
        pump(coord, [link], lambda: bool(got), commands=got)
        assert [m.body for m in got] == [Stop("meant for the node", 5.0)]
        assert attacker.poll(300) == 0
        # A dead node does not look alive however often its frames are replayed.
        heard = view.last_heard
        end = time.monotonic() + coord.settings.silence + 1.0
        while time.monotonic() < end:  # the link is no longer ticked: the node is dead
            attacker.send_multipart(tap.frames[-1])
            coord.poll(0.005)
            coord.tick(time.monotonic())
            time.sleep(0.005)
        assert view.last_heard == heard and view.state is NodeState.UNOBSERVED
        assert attacker.poll(100) == 0
    finally:
        attacker.close()
        ctx.term()
        link.close()


def test_frames_of_an_earlier_coordinator_session_are_refused(coord: Coordinator, tmp_path: Path) -> None:
    link = link_to(coord)
    tap = Tap(link)
    ctx = zmq.Context()
    attacker = ctx.socket(zmq.DEALER)
    attacker.setsockopt(zmq.LINGER, 0)
    second = Coordinator("127.0.0.1:0", SECRET, str(tmp_path / "second"), job=JOB)
    try:
        now, wall = time.monotonic(), time.time()
        link.hello("host", 1, [0], now, wall)
        link.add_line(LogLine(RankKey(link.node, 0), "step 1 loss 2.0", now, wall))
        pump(coord, [link], lambda: coord.counters.lines == 1 and len(link.outbox) == 0)
        # The job's coordinator restarted (here: another one of the same job); the node is gone.
        link.close()
        attacker.connect(second.endpoint)
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            for frames in tap.frames:
                attacker.send_multipart(frames)
            second.poll(0.01)
            second.tick(time.monotonic())
        assert second.nodes == {} and second.counters.lines == 0
        assert second.counters.unechoed > 0 and second.counters.bad == {}
        # All the attacker received: challenges (an ack of nothing), at most two a second.
        answers = []
        while attacker.poll(200):
            answers.append(decode(Signer.for_agent(SECRET, JOB).verify(attacker.recv_multipart())))
        assert answers and all(m.body == Ack(-1) for m in answers) and len(answers) <= 4
    finally:
        second.close()
        attacker.close()
        ctx.term()


def test_an_agent_of_the_previous_schema_is_refused_by_version_not_as_a_bad_signature(coord: Coordinator) -> None:
    """Schema 3 signed with keys of no job: its signature cannot verify here, yet the refusal (counted
    and logged once) names the version, so the operator upgrades instead of hunting a secret."""
    import hashlib
    import hmac

    import msgpack

    old_key = hmac.new(SECRET, b"neuron-watch/wire/v1/agent", hashlib.sha256).digest()
    header = msgpack.packb([3, "heartbeat", JOB, "old-node", 1, 0, 0, 0, 1.0, 1.0, -1, 0, 1.0])
    body = msgpack.packb([0, 0, 0])
    mac = hmac.new(old_key, digestmod=hashlib.sha256)
    for f in (header, body):
        mac.update(len(f).to_bytes(8, "big"))
        mac.update(f)
    ctx = zmq.Context()
    old = ctx.socket(zmq.DEALER)
    old.setsockopt(zmq.LINGER, 0)
    old.connect(coord.endpoint)
    try:
        for _ in range(3):
            old.send_multipart([header, body, mac.digest()])
        end = time.monotonic() + 20
        while coord.counters.bad.get("version", 0) < 3:
            assert time.monotonic() < end, coord.counters
            coord.poll(0.01)
        assert coord.counters.bad == {"version": 3} and coord.nodes == {}
        assert old.poll(200) == 0  # nothing is answered to what cannot be trusted
    finally:
        old.close()
        ctx.term()

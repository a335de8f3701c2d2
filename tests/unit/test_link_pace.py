"""A bigger job's agents batch and sample less often, and resend later to a coordinator that is
behind: the pace follows what the coordinator's acks say (the job's size, how far behind it is).
No socket: a fake one takes what goes out and hands the link the coordinator's signed acks."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Label, LogLine, RankKey, RankSpan
from neuron_watch.node.agent_link import AgentLink
from neuron_watch.wire.auth import Signer
from neuron_watch.wire.protocol import (
    Ack,
    Header,
    Kind,
    Procs,
    WorkerActivity,
    batch_age_at,
    decode,
    delivery_slack_at,
    encode_body,
    encode_header,
    procs_every_at,
)

SECRET = b"k" * 32


class AckingSocket:
    """Records what the link sends; hands it the acks queued by :meth:`ack`."""

    def __init__(self) -> None:
        self.sent: list[list[bytes]] = []
        self.inbox: list[list[bytes]] = []
        self.signer = Signer.for_coordinator(SECRET, "j")
        self.seq = 0

    def ack(self, seq: int, nodes: int, behind: float = 0.0) -> None:
        self.seq += 1
        h = Header(kind=Kind.ACK, job="j", node="coordinator", session=77, generation=0, seq=self.seq, target=5)
        self.inbox.append(self.signer.sign([encode_header(h), encode_body(Ack(seq, nodes, behind))]))

    def send(self, frames: list[bytes]) -> bool:
        self.sent.append(frames)
        return True

    def recv(self) -> list[bytes] | None:
        return self.inbox.pop(0) if self.inbox else None

    def close(self) -> None:
        pass


def link_of(nodes: int, behind: float = 0.0) -> tuple[AgentLink, AckingSocket]:
    sock = AckingSocket()
    link = AgentLink("tcp://127.0.0.1:1", SECRET, job="j", node="n1", session=5, socket=sock)  # type: ignore[arg-type]
    link.hello("h", 1, [0, 1], 0.0, 0.0)
    sock.ack(0, nodes, behind)
    link.tick(0.0, 0.0)
    sock.ack(link.outbox.next_seq - 1, nodes, behind)  # and the heartbeat that tick sent
    link.tick(0.0, 0.0)
    assert link.job_nodes == nodes and len(link.outbox) == 0
    return link, sock


def kinds(link: AgentLink) -> list[str]:
    return [link.outbox._q[i].header.kind.value for i in range(len(link.outbox))]


def test_the_pace_rule() -> None:
    assert batch_age_at(8, 0.05) == 0.05 and batch_age_at(128, 0.05) == pytest.approx(0.128)
    assert batch_age_at(1024, 0.05) == 1.0 and batch_age_at(4096, 0.05) == 1.0
    assert procs_every_at(200) == 1.0 and procs_every_at(1024) == 4.0 and procs_every_at(4096) == 5.0
    assert delivery_slack_at(50) == 0.0 and delivery_slack_at(1024) == pytest.approx(0.95 + 3.0)


@pytest.mark.parametrize("nodes, due", [(4, 0.05), (1024, 1.0)])
def test_the_batch_age_grows_with_the_job_the_coordinator_announces(nodes: int, due: float) -> None:
    link, _sock = link_of(nodes)
    link.add_line(LogLine(RankKey(link.node, 0), "step 1 loss 2.0", 10.0, 10.0))
    link.tick(10.0 + due * 0.9, 10.0)
    assert "lines" not in kinds(link)
    link.tick(10.0 + due, 10.0)
    assert "lines" in kinds(link)


def test_a_big_jobs_readings_are_held_the_newest_goes_with_every_flight_recorder_reading() -> None:
    link, _sock = link_of(1024)  # a reading every 4 s
    for t in range(5):
        link.add_compilers([], float(t), 100.0 + t, always=True, workers=[(0, 1000 + t)],
                           collectives=[(0, (), "", float(t))])
        link.tick(float(t) + 0.01, 100.0 + t)
    procs = [decode([encode_header(p.header), p.body]) for p in link.outbox._q if p.header.kind is Kind.PROCS]
    # t=0 goes at once; t=1..3 are held, each replacing the last; t=4 goes with the readings of 1..4
    assert len(procs) == 2
    first, second = procs[0].body, procs[1].body
    assert isinstance(first, Procs) and isinstance(second, Procs)
    assert first.workers == ((0, 1000),) and second.workers == ((0, 1004),)
    assert [round(4.0 - c.d_mono) for c in second.collectives] == [1, 2, 3, 4]  # each reading keeps its time


def test_an_exit_sends_the_held_reading_first() -> None:
    link, _sock = link_of(1024)
    link.add_compilers([], 0.0, 0.0, always=True, workers=[(0, 1000)])
    link.add_compilers([(0, 77, 3.0, 1.0)], 1.0, 1.0, always=True, workers=[(0, 1000)])
    assert kinds(link) == ["procs"]
    link.add_exits([(0, 1, 1.5)], 1.5, 1.5)
    assert kinds(link) == ["procs", "procs", "exits"]


def test_resends_wait_for_a_coordinator_that_says_it_is_behind() -> None:
    link, sock = link_of(1024, behind=10.0)
    rounds = link.counters.resend_rounds
    link.add_exits([(0, 0, 1.0)], 1.0, 1.0)
    link.tick(1.0, 1.0)
    link.tick(5.0, 5.0)  # resend_after (3 s) passed, but the coordinator is 10 s behind
    assert link.counters.resend_rounds == rounds
    link.tick(14.5, 14.5)
    assert link.counters.resend_rounds == rounds + 1 and link.counters.resent >= 1
    sock.ack(link.outbox.next_seq - 1, 1024, 0.0)
    link.tick(15.0, 15.0)
    assert link.coordinator_behind == 0.0 and len(link.outbox) == 0


def test_the_hang_clock_waits_the_delivery_slack() -> None:
    kb = default_knowledge_base()
    key = RankKey("n0", 0)

    def hung_at(slack: float, t: float) -> bool:
        j = Judge(kb, JudgeSettings(hang_timeout=60.0), 0.0)
        j.delivery_slack = slack
        j.observe_batch([RankSpan(key, 1.0, 1.0, "step 5 loss 2.0")], [],
                        [LogLine(key, "step 5 loss 2.0", 1.0, 1.0, "", 0, "progress.step_loss", 5, 2.0)])
        return j.verdict(t).label is Label.COLLECTIVE_HANG

    assert hung_at(0.0, 63.0) and not hung_at(4.0, 63.0) and hung_at(4.0, 66.0)


def test_a_reading_refers_to_the_acknowledged_one_and_goes_whole_to_a_new_coordinator() -> None:
    """The link files each procs message's reading under its seq, the coordinator's ack makes it
    the one the next reading refers to, and a new coordinator session or a new generation makes
    the next one whole."""
    link, sock = link_of(1)

    def reading(t: float, cpu: float) -> Procs:
        link.tick(t, t)  # the acks that came
        sock.sent.clear()
        link.add_compilers([], t, t, always=True, workers=[(0, 10), (1, 11)],
                           activity=[WorkerActivity(0, cpu, "R"), WorkerActivity(1, 5.0, "S")])
        link.tick(t, t)
        body = [m.body for m in (decode(f[:2]) for f in sock.sent) if m.header.kind is Kind.PROCS]
        assert len(body) == 1 and isinstance(body[0], Procs)
        return body[0]

    first = reading(1.0, 1.0)
    assert first.same_as == -1 and len(first.workers) == 2
    seq = link.outbox.next_seq - 1
    sock.ack(seq, 1)
    second = reading(2.0, 2.0)  # rank 1 did not move: only rank 0 goes
    assert second.same_as == seq and second.workers == ((0, 10),)
    third = reading(3.0, 3.0)  # not acknowledged yet: still against the first
    assert third.same_as == seq and third.workers == ((0, 10),)
    sock.ack(link.outbox.next_seq - 1, 1)
    assert reading(4.0, 3.0).workers == ()  # the same as the third, acknowledged: nothing moved
    link.set_generation(1)
    assert reading(5.0, 3.0).same_as == -1
    sock.ack(link.outbox.next_seq - 1, 1)
    assert reading(6.0, 3.0).same_as >= 0
    h = Header(kind=Kind.ACK, job="j", node="coordinator", session=78, generation=1, seq=1, target=5)
    sock.inbox.append(sock.signer.sign([encode_header(h), encode_body(Ack(-1, 1))]))  # a new coordinator
    link.tick(7.0, 7.0)
    assert reading(8.0, 3.0).same_as == -1

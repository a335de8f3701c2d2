"""An urgent line's batch goes at once (node/line_batches.py, node/urgent.py), without sockets: `now` in."""

from __future__ import annotations

import math
from pathlib import Path

from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import LogLine, RankKey
from neuron_watch.node.agent_link import AgentLink
from neuron_watch.node.line_batches import URGENT_SETTLE, LineBatches
from neuron_watch.node.link_settings import LinkCounters
from neuron_watch.node.urgent import is_urgent, urgent_signatures
from neuron_watch.wire.protocol import Kind, batch_age_at
from tests.fixtures.nosocket import NoSocket
from tests.unit.test_coordinator_progress import STEP, W0
from tests.unit.test_intake import HANG_LINE

KB = default_knowledge_base()
URGENT = urgent_signatures(KB)
AGE = 1.0
REAL_LOGS = Path(__file__).resolve().parents[1] / "data" / "real-logs"


def _batches() -> LineBatches:
    return LineBatches(10_000, LinkCounters(), KB)


def _line(rank: int, text: str, mono: float) -> LogLine:
    return LogLine(RankKey("n0", rank), text, mono, W0 + mono)


def test_the_gated_classifier_answers_as_classify_does_on_the_real_logs() -> None:
    of_ids = KB.classifier_of(URGENT)
    lines = [ln for p in sorted(REAL_LOGS.rglob("*.log")) for ln in p.read_text(errors="replace").splitlines()]
    assert len(lines) > 10_000
    urgent = 0
    for text in lines:
        m = KB.classify(text)
        want = m if m is not None and m.signature.id in URGENT else None
        assert of_ids(text) == want, text
        urgent += want is not None
    assert urgent > 100  # the corpus has failures: the check compared real urgent answers, not only None


def test_steady_lines_wait_for_their_age_and_an_urgent_line_takes_them_along_at_once() -> None:
    b = _batches()
    for i in range(5):
        b.add(_line(i % 2, STEP.format(i), 10.0 + 0.1 * i))
    assert not b.due(10.5, AGE) and b.next_due(AGE) == 11.0
    b.add(_line(1, HANG_LINE, 10.6))
    assert not b.due(10.6, AGE) and b.next_due(AGE) == 10.6 + URGENT_SETTLE  # the rest of its report may follow
    at = 10.6 + URGENT_SETTLE
    assert b.due(at, AGE)
    (body,) = b.take(at, W0 + at)
    assert is_urgent(body, URGENT)
    # every line read before it went with it, each rank's in the order read
    assert [(r.rank, r.text) for r in body.ranks] == [
        (0, "\n".join(STEP.format(i) for i in (0, 2, 4))), (1, "\n".join([STEP.format(1), STEP.format(3), HANG_LINE]))]
    assert b.pending == [] and b.urgent_since is None and b.urgent_taken_at == at


def test_a_second_urgent_line_within_a_batch_age_goes_at_its_age() -> None:
    b = _batches()
    b.add(_line(0, HANG_LINE, 10.0))
    assert b.due(10.0 + URGENT_SETTLE, AGE)
    list(b.take(10.1, W0 + 10.1))
    b.add(_line(0, "RuntimeError: something no rule explains happened here", 10.3))
    assert not b.due(10.4, AGE) and not b.due(11.09, AGE)
    assert b.next_due(AGE) == 11.1 and b.due(11.1, AGE)


def test_a_flood_of_failure_lines_sends_no_more_batches_than_steady_lines() -> None:
    """A rank printing a traceback a line per 5 ms for 10 s, the node's loop turning every 20 ms."""
    def batches_sent(text: str) -> int:
        b, sent, t = _batches(), 0, 0.0
        for turn in range(500):
            now = 20e-3 * turn
            while t <= now:
                b.add(_line(0, text, t))
                t += 5e-3
            if b.due(now, AGE):
                sent += len(list(b.take(now, W0 + now)))
        return sent

    steady = batches_sent(STEP.format(7))
    flood = batches_sent("RuntimeError: something no rule explains happened here")
    assert 9 <= steady <= 10 and flood <= steady + 1, (steady, flood)


def test_without_a_knowledge_base_nothing_goes_early() -> None:
    b = LineBatches(10_000, LinkCounters(), None)
    b.add(_line(0, HANG_LINE, 10.0))
    assert not b.due(10.5, AGE) and b.next_due(AGE) == 11.0


def test_the_agent_link_sends_an_urgent_lines_batch_at_its_next_tick() -> None:
    link = AgentLink("tcp://127.0.0.1:1", b"s" * 32, job="j", node="n0", session=1, kb=KB,
                     socket=NoSocket())  # type: ignore[arg-type]
    link.job_nodes = 1024  # as the coordinator's acks say: a batch age of about a second
    age = batch_age_at(link.job_nodes, link.settings.batch_age)
    assert age > 2 * URGENT_SETTLE and not math.isinf(age)
    link.add_line(_line(0, STEP.format(1), 10.0))
    link.tick(10.0, W0 + 10.0)
    assert len(link.batches.pending) == 1  # a step waits for its batch's age
    link.add_line(_line(1, HANG_LINE, 10.0 + age / 4))
    at = 10.0 + age / 4 + URGENT_SETTLE
    assert at < 10.0 + age and link.next_due(10.0 + age / 4) == at
    link.tick(at, W0 + at)
    assert link.batches.pending == []
    link.outbox.rewind()
    sent = []
    while (p := link.outbox.unsent()) is not None:
        sent.append((p.header.kind, p.header.urgent, p.lines))
        link.outbox.mark_sent()
    assert (Kind.LINES, True, 2) in sent and not any(k is Kind.LINES and not u for k, u, _n in sent)

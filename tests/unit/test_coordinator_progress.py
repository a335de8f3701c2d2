"""The coordinator's ``progress`` events are dated by the line that showed the step (however late
its batch arrives), the "no progress recognised" warning is given once, and ``status.json`` says
which timeout is in force and what the ranks are once the job is over. Fake clocks; the messages
are signed and handed to :meth:`Coordinator.handle` directly (the socket is bound on loopback and
never used)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from neuron_watch.config import WatchConfig
from neuron_watch.diagnosis.classify import kb_fingerprint
from neuron_watch.diagnosis.judge import BLIND_AFTER
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import iso_utc
from neuron_watch.job.coordinator import Coordinator, CoordinatorSettings
from neuron_watch.runtime import default_judge_factory
from neuron_watch.wire.auth import Signer
from neuron_watch.wire.protocol import Header, LineMatch, Lines, Msg, RankLines, Status, encode, kind_of

SECRET = b"a progress secret of enough bytes 42"
JOB = "job-progress"
NODE = "trn-1"
W0 = 1_800_000_000.0  # wall time at mono 0: the agent's and the coordinator's clocks agree here
STEP = "step {} loss 0.5 step_time 0.1s"


COORDINATOR_SESSION = 99  # the agent echoes it (it learnt it from the coordinator's challenge)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def mono(self) -> float:
        return self.now

    def wall(self) -> float:
        return W0 + self.now


class Agent:
    """Builds the signed messages one node's agent would send."""

    def __init__(self) -> None:
        self.signer = Signer.for_agent(SECRET, JOB)
        self.seq = 0

    def frames(self, body: Any, sent_at: float) -> list[bytes]:
        h = Header(kind=kind_of(body), job=JOB, node=NODE, session=7, generation=0, seq=self.seq, base=self.seq,
                   mono=sent_at, wall=W0 + sent_at, sent=sent_at, echo=COORDINATOR_SESSION)
        self.seq += 1
        return self.signer.sign(encode(Msg(h, body)))

    def lines(self, rank: int, text: str, read_at: float, sent_at: float, classified: bool) -> list[bytes]:
        """One line of ``rank`` read at ``read_at`` by the agent, sent at ``sent_at``."""
        age = sent_at - read_at
        ranks = (RankLines(rank, 1, age, age, age, text),)
        if not classified:
            return self.frames(Lines(ranks), sent_at)
        kb = default_knowledge_base()
        m = kb.classify(text)
        matches = () if m is None else (LineMatch(0, m.signature.id, m.step, m.loss, age, text),)
        return self.frames(Lines(ranks, matches, kb_fingerprint(kb)), sent_at)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def coord(tmp_path: Path, clock: Clock) -> Iterator[Coordinator]:
    c = Coordinator("127.0.0.1:0", SECRET, str(tmp_path / "run"), job=JOB,
                    settings=CoordinatorSettings(expected_nodes=1, silence=1e6),
                    judge_factory=default_judge_factory(WatchConfig()), clock=clock.mono, wall=clock.wall,
                    announce=False, session=COORDINATOR_SESSION)
    try:
        yield c
    finally:
        c.close()


def deliver(coord: Coordinator, clock: Clock, frames: list[bytes], at: float) -> None:
    clock.now = at
    coord.handle(b"agent", frames, at)
    coord.tick(at)
    clock.now = at + 0.2  # past the verdict interval: a second verdict (after the move to running)
    coord.tick(at + 0.2)


def events(coord: Coordinator, name: str) -> list[dict[str, Any]]:
    return [e for e in coord.events.history if e["event"] == name]


@pytest.mark.parametrize("classified", [True, False], ids=["classified-by-agent", "classified-here"])
def test_progress_events_carry_the_lines_time_not_the_arrival(coord: Coordinator, clock: Clock,
                                                              classified: bool) -> None:
    agent = Agent()
    deliver(coord, clock, agent.lines(0, STEP.format(1), 1000.0, 1000.0, classified), 1000.0)
    # step 2 was printed at 1005 but its batch arrives 35 s later (a hang, a slow link)
    deliver(coord, clock, agent.lines(0, STEP.format(2), 1005.0, 1040.0, classified), 1040.0)
    # rank 1's step 2, read at 1006, arrives much later: step 2 keeps its first time, no new event
    deliver(coord, clock, agent.lines(1, STEP.format(2), 1006.0, 1080.0, classified), 1080.0)
    got = [(e["step"], e["time"]) for e in events(coord, "progress")]
    assert got == [(1, iso_utc(W0 + 1000.0)), (2, iso_utc(W0 + 1005.0))]
    fields = coord.report.progress_fields(coord.judge)
    assert fields == {"last_progress": iso_utc(W0 + 1005.0), "last_step": 2}


def test_progress_without_step_numbers_makes_events_too(coord: Coordinator, clock: Clock) -> None:
    hf = "{'loss': 1.2345, 'grad_norm': 0.873, 'learning_rate': 4.9e-05, 'epoch': 0.02}"
    agent = Agent()
    deliver(coord, clock, agent.lines(0, hf, 1000.0, 1001.0, True), 1001.0)
    deliver(coord, clock, agent.lines(0, hf, 1010.0, 1011.0, True), 1011.0)  # throttled: within 30 s
    deliver(coord, clock, agent.lines(0, hf, 1040.0, 1042.0, True), 1042.0)
    assert [(e["step"], e["time"]) for e in events(coord, "progress")] == [
        (None, iso_utc(W0 + 1000.0)), (None, iso_utc(W0 + 1040.0))]


def test_no_progress_recognised_is_said_once(coord: Coordinator, clock: Clock,
                                             caplog: pytest.LogCaptureFixture) -> None:
    agent = Agent()
    epoch = "[train] it {} | 0.53 s/it | lr 3.0e-04"  # a format of the user's own: no built-in rule knows it
    t = 1000.0
    for i in range(12):
        deliver(coord, clock, agent.lines(0, epoch.format(i), t, t, True), t)
        t += 20.0
    assert t - 1000.0 > BLIND_AFTER
    warnings = events(coord, "warning")
    assert len(warnings) == 1
    w = warnings[0]
    assert w["kind"] == "no_progress_recognised" and w["ranks"] == 1
    assert w["time"] == iso_utc(W0 + 1000.0 + BLIND_AFTER)  # said when it became true
    assert epoch.format(9) in w["lines"] and "--progress-regex" in w["message"]
    assert any("--progress-regex" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


def test_status_doc_says_which_timeout_applies_and_ranks_end_with_the_job(coord: Coordinator, clock: Clock) -> None:
    agent = Agent()
    deliver(coord, clock, agent.lines(0, "loading the model", 1000.0, 1000.0, True), 1000.0)
    doc = coord.status_doc(1001.0)
    assert (doc["hang_timeout"], doc["hang_timeout_kind"]) == (1800.0, "startup")
    assert doc["label"] == "healthy"
    deliver(coord, clock, agent.lines(0, STEP.format(1), 1002.0, 1002.0, True), 1002.0)
    doc = coord.status_doc(1003.0)
    assert (doc["hang_timeout"], doc["hang_timeout_kind"]) == (900.0, "default")
    assert [r["state"] for r in doc["ranks"]] == ["progressing"]
    deliver(coord, clock, agent.frames(Status("finished", "0"), 1004.0), 1004.0)
    doc = coord.status_doc(1005.0)
    assert doc["state"] == "finished" and [r["state"] for r in doc["ranks"]] == ["finished"]


@pytest.mark.parametrize("classified", [True, False], ids=["classified-by-agent", "classified-here"])
def test_an_unrecognised_error_while_the_job_progresses_is_a_warning_not_a_failure(
        coord: Coordinator, clock: Clock, classified: bool) -> None:
    agent = Agent()
    unknown = "RuntimeError: the metrics exporter lost its socket"  # no rule explains it
    deliver(coord, clock, agent.lines(0, STEP.format(1), 1000.0, 1000.0, classified), 1000.0)
    deliver(coord, clock, agent.lines(1, unknown, 1001.0, 1001.0, classified), 1001.0)
    deliver(coord, clock, agent.lines(0, STEP.format(2), 1002.0, 1002.0, classified), 1002.0)
    warnings = [e for e in events(coord, "warning") if e["kind"] == "unrecognised_error"]
    assert [(w["rank"], w["line"]) for w in warnings] == [(1, unknown)]  # said once
    assert coord.last_verdict is not None and coord.last_verdict.label.value == "healthy"
    assert not events(coord, "incident") and coord.recovery.incident == 0

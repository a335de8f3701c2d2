"""A paced lines body's judged part decoded alone (``decode_body(..., judged_only=True)``, ``Lines.logged``):
what the coordinator's judging thread decodes when a writer process keeps the job log. The judge gets the
same columns, error blocks and held rows as from the whole body, reaches the same states and verdicts, the
job log gets every rank and line count, and nothing the whole decode refuses in the judge's part passes."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import cast

import msgpack
import pytest

from neuron_watch.config import WatchConfig
from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.events import Label, LogLine, RankKey
from neuron_watch.iofaults import IOHealth
from neuron_watch.job.coordinator import Coordinator, CoordinatorSettings
from neuron_watch.job.endpoint import Counters
from neuron_watch.job.joblog import JobLog, JobLogLike
from neuron_watch.job.linewriter import JobLogFactory, Tell
from neuron_watch.node.line_batches import LineBatches
from neuron_watch.node.link_settings import LinkCounters
from neuron_watch.runtime import default_judge_factory
from neuron_watch.wire.auth import Signer
from neuron_watch.wire.protocol import (
    Header,
    Kind,
    Lines,
    LoggedRanks,
    Msg,
    ProtocolError,
    block_lines,
    decode_body,
    encode,
    encode_body,
    line_columns,
)
from tests.unit.test_judge_batch import _mixed, assert_same
from tests.unit.test_progress_pace import KB, PACE, RX, _training


def _bodies(lines: list[LogLine], pace: float = PACE) -> list[bytes]:
    """``lines`` (one node's, in time order) through the real node path at ``pace``, a batch a second, then
    the held rows once due: each body's frame."""
    batches = LineBatches(10_000, LinkCounters(), KB)
    by_second: dict[int, list[LogLine]] = {}
    for line in lines:
        by_second.setdefault(int(line.mono), []).append(line)
    out = []
    for second, part in sorted(by_second.items()):
        for line in part:
            batches.add(line)
        now = second + 1.0
        out += [encode_body(b) for b in batches.take(now, now + 1e6, pace)]
    end = max(ln.mono for ln in lines) + pace + 1.0
    out += [encode_body(b) for b in batches.take(end, end + 1e6, pace, everything=True)]
    return out


def _keys(node: str, ranks: tuple[int, ...]) -> list[RankKey]:
    return [RankKey(node, r) for r in ranks]


def _judge_part(frame: bytes, node: str, t: float) -> tuple[Lines, list[RankKey], Lines]:
    """The whole body, its judged part and the judged part's keys (as the coordinator's ingest finds them)."""
    whole, part = decode_body(Kind.LINES, frame), decode_body(Kind.LINES, frame, judged_only=True)
    assert isinstance(whole, Lines) and isinstance(part, Lines)
    every = _keys(node, tuple(r.rank for r in whole.ranks))
    keys = every if part.logged is None else [every[j] for j in part.logged.judged]
    return whole, keys, part


def _one_node(lines: list[LogLine], node: str) -> list[LogLine]:
    return [ln._replace(key=RankKey(node, ln.key.rank)) for ln in lines if ln.node == node]


@pytest.mark.parametrize("seed", range(4))
def test_the_judge_gets_the_same_columns_from_the_judged_part(seed: int) -> None:
    mixed = _one_node(_mixed(seed, 2000), "n0")
    start = min(ln.mono for ln in mixed)
    lines = mixed + _one_node([ln for _at, ln in _training(16, 30, {3: 12 + seed}, t0=start)], "n0")
    parts = 0
    for frame in _bodies(sorted(lines, key=lambda ln: ln.mono)):
        whole, keys, part = _judge_part(frame, "n0", 5000.0)
        every = _keys("n0", tuple(r.rank for r in whole.ranks))
        key_of = {r: RankKey("n0", r) for r in range(64)}.__getitem__
        assert line_columns(part, keys, 5000.0, 6000.0, key_of) == line_columns(whole, every, 5000.0, 6000.0,
                                                                                 key_of)
        assert block_lines(part, keys, 5000.0, 6000.0) == block_lines(whole, every, 5000.0, 6000.0)
        assert part.held == whole.held and part.n_lines == whole.n_lines
        if part.logged is not None:
            parts += 1
            assert whole.judged is not None and 2 * len(whole.judged) <= len(whole.ranks)
            assert part.logged == LoggedRanks(tuple(r.rank for r in whole.ranks), whole.n_lines, whole.judged)
            assert part.ranks == tuple(whole.ranks[j] for j in whole.judged) and part.judged is None
        else:
            assert part == whole  # most ranks judged, or none: the whole body
    assert parts  # the light batches of paced training were decoded in part


def test_a_hang_reaches_the_same_verdict_from_judged_parts() -> None:
    """Steady training paced at 3 s, rank 5 stopping first: judges fed from the whole bodies and from their
    judged parts hold the same states and name the same culprit with the same evidence."""
    timed = _training(16, 60, {5: 40, **{r: 45 for r in range(16) if r != 5}})
    start = timed[0][1].mono
    judges = {False: Judge(KB, JudgeSettings(), start), True: Judge(KB, JudgeSettings(), start)}
    batches = LineBatches(10_000, LinkCounters(), KB)
    by_at: dict[float, list[LogLine]] = {}
    for at, line in timed:
        by_at.setdefault(at, []).append(line)
    keys: dict[int, RankKey] = {}
    key_of = lambda r: keys.setdefault(r, RankKey("n0", r))  # noqa: E731  (one key object per rank, as the ingest's)
    ticks = [*sorted(by_at), *(max(by_at) + 0.5 * k for k in range(1, 20))]
    parts = 0
    for at in ticks:
        for line in by_at.get(at, []):
            batches.add(line)
        for body in batches.take(at, at + 1e6, PACE):
            frame = encode_body(body)
            for judged_only, judge in judges.items():
                got = decode_body(Kind.LINES, frame, judged_only)
                assert isinstance(got, Lines)
                every = [key_of(r) for r in (got.logged.ranks if got.logged else [c.rank for c in got.ranks])]
                rank_keys = every if got.logged is None else [every[j] for j in got.logged.judged]
                parts += got.logged is not None
                judge.observe_columns(line_columns(got, rank_keys, at, at + 1e6, key_of))
    assert parts > 10
    assert_same(judges[False], judges[True], 1070.0)
    hung = judges[True].verdict(2500.0)
    assert hung.label is Label.COLLECTIVE_HANG and hung.culprit == RankKey("n0", 5)
    assert hung == judges[False].verdict(2500.0)


def _light_body() -> list[object]:
    """A paced body of 8 ranks: rank 0's step 2, the job's newest, and rank 6's wait judged, the others' steps
    held: the wire layout."""
    batches = LineBatches(10_000, LinkCounters(), KB)
    for r in range(8):
        batches.add(LogLine(RankKey("n0", r), "step 1 loss 2.0", 1.0, 1.0, "", 1, "progress.step", 1))
    list(batches.take(1.5, 1.5, PACE))
    for r in range(8):
        batches.add(LogLine(RankKey("n0", r), RX if r == 6 else "step 2 loss 1.9", 2.0, 2.0, "", 2))
    (body,) = batches.take(2.5, 2.5, PACE)
    assert body.judged == (0, 6)
    wire: list[object] = msgpack.unpackb(encode_body(body))
    return wire


def test_the_judged_part_is_checked_as_the_whole_body() -> None:
    wire = _light_body()
    part = decode_body(Kind.LINES, msgpack.packb(wire), judged_only=True)
    assert isinstance(part, Lines) and part.logged is not None and [r.rank for r in part.ranks] == [0, 6]
    assert [(m.chunk, m.text) for m in part.matches] == [(0, "step 2 loss 1.9"), (1, RX)]
    bad = [
        lambda b: b[2][6].__setitem__(5, "two\nlines"),  # the judged rank's text holds more lines than it says
        lambda b: b[2][6].__setitem__(3, float("nan")),  # the judged rank's newest line's time
        lambda b: b[2][1].__setitem__(0, 6),  # a rank twice (an unjudged row names the judged rank)
        lambda b: b[2][2].__setitem__(1, 0),  # an unjudged rank of no line: the job log's count
        lambda b: b[3][0].__setitem__(0, 2),  # a match of a rank not judged
        lambda b: b[3][0].__setitem__(4, "late"),  # a match's age
        lambda b: b[6].append(9),  # a judged index beyond the ranks
    ]
    for spoil in bad:
        b = msgpack.unpackb(msgpack.packb(wire))
        spoil(b)
        frame = msgpack.packb(b)
        with pytest.raises(ProtocolError):
            decode_body(Kind.LINES, frame)
        with pytest.raises(ProtocolError):
            decode_body(Kind.LINES, frame, judged_only=True)


def test_unjudged_texts_are_the_writers_to_check() -> None:
    """An unjudged rank's text is not read by the judging thread: a fault in it is refused by the whole
    decode, the one the job log's writer makes."""
    b = msgpack.unpackb(encode_body(_decoded_light()))
    b[2][1][5] = "two\nlines"
    frame = msgpack.packb(b)
    assert isinstance(decode_body(Kind.LINES, frame, judged_only=True), Lines)
    with pytest.raises(ProtocolError):
        decode_body(Kind.LINES, frame)


def _decoded_light() -> Lines:
    body = decode_body(Kind.LINES, msgpack.packb(_light_body()))
    assert isinstance(body, Lines)
    return body


def test_a_judged_part_is_never_encoded_again() -> None:
    part = decode_body(Kind.LINES, msgpack.packb(_light_body()), judged_only=True)
    assert isinstance(part, Lines) and part.logged is not None
    with pytest.raises(ValueError, match="never encoded again"):
        encode_body(part)


class _FramesJobLog(JobLog):
    """The job log in this process, standing in for the writer process (which decodes each frame itself)."""

    decodes_frames = True


def _coordinator(run_dir: Path, judged_only: bool) -> Coordinator:
    factory: JobLogFactory | None = None
    if judged_only:
        def factory(d: str, tail_lines: int, _counters: Counters, tell: Tell) -> JobLogLike:
            return _FramesJobLog(d, IOHealth(), tail_lines, gap=lambda lines, nbytes, error: f"gap {lines}")
    return Coordinator("127.0.0.1:0", SECRET, str(run_dir), job="j", settings=CoordinatorSettings(expected_nodes=1),
                       judge_factory=default_judge_factory(WatchConfig()), announce=False, session=99,
                       job_log=factory)


SECRET = b"a judged-part secret of enough bytes"


@pytest.mark.parametrize("fingerprint", ["agent's", "another table's"])
def test_a_coordinator_whose_job_log_decodes_frames_judges_and_logs_as_before(tmp_path: Path,
                                                                             fingerprint: str) -> None:
    """Paced training on 16 ranks, rank 5 stopping first, through signed frames into two coordinators: one
    whose job log decodes the frames itself (the judging thread decodes the judged part) and one whose job
    log is in its thread. Same judge, counts and merged.log; a body of another knowledge base's fingerprint
    is decoded whole and classified line by line by both."""
    coords = {flag: _coordinator(tmp_path / str(flag), flag) for flag in (False, True)}
    assert coords[True].wire.judged_only and not coords[False].wire.judged_only
    signer = Signer.for_agent(SECRET, "j")
    batches = LineBatches(10_000, LinkCounters(), KB)
    timed = _training(16, 40, {5: 25, **{r: 30 for r in range(16) if r != 5}})
    by_at: dict[float, list[LogLine]] = {}
    for at, line in timed:
        by_at.setdefault(at, []).append(line)
    seq = parts = 0
    try:
        for at in [*sorted(by_at), *(max(by_at) + 0.5 * k for k in range(1, 20))]:
            for line in by_at.get(at, []):
                batches.add(line)
            for body in batches.take(at, at + 1e6, PACE):
                if fingerprint != "agent's":
                    body = dataclasses.replace(body, classified=body.classified ^ 1)
                h = Header(kind=Kind.LINES, job="j", node="n0", session=7, generation=0, seq=seq, base=seq, mono=at,
                           wall=at + 1e6, sent=at, echo=99)
                seq += 1
                frames = signer.sign(encode(Msg(h, body)))
                parts += cast(Lines, decode_body(Kind.LINES, frames[1], judged_only=True)).logged is not None
                for c in coords.values():
                    c.handle(b"agent", frames, at)
        assert parts > 10  # light batches: the judging thread of one decoded their judged part alone
        a, b = (coords[flag] for flag in (False, True))
        assert_same(cast(Judge, a.judge), cast(Judge, b.judge), 1040.0)
        assert a.counters.lines == b.counters.lines == len(timed)
        assert a.counters.unclassified_batches == b.counters.unclassified_batches
        assert (a.counters.unclassified_batches == seq) is (fingerprint != "agent's")
        hung = cast(Judge, b.judge).verdict(2500.0)
        assert hung.label is Label.COLLECTIVE_HANG and hung.culprit == RankKey("n0", 5)
    finally:
        for c in coords.values():
            c.close()
    logs = [(tmp_path / str(flag) / "merged.log").read_text() for flag in (False, True)]
    assert logs[0] == logs[1] and logs[0].count("\n") == len(timed)

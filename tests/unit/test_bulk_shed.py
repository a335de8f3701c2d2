"""A batch's judged part sent alone while the coordinator is behind (node/bulk_shed.py, ``Lines.shed``):
the judge takes from the parts what it takes from the whole bodies (same states, same hang verdict and
culprit), every line left out is counted in the part that goes (or the next one), and merged.log marks
where they are missing."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.events import Label, LogLine, RankKey
from neuron_watch.iofaults import IOHealth
from neuron_watch.job.joblog import JobLog
from neuron_watch.node.agent_link import AgentLink
from neuron_watch.node.bulk_shed import BULK_SHED_BEHIND, judged_part, sheds_bulk
from neuron_watch.node.line_batches import LineBatches
from neuron_watch.node.link_settings import LinkCounters
from neuron_watch.wire.protocol import Kind, Lines, ProtocolError, decode_body, encode_body, line_columns
from tests.fixtures.nosocket import NoSocket
from tests.unit.test_judge_batch import assert_same
from tests.unit.test_progress_pace import KB, PACE, RX, _training


def _link() -> AgentLink:
    return AgentLink("tcp://127.0.0.1:1", b"s" * 32, job="j", node="n0", session=1,
                     socket=NoSocket())  # type: ignore[arg-type]


def test_the_bulk_is_shed_from_half_a_second_behind() -> None:
    assert not sheds_bulk(0.0)
    assert not sheds_bulk(BULK_SHED_BEHIND - 0.01)
    assert sheds_bulk(BULK_SHED_BEHIND)
    assert sheds_bulk(30.0)


def _paced_bodies(timed: list[tuple[float, LogLine]]) -> list[tuple[float, Lines]]:
    """``timed`` lines through the real node path at PACE, each batch at its time, then half-second turns."""
    batches = LineBatches(10_000, LinkCounters(), KB)
    by_at: dict[float, list[LogLine]] = {}
    for at, line in timed:
        by_at.setdefault(at, []).append(line)
    out = []
    for at in [*sorted(by_at), *(max(by_at) + 0.5 * k for k in range(1, 20))]:
        for line in by_at.get(at, []):
            batches.add(line)
        out += [(at, body) for body in batches.take(at, at + 1e6, PACE)]
    return out


def test_a_hang_reaches_the_same_verdict_from_parts_sent_alone() -> None:
    """Steady training paced at 3 s with RX waits, rank 5 stopping first: one judge fed the whole bodies,
    one fed only the parts a node sheds to (over the wire), hold the same states and name the same culprit
    with the same evidence; the lines left out are counted to the line."""
    timed = _training(16, 60, {5: 40, **{r: 45 for r in range(16) if r != 5}})
    timed += [(at, ln._replace(text=RX)) for at, ln in timed if ln.key.rank == 9 and int(at) % 7 == 0]
    timed.sort(key=lambda x: (x[0], x[1].mono))
    start = timed[0][1].mono
    judges = {False: Judge(KB, JudgeSettings(), start), True: Judge(KB, JudgeSettings(), start)}
    keys: dict[int, RankKey] = {}
    key_of = lambda r: keys.setdefault(r, RankKey("n0", r))  # noqa: E731  (one key object per rank, as the ingest's)
    sent = shed = owed = 0
    for at, whole in _paced_bodies(timed):
        part, left_out = judged_part(whole, owed)
        owed = owed + left_out if part is None else 0
        for alone, body in ((False, whole), (True, part)):
            if body is None:
                continue
            got = decode_body(Kind.LINES, encode_body(body))
            assert isinstance(got, Lines)
            if alone:
                sent += got.n_lines
                shed += got.shed
                assert got.judged is None  # every rank of a part is judged
            judges[alone].observe_columns(line_columns(got, [key_of(c.rank) for c in got.ranks], at, at + 1e6, key_of))
    assert shed > sent  # most of steady training's lines are the bulk
    assert sent + shed + owed == len(timed)  # every line went, or is counted
    assert_same(judges[False], judges[True], 1070.0)
    hung = judges[True].verdict(2500.0)
    assert hung.label is Label.COLLECTIVE_HANG and hung.culprit == RankKey("n0", 5)
    assert hung == judges[False].verdict(2500.0)


def test_a_body_that_judges_every_rank_goes_whole_with_what_is_owed() -> None:
    whole = decode_body(Kind.LINES, encode_body(_paced_bodies(_training(4, 2, {}))[0][1]))
    assert isinstance(whole, Lines) and whole.judged is None  # a rank's first step is news: every rank judged
    assert judged_part(whole) == (whole, 0)
    part, left_out = judged_part(whole, 7)
    assert part is not None and left_out == 0 and part.shed == 7 and part.ranks == whole.ranks


def _light(lines: int = 1) -> Lines:
    """A paced batch of 8 ranks: rank 6's wait judged, the others' steady steps held (``lines`` each)."""
    batches = LineBatches(10_000, LinkCounters(), KB)
    for r in range(8):
        batches.add(LogLine(RankKey("n0", r), "step 1 loss 2.0", 1.0, 1.0, "", 1, "progress.step", 1))
    list(batches.take(1.5, 1.5, PACE))
    for k in range(lines):
        for r in range(8):
            batches.add(LogLine(RankKey("n0", r), RX if r == 6 and k == 0 else f"step 2 loss 1.{k}", 2.0, 2.0, "", 2))
    (body,) = batches.take(2.5, 2.5, PACE)
    return body


def test_a_part_keeps_the_judged_ranks_and_counts_the_rest() -> None:
    body = _light(lines=3)
    assert body.judged is not None and len(body.judged) < len(body.ranks)
    part, left_out = judged_part(body, owed=5)
    assert part is not None
    assert part.ranks == tuple(body.ranks[j] for j in body.judged)
    assert left_out == body.n_lines - part.n_lines and part.shed == left_out + 5
    assert [part.ranks[m.chunk].rank for m in part.matches] == [body.ranks[m.chunk].rank for m in body.matches]
    assert decode_body(Kind.LINES, encode_body(part)) == part  # the ninth item travels


def test_a_batch_that_judges_nothing_sends_nothing_and_its_count_goes_next() -> None:
    body = Lines((_light().ranks[0],), judged=())
    part, left_out = judged_part(body, owed=2)
    assert part is None and left_out == body.n_lines


def test_the_link_sends_whole_bodies_until_its_coordinator_is_behind() -> None:
    link = _link()
    body = _light(lines=2)
    assert link.to_send(body) is body
    link.coordinator_behind = 1.0
    nothing = Lines((body.ranks[0],), judged=())
    assert link.to_send(nothing) is None
    assert link.counters.bulk_lines_shed == nothing.n_lines
    part = link.to_send(body)
    assert part is not None and part.shed == nothing.n_lines + body.n_lines - part.n_lines
    assert link.counters.bulk_lines_shed == part.shed
    link.coordinator_behind = 0.0
    assert link.to_send(body) is body  # caught up: whole again, nothing owed
    link.coordinator_behind = 1.0
    assert link.to_send(nothing) is None
    link.coordinator_behind = 0.0
    caught_up = link.to_send(body)  # the count owed goes with the next body, whole
    assert caught_up is not None and caught_up.ranks == body.ranks and caught_up.shed == nothing.n_lines
    assert link.summary()["bulk_lines_shed"] == part.shed + nothing.n_lines


@pytest.mark.parametrize("shed", [0, -3, 1.5, "2"])
def test_a_ninth_item_that_is_not_a_positive_count_is_refused(shed: object) -> None:
    wire = msgpack.unpackb(encode_body(_light()))
    assert len(wire) == 8
    with pytest.raises(ProtocolError):
        decode_body(Kind.LINES, msgpack.packb([*wire, shed]))


def test_merged_log_marks_the_lines_left_out(tmp_path: Path) -> None:
    run_dir = str(tmp_path)
    log = JobLog(run_dir, IOHealth(), 10, gap=lambda lines, nbytes, error: "")
    part, _left_out = judged_part(_light(lines=3))
    assert part is not None
    _keys, n = log.write_rows("n0", 1000.0, part, True)
    log.close()
    assert n == part.n_lines
    text = (tmp_path / "merged.log").read_text()
    assert f"n0 | neuron-watch: {part.shed} line(s) of n0 are missing here: left out at the node" in text

"""One line record from the tail to the judge: a node's :class:`LogLine` s become a lines body and
come back whole on the other side, the node's name from the header.

The node classifies a batch (:func:`classify_batch`), :func:`lines_body` makes the wire rows, the
frames are encoded and decoded, and :func:`line_records` / :func:`body_lines` give the records back:
the matched and progress lines with their stream, line number and match, every line's text.
"""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from neuron_watch.diagnosis.classify import classify_batch, kb_fingerprint
from neuron_watch.diagnosis.judge import Judge, JudgeSettings, batch_columns
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Evidence, LogLine, RankKey, RankSpan, lazy_evidence_rows
from neuron_watch.wire.protocol import (
    Header,
    Kind,
    Lines,
    Msg,
    body_lines,
    decode,
    encode,
    line_columns,
    line_records,
    lines_body,
    one_line_each,
)
from tests.unit.test_judge_batch import _mixed, assert_same

KB = default_knowledge_base()
NODE = "trn-7"
RX = "2023-Aug-01 16:14:43.0241 332066:332494 [29] include/socket.h:579 CCOM WARN Timeout waiting for RX " \
     "(waited 120 sec) - retrying"


def _lines() -> list[LogLine]:
    """Two ranks that print only steps, one that also waits on RX, one with plain chatter."""
    out = []
    for i in range(3):
        for r in range(4):
            text = f"step {10 + i} loss 2.{r}{i}" if r != 3 else f"chatter {i}"
            out.append(LogLine(RankKey(NODE, r), text, 100.0 + i + r / 10, 5000.0 + i + r / 10, f"/run/rank-{r}.log",
                               i + 1))
    out.append(LogLine(RankKey(NODE, 2), RX, 103.0, 5003.0, "/run/rank-2.log", 4))
    return out


def _over_the_wire(body: Lines, node: str = NODE) -> tuple[Header, Lines]:
    """``body`` sent by ``node`` assembled at mono 110 / wall 5010, as the receiver decodes it."""
    h = Header(kind=Kind.LINES, job="j", node=node, session=1, generation=0, seq=0, mono=110.0, wall=5010.0)
    msg = decode(encode(Msg(h, body)))
    assert isinstance(msg.body, Lines)
    return msg.header, msg.body


def test_matched_and_progress_lines_come_back_whole() -> None:
    lines = _lines()
    found = classify_batch(KB, lines)
    assert found.progress and found.matches  # both kinds of row travel
    h, body = _over_the_wire(lines_body(lines, 110.0, 5010.0, found.matches, found.progress, kb_fingerprint(KB)))
    keys = [RankKey(h.node, c.rank) for c in body.ranks]
    got = line_records(body, keys, h.mono, h.wall)  # the receiver's clock equal to the sender's here

    def same(a: LogLine, b: LogLine) -> None:
        assert (a.key, a.text, a.source, a.lineno, a.signature, a.step, a.loss) == (
            b.key, b.text, b.source, b.lineno, b.signature, b.step, b.loss)
        assert (a.mono, a.wall) == (pytest.approx(b.mono), pytest.approx(b.wall))

    assert len(got.matches) == len(found.matches) and len(got.progress) == len(found.progress)
    for a, b in zip(got.matches, found.matches, strict=True):
        same(a, b)
    for a, b in zip(got.progress, found.progress, strict=True):
        same(a, b)
    assert any(m.text == RX and m.signature for m in got.matches)
    assert [s.key.rank for s in got.ranks] == [0, 1, 2, 3]  # in the order each rank's first line was read
    newest = {r: max((ln for ln in lines if ln.rank == r), key=lambda ln: ln.mono) for r in range(4)}
    for span in got.ranks:
        assert isinstance(span, RankSpan)
        assert span.last == pytest.approx(newest[span.key.rank].mono)
        assert span.text == [ln.text for ln in lines if ln.rank == span.key.rank][-1]


def test_every_line_comes_back_unclassified_in_each_ranks_order() -> None:
    lines = _lines()
    h, body = _over_the_wire(lines_body(lines, 110.0, 5010.0))
    assert body.classified == 0 and not body.matches
    back = body_lines(body, [RankKey(h.node, c.rank) for c in body.ranks], h.mono, h.wall)
    for r in range(4):
        assert [ln.text for ln in back if ln.rank == r] == [ln.text for ln in lines if ln.rank == r]
    assert len(back) == len(lines) and {ln.node for ln in back} == {NODE}


def test_the_node_on_the_records_is_the_senders_not_the_lines() -> None:
    """The node's name travels once, in the header the receiver authenticated: lines that name
    another node come back as the sender's (a node speaks for itself only)."""
    lines = [ln._replace(key=RankKey("someone-else", ln.rank)) for ln in _lines()]
    found = classify_batch(KB, lines)
    h, body = _over_the_wire(lines_body(lines, 110.0, 5010.0, found.matches, found.progress, kb_fingerprint(KB)))
    got = line_records(body, [RankKey(h.node, c.rank) for c in body.ranks], h.mono, h.wall)
    assert {ln.node for ln in (*got.matches, *got.progress)} == {NODE}
    assert {s.key.node for s in got.ranks} == {NODE}


def test_a_line_holding_a_newline_travels_escaped_as_one_line() -> None:
    lines = [LogLine(RankKey(NODE, 0), "one\ntwo", 1.0, 1.0), LogLine(RankKey(NODE, 0), "three", 1.0, 1.0)]
    one = one_line_each(lines)
    assert [ln.text for ln in one] == ["one\\ntwo", "three"]
    _h, body = _over_the_wire(lines_body(one, 2.0, 2.0))
    assert body.ranks[0].n_lines == 2
    assert one_line_each(one) is one  # nothing to escape: the same lines


def test_the_record_names_its_node_rank_and_stream() -> None:
    line = LogLine(RankKey(NODE, 5), "step 1 loss 2.0", 1.0, 2.0, "/run/rank-5.log", 9)
    assert (line.node, line.rank, line.source, line.lineno) == (NODE, 5, "/run/rank-5.log", 9)
    assert (line.signature, line.step, line.loss) == ("", None, None)  # not classified yet


def test_the_link_only_transports() -> None:
    """The agent's link classifies (in its batches of lines) through diagnosis.classify alone: it
    imports nothing of the judge."""
    node = Path(__file__).resolve().parents[2] / "watchdog" / "node"
    imported = {src.name: {n.module for n in ast.walk(ast.parse(src.read_text())) if isinstance(n, ast.ImportFrom)}
                for src in (node / "agent_link.py", node / "line_batches.py")}
    assert "neuron_watch.diagnosis.classify" in imported["line_batches.py"]
    assert all("neuron_watch.diagnosis.judge" not in modules for modules in imported.values())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_columns_leave_the_judge_as_the_records_do(seed: int) -> None:
    """What the coordinator hands its judge (:func:`line_columns`, no record per rank or progress row)
    leaves it exactly as the records do (:func:`line_records` into ``observe_batch``), batch after
    batch of the table's every example line, steps and chatter, through the wire."""
    lines = _mixed(seed, 1500)
    # then steady training: each step first printed by one rank, the others follow (progress rows)
    t, top = lines[-1].mono, max((ln.step for ln in classify_batch(KB, lines).matches if ln.step is not None),
                                 default=0)
    for step in range(top + 1, top + 40):
        for n, r in [(n, r) for n in range(2) for r in range(3)]:
            t += 0.05
            lines.append(LogLine(RankKey(f"n{n}", r), f"step {step} loss 2.{r}{n} lr 1e-4", t, t + 1e6))
    start = min(ln.mono for ln in lines)
    by_records, by_columns = Judge(KB, JudgeSettings(), start), Judge(KB, JudgeSettings(), start)
    rng = random.Random(seed)
    keys: dict[RankKey, RankKey] = {}  # one key object per rank, as the job log gives the coordinator
    i = columns_rows = 0
    while i < len(lines):
        node = f"n{rng.randrange(2)}"
        batch = [ln for ln in lines[i:i + rng.choice((1, 5, 40))] if ln.node == node]
        i += max(1, len(batch))
        if not batch:
            continue
        now = max(ln.mono for ln in batch) + 0.5
        found = classify_batch(KB, batch)
        h = Header(kind=Kind.LINES, job="j", node=node, session=1, generation=0, seq=0, mono=now, wall=now + 1e6)
        msg = decode(encode(Msg(h, lines_body(batch, now, now + 1e6, found.matches, found.progress,
                                              kb_fingerprint(KB)))))
        assert isinstance(msg.body, Lines)
        body = msg.body
        row_keys = [keys.setdefault(RankKey(node, c.rank), RankKey(node, c.rank)) for c in body.ranks]
        records = line_records(body, row_keys, now, h.wall)
        cols = line_columns(body, row_keys, now, h.wall)
        assert batch_columns(records.ranks, records.matches, records.progress) == (
            cols._replace(first=list(cols.first), last=list(cols.last), text=list(cols.text),
                          progress=type(cols.progress)(*map(list, cols.progress))))
        columns_rows += len(cols.progress.chunk)
        by_records.observe_batch(records.ranks, records.matches, records.progress)
        by_columns.observe_columns(cols)
        assert_same(by_records, by_columns, now)
    assert columns_rows  # the progress rows were taken by column, not only matches


def test_evidence_taken_by_column_equals_evidence_built_one_by_one() -> None:
    keys = [RankKey(NODE, r) for r in range(3)]
    rows = [(k, f"step {k.rank} loss 2.0", "progress.step_loss", f"/run/rank-{k.rank}.log", k.rank + 1, 10.0 + k.rank)
            for k in keys]
    lazy = lazy_evidence_rows(*map(list, zip(*rows, strict=True)))
    assert lazy == [Evidence(*r) for r in rows] and [Evidence(*r) for r in rows] == lazy  # either way round
    assert lazy[0] != Evidence(*rows[1]) and lazy[0] != lazy[1] and lazy[0] != rows[0]
    built = [e.build() for e in lazy]
    assert built == [Evidence(*r) for r in rows] and all(type(e) is Evidence for e in built)
    assert [hash(e) for e in built] == [hash(Evidence(*r)) for r in rows]
    assert built[2].to_dict() == Evidence(*rows[2]).to_dict() and lazy[2].signature == "progress.step_loss"
    with pytest.raises(ValueError, match="2 and 3 rows"):
        lazy_evidence_rows(keys, ["a", "b", "c"], ["s"] * 3, ["x"] * 3, [1, 2, 3], [1.0, 2.0])

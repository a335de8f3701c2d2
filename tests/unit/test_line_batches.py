"""A node's batches of lines split by size, without sockets."""

from __future__ import annotations

from neuron_watch.events import LogLine, RankKey
from neuron_watch.node.line_batches import split_by_size
from neuron_watch.wire.protocol import MAX_BODY_BYTES


def _rows(texts: list[str]) -> list[LogLine]:
    return [LogLine(RankKey("n", i % 16), t, 0.0, 0.0, "", i) for i, t in enumerate(texts)]


def test_a_usual_batch_is_not_split() -> None:
    rows = _rows([f"step {i} loss 1.0" for i in range(4000)])
    assert split_by_size(rows) == [rows]


def test_a_batch_of_megabyte_lines_is_split_in_order_under_the_body_limit() -> None:
    mib = "m" * (1 << 20)
    rows = _rows([f"{i} {mib}" for i in range(80)]) + _rows(["\u00e9" * (4 << 20)])  # 8 MiB of UTF-8
    parts = split_by_size(rows)
    assert len(parts) >= 3 and [r for p in parts for r in p] == rows
    for part in parts:
        assert sum(2 * len(r[1].encode()) + 64 for r in part) <= MAX_BODY_BYTES

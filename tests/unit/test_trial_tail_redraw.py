"""A ``\\r`` redraw hides a line on a terminal; a hidden line that reads as an error is kept.

The tail (live) and :func:`logical_lines` (saved logs) keep such a line as a record of its own
before what the terminal finally shows; a bar's own redraws stay one record per poll.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.diagnosis.logtext import logical_lines
from neuron_watch.node.tail import FileTail, Record

BAR = "Epoch 0:  50%|#####     | 3/6"


def records(path: Path, *writes: bytes) -> list[Record]:
    t = FileTail(str(path))
    out: list[Record] = []
    try:
        for w in writes:
            with path.open("ab") as fh:
                fh.write(w)
            out += t.read_records()
        return out + t.read_records(final=True)
    finally:
        t.close()


@pytest.mark.parametrize("writes", [
    [f"RuntimeError: boom\r{BAR}\n".encode()],  # one read
    [b"RuntimeError: boom\r", f"{BAR}\n".encode()],  # the "\r" held back at the end of a read
    [b"RuntimeError: boom\rEpoch 0:  10%|#", b"\rEpoch 0:  50%|#####     | 3/6\n"],  # redrawn again later
    [b"RuntimeError: boom\r   \r", f"{BAR}\n".encode()],  # a blank clearing write in between
], ids=["one-read", "held-cr", "redrawn", "cleared"])
def test_an_error_line_hidden_by_a_redraw_is_a_record_of_its_own(tmp_path: Path, writes: list[bytes]) -> None:
    got = [r.text for r in records(tmp_path / "stdout.log", *writes) if not r.redraw]
    assert got == ["RuntimeError: boom", BAR]


def test_an_error_handed_out_as_a_redraw_is_logged_but_not_judged_twice(tmp_path: Path) -> None:
    got = records(tmp_path / "stdout.log", b"\rNCCL WARN socket closed", f"\r{BAR}\n".encode())
    assert [(r.text, r.redraw, r.seen) for r in got] == [
        ("NCCL WARN socket closed", True, False),  # the newest state of the line, judged as it came
        ("NCCL WARN socket closed", False, True),  # hidden now: written to the rank log, not judged again
        (BAR, False, False),
    ]


def test_a_bars_own_redraws_stay_one_record_per_poll(tmp_path: Path) -> None:
    redraws = b"".join(f"\rEpoch 0: {p:3d}%|".encode() for p in range(0, 100, 5))
    got = records(tmp_path / "stdout.log", redraws, b"\rEpoch 0: 100%| done\n")
    assert [r.text for r in got if not r.redraw] == ["Epoch 0: 100%| done"]


@pytest.mark.parametrize(("raw", "lines"), [
    (f"RuntimeError: boom\r{BAR}", ["RuntimeError: boom", BAR]),
    (f"Traceback (most recent call last):\r\x1b[2K{BAR}\r", ["Traceback (most recent call last):", BAR]),
    (f"{BAR}\rEpoch 0: 100%|", ["Epoch 0: 100%|"]),
    ("RuntimeError: boom\r   ", ["RuntimeError: boom"]),  # nothing hides it: one record
    ("loss 0.5 (no error here)\rstep 2", ["step 2"]),
])
def test_logical_lines_keep_an_error_a_redraw_hides(raw: str, lines: list[str]) -> None:
    assert logical_lines(raw) == lines

"""Long lines in the tail: kept whole up to MAX_PARTIAL bytes, longer ones cut once, marked and counted,
whatever the read boundaries; a node's reads per poll bounded by NODE_READ_BUDGET (real files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.node import tail
from neuron_watch.node.tail import MAX_PARTIAL, MAX_READ, FileTail, RankStreams


def read_all(t: FileTail) -> list[str]:
    out: list[str] = []
    for _ in range(1000):
        got = t.read_lines()
        out += got
        if not t.behind and not got:
            break
    return out + t.read_lines(final=True)


@pytest.mark.parametrize("size", [10 << 20, MAX_READ + 7, MAX_PARTIAL + 1])
def test_a_line_longer_than_the_bound_is_one_cut_line_marked_and_counted(tmp_path: Path, size: int) -> None:
    path = tmp_path / "stdout.log"
    path.write_bytes(b"step 1 loss 2.0\n" + b"x" * size + b"<end>\nstep 2 loss 1.9\n")
    t = FileTail(str(path))
    lines = read_all(t)
    assert lines[0] == "step 1 loss 2.0" and lines[-1] == "step 2 loss 1.9"
    (cut,) = lines[1:-1]  # one line, not three pieces
    head, note = cut[:MAX_PARTIAL], cut[MAX_PARTIAL:]
    assert head == "x" * MAX_PARTIAL
    assert note == tail.cut_note(str(path)) and "<end>" not in note
    assert t.cut_lines == 1 and t.cut_bytes == size + len(b"<end>") - MAX_PARTIAL


def test_a_line_written_in_pieces_is_cut_once(tmp_path: Path) -> None:
    """The line grows across polls (a rank's 64 KiB writes): its head goes out as soon as it passes the
    bound, its rest is skipped as it comes, never held, and the next line is whole."""
    path = tmp_path / "stdout.log"
    t = FileTail(str(path))
    got: list[str] = []
    with path.open("wb") as f:
        for _ in range(40):
            f.write(b"y" * (64 << 10))
            f.flush()
            got += t.read_lines()
            assert len(t.partial) <= MAX_PARTIAL
        f.write(b"\nnext line\n")
    got += read_all(t)
    assert len(got) == 2 and got[0].startswith("y" * MAX_PARTIAL) and got[0].endswith("]")
    assert got[1] == "next line"
    assert t.cut_lines == 1 and t.cut_bytes == 40 * (64 << 10) - MAX_PARTIAL


def test_a_line_of_exactly_the_bound_is_whole(tmp_path: Path) -> None:
    path = tmp_path / "stdout.log"
    path.write_bytes(b"z" * MAX_PARTIAL + b"\n")
    t = FileTail(str(path))
    assert read_all(t) == ["z" * MAX_PARTIAL] and t.cut_lines == 0


def test_a_node_reads_at_most_its_budget_a_poll_and_every_file_gets_turns(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tail, "NODE_READ_BUDGET", 3 << 20)
    root = tmp_path / "torchrun"
    ranks = 6
    for lr in range(ranks):
        d = root / "job" / "attempt_0" / str(lr)
        d.mkdir(parents=True)
        (d / "stdout.log").write_bytes((b"m" * (2 << 20) + b"\n") * 2 + f"done {lr}\n".encode())
        (d / "stderr.log").write_bytes(b"")
    streams = RankStreams("n", str(tmp_path / "gen"))
    (tmp_path / "gen").mkdir()
    streams.set_log_root(str(root))
    streams.rank_offset = 0
    done: set[int] = set()
    polls = 0
    while len(done) < ranks and polls < 100:
        before = sum(t.bytes_read for t, _r in streams._tails.values())
        lines = streams.poll(float(polls), 0.0)
        read = sum(t.bytes_read for t, _r in streams._tails.values()) - before
        assert read <= (3 << 20) + MAX_READ  # the budget, and at most one file's read beyond it
        done |= {int(x.text.split()[1]) for x in lines if x.text.startswith("done ")}
        polls += 1
    streams.close()
    assert done == set(range(ranks))  # no file starved
    assert streams.cut_lines == 2 * ranks and streams.cut_bytes == 2 * ranks * ((2 << 20) - MAX_PARTIAL)
    for r in range(ranks):
        text = (tmp_path / "gen" / f"rank-{r}.log").read_text()
        assert text.count("neuron-watch: this line is longer than") == 2 and text.endswith(f"done {r}\n")


def test_a_backlog_skip_inside_a_long_line_never_passes_its_rest_as_a_line(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A flood's skip that ends inside a long line: the line is counted once as skipped, and what is left
    of it is skipped too, not passed on as a line (or a piece) of its own."""
    monkeypatch.setattr(tail, "BACKLOG_MAX", 2 << 20)
    monkeypatch.setattr(tail, "BACKLOG_KEEP", 512 << 10)
    path = tmp_path / "stdout.log"
    path.write_bytes(b"first\n" + b"x" * (6 << 20) + b"\nlast\n")
    t = FileTail(str(path))
    t.offset = 0
    lines = t.read_lines(to_eof=True)
    notes = [x for x in lines if x.startswith("neuron-watch: ")]
    assert [x for x in lines if not x.startswith("neuron-watch: ")] == ["last"]
    assert notes and t.skipped_lines == 2  # "first" and the long line, each once
    assert t.cut_lines == 0

"""The watchdog's own files through faults (iofaults), and the tail's read-to-EOF and flood counting."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from neuron_watch.errors import ExitCode, UsageError
from neuron_watch.iofaults import AppendFile, IOHealth, check_checkpoint_dir, check_run_dir, claim_run_dir
from neuron_watch.node import tail
from neuron_watch.node.tail import FileTail


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _heard(health: IOHealth) -> list[tuple[str, dict[str, Any]]]:
    heard: list[tuple[str, dict[str, Any]]] = []
    health.listeners.append(lambda kind, fields: heard.append((kind, fields)))
    return heard


def test_append_file_keeps_what_the_disk_refuses_and_writes_it_in_order_when_it_takes_writes(tmp_path: Path) -> None:
    health, clock = IOHealth("n1"), Clock()
    heard = _heard(health)
    path = tmp_path / "gone" / "merged.log"  # its directory does not exist: every open fails (ENOENT)
    f = AppendFile(str(path), health, clock=clock)
    f.write("one\n")
    assert not f.flush()
    f.write("two\n")
    assert not f.flush()  # not retried before RETRY_EVERY
    assert [k for k, _ in heard] == ["watchdog_degraded"]  # said once, not per attempt
    assert heard[0][1]["path"] == str(path) and "ENOENT" in heard[0][1]["error"]
    assert health.summary()["degraded"] == {str(path): heard[0][1]["error"]} and health.faults == 1
    path.parent.mkdir()
    clock.now += 1.5
    f.write("three\n")
    assert f.flush()
    assert path.read_text() == "one\ntwo\nthree\n"
    assert [k for k, _ in heard] == ["watchdog_degraded", "watchdog_recovered"]
    assert heard[1][1]["lost_lines"] == 0 and health.summary()["degraded"] == {}
    f.close()


def test_create_makes_the_file_before_any_write_and_a_refusal_is_told_then_mended_at_a_flush(tmp_path: Path) -> None:
    health, clock = IOHealth("n1"), Clock()
    heard = _heard(health)
    made = AppendFile(str(tmp_path / "merged.log"), health, clock=clock)
    assert made.create() and (tmp_path / "merged.log").read_text() == ""  # there, empty
    made.close()
    path = tmp_path / "gone" / "merged.log"  # its directory does not exist: the open fails (ENOENT)
    f = AppendFile(str(path), health, clock=clock)
    assert not f.create() and not path.exists()
    assert [k for k, _ in heard] == ["watchdog_degraded"] and health.faults == 1
    path.parent.mkdir()
    clock.now += 1.5
    f.write("one\n")
    assert f.flush() and path.read_text() == "one\n"
    assert [k for k, _ in heard] == ["watchdog_degraded", "watchdog_recovered"]
    f.close()


def test_append_file_beyond_its_bound_counts_what_it_drops_and_marks_the_gap(tmp_path: Path) -> None:
    health, clock = IOHealth(), Clock()
    heard = _heard(health)
    path = tmp_path / "gone" / "rank-0.log"
    f = AppendFile(str(path), health, clock=clock, max_pending=10,
                   gap=lambda lines, nbytes, error: f"GAP {lines} {nbytes}")
    f.write("12345\n")
    f.flush()
    f.write("abcdef\n")  # beyond 10 bytes while failing: dropped, counted
    f.write("ghijkl\n")
    assert health.lost_lines == 2 and health.lost_bytes == 14
    path.parent.mkdir()
    clock.now += 2
    assert f.flush()
    f.write("after\n")
    f.close()
    assert path.read_text() == "12345\nGAP 2 14\nafter\n"
    assert heard[-1][1]["lost_lines"] == 2 and heard[-1][1]["lost_bytes"] == 14


def test_close_counts_what_still_cannot_be_written(tmp_path: Path) -> None:
    health = IOHealth()
    f = AppendFile(str(tmp_path / "gone" / "x.log"), health)
    f.write("a\nb\n")
    f.close()
    assert health.lost_lines == 2 and health.lost_bytes == 4


def test_write_json_failure_is_counted_not_raised(tmp_path: Path) -> None:
    health = IOHealth()
    assert not health.write_json(str(tmp_path / "gone" / "status.json"), {"a": 1})
    assert health.faults == 1
    (tmp_path / "gone").mkdir()
    assert health.write_json(str(tmp_path / "gone" / "status.json"), {"a": 1})
    assert health.degraded == {} and os.listdir(tmp_path / "gone") == ["status.json"]


def test_unusable_run_dirs_are_usage_errors_naming_the_dir(tmp_path: Path) -> None:
    check_run_dir(str(tmp_path / "new" / "run"))  # created
    assert (tmp_path / "new" / "run").is_dir() and not os.listdir(tmp_path / "new" / "run")  # the probe is gone
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError) as err:
        check_run_dir(str(tmp_path / "file"))
    assert err.value.exit_code == ExitCode.USAGE
    assert f"--run-dir {tmp_path / 'file'} is not usable" in str(err.value) and err.value.hint


def test_a_node_name_held_in_a_run_dir_is_refused_naming_the_holder_and_free_once_released(tmp_path: Path) -> None:
    first = claim_run_dir(str(tmp_path), "trn-a/7", "slurm-42")
    assert first is not None
    assert claim_run_dir(str(tmp_path), "trn-b", "slurm-42") is not None  # another node of the job: its own
    with pytest.raises(UsageError) as err:  # a second open file description: flock refuses it as another process
        claim_run_dir(str(tmp_path), "trn-a/7", "slurm-42")
    assert err.value.exit_code == ExitCode.USAGE
    assert f"is in use by another neuron-watch of node trn-a/7 that still runs (job slurm-42, pid {os.getpid()})" \
        in str(err.value) and "--run-dir DIR" in err.value.hint
    first.close()  # the process's end does the same
    again = claim_run_dir(str(tmp_path), "trn-a/7", "slurm-43")
    assert again is not None
    again.close()


def test_checkpoint_dir_missing_is_fine_unreadable_is_a_usage_error(tmp_path: Path) -> None:
    check_checkpoint_dir(str(tmp_path / "not-yet"))
    (tmp_path / "ok").mkdir()
    check_checkpoint_dir(str(tmp_path / "ok"))
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(UsageError, match="Too many levels of symbolic links"):
        check_checkpoint_dir(str(loop))
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(UsageError, match="symlink to nothing"):
        check_checkpoint_dir(str(tmp_path / "dangling"))


@pytest.fixture
def small_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tail's bounds shrunk so that a few KiB is a flood (same code path as 32 MiB)."""
    monkeypatch.setattr(tail, "MAX_READ", 64)
    monkeypatch.setattr(tail, "BACKLOG_MAX", 1000)
    monkeypatch.setattr(tail, "BACKLOG_KEEP", 200)
    monkeypatch.setattr(tail, "MAX_PARTIAL", 1 << 20)


def test_final_read_goes_to_the_end_of_the_file(tmp_path: Path, small_reads: None) -> None:
    path = tmp_path / "stdout.log"
    path.write_text("".join(f"line {i}\n" for i in range(60)))  # ~480 bytes: over MAX_READ, under the backlog
    t = FileTail(str(path))
    assert len(t.read_lines()) < 60  # one read of MAX_READ bytes
    t2 = FileTail(str(path))
    assert t2.read_lines(final=True) == [f"line {i}" for i in range(60)]
    t3 = FileTail(str(path))
    assert t3.read_records(to_eof=True)[-1].text == "line 59"
    for x in (t, t2, t3):
        x.close()


def test_a_flood_backlog_is_skipped_and_every_skipped_line_counted(tmp_path: Path, small_reads: None) -> None:
    path = tmp_path / "stdout.log"
    path.write_text("".join(f"flood {i}\n" for i in range(1000)) + "the last line\n")
    t = FileTail(str(path))
    texts = t.read_lines(final=True)
    notes = [x for x in texts if x.startswith("neuron-watch: ")]
    assert len(notes) == 1 and "skipped unread" in notes[0]
    assert texts[-1] == "the last line"
    assert len(texts) - len(notes) + t.skipped_lines == 1001
    assert int(notes[0].split()[1]) == t.skipped_lines
    # the lines read are the newest, whole, in order
    read = [x for x in texts if not x.startswith("neuron-watch: ")]
    first = int(read[0].split()[1])
    assert read[:-1] == [f"flood {i}" for i in range(first, 1000)]
    t.close()


def test_a_line_longer_than_the_backlog_is_counted_once_however_many_skips(tmp_path: Path,
                                                                           small_reads: None) -> None:
    path = tmp_path / "stdout.log"
    with open(path, "w") as f:
        f.write("before\n")
    t = FileTail(str(path))
    assert t.read_lines() == ["before"]
    with open(path, "a") as f:
        f.write("x" * 1500)  # more than BACKLOG_MAX, still no newline: a skip inside the line
    t.read_lines(to_eof=True)
    with open(path, "a") as f:
        f.write("x" * 1500 + "\nafter\n")
    texts = t.read_lines(final=True)
    assert texts[-1] == "after"
    assert t.skipped_lines == 1
    t.close()

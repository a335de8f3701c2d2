from __future__ import annotations

import os
from pathlib import Path

from neuron_watch.node.tail import FileTail, RankStreams


def test_lines_split_across_reads_and_partial_lines_wait(tmp_path: Path) -> None:
    f = tmp_path / "stdout.log"
    f.write_bytes(b"step 1 loss 0.5\nstep 2 lo")
    t = FileTail(str(f))
    assert t.read_lines() == ["step 1 loss 0.5"]
    with f.open("ab") as fh:
        fh.write(b"ss 0.4\r\n")
    assert t.read_lines() == ["step 2 loss 0.4"]
    t.close()


def test_dots_without_newline_are_passed_on_at_once(tmp_path: Path) -> None:
    f = tmp_path / "stdout.log"
    f.write_bytes(b"Call compiler\n...")
    t = FileTail(str(f))
    assert t.read_lines() == ["Call compiler", "..."]
    t.close()


def test_invalid_utf8_is_replaced_not_fatal(tmp_path: Path) -> None:
    f = tmp_path / "stdout.log"
    f.write_bytes(b"bad \xff\xfe bytes\n")
    t = FileTail(str(f))
    assert t.read_lines() == ["bad \ufffd\ufffd bytes"]
    t.close()


def test_a_file_that_appears_later_is_read_from_its_start_and_released_on_close(tmp_path: Path) -> None:
    f = tmp_path / "stdout.log"
    t = FileTail(str(f))
    assert t.read_lines() == []  # torchrun has not created it yet
    f.write_bytes(b"first\n")
    assert t.read_lines() == ["first"]
    fds = len(os.listdir("/proc/self/fd"))
    t.close()
    assert len(os.listdir("/proc/self/fd")) == fds - 1


def test_rank_streams_map_local_to_global_rank_and_write_rank_logs(tmp_path: Path) -> None:
    root = tmp_path / "torchrun"
    for local in (0, 1):
        d = root / "job_abc" / "attempt_0" / str(local)
        d.mkdir(parents=True)
        (d / "stdout.log").write_text(f"hello from {local}\n")
        (d / "stderr.log").write_text("")
    echoed: list[str] = []
    s = RankStreams("n2", str(tmp_path), echoed.append)
    s.set_log_root(str(root))
    assert s.poll(1.0, 1.0) == []  # offset unknown yet: buffered, not lost
    s.rank_offset = 8  # node 2 of a 4-rank-per-node job... as learned from the workers' RANK
    lines = s.poll(2.0, 2.0)
    assert sorted((ln.key.rank, ln.text) for ln in lines) == [(8, "hello from 0"), (9, "hello from 1")]
    assert (tmp_path / "rank-9.log").read_text() == "hello from 1\n"
    assert any(e.startswith("[rank8] hello from 0") for e in "\n".join(echoed).splitlines())
    s.close()


def test_lines_of_a_generation_that_ended_before_its_ranks_were_known_still_go_out(tmp_path: Path) -> None:
    root = tmp_path / "torchrun"
    d = root / "job_abc" / "attempt_0" / "0"
    d.mkdir(parents=True)
    (d / "stdout.log").write_text("Failure: NRT_EXEC_HW_ERR_HBM_UE in nrt_execute()\n")
    s = RankStreams("n2", str(tmp_path))
    s.set_log_root(str(root))
    assert s.poll(1.0, 1.0) == []
    lines = s.poll(2.0, 2.0, final=True)  # the launcher exited; no worker ever told us its RANK
    assert [(str(ln.key), ln.text) for ln in lines] == [
        ("n2/rank?", "[local_rank 0] Failure: NRT_EXEC_HW_ERR_HBM_UE in nrt_execute()")]
    assert s.unattributed_lines == 1
    assert "NRT_EXEC_HW_ERR_HBM_UE" in (tmp_path / "unattributed-n2.log").read_text()
    s.close()


def test_a_rank_file_made_anew_by_torchrun_is_read_from_its_start_after_the_old_ones_last_words(
        tmp_path: Path) -> None:
    """torchrun restarts its workers without counting a restart when an elastic job's members change:
    it removes the attempt's log dir and makes it again (torch's DefaultLogsSpecs.reify), so the same
    path names a new file. Found by hand: a node joining a ``--nnodes 1:2`` job, and node 0's ranks
    unread from then on (the tail held the removed file open)."""
    root = tmp_path / "torchrun"
    attempt = root / "job_abc" / "attempt_0"
    (attempt / "0").mkdir(parents=True)
    (attempt / "0" / "stdout.log").write_text("step 1\nstep 2\n")
    s = RankStreams("n0", str(tmp_path))
    s.set_log_root(str(root))
    s.rank_offset = 0
    assert [ln.text for ln in s.poll(1.0, 1.0)] == ["step 1", "step 2"]
    with (attempt / "0" / "stdout.log").open("a") as f:
        f.write("step 3\n")  # its last words, written before torchrun removes the dir
        removed = attempt.with_name("removed")
        attempt.rename(removed)  # (as rmtree: the path no longer names the open file)
    (attempt / "0").mkdir(parents=True)
    (attempt / "0" / "stdout.log").write_text("step 1 of the new workers\n")
    texts = [ln.text for ln in s.poll(3.0, 3.0)]  # discovery's turn (every DISCOVER_EVERY seconds)
    assert texts[0] == "step 3" and texts[-1] == "step 1 of the new workers", texts
    assert "made anew" in texts[1]
    with (attempt / "0" / "stdout.log").open("a") as f:
        f.write("step 2 of the new workers\n")
    assert [ln.text for ln in s.poll(3.1, 3.1)] == ["step 2 of the new workers"]
    held = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
            if os.path.exists(f"/proc/self/fd/{fd}")]
    assert not [p for p in held if p.startswith(str(removed))]  # the replaced file was closed at once
    s.close()

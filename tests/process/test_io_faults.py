"""Faults of the watchdog's own I/O and output floods, on real processes.

The disks are real: a small tmpfs mounted by the fixture for the run dir (filled with a real file
until the kernel says ENOSPC), ``chattr +i`` for a run dir that refuses new entries (a read-only
remount is refused by the kernel while the watchdog holds files open for writing, so the
immutable flag is how a run dir "turns read-only" under a live process here: EPERM on every new
file or directory), a symlink loop for a checkpoint dir that cannot be read (ELOOP: as root,
``chmod 000`` would not stop us). Each test asserts that the healthy job finished (exit 0,
``job_finished``), that what was lost is counted, and that no pid survives.
"""

from __future__ import annotations

import errno
import json
import os
import select
import subprocess
from pathlib import Path

import pytest

from tests.conftest import require_binary
from tests.fixtures.procs import NEURON_WATCH, events, force_cleanup, named, pids_with_env, run_to_end, started
from tests.fixtures.wait import wait_for, within

POLL = 0.2  # how often a wait looks; the disk-full window depends on it

pytestmark = pytest.mark.process

RANKS = str(Path(__file__).parent / "ranks" / "io_faults.py")
#: seconds a restarted generation trains: it has only to resume from its checkpoint and finish
THEN = 3


def fill(disk: Path) -> Path:
    """Write a file on ``disk`` until the kernel refuses with ENOSPC; returns it."""
    filler = disk / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * (256 << 10))
                f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    # the file object's close flushes nothing more (its buffer went out or was refused above)
    return filler


class Console:
    """The wrapper's console (stdout+stderr), read as it comes without blocking the test."""

    def __init__(self, p: subprocess.Popen[str]) -> None:
        assert p.stdout is not None
        self.fd = p.stdout.fileno()
        self.text = ""

    def read(self) -> str:
        while select.select([self.fd], [], [], 0)[0]:
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                break
            self.text += chunk.decode("utf-8", "replace")
        return self.text

    def saw(self, needle: str) -> bool:
        return needle in self.read()

    def rest(self) -> str:
        while True:
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                return self.text
            self.text += chunk.decode("utf-8", "replace")


def has_event(run_dir: Path, name: str) -> bool:
    try:
        return any(json.loads(x).get("event") == name for x in (run_dir / "events.jsonl").read_text().splitlines())
    except (OSError, ValueError):
        return False


def torchrun_files(root: Path) -> dict[int, Path]:
    """torchrun's own stdout file of each local rank under ``root`` (its --log-dir)."""
    return {int(p.parent.name): p for p in root.glob("**/attempt_0/*/stdout.log")}


def ours(text: str) -> list[str]:
    """A rank log's lines that the rank printed (not our notes about gaps and skips)."""
    return [x for x in text.splitlines() if not x.startswith("neuron-watch: ")]


def end_file(tmp_path: Path) -> Path:
    """The file whose appearance ends the ranks of a full-disk run (their ``--until``): off the full
    disk, so that the test can always make it."""
    return tmp_path / "end-now"


def run_through_a_full_disk(argv: list[str], tmp_path: Path, env: dict[str, str], run_dir: Path,
                            disk: Path) -> tuple[int, str, dict[int, int]]:
    """Run ``argv`` (a job whose run dir is on ``disk``, its ranks ``steady ... --until`` the file
    :func:`end_file` names); once it progresses, fill ``disk`` until the console says the watchdog is
    degraded, check the job runs on, free it, wait for "recovered", let the ranks finish and wait for
    the end. Returns the exit code, the console, and the size of torchrun's per-rank stdout files
    while the disk was full (by local rank)."""
    try:
        with started(argv, str(tmp_path), env) as p:
            console = Console(p)
            wait_for("the job's first progress event", lambda: has_event(run_dir, "progress"),
                     within(180), interval=POLL)
            filler = fill(disk)
            wait_for("the console's 'watchdog degraded'", lambda: console.saw("watchdog degraded"),
                     within(60), interval=POLL)
            size = {r: f.stat().st_size for r, f in torchrun_files(run_dir / "gen-0" / "torchrun").items()}
            # The watchdog's own writes may fail first (its job log takes a batch every few ms); the
            # ranks print 10 lines a second: keep the disk full until no rank's file has grown for
            # three looks in a row, so that their prints met the full disk too.
            unchanged = [0]

            def ranks_blocked() -> bool:
                now = {r: f.stat().st_size for r, f in torchrun_files(run_dir / "gen-0" / "torchrun").items()}
                unchanged[0] = unchanged[0] + 1 if now == size else 0
                size.update(now)
                return unchanged[0] >= 3

            wait_for("the ranks' files to stop growing on the full disk", ranks_blocked, within(60), interval=POLL)
            assert p.poll() is None, console.read()[-3000:]  # the job runs on
            filler.unlink()
            wait_for("the console's 'watchdog recovered'", lambda: console.saw("watchdog recovered"),
                     within(60), interval=POLL)
            end_file(tmp_path).touch()  # the ranks print "training done" and exit
            p.wait(180)
            out = console.rest()
    finally:
        force_cleanup(str(run_dir))
    return p.returncode, out, size


def test_full_run_dir_degrades_the_watchdog_and_the_job_finishes(
    tmp_path: Path, small_disk: Path, toy_env: dict[str, str]
) -> None:
    run_dir, tr_logs = small_disk / "run", tmp_path / "torchrun-logs"
    # torchrun's per-rank files live elsewhere: the ranks' own stdout on a full disk would fail
    # their prints; this test is about the watchdog's files (merged.log, events, rank logs, status)
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "torchrun", "--log-dir", str(tr_logs),
            "--nproc_per_node", "2", RANKS, "steady", "30", "--until", str(end_file(tmp_path))]
    code, out, _ = run_through_a_full_disk(argv, tmp_path, toy_env, run_dir, small_disk)
    assert code == 0, out[-3000:]
    evs = events(run_dir)
    assert evs[0]["event"] == "job_started" and evs[-1]["event"] == "job_finished", out[-3000:]
    end = evs[-1]
    assert end["exit_code"] == 0 and end["restarts"] == 0
    degraded, recovered = named(evs, "watchdog_degraded"), named(evs, "watchdog_recovered")
    assert degraded and recovered
    assert "No space left on device" in degraded[0]["error"]
    assert end["watchdog_io"]["faults"] >= 1 and end["watchdog_io"]["degraded"] == {}
    # nothing had to be dropped (the disk came back before 8 MiB per file waited): every line
    # each rank printed is in its rank log, and in merged.log
    assert end["watchdog_io"]["lost_lines"] == 0 and all(e["lost_lines"] == 0 for e in recovered)
    merged = (run_dir / "merged.log").read_text()
    for local_rank, path in torchrun_files(tr_logs).items():
        printed = path.read_text().splitlines()
        assert printed[-1] == "training done"
        assert ours((run_dir / "gen-0" / f"rank-{local_rank}.log").read_text()) == printed
        assert merged.count(f"/rank{local_rank} | ") >= len(printed)
    assert "watchdog degraded: cannot write" in out
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []


def test_a_full_disk_under_the_ranks_own_output_files_does_not_kill_them(
    tmp_path: Path, small_disk: Path, toy_env: dict[str, str]
) -> None:
    """The default layout: torchrun's per-rank stdout files live in the run dir (neuron-watch asks
    for them there). Filled to ENOSPC mid-job, a rank's ``print`` would raise and the rank die (the
    soak benchmark saw two restarts from it); on a terminal it never would. The rank bootstrap keeps
    those writes from raising: the job finishes, no restart, and the rank's file says what it lost."""
    run_dir = small_disk / "run"
    # 2 kB a line, 10 lines a second: every rank needs new pages of the disk while it is full
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "torchrun", "--nproc_per_node", "2", RANKS,
            "steady", "30", "--pad", "2000", "--until", str(end_file(tmp_path))]
    code, out, size = run_through_a_full_disk(argv, tmp_path, toy_env, run_dir, small_disk)
    assert code == 0, out[-3000:]
    files = torchrun_files(run_dir / "gen-0" / "torchrun")
    evs = events(run_dir)
    assert named(evs, "restart") == [] and evs[-1]["event"] == "job_finished" and evs[-1]["exit_code"] == 0
    texts = {r: f.read_text() for r, f in files.items()}
    assert all(t.splitlines()[-1] == "training done" for t in texts.values()), {r: t[-300:] for r, t in texts.items()}
    lost = [line for t in texts.values() for line in t.splitlines() if "bytes of this rank's output were lost" in line]
    assert lost and all("ENOSPC" in line for line in lost), lost
    assert all(f.stat().st_size > size[r] for r, f in files.items())
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []


def test_run_dir_refusing_new_files_at_a_restart_the_restart_goes_on(
    tmp_path: Path, small_disk: Path, toy_env: dict[str, str]
) -> None:
    chattr = require_binary("chattr")
    run_dir, trigger = small_disk / "run", tmp_path / "crash-now"
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "--max-restarts", "2", "--no-prewarm", "torchrun",
            "--nproc_per_node", "2", RANKS, "steady", "20", "--crash-on", str(trigger), "--then", str(THEN)]
    try:
        with started(argv, str(tmp_path), toy_env) as p:
            console = Console(p)
            wait_for("the job's first progress event", lambda: has_event(run_dir, "progress"),
                     within(180), interval=POLL)
            # the run dir takes no new entry from now on (EPERM), files already open stay writable
            subprocess.run([chattr, "+i", str(run_dir)], check=True)
            trigger.touch()  # rank 1 of generation 0 exits 3: a real restart is due
            wait_for("generation 1", lambda: console.saw("generation 1"), within(120), interval=POLL)
            wait_for("the end", lambda: p.poll() is not None, within(180), interval=POLL)
            subprocess.run([chattr, "-i", str(run_dir)], check=True)
            out = console.rest()
    finally:
        subprocess.run([chattr, "-i", str(run_dir)], check=False)
        force_cleanup(str(run_dir))
    assert p.returncode == 0, out[-3000:]
    evs = events(run_dir)
    assert evs[-1]["event"] == "job_finished" and evs[-1]["exit_code"] == 0
    assert len(named(evs, "restart")) == 1
    degraded = named(evs, "watchdog_degraded")
    assert any(e["path"] == str(run_dir / "gen-1") and "Operation not permitted" in e["error"]
               for e in degraded), degraded
    assert evs[-1]["watchdog_io"]["faults"] >= 1
    # generation 1's logs went to a temp dir the console named; its ranks finished there
    fallback = next(Path(x.split(" go to ", 1)[1].split(" ", 1)[0]) for x in out.splitlines()
                    if "generation 1: its logs go to" in x)
    try:
        for r in (0, 1):
            assert ours((fallback / f"rank-{r}.log").read_text())[-1] == "training done"
    finally:
        subprocess.run(["rm", "-rf", str(fallback.parent)], check=False)
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []


def test_unreadable_checkpoint_dir_at_a_restart_resumes_from_the_last_one_seen(
    tmp_path: Path, toy_env: dict[str, str]
) -> None:
    run_dir, ckpt, trigger = tmp_path / "run", tmp_path / "ckpt", tmp_path / "crash-now"
    ckpt.mkdir()
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "--checkpoint-dir", str(ckpt),
            "--hang-timeout", "30", "--no-prewarm", "torchrun", "--nproc_per_node", "2", RANKS, "steady", "25",
            "--crash-on", str(trigger), "--save-to", str(ckpt), "--then", str(THEN)]
    try:
        with started(argv, str(tmp_path), toy_env) as p:
            console = Console(p)
            merged = run_dir / "merged.log"
            wait_for("the agent's scan to see step_5",
                     lambda: merged.exists() and "complete checkpoint appeared" in merged.read_text(),
                     within(180), interval=POLL)
            ckpt.rename(tmp_path / "ckpt.real")
            ckpt.symlink_to(ckpt)  # a loop: ELOOP, as an ESTALE/EIO network file system would refuse
            trigger.touch()
            wait_for("the end", lambda: p.poll() is not None, within(240), interval=POLL)
            out = console.rest()
    finally:
        force_cleanup(str(run_dir))
    assert p.returncode == 0, out[-3000:]
    evs = events(run_dir)
    assert evs[-1]["event"] == "job_finished" and evs[-1]["exit_code"] == 0
    restarts = named(evs, "restart")
    assert len(restarts) == 1 and restarts[0]["checkpoint"] == str(ckpt / "step_5"), restarts
    assert any(e["path"] == str(ckpt) and "Too many levels of symbolic links" in e["error"]
               for e in named(evs, "watchdog_degraded"))
    assert f"resuming from '{ckpt / 'step_5'}'" in (run_dir / "gen-1" / "rank-0.log").read_text()
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []


@pytest.mark.parametrize("case", ["run_dir_is_a_file", "run_dir_full", "checkpoint_dir_loop", "checkpoint_dir_file"])
def test_unusable_dirs_at_start_are_a_usage_error(tmp_path: Path, toy_env: dict[str, str], case: str,
                                                  request: pytest.FixtureRequest) -> None:
    run_dir, ckpt = tmp_path / "run", tmp_path / "ckpt"
    named_dir = run_dir
    if case == "run_dir_is_a_file":
        run_dir.write_text("not a directory")
    elif case == "run_dir_full":
        disk = request.getfixturevalue("small_disk")
        run_dir = named_dir = disk / "run"
        fill(disk)
    elif case == "checkpoint_dir_loop":
        ckpt.symlink_to(ckpt)
        named_dir = ckpt
    else:
        ckpt.write_text("")
        named_dir = ckpt
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "--checkpoint-dir", str(ckpt), "torchrun",
            "--nproc_per_node", "1", RANKS, "steady", "1"]
    code, out = run_to_end(argv, str(tmp_path), toy_env, run_dir, 120)
    assert code == 2, out
    assert "Traceback" not in out
    assert f"{named_dir} is not usable" in out and "next step:" in out, out
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []


def test_a_200_mb_line_is_read_to_the_end_and_what_was_skipped_is_counted(
    tmp_path: Path, toy_env: dict[str, str]
) -> None:
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "torchrun", "--nproc_per_node", "1", RANKS,
            "bigline", "200"]
    code, out = run_to_end(argv, str(tmp_path), toy_env, run_dir, 280)
    assert code == 0, out[-3000:]
    evs = events(run_dir)
    end = evs[-1]
    assert end["event"] == "job_finished" and end["last_step"] == 15
    log = (run_dir / "gen-0" / "rank-0.log").read_text()
    lines = log.splitlines()
    assert lines[-1] == "training done"
    assert [x for x in lines if x.startswith("step ")] == [f"step {n} loss {1.0 / n:.4f}" for n in range(1, 16)]
    # The line is lost one of two ways, whichever the timing gives, and either way counted: a tail
    # that keeps pace cuts it at MAX_PARTIAL (its head kept, marked, a lines_truncated event); one
    # that falls more than BACKLOG_MAX behind skips it unread (a note, counted as dropped).
    notes = [x for x in lines if x.startswith("neuron-watch: ")]
    skipped = sum(int(x.split()[1]) for x in notes if x.split()[1].isdigit())
    cut = [x for x in lines if "neuron-watch: this line is longer than" in x]
    assert skipped + len(cut) >= 1, lines[:20]
    assert len(lines) == 15 + 1 + len(notes) + len(cut)  # nothing else: no piece of it as a line
    if notes:
        assert all("skipped unread" in x for x in notes) and skipped <= 1  # one line, however many skips
        assert end["dropped_lines"] >= 1
    if cut:
        assert len(cut) == 1 and named(evs, "lines_truncated")[-1]["lines"] >= 1
    assert "training done" in (run_dir / "merged.log").read_text()
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []


def test_a_flood_is_logged_or_counted_line_for_line(tmp_path: Path, toy_env: dict[str, str]) -> None:
    """A flood that ends before the node's link exists (seconds, under load) once reached job_finished
    without its skipped lines: they were added to the count after the replayed "finished" status."""
    run_dir = tmp_path / "run"
    # ~70 MB per rank, more than the 32 MiB backlog the watchdog keeps up with, in lines of ~280 bytes: the
    # skip is by bytes, and each line the node reads costs its CPU, each line a rank writes the rank's
    # (2.5 million lines of 28 bytes cost the test ~10x the lines read, written and counted)
    n, pad = 250_000, 250
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "torchrun", "--nproc_per_node", "2", RANKS,
            "flood", str(n), "--pad", str(pad)]
    code, out = run_to_end(argv, str(tmp_path), toy_env, run_dir, 280)
    assert code == 0, out[-3000:]
    evs = events(run_dir)
    end = named(evs, "job_finished")[0]  # (an agent_dropped may follow it: a loss said after the end)
    assert end["exit_code"] == 0
    files = torchrun_files(next((run_dir / "gen-0" / "torchrun").iterdir()))
    skipped_total = 0
    for local_rank, path in files.items():
        printed = sum(1 for _ in path.open("rb"))
        assert printed == n + 1
        lines = (run_dir / "gen-0" / f"rank-{local_rank}.log").read_text().splitlines()
        notes = [x for x in lines if x.startswith("neuron-watch: ")]
        skipped = sum(int(x.split()[1]) for x in notes)
        assert notes, "a flood this size is skipped in part"
        assert len(lines) - len(notes) + skipped == printed  # every line read or counted
        assert lines[-1] == "training done"
        skipped_total += skipped
    # what merged.log lacks, the node reported as lost (skipped unread, or more than the link buffers)
    lost = max([end["dropped_lines"], *(e["lines"] for e in named(evs, "agent_dropped"))])
    assert lost >= skipped_total
    with open(run_dir / "merged.log", "rb") as f:
        merged = sum(1 for x in f if b" neuron-watch: " not in x)
    assert merged + lost >= 2 * (n + 1)
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []


def test_a_hardware_error_after_a_burst_reaches_the_verdict_and_the_bundle(
    tmp_path: Path, toy_env: dict[str, str]
) -> None:
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--quiet", "--max-restarts", "0", "--run-dir", str(run_dir), "torchrun",
            "--nproc_per_node", "2", RANKS, "hwburst", "40"]
    code, out = run_to_end(argv, str(tmp_path), toy_env, run_dir, 280)
    evs = events(run_dir)
    verdicts = [v for v in named(evs, "verdict") if v["action"] != "wait"]
    assert verdicts and verdicts[0]["label"] == "hardware_error", (verdicts, out[-3000:])
    assert verdicts[0]["culprit"]["rank"] == 1
    assert code == 4  # a faulty node this launcher cannot exclude
    incident = named(evs, "incident")[0]
    bundle = Path(incident["artifacts"])
    tail = next(bundle.glob("*/logs/rank-1.log")).read_text()
    assert "NRT_EXEC_HW_ERR_HBM_UE" in tail
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []

"""The capture and the tail under load, on real processes: an incident after a flood of 64
MiB of rank logs, and ranks printing multi-MiB lines. Each asserts the job's outcome and record and that
no pid survives; the watcher's peak RSS (``VmHWM``) is printed, never asserted (figures belong to
tests/benchmarks/bench_capture.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.fixtures.procs import NEURON_WATCH, events, force_cleanup, named, pids_with_env, started

pytestmark = pytest.mark.process

RANKS = str(Path(__file__).parent / "ranks" / "capture_load.py")


def peak_rss_mb(pid: int) -> float | None:
    """The process's peak resident set (``VmHWM``), in MiB; None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def run_watching_rss(argv: list[str], cwd: Path, env: dict[str, str], run_dir: Path,
                     timeout: float) -> tuple[int, str, float]:
    """Run ``argv`` to its end, reading the watcher's peak RSS as it runs (the last reading before it
    exits is its peak). Returns the exit code, the output and that peak (MiB)."""
    peak = 0.0
    try:
        with started(argv, str(cwd), env) as p:
            deadline = time.monotonic() + timeout
            while p.poll() is None and time.monotonic() < deadline:
                peak = max(peak, peak_rss_mb(p.pid) or 0.0)
                try:
                    p.wait(0.5)
                except subprocess.TimeoutExpired:
                    continue
            out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        force_cleanup(str(run_dir))
    return p.returncode, out, peak


@pytest.mark.timeout(600)
def test_an_incident_after_a_flood_of_rank_logs_is_captured_within_its_bound(
    tmp_path: Path, toy_env: dict[str, str]
) -> None:
    """Two ranks write 32 MiB each (at the pace the watchdog reads it all into their rank logs), then go
    silent: a hang. The capture reads the logs' ends only, off the loop, and the incident event says
    what it took and what it got: real seconds, no node without evidence, the bundle whole."""
    run_dir = tmp_path / "run"
    # 4 x the capture's timeline window per log (evidence.TIMELINE_LOG_BYTES): read whole, the two
    # logs would take ~4 s at the ~16 MiB/s the timeline reads on one loaded core, more than its
    # share of the --evidence-timeout bound (evidence.TIMELINE_SHARE: 2.5 s); read by their ends,
    # under a second. The flood is the test's costliest part: no bigger than that proof needs, and in lines
    # of 1,000 bytes: the bound is on bytes, while each line costs the node, the coordinator and the rank
    # their CPU (lines of 94 bytes were ten times as many for the same 64 MiB).
    mb, width = 32, 1000
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "--max-restarts", "0", "--hang-timeout", "10",
            "--evidence-timeout", "5", "torchrun", "--nproc_per_node", "2", RANKS, "flood", str(mb), "16", str(width)]
    try:
        code, out, peak = run_watching_rss(argv, tmp_path, toy_env, run_dir, 400)
        logs = {r: (run_dir / "gen-0" / f"rank-{r}.log").stat().st_size for r in (0, 1)}
        print(f"\nrank logs {sum(logs.values()) / 2**20:.0f} MiB; the watcher's peak RSS {peak:.0f} MiB")
        evs = events(run_dir)
        assert code != 0 and evs[-1]["event"] == "job_finished", out[-3000:]
        # the logs are what the test is about: the ranks' flood is in them, not skipped
        assert all(size > (mb - 20) << 20 for size in logs.values()), logs
        (incident,) = named(evs, "incident")
        assert incident["label"] == "collective_hang", incident
        assert incident["nodes_without_evidence"] == [], incident
        assert 0.0 < incident["capture_seconds"] < 5 + 5, incident  # its bound: --evidence-timeout and a grace
        (bundle,) = [p for p in Path(incident["artifacts"]).iterdir() if p.is_dir()]  # the one node's part
        manifest = json.loads((bundle / "manifest.json").read_text())
        assert incident["missing_items"] == len(manifest["missing"]), (incident, manifest["missing"])
        assert manifest["elapsed_s"] <= 5 + 2, manifest["elapsed_s"]
        for r in (0, 1):  # each rank's tail, ending where the rank stopped
            tail = (bundle / "logs" / f"rank-{r}.log").read_text().splitlines()
            assert tail[-1] == "flood done" and len(tail) <= 1000
        trace = json.loads((bundle / "timeline.json").read_text())
        other = trace["otherData"]
        # the timeline read each log's end only, and says so; a log its share of the deadline did not
        # reach (a loaded machine) is listed unread and the manifest says the timeline is partial
        read = {x["path"]: x for x in other.get("logs", [])}
        unread = other.get("unread_logs", [])
        logs_named = [f"gen-0/rank-{r}.log" for r in (0, 1)]
        assert all((p in read and read[p]["skipped_bytes"] > 0) or p in unread for p in logs_named), other
        assert any(p in read and read[p]["skipped_bytes"] > 0 for p in logs_named), other
        if unread:
            assert any(m["item"] == "timeline.json" for m in manifest["missing"]), manifest["missing"]
        assert not any("capture failed" in line for line in out.splitlines()), out[-3000:]
        assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


@pytest.mark.timeout(600)
def test_ranks_printing_multi_mib_lines_keep_each_line_once_cut_and_counted(
    tmp_path: Path, toy_env: dict[str, str]
) -> None:
    """16 ranks each print three 5 MiB lines between step lines: each rank log has every step line and
    each long line once, cut at 1 MiB and marked (never split into pieces), the cut counted in the
    record; the job finishes. The watcher's peak RSS is printed."""
    from neuron_watch.wire.protocol import RANK_LINE_BYTES

    run_dir = tmp_path / "run"
    ranks, count, mb = 16, 3, 5
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "torchrun", "--nproc_per_node", str(ranks), RANKS,
            "longlines", str(mb), str(count)]
    try:
        code, out, peak = run_watching_rss(argv, tmp_path, toy_env, run_dir, 500)
        print(f"\n{ranks} ranks x {count} lines of {mb} MiB; the watcher's peak RSS {peak:.0f} MiB")
        assert code == 0, out[-3000:]
        evs = events(run_dir)
        assert named(evs, "job_finished")[0]["exit_code"] == 0 and not named(evs, "incident")
        for r in range(ranks):
            lines = (run_dir / "gen-0" / f"rank-{r}.log").read_text().splitlines()
            assert [x for x in lines if x.startswith("step ")] == [f"step {n} loss {1.0 / n:.4f}" for n in range(1, 11)]
            long = [x for x in lines if x.startswith("w")]
            assert len(long) == count  # each long line once: not split into pieces
            for x in long:
                assert x.startswith("w" * RANK_LINE_BYTES) and "<end of line" not in x
                assert x[RANK_LINE_BYTES:].startswith(" [neuron-watch: this line is longer than")
            assert lines[-1] == "training done"
        cut = max(e["lines"] for e in named(evs, "lines_truncated"))
        assert cut == ranks * count
        assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)

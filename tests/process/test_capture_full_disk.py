"""A disk that fills during a capture, on a real disk: a small tmpfs mounted for the test and filled with
a real file until the kernel says ENOSPC. The capture keeps what the disk refuses in memory, says it
is missing, and writes it when the disk allows; ``events.jsonl`` never ends in a torn record, and the
report says so when one is found (a file torn by an older writer or a kill)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from neuron_watch.commands import report
from neuron_watch.iofaults import AppendFile, IOHealth
from neuron_watch.node import evidence
from neuron_watch.node.bundle import HELD_REASON, flush_held


def fill(disk: Path) -> Path:
    """Write a file on ``disk`` until the kernel refuses with ENOSPC; returns it."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)
    return filler


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("whole_lines", [True, False])
def test_a_jsonl_file_on_a_full_disk_never_ends_torn(small_disk: Path, whole_lines: bool) -> None:
    """Records of 1,000 bytes into a file whose last page has room for a few: the record that crosses
    into a page the disk has not got is written in part by the kernel. With ``whole_lines`` (how the
    event log writes) the file is cut back to its last whole record and the record waits; without,
    the file ends torn (the fault this guards against is real)."""
    path = small_disk / "events.jsonl"
    health, clock = IOHealth(), Clock()
    f = AppendFile(str(path), health, clock=clock, whole_lines=whole_lines)
    f.write(json.dumps({"event": "job_started"}) + "\n")
    assert f.flush()
    filler = fill(small_disk)
    records = [json.dumps({"event": "progress", "n": n, "pad": "p" * 1000}) + "\n" for n in range(8)]
    for rec in records:
        f.write(rec)
        f.flush()
    on_disk = path.read_bytes()
    assert len(on_disk) < sum(map(len, records))  # the disk refused some
    if not whole_lines:
        assert not on_disk.endswith(b"\n")  # torn
        f.close()
        return
    assert on_disk.endswith(b"\n") and all(json.loads(x) for x in on_disk.splitlines())
    assert health.degraded  # said
    filler.unlink()
    clock.now += 5
    assert f.flush()
    f.close()
    lines = path.read_text().splitlines()
    assert [json.loads(x).get("n") for x in lines] == [None, *range(8)]  # every record once, whole, in order


def test_report_says_when_events_jsonl_ends_torn(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    good = [{"time": "2026-11-21T13:00:00.000Z", "event": "job_started", "generation": 0}]
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in good) + '{"time": "2026-11-21T13:0')
    figures = report.report(run)
    assert figures["torn_last_event"] is True and figures["skipped_events"] == 1
    assert any("torn record" in n for n in figures["notes"])
    assert "torn record" in report.render(figures)
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in good))
    assert report.report(run)["torn_last_event"] is False


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_a_capture_on_a_full_disk_keeps_its_evidence_and_writes_it_when_the_disk_allows(small_disk: Path) -> None:
    run = small_disk / "run"
    (run / "gen-0").mkdir(parents=True)
    log = run / "gen-0" / "rank-0.log"
    log.write_text("".join(f"step {n} loss 1.0\n" for n in range(1, 200)) + "RuntimeError: boom\n")
    (run / "events.jsonl").write_text(json.dumps({"time": "2026-11-21T13:00:00.000Z", "event": "job_started",
                                                  "generation": 0}) + "\n")
    filler = fill(small_disk)
    ctx = evidence.IncidentContext(job_id="j", generation=0, incident=1, node="n0", run_dir=run,
                                   rank_logs={0: log}, verdict={"label": "other_crash"}, deadline_s=30,
                                   tool_path="", compile_workdir_glob=str(run / "none" / "*"))
    result = evidence.capture_node_bundle(ctx)
    assert {"verdict.json", "logs/rank-0.log", "env.json", "incident.md", "manifest.json"} <= set(result.held)
    held_missing = {m["item"] for m in result.manifest["missing"] if m["reason"].startswith(HELD_REASON)}
    assert {"verdict.json", "logs/rank-0.log", "env.json"} <= held_missing  # said missing, with why
    assert all("No space left on device" in m["reason"] for m in result.manifest["missing"]
               if m["item"] in held_missing)
    assert not (result.bundle_dir / "manifest.json").exists()
    assert not flush_held(result)  # still full: nothing lost, still held
    assert result.held
    filler.unlink()
    assert flush_held(result) and result.held == {}
    manifest = json.loads((result.bundle_dir / "manifest.json").read_text())
    assert not any(m["reason"].startswith(HELD_REASON) for m in manifest["missing"])
    assert manifest["held_in_memory"] == []
    files = {f["path"]: f for f in manifest["files"]}
    for rel in ("verdict.json", "logs/rank-0.log", "env.json", "incident.md"):
        assert files[rel]["sha256"] == _sha(result.bundle_dir / rel)
    assert (result.bundle_dir / "logs" / "rank-0.log").read_text().endswith("RuntimeError: boom\n")


class Console:
    """The wrapper's console, read by a thread as it comes (the test never blocks on it)."""

    def __init__(self, p: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert p.stdout is not None
        stream = p.stdout
        self._thread = threading.Thread(target=lambda: self.lines.extend(iter(stream.readline, "")), daemon=True)
        self._thread.start()

    def wait_for(self, needle: str, p: subprocess.Popen[str], timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and p.poll() is None:
            hit = next((x for x in list(self.lines) if needle in x), None)
            if hit is not None:
                return hit
            time.sleep(0.2)
        raise AssertionError(f"no {needle!r} on the console: {''.join(self.lines[-30:])}")

    def text(self) -> str:
        self._thread.join(10)
        return "".join(self.lines)


@pytest.mark.timeout(400)
def test_a_real_capture_through_a_full_disk_writes_its_bundle_when_the_disk_allows(
    tmp_path: Path, small_disk: Path, toy_env: dict[str, str]
) -> None:
    """The run dir's disk is full when a hang is captured: the incident says what is missing (the files
    the disk refused, held in memory), and once the disk is freed, before the job's end, the bundle is
    written whole -- stacks included -- and events.jsonl has every event, none torn."""
    from tests.fixtures.procs import NEURON_WATCH, events, force_cleanup, named, pids_with_env, started

    run_dir, trigger = small_disk / "run", tmp_path / "hang-now"
    ranks = str(Path(__file__).parent / "ranks" / "capture_load.py")
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "--max-restarts", "0", "--hang-timeout", "8",
            "--evidence-timeout", "10", "--stop-timeout", "20", "torchrun", "--log-dir", str(tmp_path / "tr"),
            "--nproc_per_node", "2", ranks, "hangon", str(trigger)]
    try:
        with started(argv, str(tmp_path), toy_env) as p:
            console = Console(p)
            console.wait_for("[rank1] step 5 ", p, 180)
            filler = fill(small_disk)
            trigger.touch()
            line = console.wait_for("evidence captured", p, 120)
            assert "missing" in line, line  # what the disk refused is said missing
            filler.unlink()  # the ranks ignore SIGTERM: the stop's 20 s leave the disk time to be free
            p.wait(120)
            out = console.text()
    finally:
        force_cleanup(str(run_dir))
    raw = (run_dir / "events.jsonl").read_bytes()
    assert raw.endswith(b"\n"), raw[-300:]
    evs = events(run_dir)  # every line parses
    assert evs[-1]["event"] == "job_finished", out[-3000:]
    (incident,) = named(evs, "incident")
    assert incident["missing_items"] >= 1 and incident["nodes_without_evidence"] == []
    (bundle,) = [d for d in Path(incident["artifacts"]).iterdir() if d.is_dir()]
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["held_in_memory"] == []
    assert not any(m["reason"].startswith(HELD_REASON) for m in manifest["missing"]), manifest["missing"]
    # the incident counted the files the full disk refused; written since, they are missing no more
    assert incident["missing_items"] > len(manifest["missing"]), (incident, manifest["missing"])
    stacks = sorted(p.name for p in (bundle / "stacks").iterdir())
    assert stacks == ["rank-0.txt", "rank-1.txt"], manifest["missing"]
    files = {f["path"]: f for f in manifest["files"]}
    for rel in ("stacks/rank-0.txt", "stacks/rank-1.txt", "verdict.json", "logs/rank-0.log"):
        assert files[rel]["sha256"] == _sha(bundle / rel)
    assert json.loads((bundle / "verdict.json").read_text())["label"] == "collective_hang"
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []

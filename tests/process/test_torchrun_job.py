"""The main job on one node, for real: torchrun with 2 CPU ranks (gloo) under neuron-watch.

Each test runs the toy job (examples/toy/train.py, its gradients averaged by one all_reduce) with a
fault injected in generation 0 and reads what a user would read: the exit code, events.jsonl, the
per-rank logs, the process table.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from neuron_watch.diagnosis.stacks import main_thread
from tests.fixtures import chromium
from tests.fixtures.procs import (
    NEURON_WATCH,
    TOY,
    events,
    force_cleanup,
    named,
    pids_with_env,
    run_to_end,
    started,
    wait_until_gone,
)
from tests.fixtures.runs import HANG_TIMEOUT, OneNodeRun

pytestmark = pytest.mark.process

NPROC = "2"  # every scenario here shows with two ranks: one at fault, one waiting for it
#: What tests keep for people to look at after the run (screenshots); not in git.
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


def watch(
    tmp_path: Path, env: dict[str, str], *toy_args: str, watch_args: tuple[str, ...] = (), timeout: float = 240
) -> tuple[int, str, Path, Path]:
    run_dir, ckpt = tmp_path / "run", tmp_path / "ckpt"
    argv = [
        NEURON_WATCH,
        "--run-dir",
        str(run_dir),
        "--checkpoint-dir",
        str(ckpt),
        *watch_args,
        "torchrun",
        "--nproc_per_node",
        NPROC,
        TOY,
        "--checkpoint-dir",
        str(ckpt),
        *toy_args,
    ]
    code, out = run_to_end(argv, str(tmp_path), env, run_dir, timeout)
    return code, out, run_dir, ckpt


@pytest.mark.xdist_group("clean-run")
def test_job_finishes_with_torchrun_exit_code_and_writes_logs_and_events(
    clean_run: tuple[int, str, Path, Path]
) -> None:
    code, out, run_dir, _ = clean_run
    assert code == 0, out[-3000:]
    for r in range(int(NPROC)):
        log = (run_dir / "gen-0" / f"rank-{r}.log").read_text()
        assert "step 12 loss" in log and "training done" in log
    assert "[rank1] step 12 loss" in out  # shown on the console with a rank prefix
    evs = events(run_dir)
    assert next(e["event"] for e in evs) == "job_started" and evs[-1]["event"] == "job_finished"
    assert evs[-1]["exit_code"] == 0 and evs[-1]["restarts"] == 0
    assert all(e["time"].endswith("Z") and isinstance(e["generation"], int) for e in evs)
    assert not named(evs, "restart")
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []


@pytest.mark.xdist_group("crash-no-restart")
def test_failing_job_exit_code_is_torchruns(
    tmp_path: Path, toy_env: dict[str, str], crash_no_restart: tuple[int, str, Path, Path]
) -> None:
    ckpt = tmp_path / "plain-ckpt"
    plain = subprocess.run(
        [
            str(Path(NEURON_WATCH).parent / "torchrun"),
            "--nproc_per_node",
            NPROC,
            TOY,
            "--steps",
            "6",
            "--crash-at",
            "3",
            "--crash-rank",
            "1",
            "--checkpoint-dir",
            str(ckpt),
        ],
        cwd=tmp_path,
        env=toy_env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    code, out, run_dir, _ = crash_no_restart  # the same job under neuron-watch
    assert plain.returncode != 0
    assert code == plain.returncode, out[-3000:]
    assert named(events(run_dir), "job_finished")[0]["exit_code"] == code


@pytest.mark.xdist_group("crash-restart")
def test_crash_restarts_from_newest_complete_checkpoint(crash_restart: tuple[int, str, Path, Path]) -> None:
    code, out, run_dir, ckpt = crash_restart
    assert code == 0, out[-3000:]
    evs = events(run_dir)
    restarts = named(evs, "restart")
    assert len(restarts) == 1
    assert restarts[0]["checkpoint"] == str(ckpt / "step_10")
    assert f"[neuron-watch] checkpoints: {ckpt} does not exist yet" in out  # said once, at start
    assert "no complete checkpoint" not in out
    verdict = named(evs, "verdict")[-1]
    assert verdict["label"] in ("other_crash", "comm_error") and verdict["culprit"] == {
        "node": verdict["culprit"]["node"],
        "rank": 1,
    }
    incident = named(evs, "incident")[0]
    assert incident["culprit"]["rank"] == 1 and os.path.isdir(incident["artifacts"])
    gen1 = (run_dir / "gen-1" / "rank-0.log").read_text()
    assert "resuming at step 11" in gen1 and "step 16 loss" in gen1
    assert "step 1 loss" not in gen1  # did not start over from step 0
    # generation 1 ran in the torchrun started ahead as soon as generation 0 trained (--prewarm-after 0)
    assert out.count("generation starts in the pre-started torchrun") == 1, out[-3000:]


@pytest.mark.xdist_group("hang-restart")
def test_hang_detected_after_timeout_restarted_and_finished(hang_restart: OneNodeRun) -> None:
    code, out, run_dir, ckpt, _ = hang_restart
    assert code == 0, out[-3000:]
    assert "pre-started torchrun" not in out  # --no-prewarm: every generation starts the usual way
    evs = events(run_dir)
    hang = [e for e in named(evs, "verdict") if e["label"] == "collective_hang"]
    assert len(hang) == 1 and hang[0]["generation"] == 0
    assert hang[0]["culprit"]["rank"] == 1  # named from the stacks: the only rank not in a collective
    stacks = run_dir / "incidents" / "incident-1" / hang[0]["culprit"]["node"] / "stacks" / "rank-1.txt"
    # taken while the rank was alive, before the stop (its worker server's dump, or py-spy's)
    assert main_thread(stacks.read_text()), stacks.read_text()
    # not before the timeout: the last progress line of generation 0 was printed >= HANG_TIMEOUT earlier
    last_progress = max(os.path.getmtime(run_dir / "gen-0" / f"rank-{r}.log") for r in range(int(NPROC)))
    t_verdict = time.mktime(time.strptime(hang[0]["time"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
    assert t_verdict + 1.0 >= last_progress + HANG_TIMEOUT - 1.0
    assert named(evs, "restart")[0]["checkpoint"] == str(ckpt / "step_5")
    assert named(evs, "job_finished")[0]["restarts"] == 1


@pytest.mark.xdist_group("long-compile")
def test_compiling_rank_is_not_a_hang(long_compile: tuple[int, str, Path, Path]) -> None:
    code, out, run_dir, _ = long_compile
    assert code == 0, out[-3000:]
    evs = events(run_dir)
    assert not named(evs, "restart") and not named(evs, "incident")
    labels = [e["label"] for e in named(evs, "verdict")]
    assert "compiling" in labels and "collective_hang" not in labels
    compiling = next(e for e in named(evs, "verdict") if e["label"] == "compiling")
    assert compiling["culprit"]["rank"] == 0
    waiting_logs = (run_dir / "gen-0" / "rank-1.log").read_text()
    assert "Timeout waiting for RX" in waiting_logs  # the others really were waiting


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_signal_to_wrapper_leaves_no_rank_behind(tmp_path: Path, toy_env: dict[str, str], sig: int) -> None:
    run_dir = tmp_path / "run"
    argv = [
        NEURON_WATCH,
        "--quiet",  # nobody reads the pipe until the end: rank output must not fill it
        "--run-dir",
        str(run_dir),
        "torchrun",
        "--nproc_per_node",
        NPROC,
        TOY,
        "--steps",
        "100000",
        "--checkpoint-dir",
        str(tmp_path / "ckpt"),
    ]
    try:
        with started(argv, str(tmp_path), toy_env) as p:
            deadline = time.monotonic() + 120
            while len(pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir))) < int(NPROC) + 1:
                assert time.monotonic() < deadline, "ranks never started"
                assert p.poll() is None, p.stdout.read() if p.stdout else ""
                time.sleep(0.2)
            os.kill(p.pid, sig)
            p.wait(60)
            survivors = wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), timeout=15)
            assert survivors == []
            if sig == signal.SIGTERM:
                assert p.returncode == 128 + signal.SIGTERM
                assert named(events(run_dir), "job_finished")[0]["state"] == "interrupted"
            else:
                assert p.returncode == -signal.SIGKILL
    finally:
        force_cleanup(str(run_dir))


def test_dry_run_prints_environment_and_command(tmp_path: Path, toy_env: dict[str, str]) -> None:
    r = subprocess.run(
        [
            NEURON_WATCH,
            "--dry-run",
            "--run-dir",
            str(tmp_path / "run"),
            "torchrun",
            "--nproc_per_node",
            "2",
            TOY,
            "--steps",
            "3",
            "--resume-from",
            "{checkpoint}",
        ],
        cwd=tmp_path,
        env=toy_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "NEURON_RT_LOCAL_CORE_DUMP_DIRECTORY=" in r.stdout and "%d-%c" in r.stdout
    assert "--nproc_per_node 2" in r.stdout and TOY in r.stdout and "--redirects 3" in r.stdout
    assert not (tmp_path / "run").exists()  # nothing was started or written


def test_dry_run_rejects_bad_torchrun_arguments(tmp_path: Path, toy_env: dict[str, str]) -> None:
    r = subprocess.run(
        [NEURON_WATCH, "--dry-run", "torchrun", "--nproc_per_node"],
        cwd=tmp_path,
        env=toy_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert "torchrun rejects its arguments" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.xdist_group("slow-save")
def test_a_synced_checkpoint_save_longer_than_the_hang_timeout_is_not_a_hang(
    slow_save: tuple[int, str, Path, Path]
) -> None:
    # rank 0 spends 14 s in the save of step 10 while the others wait in its barrier, silent:
    # with a 6 s hang timeout that silence would be a hang, but the save's "began" has no
    # "completed" yet.
    code, out, run_dir, ckpt = slow_save
    assert code == 0, out[-3000:]
    evs = events(run_dir)
    assert not named(evs, "restart") and not named(evs, "incident"), [e["event"] for e in evs]
    assert not [v for v in named(evs, "verdict") if v["label"] == "collective_hang"]
    assert (ckpt / "step_10" / "done").exists()
    log = (run_dir / "gen-0" / "rank-0.log").read_text()
    assert "synced saving of checkpoint step_10 began" in log and "step 12 loss" in log


def test_numerical_error_is_not_restarted(tmp_path: Path, toy_env: dict[str, str]) -> None:
    code, out, run_dir, _ = watch(tmp_path, toy_env, "--steps", "200", "--nan-at", "4")
    evs = events(run_dir)
    assert code != 0, out[-3000:]
    assert not named(evs, "restart")
    verdict = next(e for e in named(evs, "verdict") if e["action"] != "wait")
    assert verdict["label"] == "numerical_error" and verdict["action"] == "stop"
    assert "not fixed by a restart" in named(evs, "gave_up")[0]["reason"]
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []


@pytest.mark.xdist_group("hang-restart")
def test_timeline_of_a_run_with_a_compile_a_hang_and_a_restart(hang_restart: OneNodeRun) -> None:
    code, out, run_dir = hang_restart[:3]
    assert code == 0, out[-3000:]
    trace = json.loads((run_dir / "timeline.json").read_text())  # valid JSON, Chrome trace format
    evs = trace["traceEvents"]
    assert all(e["ph"] in ("X", "i", "M") for e in evs)
    compile_spans = [e for e in evs if e["ph"] == "X" and e.get("cat") == "compile"]
    # ~8 s on rank 0's track: longer than a hang timeout, which the compile outlasted unrestarted
    assert len(compile_spans) == 1 and compile_spans[0]["dur"] >= (HANG_TIMEOUT + 1) * 1e6, compile_spans
    assert any(e["ph"] == "X" and e.get("cat") == "hang" for e in evs)
    assert any(e["ph"] == "X" and e.get("cat") == "step" for e in evs)
    markers = {e["name"] for e in evs if e["ph"] == "i"}
    assert {"incident: collective_hang", "restart"} <= markers
    assert [e["name"] for e in evs if e.get("cat") == "generation"] == ["generation 0", "generation 1"]


@pytest.mark.xdist_group("hang-restart")
def test_html_report_of_a_hang_a_restart_and_the_end_opens_in_a_browser(hang_restart: OneNodeRun,
                                                                        tmp_path: Path) -> None:
    code, out, run_dir = hang_restart[:3]
    assert code == 0, out[-3000:]
    page = tmp_path / "report.html"
    made = subprocess.run([NEURON_WATCH, "report", str(run_dir), "--html", str(page)], capture_output=True,
                          text=True, timeout=120)
    assert made.returncode == 0, made.stdout + made.stderr
    shot = tmp_path / "report.png"
    pictured = chromium.render(page, tmp_path, screenshot=shot)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    ARTIFACTS.mkdir(exist_ok=True)
    kept = ARTIFACTS / "report-html-hang-restart.png"
    shutil.copyfile(shot, kept)
    print(f"screenshot of the HTML report: {kept} (and {shot})")
    loaded = chromium.render(page, tmp_path)
    assert pictured.survivors == [] and loaded.survivors == []
    dom = loaded.dom
    # the generations, each a row and a lane of phases on the time axis
    assert dom.count('class="generation"') == 2
    assert 'data-generation="0"' in dom and 'data-generation="1"' in dom
    phases = set(re.findall(r'data-phase="([a-z-]+)"', dom))
    assert {"compiling", "progressing", "hang", "capture", "start-up"} <= phases, phases
    # the step curve on both sides of the restart
    assert len(re.findall(r'<polyline class="steps" data-generation="[01]"', dom)) == 2
    # the incident, its verdict and its culprit (the hung rank), its bundle
    incident = re.search(r'<tr class="incident" data-incident="1">(.*?)</tr>', dom, re.S)
    assert incident, dom[-3000:]
    assert "collective_hang" in incident.group(1)
    culprit = re.search(r'<td class="culprit">(.*?)</td>', incident.group(1), re.S)
    assert culprit and "rank 1" in culprit.group(1), incident.group(1)
    assert str(run_dir / "incidents" / "incident-1") in incident.group(1)
    assert "<script" not in dom

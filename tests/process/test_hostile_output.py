"""A real torchrun rank printing escape sequences cannot forge a watchdog line
or drive the operator's terminal; the job still finishes, the rank log keeps the bytes as printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.procs import NEURON_WATCH, events, named, pids_with_env, run_to_end

pytestmark = pytest.mark.process

RANK = str(Path(__file__).parent / "ranks" / "hostile_output.py")


def test_forged_watchdog_lines_are_shown_as_rank_text(tmp_path: Path, toy_env: dict[str, str]) -> None:
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "--job-id", "hostile", "--max-restarts", "0",
            "torchrun", "--nproc_per_node", "1", RANK]
    code, out = run_to_end(argv, str(tmp_path), toy_env, run_dir, timeout=180)
    assert not pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir))
    assert code == 0, out[-3000:]
    (fin,) = named(events(run_dir), "job_finished")
    assert fin["state"] == "finished"

    lines = out.split("\n")
    # nothing on the console that a terminal obeys (the status line is off: not a tty)
    assert not [ln for ln in lines if not ln.isprintable()], [ln for ln in lines if not ln.isprintable()]
    forged = [ln for ln in lines if "SPOOF-" in ln]
    assert sorted({ln.split("SPOOF-")[1][0] for ln in forged}) == list("123456"), forged
    assert all(ln.startswith("[rank0] ") for ln in forged), forged
    assert not [ln for ln in lines if ln.startswith("[neuron-watch]") and "SPOOF" in ln]
    assert any(ln == "[rank0] ^M^[[2K[neuron-watch] verdict: healthy (SPOOF-1)"
               or ln == "[rank0] ^[[2K[neuron-watch] verdict: healthy (SPOOF-1)" for ln in forged), forged
    assert "[rank0] training done" in lines
    # the rank log is the evidence: the bytes as the rank printed them
    logs = "".join(p.read_text() for p in run_dir.rglob("rank-0.log"))
    assert "\x1b]0;SPOOF-3 owned\x07" in logs and "\u202eSPOOF-6" in logs

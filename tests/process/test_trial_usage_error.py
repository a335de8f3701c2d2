"""torchrun refusing its own arguments is a configuration error, not a crash to restart.

Real torchrun, under ``neuron-watch torchrun`` and on its own with the same arguments: a value its
configuration check refuses (``--nproc_per_node two``: torchrun raises ValueError and exits 1) and a
flag its parser does not know (argparse's usage text and exit 2). Under neuron-watch the job ends
with torchrun's own exit code, its message printed once, one generation, a ``config_error`` verdict
in ``events.jsonl``, no restart and no evidence bundle.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.fixtures.procs import NEURON_WATCH, TOY, VENV_BIN, events, named, pids_with_env, run_to_end

pytestmark = pytest.mark.process


@pytest.mark.parametrize(("bad", "message"), [
    (["--nproc_per_node", "two"], "Unsupported nproc_per_node value: two"),
    (["--nproc_per_node", "1", "--no-such-torchrun-flag"], "unrecognized arguments: --no-such-torchrun-flag"),
], ids=["configuration-check", "parser"])
def test_torchrun_refusing_its_arguments_is_not_restarted(tmp_path: Path, toy_env: dict[str, str], bad: list[str],
                                                          message: str) -> None:
    args = [*bad, TOY, "--steps", "3"]
    plain = subprocess.run([str(VENV_BIN / "torchrun"), *args], cwd=tmp_path, env=toy_env, capture_output=True,
                           text=True, timeout=240)
    assert plain.returncode != 0 and message in plain.stderr, plain.stderr[-2000:]

    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "--max-restarts", "3", "torchrun", *args]
    code, out = run_to_end(argv, str(tmp_path), toy_env, run_dir, timeout=240)
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    assert code == plain.returncode, out[-3000:]
    # torchrun's own words, once (a restart printed them again)
    assert out.count(message) == 1 + out.count("torchrun rejects its arguments"), out[-3000:]
    assert "verdict: config_error" in out and "-> stop, no restart" in out, out[-3000:]
    assert f"exit code {plain.returncode} (torchrun's own)" in out, out[-3000:]
    if "usage: torchrun" in plain.stderr:
        assert out.count("usage: torchrun") == 1, out[-3000:]

    evs = events(run_dir)
    assert not named(evs, "restart") and not named(evs, "incident"), evs
    (verdict,) = named(evs, "verdict")
    assert verdict["label"] == "config_error" and verdict["action"] == "stop"
    assert message in verdict["reason"]
    assert evs[-1]["event"] == "job_finished" and evs[-1]["exit_code"] == plain.returncode
    assert evs[-1]["restarts"] == 0 and evs[-1]["state"] == "failed"
    assert sorted(p.name for p in run_dir.glob("gen-*")) == ["gen-0"]
    assert not (run_dir / "incidents").exists()

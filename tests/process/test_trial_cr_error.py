"""An error line that a ``\\r`` redraw hides on a terminal stays in the record.

Real torchrun, 2 gloo ranks (tests/process/ranks/trial_noise.py ``--noise cr-error``): at step 3
of generation 0 rank 1 prints ``RuntimeError: ...\\r`` and a progress bar over it on the same line,
then exits 1. The error reaches ``rank-1.log``, the verdict's evidence and the incident bundle (the
bar too: it is what the line finally shows); no pid survives. The record is the subject: the job
ends on the failure (``--max-restarts 0``), a restarted generation would only start torch in every
rank again and train clean, which other tests show.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.procs import NEURON_WATCH, assert_ended_on_the_fault, events, named, pids_with_env, run_to_end

pytestmark = pytest.mark.process

RANKS = str(Path(__file__).resolve().parent / "ranks" / "trial_noise.py")
ERROR = "RuntimeError: trial failure at step 3"


def test_an_error_line_under_a_redraw_reaches_the_log_the_verdict_and_the_bundle(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "--max-restarts", "0", "torchrun", "--nproc_per_node", "2",
            RANKS, "--noise", "cr-error", "--steps", "6", "--hang-at", "3"]
    code, out = run_to_end(argv, str(tmp_path), toy_env, run_dir, timeout=300)
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    lines = (run_dir / "gen-0" / "rank-1.log").read_text().splitlines()
    assert ERROR in lines and lines.index(ERROR) + 1 < len(lines), lines[-5:]
    assert lines[lines.index(ERROR) + 1].startswith("Epoch 0:  50%|")  # then what the terminal shows
    evs = events(run_dir)
    assert_ended_on_the_fault(code, evs, out)  # given up on the failure, the give-up's exit code
    failed = [e for e in named(evs, "verdict") if e["generation"] == 0 and e["action"] == "restart"]
    assert failed and failed[0]["culprit"]["rank"] == 1, named(evs, "verdict")
    assert any(ERROR in ev["text"] for ev in failed[0]["evidence"]), failed[0]
    (incident,) = named(evs, "incident")
    node = Path(incident["artifacts"]) / incident["culprit"]["node"]
    assert ERROR in (node / "logs" / "rank-1.log").read_text()
    assert ERROR in json.dumps(json.loads((node / "verdict.json").read_text()))

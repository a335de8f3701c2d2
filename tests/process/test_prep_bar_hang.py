"""A real hang right after a data-preparation bar is a hang at the hang timeout.

A real torchrun job under ``neuron-watch`` (``ranks/prep_bar_hang.py``, 2 ranks, gloo, CPU): rank 0
draws a real tqdm bar without a description to its total (tokenising 1000 texts), then the ranks
hang at their first collective. A bar at its total is also how training's last step looks, and
silence after training's last step is its final save (up to ``--save-timeout``); but no loss was
logged and no checkpoint written, so this silence is judged at the hang timeout: a hang, captured,
and given up on (``--max-restarts 0``). No pid of the run survives it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.procs import (
    NEURON_WATCH,
    assert_ended_on_the_fault,
    events,
    named,
    pids_with_env,
    run_to_end,
)
from tests.process.test_culprit import HANG, NO_RESTART, assert_incident_says

pytestmark = pytest.mark.process

PREP_BAR_HANG = str(Path(__file__).resolve().parent / "ranks" / "prep_bar_hang.py")
STARTUP = "180"  # imports of torch on a busy 2-core machine, before the bar's first step


@pytest.mark.timeout(360)
def test_a_hang_after_a_data_preparation_bar_is_judged_at_the_hang_timeout(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), *HANG, "--startup-timeout", STARTUP,
            "--stop-timeout", "10", "--no-prewarm", *NO_RESTART, "torchrun", "--nproc_per_node", "2",
            PREP_BAR_HANG, "--items", "1000"]
    code, out = run_to_end(argv, str(tmp_path), toy_env, run_dir, 300)
    evs = events(run_dir)
    assert_ended_on_the_fault(code, evs, out)
    # the preparation's bar did reach its total on rank 0
    log = (run_dir / "gen-0" / "rank-0.log").read_text(errors="replace")
    assert "100%|██████████| 1000/1000 [" in log, log[-2000:]
    verdicts = named(evs, "verdict")
    # never read as training's last step: no wait for a final save
    assert not [v for v in verdicts if "last step" in v["reason"]], verdicts
    hang = [v for v in verdicts if v["label"] == "collective_hang"]
    assert len(hang) == 1 and hang[0]["action"] == "restart", [(v["label"], v["reason"]) for v in verdicts]
    assert "> hang timeout" in hang[0]["reason"], hang[0]["reason"]
    # captured: the node's incident bundle says the verdict
    bundles = [d for d in sorted((run_dir / "incidents" / "incident-1").iterdir()) if d.is_dir()]
    assert len(bundles) == 1, bundles
    assert_incident_says(bundles[0], hang[0])
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []

"""A first step slow on one rank is no hang; a rank that never enters a collective of the first step is one,
judged at the hang timeout (not start-up's), and ``neuron-watch status`` says so while it waits.

One real run (torchrun, 2 gloo ranks of ``ranks/slow_first_step.py --then-hang``): both ranks complete a
start-up all-reduce (what DDP's broadcast is); rank 0 enters step 1's first all-reduce and waits in it
while rank 1 computes (a tenth of a core) for over 3 hang timeouts before it joins; then rank 1 says
``slow part done`` and never enters the step's second all-reduce, which rank 0 entered. No progress line
is ever printed.

- The slow part is no hang: rank 1's process tree's CPU keeps the first-collective clock from running
  out (the rule without its CPU reading restarted the job within 4 s, so ``slow part done`` never came).
- The stall after it is judged at ``--hang-timeout`` with rank 1 the culprit (flight recorder), captured
  and given up on (``--max-restarts 0``). Before that fix only ``--startup-timeout`` (30 min by default)
  judged it; the startup timeout is left long (600 s) here: a verdict that waited for it would outlast the
  test's timeout.
- Meanwhile status.json says the hang timeout is in force (kind ``first_collective``) with the stall and
  its clock; before the fix it said ``hang timeout 600s (startup)`` until the verdict.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.procs import (
    NEURON_WATCH,
    assert_ended_on_the_fault,
    events,
    named,
    pids_with_env,
    run_to_end,
)
from tests.process.test_culprit import NO_RESTART, assert_incident_says

pytestmark = pytest.mark.process

SLOW_FIRST_STEP = str(Path(__file__).resolve().parent / "ranks" / "slow_first_step.py")


def _watch_status(run_dir: Path, done: threading.Event, seen: list[dict[str, Any]]) -> None:
    """Keep each status.json document that shows a stuck first collective, until ``done``."""
    while not done.wait(0.2):
        try:
            doc = json.loads((run_dir / "status.json").read_text())
        except (OSError, ValueError):
            continue  # not written yet
        if isinstance(doc, dict) and doc.get("first_collective"):
            seen.append(doc)


@pytest.mark.timeout(300)
def test_a_slow_first_step_is_no_hang_and_a_rank_that_then_never_enters_a_collective_is_one_at_the_hang_timeout(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "--hang-timeout", "3", "--startup-timeout", "600",
            "--no-prewarm", *NO_RESTART, "torchrun", "--nproc_per_node", "2", SLOW_FIRST_STEP, "--slow", "10",
            "--then-hang"]
    done, seen = threading.Event(), []  # type: ignore[var-annotated]
    watcher = threading.Thread(target=_watch_status, args=(run_dir, done, seen), daemon=True)
    watcher.start()
    try:
        code, out = run_to_end(argv, str(tmp_path), toy_env, run_dir, 280)
    finally:
        done.set()
        watcher.join()
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    evs = events(run_dir)
    assert_ended_on_the_fault(code, evs, out)
    merged = (run_dir / "merged.log").read_text()
    assert "slow part done" in merged, merged[-3000:]  # the slow part was not judged: it ran to its end
    assert "step 1 loss" not in merged  # no step was ever printed
    assert {v["label"] for v in named(evs, "verdict")} <= {"healthy", "collective_hang"}
    (hang,) = [v for v in named(evs, "verdict") if v["label"] == "collective_hang"]
    assert hang["action"] == "restart" and hang["culprit"] == {"node": hang["culprit"]["node"], "rank": 1}, hang
    assert hang["culprit_source"] == "flight_recorder", hang
    assert "rank1 never entered collective" in hang["reason"] and "> hang timeout" in hang["reason"], hang
    (bundle,) = [d for d in sorted((run_dir / "incidents" / "incident-1").iterdir()) if d.is_dir()]
    assert_incident_says(bundle, hang)
    # status said what the judge did: the hang timeout (3 s and the delivery slack), the stall, its clock
    assert seen, "status.json never showed the stuck first collective"
    last = seen[-1]
    assert last["hang_timeout_kind"] == "first_collective" and 3.0 <= last["hang_timeout"] < 600.0, last
    stall = last["first_collective"]
    assert "rank1 never entered collective" in stall["how"] and stall["timeout"] == last["hang_timeout"], stall
    assert stall["hang_in"] == pytest.approx(max(0.0, stall["timeout"] - stall["stalled_for"]), abs=0.11), stall

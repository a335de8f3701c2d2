"""``neuron-watch diagnose`` of a run directory says what the watchdog said live.

Real torchrun jobs (the toy job, 2 CPU ranks, gloo) under neuron-watch, one per kind of
generation the process tests make: a clean run, a crash, a hang, a compile (each a run other tests
read too: tests/process/conftest.py, tests/fixtures/runs.py). Then ``diagnose`` reads the
generation's directory (the rank logs once, dated by their time index; the ranks' exits and the
generation's end from events.jsonl) and its label is compared with the run's own verdict.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.procs import NEURON_WATCH, events, named, pids_with_env
from tests.process.conftest import COMPILE_HANG_TIMEOUT

pytestmark = pytest.mark.process

HANG_TIMEOUT = f"{COMPILE_HANG_TIMEOUT:.0f}"
#: the shared runs (tests/process/conftest.py, tests/fixtures/runs.py) by scenario: the clean one
#: (``clean_run``); the crash without a restart (``crash_no_restart``); the hang, restarted once and
#: finished (``hang_restart``: diagnose reads its generation 0); the compile (``long_compile``), whose
#: steps take seconds: its own verdict sees the compile end before the job does (at 0.05 s a step it
#: once did not)
COMPILE = "compile"
SHARED = {"clean": "clean_run", "crash": "crash_no_restart", "hang": "hang_restart", COMPILE: "long_compile"}
EXPECTED = {"clean": "healthy", "crash": "other_crash", "hang": "collective_hang", "compile": "healthy"}


def own_verdict(evs: list[dict[str, Any]], generation: int) -> str:
    """The run's verdict on a generation: its last verdict event; healthy if it finished without one."""
    verdicts = [e for e in named(evs, "verdict") if e["generation"] == generation]
    if verdicts:
        return str(verdicts[-1]["label"])
    finished = named(evs, "job_finished")
    assert finished and finished[0]["exit_code"] == 0
    return "healthy"


@pytest.mark.parametrize("scenario", [pytest.param(name, marks=pytest.mark.xdist_group(run.replace("_", "-")))
                                      for name, run in sorted(SHARED.items())])
def test_diagnose_of_a_run_dir_matches_the_live_verdict(toy_env: dict[str, str], scenario: str,
                                                        request: pytest.FixtureRequest) -> None:
    code, out, run_dir = request.getfixturevalue(SHARED[scenario])[:3]
    assert (code == 0) == (scenario != "crash"), out[-3000:]  # the hang's run restarts and finishes
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    live = own_verdict(events(run_dir), 0)
    assert live == EXPECTED[scenario], out[-3000:]
    if scenario == COMPILE:
        assert "compiling" in [e["label"] for e in named(events(run_dir), "verdict")], out[-3000:]
    assert (run_dir / "gen-0" / "rank-0.times").is_file()  # the rank logs' time index
    # options after the subcommand word; the generation dir and, for one generation, the run dir
    for path in (run_dir / "gen-0", run_dir):
        if path == run_dir and len(list(run_dir.glob("gen-*"))) != 1:
            continue
        res = subprocess.run([NEURON_WATCH, "diagnose", "--json", "--hang-timeout", HANG_TIMEOUT, str(path)],
                             capture_output=True, text=True, timeout=60, env=toy_env)
        assert res.returncode == 0, res.stderr
        doc = json.loads(res.stdout)
        assert doc["label"] == live, (doc["reason"], out[-2000:])
        # the rank logs once: no torchrun attempt_*/ copies, no launcher log
        assert sorted(Path(s).name for s in doc["sources"]) == ["rank-0.log", "rank-1.log"], doc["sources"]
        # silence is never measured from the epoch: every figure of the reason is a real duration
        assert all(not w.endswith("s") or not w[:-1].isdigit() or int(w[:-1]) < 3600
                   for w in doc["reason"].replace("(", " ").split()), doc["reason"]

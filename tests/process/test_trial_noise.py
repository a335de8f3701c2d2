"""Noise is output, not a compile: a keep-alive dot and binary output do not hide a hang.

Real torchrun, 2 gloo ranks (tests/process/ranks/trial_noise.py): rank 1 stops at step 8 of
generation 0 while rank 0 waits in the all-reduce. Rank 0's thread prints ``.`` every second
throughout (keep-alive), or rank 1 writes random bytes ending in a partial ``.`` before each step
(binary). Either way the hang is judged after ``--hang-timeout`` and no verdict ever says ``compiling`` (no
compiler line, no compiler process). The verdict is the subject: the job ends on it
(``--max-restarts 0``); a restarted generation would only start torch in every rank again and train
clean, which other tests show.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.procs import NEURON_WATCH, assert_ended_on_the_fault, events, named, pids_with_env, run_to_end

pytestmark = pytest.mark.process

RANKS = str(Path(__file__).resolve().parent / "ranks" / "trial_noise.py")


@pytest.mark.parametrize("noise", ["keepalive", "binary"])
def test_noise_does_not_hide_a_hang(tmp_path: Path, toy_env: dict[str, str], noise: str) -> None:
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "--hang-timeout", "8", "--max-restarts", "0",
            "--evidence-timeout", "20", "torchrun", "--nproc_per_node", "2", RANKS, "--noise", noise,
            "--steps", "12", "--hang-at", "8"]
    code, out = run_to_end(argv, str(tmp_path), toy_env, run_dir, timeout=420)
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    evs = events(run_dir)
    labels = [(e["generation"], e["label"]) for e in named(evs, "verdict")]
    assert "compiling" not in {label for _g, label in labels}, labels
    assert (0, "collective_hang") in labels, labels
    assert_ended_on_the_fault(code, evs, out)  # given up on the hang, the give-up's exit code
    (incident,) = named(evs, "incident")
    assert incident["label"] == "collective_hang", incident
    assert not [line for line in out.splitlines() if line.startswith("[neuron-watch]") and "compiling" in line]
    if noise == "keepalive":
        assert (run_dir / "gen-0" / "rank-0.log").read_text().count(".\n") >= 8  # the dots kept coming

"""A second job in a run dir whose node another live neuron-watch holds is refused; the first runs on untouched.

Two single-node jobs in one Slurm allocation (one ``SLURM_JOB_ID``, so one default run dir,
``neuron-watch-runs/slurm-<id>``), or the same ``--run-dir`` given twice: before, both ran and both wrote
``events.jsonl``, ``coordinator-state.json`` and ``gen-0/rank-0.log`` in it (two ``job_started``, each rank
log holding both jobs' lines). Now the second wrapper exits 2 saying who holds the node's place there
(job id, pid) and what to do. Real torchrun, one torch-free step printer per job (the subject is the
wrappers, not torch). ``slurm``: the node's name is final before anything starts (Slurm's node name, here
``NEURON_WATCH_NODE``), so the second job starts nothing; ``host``: a host name alone may still get the
node's place in a job of several nodes, so the second job is refused once its shape is read, its rank
stopped. Either way the first job ends on its own word with exit 0 and no pid of either survives.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.fixtures.procs import NEURON_WATCH, STEP_RANKS, events, named, pids_with_env, started, wait_until_gone
from tests.fixtures.wait import wait_for

pytestmark = pytest.mark.process


@pytest.mark.parametrize("naming", ["slurm", "host"])
@pytest.mark.timeout(240)
def test_a_second_job_in_a_run_dir_held_by_a_live_one_is_refused_and_the_first_runs_on(
        tmp_path: Path, toy_env: dict[str, str], naming: str) -> None:
    run_dir, until = tmp_path / "run", tmp_path / "a-may-end"
    env = {k: v for k, v in toy_env.items() if k != "SLURMD_NODENAME"}
    if naming == "slurm":
        env["NEURON_WATCH_NODE"] = "trn1-st-1"

    def argv(pad: str) -> list[str]:  # job B's lines are padded: any of them in the run dir is seen
        return [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "torchrun", "--nproc_per_node", "1", STEP_RANKS,
                "steady", "120", "--until", str(until), "--pad", pad]

    with started(argv("0"), str(tmp_path), env) as job_a:
        rank_log = run_dir / "gen-0" / "rank-0.log"
        # its coordinator writes events.jsonl once the launch is judged not refused, which may come after
        # the first step (the rank lines are kept meanwhile): both, before job B starts
        event_log = run_dir / "events.jsonl"
        wait_for("job A's first step and its job_started",
                 lambda: rank_log.exists() and "step 1 loss" in rank_log.read_text()
                 and event_log.exists() and '"job_started"' in event_log.read_text(),
                 time.monotonic() + 120, alive=job_a)
        with started(argv("7"), str(tmp_path), env) as job_b:
            out_b, _ = job_b.communicate(timeout=120)
        assert job_b.returncode == 2, out_b
        holder = f"(job {named(events(run_dir), 'job_started')[0]['job_id']}, pid {job_a.pid})"
        assert "is in use by another neuron-watch of node " in out_b and holder in out_b, out_b
        assert "--run-dir DIR" in out_b, out_b
        if naming == "slurm":  # refused before it started anything
            assert "[rank0]" not in out_b and "torchrun on" not in out_b, out_b
        assert job_a.poll() is None  # job A runs on
        until.touch()
        out_a, _ = job_a.communicate(timeout=120)
    assert job_a.returncode == 0, out_a
    evs = events(run_dir)
    assert len(named(evs, "job_started")) == 1 and named(evs, "job_finished")[0]["exit_code"] == 0, evs[-3:]
    if naming == "slurm":
        assert ". . ." not in rank_log.read_text() and "......." not in (run_dir / "merged.log").read_text()
    assert wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 10) == []
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []

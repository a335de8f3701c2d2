"""``neuron-watch srun`` on a real Slurm (tests/fixtures/slurm.py): a failure told by a traceback whose
last line is a generic wrapper gets the live verdict ``diagnose`` gives its rank logs.

``srun -N 1 --ntasks-per-node 2 python train.py``: two tasks, each a rank with its own agent, each
refusing a bad optimizer name while it loads its configuration and re-raising it as a RuntimeError (the
script of tests/process/test_wrapped_config_error.py). Each agent sends the lines around its rank's
failure with its batch; the coordinator's judge reads the cause and the frames from them: configuration,
stopped, no second srun step.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.procs import NEURON_WATCH, events, named, pids_with_env, wait_until_gone
from tests.fixtures.slurm import SlurmCluster
from tests.integration.test_srun import END_STATES, kill_job_processes
from tests.process.test_wrapped_config_error import SCRIPT

pytestmark = pytest.mark.integration


def test_srun_tasks_that_fail_on_a_wrapped_bad_argument_stop_as_diagnose_reads_them(
        quiet_slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    cluster = quiet_slurm_cluster
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    run_dir = tmp_path / "run"
    nw = [sys.executable, "-m", "neuron_watch.cli", "--quiet", "--run-dir", str(run_dir), "--max-restarts", "3",
          "--stop-timeout", "5", "--evidence-timeout", "10", "--drain-state", str(tmp_path / "drains.json"),
          "srun", "-N", "1", "--ntasks-per-node", "2", sys.executable, str(script), "--optimizer", "adamw2"]
    batch = tmp_path / "job.sbatch"
    batch.write_text("#!/bin/bash\n" + " ".join(nw) + "\n")
    batch.chmod(0o755)
    env = dict(cluster.env, PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    # (the allocation holds both tasks: srun refuses a step of more tasks than sbatch was given)
    r = subprocess.run(["sbatch", "--parsable", "-N", "1", "--ntasks-per-node", "2", "-D", str(tmp_path),
                        "-o", str(tmp_path / "job.out"), str(batch)],
                       env=env, capture_output=True, text=True, timeout=30, check=True)
    job = r.stdout.strip().split(";")[0]
    try:
        state = cluster.wait_for(f"job {job} to end", lambda: (s := cluster.job_state(job)) in END_STATES and s,
                                 timeout=240, interval=0.5)
        out = (tmp_path / "job.out").read_text(errors="replace") + "".join(
            p.read_text(errors="replace")[-3000:] for p in sorted((run_dir / "steps").glob("*.log")))
        assert state == "FAILED", out[-3000:]
        evs = events(run_dir)
        assert not named(evs, "restart"), out[-3000:]
        assert [s["generation"] for s in named(evs, "srun_step")] == [0]
        verdicts = [e for e in named(evs, "verdict") if e["label"] != "healthy"]
        assert verdicts, out[-3000:]
        live = verdicts[-1]
        assert (live["label"], live["action"]) == ("config_error", "stop"), (live["reason"], out[-3000:])
        assert named(evs, "job_finished")[0]["exit_code"] == 4
        logs = sorted(str(p) for p in (run_dir / "nodes").glob("*/gen-0/rank-*.log"))
        assert len(logs) == 2, logs
        res = subprocess.run([NEURON_WATCH, "diagnose", "--json", *logs], capture_output=True, text=True, timeout=60,
                             env=env)
        assert res.returncode == 0, res.stderr
        doc = json.loads(res.stdout)
        assert (doc["label"], doc["action"]) == (live["label"], live["action"]), (doc["reason"], live["reason"])
        assert wait_until_gone("SLURM_JOB_ID", job, 30) == []
        assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    finally:
        cluster.run("scancel", job, check=False)
        left = wait_until_gone("SLURM_JOB_ID", job, 20)
        killed = kill_job_processes(job) if left else []
        assert not killed, f"had to SIGKILL leftovers of job {job}: {killed}"

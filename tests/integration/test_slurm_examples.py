"""The shipped ParallelCluster sbatch examples, submitted as shipped to a real Slurm with the toy job.

Only the environment and sbatch's own command-line options (output file, node count) differ from
what a user types; the scripts are not edited. Two "nodes" share this host (NodeAddr 127.0.0.1).
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.procs import free_port, toy_settings
from tests.fixtures.slurm import REPO, SlurmCluster
from tests.integration.test_srun import END_STATES

pytestmark = pytest.mark.integration
EXAMPLES = REPO / "examples" / "parallelcluster"


def run_job(c: SlurmCluster, tmp_path: Path, script: str, train_args: list[str], **env: str) -> tuple[str, str]:
    out = tmp_path / f"{script}.out"
    job_env = dict(c.env, **toy_settings(),
                   PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                   NPROC_PER_NODE="1", MASTER_PORT=str(29400 + os.getpid() % 500),
                   # node 0's coordinator would take this host's default port 29510, which another test
                   # running at the same time (tests/run runs two pytest-xdist workers) may hold
                   NEURON_WATCH_COORDINATOR=f"127.0.0.1:{free_port()}",
                   CHECKPOINT_DIR=str(tmp_path / "ckpt"), RUN_DIR=str(tmp_path / "runs"), **env)
    import subprocess

    r = subprocess.run(["sbatch", "--parsable", "-N", "2", "-D", str(EXAMPLES), "-o", str(out), script, *train_args],
                       env=job_env, capture_output=True, text=True, timeout=30, check=True)
    job = r.stdout.strip().split(";")[0]
    t0 = time.monotonic()
    try:
        state = c.wait_for(f"job {job} to end", lambda: (s := c.job_state(job)) in END_STATES and s, timeout=240,
                           interval=0.5)
    finally:  # the cluster is the session's: a job that outlived a failed wait must not reach the next test
        c.run("scancel", job, check=False)
    print(f"{script}: job {job} {state} in {time.monotonic() - t0:.1f}s")
    return str(state), out.read_text() if out.exists() else ""


def test_train_sbatch_runs_the_toy_job_on_two_nodes(quiet_slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    c = quiet_slurm_cluster
    args = ["--steps", "6", "--checkpoint-every", "3", "--step-time", "0.01"]
    state, out = run_job(c, tmp_path, "train.sbatch", args)
    assert state == "COMPLETED", out
    nodes = re.findall(r"run_node.sh: node (\d)/2 on \S+ master=127\.0\.0\.1:\d+ nproc=1 restart=0", out)
    assert sorted(nodes) == ["0", "1"], out
    assert (tmp_path / "ckpt" / "step_6" / "done").exists(), sorted(p.name for p in (tmp_path / "ckpt").iterdir())


def test_compile_sbatch_runs_the_extraction_pass(quiet_slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    c = quiet_slurm_cluster
    state, out = run_job(c, tmp_path, "compile.sbatch", ["--step-time", "0.01", "--checkpoint-every", "2"])
    assert state == "COMPLETED", out
    assert "neuron_parallel_compile not found; running the graph-extraction pass only" in out
    assert (tmp_path / "ckpt-compile" / "step_4" / "done").exists()
    assert not (tmp_path / "ckpt").exists()  # the compile run does not touch the real run's checkpoints

"""``neuron-watch srun`` with torchrun's elastic form inside each task: ``torchrun --rdzv_backend
c10d --rdzv_endpoint HOST:PORT --rdzv_id $SLURM_JOB_ID`` and no ``--node_rank`` (the rendezvous
numbers the nodes, perhaps not as Slurm does).

Under srun no wrapper elects a coordinator: it runs on the batch host, and every task's agent has
its place from Slurm (``SLURM_PROCID``) before anything starts; the ranks' global numbers come
from torchrun's workers. What must hold is that a hang is still judged on the right rank, the
step restarted, and the job finished with nothing left running."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.procs import events, named
from tests.fixtures.slurm import SlurmCluster
from tests.integration import test_srun
from tests.integration.test_srun import rank_lines, submitted

pytestmark = pytest.mark.integration

ELASTIC_RUN_NODE = """#!/bin/bash
# torchrun's elastic form: no node rank, the c10d rendezvous places each node.
echo "node $SLURMD_NODENAME nodeid $SLURM_NODEID procid $SLURM_PROCID step $SLURM_STEP_ID"
exec torchrun --nnodes 2 --nproc_per_node "$NPROC" --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$MASTER_PORT" \\
    --rdzv_id "$SLURM_JOB_ID" "$TOY" --checkpoint-dir "$CKPT" "$@"
"""


#: one rank a node: the scenario is the nodes' placement (the rendezvous numbers them, perhaps not as
#: Slurm does); the last rank, on whichever node the rendezvous put second, hangs
NPROC = 1
CULPRIT = 2 * NPROC - 1


def test_an_elastic_torchrun_in_each_task_hang_judged_and_the_step_restarted(
        quiet_slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(test_srun, "RUN_NODE", ELASTIC_RUN_NODE)
    with submitted(quiet_slurm_cluster, tmp_path, 2, ["--hang-at", "12", "--hang-rank", str(CULPRIT)],
                   test_srun.HANG_WATCH, nproc=NPROC) as job:
        state = job.wait()
        assert state == "COMPLETED", job.explain()
        assert "--node_rank" not in (tmp_path / "run_node.sh").read_text()
        evs = events(job.run_dir)
        hellos = sorted((e["node"], e["place"]) for e in named(evs, "node_hello") if e["generation"] == 0)
        assert hellos == [("n1", 0), ("n2", 1)]  # places from SLURM_PROCID
        hang = [e for e in named(evs, "verdict") if e.get("label") == "collective_hang"]
        assert len(hang) == 1 and hang[0]["culprit"]["rank"] == CULPRIT, [e["event"] for e in evs]
        culprit_node = hang[0]["culprit"]["node"]
        # the culprit rank is where the rendezvous put it: the culprit's node is the one that logged it
        assert (job.run_dir / "nodes" / culprit_node / "gen-0" / f"rank-{CULPRIT}.log").exists()
        assert [s["generation"] for s in named(evs, "srun_step")] == [0, 1]
        restart = named(evs, "restart")[0]
        assert restart["checkpoint"] and restart["checkpoint"].endswith("step_10"), restart
        assert named(evs, "job_finished")[-1]["exit_code"] == 0
        for node in ("n1", "n2"):
            assert "training done at step 30" in rank_lines(job.run_dir, node, 1), node
        job.assert_nothing_survives()

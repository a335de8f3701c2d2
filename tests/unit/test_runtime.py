"""The composition root's identity rules (watchdog/runtime.py): one job id for every entry point,
a node's place in the job and a name unique in it, what the ranks get."""

from __future__ import annotations

import pytest

from neuron_watch.config import WatchConfig
from neuron_watch.runtime import (
    host_name,
    rank_environment,
    resolve_job_id,
    slurm_task_node,
    torchrun_node,
)


def test_the_job_id_is_the_same_rule_for_every_entry_point() -> None:
    # The standalone coordinator once took SLURM_JOB_ID raw while its agents said slurm-<id>.
    assert resolve_job_id(WatchConfig(job_id="mine"), {"SLURM_JOB_ID": "7"}) == "mine"
    assert resolve_job_id(WatchConfig(), {"SLURM_JOB_ID": "7"}) == "slurm-7"
    assert resolve_job_id(WatchConfig(), {"SLURM_JOB_ID": "7"}, address="h:1", rendezvous="r") == "slurm-7"
    derived = resolve_job_id(WatchConfig(), {}, address="10.0.0.1:29510", rendezvous="static 10.0.0.1:29500")
    assert derived == resolve_job_id(WatchConfig(), {}, address="10.0.0.1:29510", rendezvous="static 10.0.0.1:29500")
    assert derived != resolve_job_id(WatchConfig(), {}, address="10.0.0.1:29510", rendezvous="static 10.0.0.1:29501")
    assert resolve_job_id(WatchConfig(), {}).startswith("nw-")


@pytest.mark.parametrize(("env", "node_rank", "multi", "place", "name"), [
    ({}, 0, False, 0, "{host}"),  # one node: its host name, as the demo shows it
    ({}, 1, True, 1, "{host}-n1"),  # several nodes may share a host name: the place is in the name
    ({"NEURON_WATCH_NODE": "algo-2"}, 1, True, 1, "algo-2"),  # SageMaker's host, the operator's name
    ({"SLURMD_NODENAME": "trn-7"}, 3, True, 3, "trn-7"),  # unique in a Slurm cluster
    ({}, None, True, -1, "{host}"),  # torchrun's parser could not tell: no place claimed
])
def test_a_torchrun_node_is_known_by_its_node_rank(env: dict[str, str], node_rank: int | None, multi: bool,
                                                   place: int, name: str) -> None:
    node = torchrun_node(env, node_rank, multi)
    assert (node.place, node.name) == (place, name.format(host=host_name()))
    assert node.hostname == host_name()


def test_an_srun_task_is_known_by_its_procid() -> None:
    first = slurm_task_node({"SLURMD_NODENAME": "n2", "SLURM_PROCID": "2", "SLURM_LOCALID": "0"})
    second = slurm_task_node({"SLURMD_NODENAME": "n2", "SLURM_PROCID": "3", "SLURM_LOCALID": "1"})
    assert (first.place, first.name) == (2, "n2") and (second.place, second.name) == (3, "n2-t1")


def test_the_ranks_get_our_environment_never_the_secret(tmp_path: object) -> None:
    env = {"NEURON_WATCH_SECRET": "s" * 32, "PATH": "/usr/bin", "PYTHONUNBUFFERED": "0"}
    ranks = rank_environment(WatchConfig(no_neuron_env=True), env, "/runs/j", "j", "j-abc")
    assert "NEURON_WATCH_SECRET" not in ranks.env
    assert ranks.env["PYTHONUNBUFFERED"] == "0"  # the user's setting stands
    assert ranks.env["NEURON_WATCH_RUN_DIR"] == "/runs/j" and ranks.env["PATH"] == "/usr/bin"
    fresh = rank_environment(WatchConfig(no_neuron_env=True), {}, "/runs/j", "j", "j-abc")
    assert fresh.env["PYTHONUNBUFFERED"] == "1" and any("PYTHONUNBUFFERED" in line for line in fresh.said)

"""Pure decisions of ``neuron-watch srun``: the command line split and the next step's plan."""

from __future__ import annotations

import pytest

from neuron_watch.errors import UsageError
from neuron_watch.slurm import srunplan
from neuron_watch.slurm.srunplan import (
    nodes_wanted,
    plan_restart,
    short_evidence,
    split_srun_args,
    without_exclude,
)


@pytest.mark.parametrize(
    ("argv", "srun", "cmd"),
    [
        (["-N", "2", "--ntasks-per-node", "1", "./run.sh", "--steps", "3"],
         ["-N", "2", "--ntasks-per-node", "1"], ["./run.sh", "--steps", "3"]),
        (["-N2", "--label", "--nodes=2", "bash", "-c", "x"], ["-N2", "--label", "--nodes=2"], ["bash", "-c", "x"]),
        (["--unknown-flag", "--", "-weird-cmd"], ["--unknown-flag"], ["-weird-cmd"]),
        (["--auto-resume", "1", "-x", "n3", "run.sh"], ["--auto-resume", "1", "-x", "n3"], ["run.sh"]),
    ],
)
def test_split_srun_args(argv: list[str], srun: list[str], cmd: list[str]) -> None:
    assert split_srun_args(argv) == (srun, cmd)


def test_no_command_is_a_usage_error_with_a_hint() -> None:
    with pytest.raises(UsageError) as e:
        split_srun_args(["-N", "2"])
    assert "needs a command" in str(e.value) and e.value.hint


@pytest.mark.parametrize(("args", "want"), [([], 3), (["-N", "2"], 2), (["-N2"], 2), (["--nodes=1-2"], 1),
                                             (["--nodes", "2", "-N", "1"], 1)])
def test_nodes_wanted(args: list[str], want: int) -> None:
    assert nodes_wanted(args, 3) == want


def test_nodes_wanted_rejects_garbage() -> None:
    with pytest.raises(UsageError):
        nodes_wanted(["-N", "two"], 3)


def test_without_exclude_keeps_the_users_exclusions_apart() -> None:
    assert without_exclude(["-N", "2", "-x", "n4", "--exclude=n5", "-xn6", "--label"]) == (
        ["-N", "2", "--label"], ["n4", "n5", "n6"])


def test_plan_excludes_when_a_spare_remains() -> None:
    p = plan_restart(["n1", "n2", "n3"], ["n2"], 2, requeue_allowed=False)
    assert (p.how, p.exclude, p.usable) == ("exclude", ("n2",), ("n1", "n3"))


def test_plan_restarts_in_place_without_bad_nodes() -> None:
    p = plan_restart(["n1", "n2"], [], 2, requeue_allowed=True)
    assert (p.how, p.exclude) == ("exclude", ())


def test_plan_requeues_without_a_spare_and_gives_up_when_not_requeueable() -> None:
    assert plan_restart(["n1", "n2"], ["n2"], 2, requeue_allowed=True).how == "requeue"
    p = plan_restart(["n1", "n2"], ["n2"], 2, requeue_allowed=False)
    assert p.how == "give_up" and "--requeue" in p.why


def test_short_evidence_drops_timestamp_and_pid() -> None:
    line = ("2026-Nov-21 13:53:08.5561 13336:13336 ERROR   NRT:nrt_infodump        "
            "Failure: NRT_EXEC_HW_ERR_HBM_UE in nrt_execute()")
    assert short_evidence(2, line).startswith("rank 2: ERROR")
    assert short_evidence(None, "plain line") == "plain line"


@pytest.mark.parametrize(("args", "nodes", "tasks"), [
    ([], 2, 2), (["--ntasks-per-node", "8"], 2, 16), (["--ntasks-per-node=4"], 3, 12), (["-n", "6"], 2, 6),
    (["--ntasks", "5", "--ntasks-per-node", "4"], 2, 5),
])
def test_tasks_a_step_runs(args: list[str], nodes: int, tasks: int) -> None:
    assert srunplan.tasks_wanted(args, nodes) == tasks


@pytest.mark.parametrize(("cmd", "tasks", "nodes", "ranks"), [
    (["python", "train.py"], 16, 2, True),  # Megatron/NeMo: srun --ntasks-per-node 8 python train.py
    (["python3.11", "pretrain_gpt.py"], 2, 2, True),  # one rank per node, started by srun
    (["/opt/venv/bin/python", "train.py"], 2, 2, True),
    (["bash", "-c", "python train.py"], 16, 2, True),  # more tasks than nodes: each is a rank
    (["./run_node.sh"], 2, 2, False),  # the Neuron pattern: a per-node script running torchrun
    (["torchrun", "--nproc_per_node", "8", "train.py"], 2, 2, False),
    (["python", "-m", "torch.distributed.run", "train.py"], 2, 2, False),
    (["torchrun", "train.py"], 4, 2, False),  # torchrun is a launcher whatever the count
])
def test_whether_each_task_is_a_rank(cmd: list[str], tasks: int, nodes: int, ranks: bool) -> None:
    assert srunplan.tasks_are_ranks(cmd, tasks, nodes) is ranks


def test_a_task_count_that_is_not_one_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--ntasks-per-node"):
        srunplan.tasks_wanted(["--ntasks-per-node", "x"], 2)

"""HyperPod detection and the "who restarts" decision."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.slurm import hyperpod


@pytest.mark.parametrize(("args", "want"), [
    (["--auto-resume=1", "-N", "2", "bash", "run.sh"], True),
    (["-N2", "--auto-resume", "1", "run.sh"], True),
    (["--auto-resume=0", "run.sh"], False),
    (["-N2", "run.sh", "--auto-resume=1"], False),  # the command's own flag, not srun's
    (["run.sh"], False),
])
def test_auto_resume_requested(args: list[str], want: bool) -> None:
    assert hyperpod.auto_resume_requested(args) is want


def test_auto_resume_from_env() -> None:
    assert hyperpod.auto_resume_requested(["run.sh"], {"SLURM_AUTO_RESUME": "1"})


def test_detect(tmp_path: Path) -> None:
    assert not hyperpod.detect(tmp_path)
    (tmp_path / "opt/sagemaker_cluster").mkdir(parents=True)
    assert hyperpod.detect(tmp_path)


def test_restart_owner() -> None:
    assert hyperpod.restart_owner(True, True).leave_to_hyperpod
    assert not hyperpod.restart_owner(True, False).leave_to_hyperpod
    assert not hyperpod.restart_owner(False, True).leave_to_hyperpod
    assert "auto-resume" in hyperpod.restart_owner(True, True).why

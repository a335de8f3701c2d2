"""SageMaker HyperPod: detect it, and decide who restarts a failed step.

HyperPod's Slurm clusters have ``/opt/sagemaker_cluster``; with ``srun --auto-resume=1`` the
HyperPod agent replaces faulty nodes and re-runs the *same* step ("[Auto Resume] Info: ...
Retrying step. Attempt number: 1"). If neuron-watch also restarted, the
job would restart twice. So under auto-resume neuron-watch still judges and collects evidence,
but leaves the restart to HyperPod: it stops the step with a failing exit code and lets the agent
retry it.

:func:`auto_resume_requested` and :func:`restart_owner` are pure; :func:`detect` looks at the disk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: Present on every HyperPod Slurm node (the awsome-distributed-training submit scripts test it).
MARKER = "opt/sagemaker_cluster"
_TRUE = ("1", "true", "yes", "on")


def detect(root: str | Path = "/") -> bool:
    """Whether this host is a HyperPod node (``<root>/opt/sagemaker_cluster`` is a directory)."""
    return (Path(root) / MARKER).is_dir()


def auto_resume_requested(srun_args: Sequence[str], env: Mapping[str, str] | None = None) -> bool:
    """Whether HyperPod auto-resume is on for this step.

    Recognises ``--auto-resume=1``/``true`` and ``--auto-resume 1`` among the srun arguments (up
    to the command, i.e. the first word not starting with ``-`` that is not an option value),
    and ``SLURM_AUTO_RESUME`` / ``SBATCH_AUTO_RESUME`` style variables if a site sets them.
    """
    i = 0
    while i < len(srun_args):
        a = srun_args[i]
        if a == "--":
            break
        if a.startswith("--auto-resume="):
            return a.split("=", 1)[1].strip().lower() in _TRUE
        if a == "--auto-resume":
            return i + 1 < len(srun_args) and srun_args[i + 1].strip().lower() in _TRUE
        if not a.startswith("-"):
            break  # the command starts here; its own flags are not srun's
        i += 1
    env = env or {}
    return any(env.get(k, "").strip().lower() in _TRUE for k in ("SLURM_AUTO_RESUME", "SBATCH_AUTO_RESUME"))


@dataclass(frozen=True)
class RestartOwner:
    """Who restarts after a failure: ``"hyperpod"`` or ``"neuron-watch"``, and the sentence why."""

    owner: str
    why: str

    @property
    def leave_to_hyperpod(self) -> bool:
        return self.owner == "hyperpod"


def restart_owner(is_hyperpod: bool, auto_resume: bool) -> RestartOwner:
    """Pure decision: leave the restart to HyperPod only when on HyperPod *and* auto-resume is on."""
    if is_hyperpod and auto_resume:
        return RestartOwner("hyperpod", "HyperPod auto-resume is on: neuron-watch collects evidence, stops the "
                                        "step and lets HyperPod replace the node and retry it")
    if is_hyperpod:
        return RestartOwner("neuron-watch", "HyperPod without --auto-resume=1: neuron-watch restarts the job")
    return RestartOwner("neuron-watch", "not a HyperPod cluster")

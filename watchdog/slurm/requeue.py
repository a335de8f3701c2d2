"""Requeue the running Slurm batch job with its bad nodes kept out of its next run.

``scontrol requeue J``, then ``ExcNodeList=<bad>`` on the requeued job. Not held: Slurm makes a requeued
batch job eligible again only after every step of its last run has ended (this process runs in the
batch step), plus its requeue delay (``SchedulerParameters=requeue_delay``, else the credential
lifetime; slurmctld's ``batch_requeue_fini``). So it cannot start again, on the bad node or anywhere,
while this process still runs, and the exclusion set here is in place before it can. A held requeue
(``requeuehold`` ... ``release``) guarded the same race but needed its release to come after: Slurm
SIGKILLs the batch step KillWait seconds after the requeue, and a busy slurmctld can take longer than
that to answer, which left the job held until someone released it by hand. Killed before the
exclusion is set, the job still runs again (a drained node is not allocated anyway); each call that
fails is told through ``failed``, never raised.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable, Sequence
from typing import NamedTuple

from neuron_watch.errors import PlatformError
from neuron_watch.slurm import slurmtext

#: ``scontrol`` with its arguments (the drainer's, which bounds each call): raises PlatformError when
#: scontrol could not run or did not answer in time.
Scontrol = Callable[..., subprocess.CompletedProcess[str]]


class RequeueOutcome(NamedTuple):
    """``requeued``: Slurm took the requeue; ``excluded``: the next run is kept off the bad nodes;
    ``errors``: what failed, each naming the command and what to do."""

    requeued: bool
    excluded: bool
    errors: tuple[str, ...]


def _call(scontrol: Scontrol, *args: str) -> str:
    """'' when ``scontrol ARGS`` succeeded, else why not."""
    try:
        r = scontrol(*args)
    except PlatformError as exc:
        return str(exc)
    return "" if r.returncode == 0 else f"`scontrol {' '.join(args)}` exited {r.returncode}: {r.stderr.strip()}"


def requeue_without(scontrol: Scontrol, slurm_job: str, exclude: Sequence[str]) -> RequeueOutcome:
    """Requeue ``slurm_job`` and exclude ``exclude`` from its next run (see the module's docstring).

    Slurm SIGTERMs this batch step right after the requeue: the calls ignore SIGTERM (an ignored
    signal stays ignored across exec) and are done long before KillWait's SIGKILL.
    """
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        refused = _call(scontrol, "requeue", slurm_job)
        # A call that timed out may still have been done: the exclusion is tried whatever the
        # requeue's answer (on a job still running, slurmctld refuses it, and nothing changes).
        unset = _call(scontrol, "update", f"jobid={slurm_job}", f"ExcNodeList={slurmtext.join_nodelist(exclude)}")
    finally:
        signal.signal(signal.SIGTERM, previous)
    errors = tuple(e for e in (refused, unset) if e)
    return RequeueOutcome(requeued=not refused, excluded=not unset, errors=errors)

"""Failure forms of a job's state as its scheduler reports it: Kubernetes' pod statuses and events, Slurm's job
states, Ray's report of a worker that died.

Pure: no I/O. Users paste what the scheduler shows when the job's own log is gone or says nothing (``kubectl get
pods``, ``kubectl describe``, ``scontrol show job``, ``sacct``); such a paste names the failure in the
scheduler's vocabulary, which is small and closed (:func:`scheduler_form`). Read from the schedulers' sources:

* a pod's status column (``kubectl get pods``: NAME READY STATUS RESTARTS AGE; the status is the waiting or
  terminated reason kubectl's printer shows, pkg/printers/internalversion/printers.go printPod): a container that
  keeps failing (``CrashLoopBackOff``, ``Error``, ``Init:Error``, ``Init:CrashLoopBackOff``), one that could not be
  created or started from its spec or image (``ImagePullBackOff``, ``ErrImagePull``, ``InvalidImageName``,
  ``CreateContainerConfigError``, ``CreateContainerError``, ``RunContainerError``, ``ContainerCannotRun``): the
  spec or the image, which a restart meets again. ``OOMKilled`` and evictions are read elsewhere;
* ``kubectl describe``'s container state (``Exit Code:    137``) and the kubelet's event ``Back-off restarting
  failed container`` (pkg/kubelet/kuberuntime: the reason ``BackOff``), a Job's ``BackoffLimitExceeded``;
* Slurm's job state (``scontrol show job``: ``JobState=FAILED Reason=NonZeroExitCode``; ``sacct``'s State column
  before ExitCode ``1:0``; src/common/slurm_protocol_defs.c job_state_string): ``FAILED``, ``NODE_FAIL`` (a node of
  the allocation failed), ``OUT_OF_MEMORY`` (sacct cuts it to ``OUT_OF_ME+``), ``TIMEOUT`` (the time limit, a
  setting: as the signature table reads slurmstepd's "DUE TO TIME LIMIT");
* Ray's ``WorkerCrashedError`` message (python/ray/exceptions.py: "The worker died unexpectedly while executing
  this task", and the core worker's "A worker died or was killed while executing a task by an unexpected system
  error"), unless a WARNING record says it: Ray retries the task.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind
from neuron_watch.diagnosis.forms_severity import QUIET_LEVELS, head_level
from neuron_watch.events import Label

#: Digit-free literals of which every line holding one of these forms holds one (failureforms.NEEDLES).
NEEDLES: tuple[str, ...] = (
    "CrashLoopBackOff", "Error ", "ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ContainerConfigError",
    "CreateContainerError", "RunContainerError", "ContainerCannotRun", "Exit Code:", "Back-off restarting failed",
    "BackoffLimitExceeded", "JobState=", "FAILED ", "NODE_FAIL", "OUT_OF_ME", "TIMEOUT ", "worker died",
)

#: a row of ``kubectl get pods``: (the namespace with -A,) name ("pod/x" with get all), ready "n/m", status,
#: restarts (with "(2m ago)" since 1.23), age
_POD_ROW = re.compile(r"^\s*(?:[\w.-]+\s+)?[\w./-]+\s+\d+/\d+\s+(\S+)\s+\d+(?:\s+\([^)]*\))?\s+\d+[smhdy]\w*\b")
_POD_CRASHED = frozenset({"CrashLoopBackOff", "Error", "Init:Error", "Init:CrashLoopBackOff"})
_POD_NOT_STARTED = frozenset({"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError",
                              "CreateContainerError", "RunContainerError", "ContainerCannotRun",
                              "Init:ImagePullBackOff", "Init:ErrImagePull"})
#: ``kubectl describe``'s exit code of a terminated container
_DESCRIBED_EXIT = re.compile(r"^\s*Exit Code:\s+(\d+)\s*$")
#: the kubelet's back-off event, a Job out of retries
_BACK_OFF = re.compile(r"\bBack-off restarting failed container\b|\bBackoffLimitExceeded\b")
#: Slurm's job state in scontrol's record, or in the State column of a sacct row (it starts with the job id,
#: "1012", "1012.batch", "1012.bat+", "77_3"; the state is its last column or the one before ExitCode "n:m")
_SLURM_STATE = re.compile(r"\bJobState=(FAILED|NODE_FAIL|OUT_OF_MEMORY|TIMEOUT)\b|"
                          r"^\s*\d+(?:_\[?[\d-]+\]?)?(?:\.[\w+]+)?\s.*\s(FAILED|NODE_FAIL|OUT_OF_ME(?:MORY|\+)|TIMEOUT)"
                          r"(?:\s+\d+:\d+)?\s*$")
_SLURM_CAUSES = {"OUT_OF_MEMORY": Label.OOM, "OUT_OF_ME+": Label.OOM, "TIMEOUT": Label.CONFIG_ERROR}
#: Ray's WorkerCrashedError, in the core worker's words
_RAY_WORKER_CRASHED = re.compile(r"\bA worker died or was killed while executing (?:a|the) task by an unexpected "
                                 r"system error\b|\bThe worker died unexpectedly while executing this task\b")


def scheduler_form(text: str) -> Form | None:
    """The form of a failed job, pod or worker in its scheduler's words, or None."""
    pod = _POD_ROW.match(text)
    if pod is not None:
        status = pod.group(1)
        if status in _POD_NOT_STARTED:
            return Form(FormKind.ERROR, f"a pod that could not start its container ({status})", Label.CONFIG_ERROR)
        if status in _POD_CRASHED:
            return Form(FormKind.CRASH, f"a pod whose container keeps failing ({status})")
        return None
    described = _DESCRIBED_EXIT.match(text)
    if described is not None:
        return Form(FormKind.CRASH, "a container that ended with an exit code") if described.group(1) != "0" else None
    if _BACK_OFF.search(text):
        return Form(FormKind.CRASH, "a container the kubelet restarts after it failed")
    state = _SLURM_STATE.search(text)
    if state is not None:
        name = state.group(1) or state.group(2)
        return Form(FormKind.CRASH, f"a Slurm job in state {name}", _SLURM_CAUSES.get(name))
    # Ray logs the death of a worker whose task it will retry as a WARNING: the job goes on (a task that ran out
    # of retries raises WorkerCrashedError, whose message is the same sentence without the level)
    if _RAY_WORKER_CRASHED.search(text) and head_level(text) not in QUIET_LEVELS:
        return Form(FormKind.CRASH, "a Ray worker that died while executing a task")
    return None

"""Failure forms read for the misses of round issue23-heldout-32 (part A: RL post-training frameworks, whose jobs
mix a trainer, rollout engines and Ray in one log): Ray's report of a remote call's error that no caller retrieved,
Ray's memory monitor's report of a task or an actor it killed, vLLM's NCCL library that could not be loaded, and an
error that names a file-system path where what it needs is not found.

Pure: no I/O. :func:`round32a_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the forms
of round 31, :func:`round32a_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line
that is already an error.

Each form is read where its program prints it:

* Ray's driver (or a task that holds the reference) logging a remote call that raised while nobody called
  ``ray.get`` on its result (python/ray/_private/worker.py ``_unhandled_error_handler``: ``logger.error(f"Unhandled
  error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): {e}")``, the quotes absent before Ray 1.5; ``e`` is the
  RayTaskError, ``ray::<Class>.<method>() (pid=..., ip=...)`` and the worker's traceback). An actor's method failed:
  verl's driver printed it for ``WorkerDict.actor_rollout_generate_sequences`` whose vLLM wake-up ran out of memory
  (verl#302, the traceback cut before its exception: read as healthy); vLLM's RayWorkerWrapper, lmdeploy's warm-up
  and DJL's worker print the same record. It says a call failed, not why: no cause.
* Ray's memory monitor's report of the task or actor it killed (src/ray/raylet/node_manager.cc, the OOM kill
  message the caller's OutOfMemoryError carries): "Task was killed due to the node running low on memory. Memory on
  the node ... Top 10 memory users: ... Refer to the documentation on how to address the out of memory issue: ...
  Consider provisioning more memory on this node or reducing task parallelism by requesting more CPUs per task. Set
  max_restarts and max_task_retries to enable retry when the task crashes due to OOM." (``Set max_retries`` for a
  task). The suggestion to enable a retry is written only into that kill's message, not into the raylet's periodic
  count of killed workers (which ends "... requesting more CPUs per task. To adjust the kill threshold ..."): a
  ``ray job submit`` status that kept the message's tail but not its head still reports the kill (OpenRLHF#911,
  read as healthy).
* vLLM's NCCL wrapper that could not load the library it found (vllm/distributed/device_communicators/
  pynccl_wrapper.py ``NCCLLibrary.__init__``: ``ctypes.CDLL`` raised, ``logger.error("Failed to load NCCL library
  from %s. It is expected if you are not running on NVIDIA/AMD GPUs. ...")``, the same sentence in SGLang's copy and
  other forks of the wrapper): the library the environment names (VLLM_NCCL_SO_PATH, or the one found on the path)
  is missing, built for another platform or corrupt, which every restart meets again (trl#3925, restarted as a
  crash).
* An error that says what it needs is "not found at" a file-system path (pytriton's ``RuntimeError: venv for python
  backend not found at /root/.cache/pytriton/python_backend_interpreter``, NeMo-Aligner#147, restarted as a crash):
  a file, a directory or an environment the set-up did not provide. Read only as the cause of a line that is
  already an error: an INFO record that a default is used when a file is not found at a path is no failure.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round32a_form` reads hold, besides the needles failureforms already
#: searches
NEEDLES: tuple[str, ...] = ("RAY_IGNORE_UNHANDLED_ERRORS", "to enable retry when the task crashes due to OOM",
                            "Failed to load NCCL library from")

#: Ray's record of a remote call's error that no caller retrieved (quoted since Ray 1.5, bare before)
_RAY_UNHANDLED = re.compile(r"\bUnhandled error \(suppress with '?RAY_IGNORE_UNHANDLED_ERRORS=1'?\):")

#: the suggestion Ray's memory monitor writes into the message of a task or an actor it killed, after the one it shares
#: with the raylet's count (a program's own comment quoting the sentence is no report)
_RAY_OOM_KILL = re.compile(r"\bCPUs per task\. Set max_(?:restarts and max_task_)?retries to enable retry when the "
                           r"task crashes due to OOM\b")

#: vLLM's (and its forks') NCCL wrapper whose ctypes.CDLL of the library failed
_NCCL_NOT_LOADED = re.compile(r"\bFailed to load NCCL library from \S")

#: what an error needs, not found at a file-system path (absolute, home-relative or relative to the directory)
_NOT_FOUND_AT_PATH = re.compile(r"\bnot found at (?:/|~/|\.{1,2}/)[\w.~/-]")


def round32a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "RAY_IGNORE_UNHANDLED_ERRORS" in text and _RAY_UNHANDLED.search(text):
        return Form(FormKind.ERROR, "Ray's report of a remote call's error that no caller retrieved")
    if "crashes due to OOM" in text and _RAY_OOM_KILL.search(text):
        return Form(FormKind.CRASH, "Ray's memory monitor's report of a task or actor it killed", Label.OOM)
    if "NCCL library" in text and _NCCL_NOT_LOADED.search(text):
        return Form(FormKind.ERROR, "an NCCL library that could not be loaded (missing, corrupt or for another "
                                    "platform)", Label.CONFIG_ERROR)
    return None


def round32a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    stated = stated_cause(round32a_form(text))
    if stated is not None:
        return stated
    if "not found at" in text and _NOT_FOUND_AT_PATH.search(text):
        return Label.CONFIG_ERROR, "what the program needs, not found at a file-system path"
    return None

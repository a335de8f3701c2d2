"""Failure forms read for the misses of round issue23-heldout-35 (part A: evaluation harnesses and offline batch
inference): a device runtime refused in a forked child, CPython's spawn started from a module still being imported,
Ray's autoscaler finding no node type for a request, and TensorRT-LLM's runtime launched with other MPI ranks than the
engine's parallelism, and vLLM's Ray executor started on a node Ray gives no device.

Pure: no I/O. :func:`round35a_form` is asked after the forms of round 34, :func:`round35a_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

Each form is read where its program prints it; all four are set-ups a restart repeats word for word:

* torch initialises a device runtime lazily and refuses to do so in a child forked from a parent that already had:
  ``raise RuntimeError("Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must
  use the 'spawn' start method")`` (torch/cuda/__init__.py ``_lazy_init``; torch/xpu and the vendors' plugins raise
  the same words for XPU, NPU...). vLLM's tensor-parallel workers, evaluation harnesses and data loaders started
  with ``fork`` after the parent touched the device all meet it (vllm-project/vllm#6668, #6152, #8893, FastChat#3507),
  and vLLM relays it in its worker's record ("Exception in worker VllmWorkerProcess while processing method
  init_device: Cannot re-initialize CUDA ..."). vLLM's own warning that it *switches* to spawn because CUDA was
  initialised ("We must use the `spawn` multiprocessing start method ... Reason: CUDA is initialized") names no
  failure and is not read.
* CPython's spawn start method re-imports the main module in the child; a module that starts processes at import
  (no ``if __name__ == '__main__':`` guard) makes the child start processes while bootstrapping, and
  multiprocessing/spawn.py ``_check_not_importing_main`` raises ``RuntimeError('''An attempt has been made to start a
  new process before the current process has finished its bootstrapping phase. ...''')``, a multi-line message whose
  first line is read, and, when a paste is cut before it, the frame of that check: the function raises nothing else
  (InternLM/lmdeploy#1366, #1029: tensor-parallel pipelines created at import).
* Ray's autoscaler reports a resource request that no node type of the cluster can ever hold, every 30 seconds, while
  the task or placement group waits: ``"Error: No available node types can fulfill resource request {}. Add suitable
  node types to this cluster to resolve this issue."`` (python/ray/autoscaler/_private/autoscaler.py, the
  ``infeasible`` requests; the v2 autoscaler's "resource requests"). An actor asking for more GPUs than any node has
  (ray-project/ray#53192), a placement group pinned to a node without them (vllm-project/vllm#8908): the job waits
  for ever, and a restart asks for the same. The autoscaler's *pending* requests (nodes being launched) are another
  record and are not read.
* TensorRT-LLM's runtime builds its world from MPI and asserts that the ranks launched are the engine's tensor times
  pipeline parallelism: ``[TensorRT-LLM][ERROR] Assertion failed: mpiSize == tp * pp (.../runtime/worldConfig.cpp)``
  (huggingface/optimum-nvidia#68, Tlntin/Qwen-TensorRT-LLM#123: engines for 2 or 4 GPUs run by one process); the
  Python runner's ``Engine world size (2 * 1) != Runtime world size (1)`` says the same and is read already. Other
  assertions of the runtime are not read here: their expression is the bug's, not the launch's.
* vLLM's Ray executor pins its first bundle to the driver's node and refuses to start when Ray lists no device there:
  ``raise ValueError(f"Current node has no {device_str} available. {current_node_resource=}. vLLM engine cannot start
  without {device_str}. Make sure you have at least 1 {device_str} available in a node ...")``
  (vllm/executor/ray_utils.py ``_verify_bundles``/``initialize_ray_cluster``). A Ray task started without ``num_gpus``
  (lighteval's data-parallel runs before huggingface/lighteval#841, huggingface/open-r1#245), a head node without
  the accelerator or a plugin's device key (``NPU``) all read it: the resources Ray was given, which a restart keeps.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round35a_form` reads hold, besides the needles failureforms already
#: searches
NEEDLES: tuple[str, ...] = ("in forked subprocess", "finished its bootstrapping phase",
                            "start a new process before the", "_check_not_importing_main",
                            "No available node types can fulfill", "mpiSize == tp", "engine cannot start without",
                            "Current node has no")

#: torch's lazy initialisation of a device runtime refused in a forked child (any device's name)
_FORKED_REINIT = re.compile(r"\bCannot re-initialize [A-Za-z]+ in forked subprocess\b")

#: CPython's spawn started while the main module is still imported: the message's first line (or its second), or
#: the frame of the check that raises it (a traceback cut before the message)
_SPAWN_AT_IMPORT = re.compile(r"\bAn attempt has been made to start a new process before the\b"
                              r"|\bcurrent process has finished its bootstrapping phase\b"
                              r"|\bspawn\.py\", line \d+, in _check_not_importing_main\b")

#: Ray's autoscaler on a request no node type can hold (the v1 wording and the v2's plural)
_INFEASIBLE_REQUEST = re.compile(r"\bNo available node types can fulfill resource requests?\b")

#: TensorRT-LLM's world built from MPI with other ranks than the engine's parallelism
_WORLD_SIZE_ASSERT = re.compile(r"\bAssertion failed: mpiSize == tp \* pp\b")


#: vLLM's Ray executor on a node Ray lists without the device (its message, or a paste wrapped after the resources)
_NO_DEVICE_ON_NODE = re.compile(r"\bCurrent node has no [A-Za-z]+ available\. current_node_resource="
                                r"|\bvLLM engine cannot start without [A-Za-z]+\b")


def round35a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "in forked subprocess" in text and _FORKED_REINIT.search(text):
        return Form(FormKind.ERROR, "a device runtime initialised in a forked child (use the 'spawn' start method, "
                    "or touch the device only after the fork)", Label.CONFIG_ERROR)
    if ("bootstrapping phase" in text or "start a new process" in text or "_check_not_importing_main" in text) \
            and _SPAWN_AT_IMPORT.search(text):
        return Form(FormKind.ERROR, "processes started while the main module is imported by spawn (guard the start "
                    "with if __name__ == '__main__')", Label.CONFIG_ERROR)
    if "No available node types" in text and _INFEASIBLE_REQUEST.search(text):
        return Form(FormKind.ERROR, "a resource request no node of the Ray cluster can hold (the task waits for "
                    "ever: ask for less per actor, or add a node type that has it)", Label.CONFIG_ERROR)
    if "mpiSize" in text and _WORLD_SIZE_ASSERT.search(text):
        return Form(FormKind.ERROR, "TensorRT-LLM run with other MPI ranks than the engine's tensor x pipeline "
                    "parallelism (mpirun -n <tp*pp>)", Label.CONFIG_ERROR)
    if ("Current node has no" in text or "engine cannot start without" in text) and _NO_DEVICE_ON_NODE.search(text):
        return Form(FormKind.ERROR, "vLLM's Ray executor on a node Ray gives no device (give the Ray task its GPUs, "
                    "or start Ray with the devices it should see)", Label.CONFIG_ERROR)
    return None


def round35a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round35a_form(text))

"""Failure forms read for the misses of round issue23-heldout-32 (part C: the JAX ecosystem on GPU and TPU): XLA's
wrapper of NCCL's result, JAX's own report of a platform it could not start, JAX's check of the jaxlib it runs with,
XLA's NCCL stub without a library, the TPU client's alarm of an execution that does not end, an exception for a
target already there, and XLA's internal checks that failed inside its compiler.

Pure: no I/O. :func:`round32c_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the forms
of round 31, :func:`round32c_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line
that is already an error.

Each form is read where its program prints it:

* XLA wraps every NCCL call's result in its own status (xla/backends/gpu/collectives/nccl_errors.h, before it
  xla/service/gpu/nccl_utils.h, TensorFlow's nccl_all_reduce_thunk.cc: ``XLA_NCCL_STATUS``, "NCCL operation %s
  failed: %s. Last NCCL warning(error) log entry (may be unrelated) '%s'.", the call's own text then
  ``ncclGetErrorString``'s): the result string names the cause as round 29 part C's reader of NCCL's results under
  other wrappers reads it (an invalid usage or argument is the caller's mistake; a system error or a remote that
  exited is the transport). The call's text holds parentheses and commas, so the result is read after "failed: "
  (vdvae-jax#2 "invalid usage", flax#4942 "invalid argument": round issue23-heldout-32 part C, read as crashes).
* JAX raises ``RuntimeError(f"Unable to initialize backend '{platform}': {err}")`` when a platform the program asked
  for (``JAX_PLATFORMS``, a plugin it installed) does not come up (jax/_src/xla_bridge.py): no device visible
  (Slurm's binding, jax#28194), the TPU held by another process (sglang-jax#857), a plugin that does not match.
  A restart meets the same machine: configuration. The probe of every other platform logs the same words through
  its logger (``xla_bridge.py:<n>] Unable to initialize backend ...``, signatures.toml ``jax.backend_probe``), which
  is not this: only the raised error is read, and a status that states its own cause (RESOURCE_EXHAUSTED) keeps it.
* JAX checks the jaxlib it imports (jax/_src/lib/__init__.py ``check_jaxlib_version``): "jaxlib is version {v}, but
  this version of jax requires version >= {minimum}." (older: "... requires version {minimum}.", raised as a
  ValueError) and "jaxlib version {v} is newer than and incompatible with jax version {v}. Please update your jax
  and/or jaxlib packages.": two packages of the install that do not match (weathernext#48, ParallelFold#13,
  plenoctree#22, jax#17638).
* XLA loads NCCL when the first collective needs it; its stub answers every call with ncclSystemError and
  ``ncclGetErrorString`` with "Unable to load NCCL library. Multi-GPU collectives will not work." when the library
  is not there (xla/tsl/cuda/nccl_stub.cc ``ReturnErrorString``): the install lacks NCCL (jax#18391: read as a
  crash; a run's notes in mixed-agents record the same failure, fixed by installing nvidia-nccl).
* The TPU client warns every ten seconds while an execution has not returned (tensorflow/compiler/xla/python/
  tpu_driver/client/tpu_client.cc: "TPU Execute is taking a long time. This might be due to a deadlock between
  multiple TPU cores or a very slow program."): the cores wait on one another. A log that ends in it is a hang
  (jax#4153, colabtools#3952); the rank's progress after it withdraws it.
* An exception whose class says that what the run creates is already there: orbax's CheckpointManager refuses a
  step it holds (``StepAlreadyExistsError``: "Checkpoint for step 2000 already exists.", orbax#2657, read as a
  crash: ``save(force=True)`` does not overwrite), TensorFlow's ALREADY_EXISTS status (``AlreadyExistsError``,
  "Another metric with the same name already exists." when two Keras installs register the same metrics), Hadoop's
  ``FileAlreadyExistsException`` for an output directory a job writes again. A restart meets the same target:
  configuration (the directory, the step, the install), as a FileExistsError is (heldout.round26b).
* XLA's ``RET_CHECK`` fails an internal invariant as an INTERNAL status that names the source file
  (xla/status_macros.cc: "RET_CHECK failure (<file>:<line>) <condition>"). In the compiler's sources (the HLO
  passes of xla/service and xla/hlo, the SPMD partitioner, a backend's IR emitter, a TPU rewrite pass) the compile
  failed (jax#22484, jax#26051, mesh-transformer-jax#86, simclr#53); elsewhere (the runtime, PJRT's client) it says
  nothing of the cause.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.diagnosis.heldout.round29c import NCCL_CAUSES
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round32c_form` reads hold, besides the needles failureforms already
#: searches: XLA's NCCL status, JAX's raised backend error, its jaxlib check, XLA's NCCL stub without a library, the
#: TPU client's alarm, XLA's failed internal check, an exception that names a target already there
NEEDLES: tuple[str, ...] = ("NCCL operation ", "Unable to initialize backend '",
                            "but this version of jax requires", "is newer than and incompatible with",
                            "Unable to load NCCL", "Execute is taking a long time", "RET_CHECK failure (",
                            "AlreadyExists")

#: XLA's status of a failed NCCL call: the call's text (parentheses, commas), then NCCL's result string
_XLA_NCCL = re.compile(r"\bNCCL operation \S.*? failed: (" + "|".join(map(re.escape, NCCL_CAUSES)) + r")\b")

#: JAX's error for a platform it was asked for and could not start, as raised (an exception's line, or the message
#: alone under a wrapper's head), not its logger's record of the probe ("xla_bridge.py:<n>] ...")
_BACKEND_RAISED = re.compile(r"^(?:.*?\b(?:RuntimeError|JaxRuntimeError|XlaRuntimeError): |[\s>|]*)"
                             r"Unable to initialize backend '\w+': ")
_BACKEND_LOGGED = re.compile(r"\bxla_bridge\.py:\d+\]\s+Unable to initialize backend ")

#: JAX's check of the jaxlib it imports, both directions
_JAXLIB_MISMATCH = re.compile(r"\bjaxlib is version \S+, but this version of jax requires version (?:>= )?\d|"
                              r"\bjaxlib version \S+ is newer than and incompatible with jax version \d")

#: the error string of XLA's NCCL stub when the library is not there
_NCCL_NOT_LOADED = re.compile(r"\bUnable to load NCCL library\. Multi-GPU collectives will not work\b")

#: the TPU client's alarm of an execution that has not returned
_TPU_EXECUTE_STALLED = re.compile(r"\bTPU Execute is taking a long time\. This might be due to a deadlock between "
                                  r"multiple TPU cores\b")

#: an exception whose class says the target it creates is already there (orbax's StepAlreadyExistsError, TensorFlow's
#: AlreadyExistsError, Hadoop's FileAlreadyExistsException), as its line names it
_ALREADY_EXISTS = re.compile(r"(?:^|[\s.:>])\w*AlreadyExists(?:Error|Exception)(?::|\s*$)")

#: XLA's failed internal check, and the compiler's sources it may name: the HLO passes and IR of xla/service and
#: xla/hlo (not their runtime helpers), the SPMD partitioner, a backend's emitter, a TPU rewrite pass
_RET_CHECK = re.compile(r"\bRET_CHECK failure \(([^):]+)(?::\d+)?\)")
_COMPILER_SOURCE = re.compile(r"(?:^|/)(?:xla/hlo/|spmd/|\w*(?:_pass|_emitter|partitioner|_compiler|"
                              r"_rewriter|_simplifier|_normalization|_expander|_folding)\.cc$)|"
                              r"xla/service/(?:[a-z_]+/)?\w+\.cc$")
#: the runtime's sources under xla/service, whose failed checks are not the compile's
_RUNTIME_SOURCE = re.compile(r"(?:_runtime|_executable|_client|_thunk|_stream\w*|allocator|_buffer\w*|"
                             r"transfer_manager|_executor)\.cc$")


def round32c_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "NCCL" in text:  # XLA's status of a failed NCCL call, its stub without a library
        if "NCCL operation " in text and (result := _XLA_NCCL.search(text)) is not None:
            return Form(FormKind.ERROR, f"NCCL's result '{result.group(1)}' in XLA's status of a failed NCCL call",
                        NCCL_CAUSES[result.group(1)])
        if "Unable to load NCCL" in text and _NCCL_NOT_LOADED.search(text):
            return Form(FormKind.ERROR, "an NCCL library the install lacks (XLA's stub could not load it)",
                        Label.CONFIG_ERROR)
    if ("Unable to initialize backend '" in text and _BACKEND_RAISED.search(text)
            and not _BACKEND_LOGGED.search(text)):
        return Form(FormKind.ERROR, "a platform JAX was asked for and could not start", Label.CONFIG_ERROR)
    if "jaxlib" in text and _JAXLIB_MISMATCH.search(text):
        return Form(FormKind.ERROR, "a jaxlib that does not match the jax installed with it", Label.CONFIG_ERROR)
    if "Execute is taking a long time" in text and _TPU_EXECUTE_STALLED.search(text):
        return Form(FormKind.ERROR, "a TPU execution that has not returned (the TPU client's deadlock alarm)",
                    Label.COLLECTIVE_HANG)
    if "AlreadyExists" in text and _ALREADY_EXISTS.search(text):
        return Form(FormKind.ERROR, "an exception for a target the run creates that is already there",
                    Label.CONFIG_ERROR)
    if "RET_CHECK failure (" in text and (check := _RET_CHECK.search(text)) is not None:
        source = check.group(1)
        if _COMPILER_SOURCE.search(source) and not _RUNTIME_SOURCE.search(source):
            return Form(FormKind.ERROR, "an internal check of XLA's compiler that failed (RET_CHECK)",
                        Label.COMPILE_ERROR)
    return None


def round32c_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round32c_form(text))

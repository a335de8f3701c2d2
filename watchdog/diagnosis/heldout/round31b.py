"""Failure forms read for the misses of round issue23-heldout-31 (part B: logs seen through a collector or a
wrapper): the container engine refusing a GPU container, a platform's report of a container the OOM killer ended,
a runtime's GPU execution provider that fell back to the CPU, CPython's call to a signature the installed package
does not have, and Marian's checkpoint whose parameter shapes differ from the model's.

Pure: no I/O. :func:`round31b_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the forms
of round 30, :func:`round31b_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line
that is already an error.

Each form is read where its program prints it:

* The Docker engine refusing the GPU a container asks for: moby's ``incompatibleDeviceRequest`` (daemon/errors.go:
  ``could not select device driver %q with capabilities: %v``, an InvalidParameter error: no registered device
  driver, the NVIDIA container toolkit's, offers ``--gpus``' capabilities) and its runtime lookup (``Unknown
  runtime specified %s`` before 23.0, ``unknown or invalid runtime name: %s`` since: ``runtime: nvidia`` names a
  runtime the daemon was never configured with). docker run prints them after "Error response from daemon:",
  Compose after "Cannot start service <svc>:"/"Cannot create container for service <svc>:". No container is
  created; every retry on that host meets the same daemon (Generative_Deep_Learning_2nd_Edition#5 and
  StyleGAN-nada#62, round issue23-heldout-31 part B, restarted as crashes).
* A platform's report that a container was OOM-killed, written as a reason field whatever the decoration around
  it: round 14's ``Reason: OOMKilled`` of kubectl, and the same field with a cloud console's or a bot's markup and
  words: ``**Restart Reason**: OOMKill (memory exceeded limit, SIGKILL)``, a status dump's ``lastState: terminated
  reason=OOMKilled, exitCode=137``. The container's memory ran out (DrivoR#35, read as healthy). kubectl's own
  ``--field-selector reason=OOMKilled``, a query for such events, and prose that goes on after the word
  ("Reason: OOMKilled containers are restarted ...") are no report of one.
* A GPU execution provider ONNX Runtime could not create, so the session runs on the CPU: onnxruntime's own warning
  (onnxruntime_pybind_state.cc: ``[W:onnxruntime:Default, ...] Failed to create CUDAExecutionProvider. Require
  cuDNN 9.* and CUDA 12.* ...``; the same for TensorRT, ROCm, MIGraphX) and fastembed's check of the session's
  providers (fastembed/common/onnx_model.py: ``Attempt to set CUDAExecutionProvider failed. Current providers:
  ['CPUExecutionProvider']``). Nothing stops, but the GPU the job was given is not used: the CUDA/cuDNN libraries
  the wheel was built for are not the machine's, which a restart does not change (fastembed-server#1, read as
  healthy).
* CPython's refusal of a call's keyword (Python/ceval.c and getargs.c: ``%U() got an unexpected keyword argument
  '%S'``): the caller was written for another version of the callee (a package upgraded on one side only) or passes
  a setting the installed version does not accept. The same call fails at every start (mozilla/translations#961:
  OpusTrainer's ``PlaceholderTagModifier.__init__() got an unexpected keyword argument 'tag'`` inside its
  CurriculumLoaderError, restarted as a crash).
* Marian's check of a parameter it loads against the one the model's configuration builds
  (src/graph/expression_graph.h, ``ExpressionGraph::param``: ``Requested shape %s for existing parameter '%s' does
  not match original shape %s``, then ``Aborted from marian::Expr marian::ExpressionGraph::param``): the checkpoint
  was trained with other dimensions than the ones given now, a configuration mismatch (mozilla/translations#226,
  restarted as a crash). PyTorch's word for the same, ``size mismatch for <param>``, is round 22's.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round31b_form` reads hold, besides the needles failureforms already
#: searches
NEEDLES: tuple[str, ...] = ("could not select device driver", "nknown runtime specified", "invalid runtime name",
                            "OOMKill", "ExecutionProvider", "unexpected keyword argument",
                            "does not match original shape")

#: moby's refusals of a container's GPU request or runtime (the runtime's name a word, quoted or not)
_DOCKER_GPU_REFUSED = re.compile(r"\bcould not select device driver \"[^\"]*\" with capabilities: \[|"
                                 r"\b[Uu]nknown runtime specified [\w.-]+|\bunknown or invalid runtime name: [\w.-]+")

#: a reason field (kubectl's "Reason:", a report's "**Restart Reason**:", a status dump's "reason=") whose value is
#: the OOM killer's, OOMKilled or OOMKill; not kubectl's own "--field-selector reason=OOMKilled" that looks for one
_OOM_REASON = re.compile(r"(?<!selector )\b[Rr]eason[\s*_\"']*[:=][\s*_\"']*OOMKill(?:ed)?\b(?!\s+[a-z])")

#: ONNX Runtime's GPU provider not created (onnxruntime's own words and fastembed's)
_GPU_PROVIDER_FAILED = re.compile(r"\bFailed to create (?:CUDA|TensorRT|ROCM|MIGraphX)ExecutionProvider\b|"
                                  r"\bAttempt to set (?:CUDA|TensorRT|ROCM)ExecutionProvider failed\b")

#: CPython's keyword a callee does not have: "<callable>() got an unexpected keyword argument '<kw>'"
_UNEXPECTED_KWARG = re.compile(r"\w\(\) got an unexpected keyword argument '\w+'")

#: Marian's loaded parameter whose shape is not the configured model's
_MARIAN_SHAPE = re.compile(r"\bRequested shape shape=\S+ size=\d+ for existing parameter '[^']+' does not match "
                           r"original shape\b")



def round31b_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if _DOCKER_GPU_REFUSED.search(text):
        return Form(FormKind.ERROR, "the container engine refusing the GPU device or runtime a container asks for "
                                    "(no NVIDIA container toolkit registered)", Label.CONFIG_ERROR)
    if "OOMKill" in text and _OOM_REASON.search(text):
        return Form(FormKind.CRASH, "a container the OOM killer ended (a platform's reason OOMKill)", Label.OOM)
    if "ExecutionProvider" in text and _GPU_PROVIDER_FAILED.search(text):
        return Form(FormKind.ERROR, "ONNX Runtime's GPU execution provider that could not be created (the session "
                                    "runs on the CPU)", Label.CONFIG_ERROR)
    if "unexpected keyword" in text and _UNEXPECTED_KWARG.search(text):
        return Form(FormKind.ERROR, "a call to a signature the installed package does not have (unexpected keyword "
                                    "argument)", Label.CONFIG_ERROR)
    if "original shape" in text and _MARIAN_SHAPE.search(text):
        return Form(FormKind.ERROR, "a checkpoint's parameter whose shape differs from the configured model's",
                    Label.CONFIG_ERROR)
    return None


def round31b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round31b_form(text))

"""Forms read for the misses of round issue23-heldout-38 (part D: healthy runs that look frightening, part 5):
DeepStream building the TensorRT engine it found no file for, and the stack Inductor prints when it skips CUDA graphs,
which is not a traceback.

Pure: no I/O. :func:`round38d_form` is asked after the forms of round 37, :func:`round38d_quiet` with the other rounds'
warnings, and :func:`round38d_warning_stack` by :func:`neuron_watch.diagnosis.offline.open_traceback`. The round
states no cause (its one form is a phase, a compile running), so it gives failureforms' ``cause_of`` nothing to ask.

Each form is read where its program prints it:

* DeepStream's nvinfer plugin looks for the serialized TensorRT engine its config names and, when the file is not
  there, builds one from the model files. nvdsinfer_model_builder.cpp prints the miss at its ERROR level, "ERROR:
  Deserialize engine failed because file path: <engine> open error", and nvdsinfer_context_impl.cpp goes on with
  the WARN "... NvDsInferContextImpl::generateBackendContext() ... deserialize backend context from engine from file
  :<engine> failed, try rebuild" and the INFO "... NvDsInferContextImpl::buildModel() ... Trying to create engine
  from model files": the first run of every new model, a build of minutes (hours on a Jetson) with nothing printed
  meanwhile. The ERROR record is the cache miss, not a failure (quiet); the rebuild is a compile running (round
  issue23-heldout-38: DeepStream-Yolo#277, whose run went on to infer, read as a crash on the ERROR line). A build
  that fails says so afterwards in TensorRT's and nvinfer's own errors ("failed to build network"), which stay read.
* Inductor skips CUDA graphs for a graph that touches a CPU tensor or mutates an input, and says where, from torch/
  _inductor/cudagraph_utils.py: ``f"skipping cudagraphs due to {reason}. Found from : \\n {stack_trace}"``, the
  stack being the user code's frames (``File "...", line N, in forward`` and its source line) recorded when the graph
  was traced. A log whose last lines are those frames ends on a warning's stack, not inside a traceback the process
  was printing as it died (round issue23-heldout-38: Wan2.1#332 and ultralytics#21975, compiled runs that went on,
  read as crashes cut inside a traceback). Only frames under that header are excused: a "Traceback (most recent call
  last):" header, or any other line above them, leaves them a traceback.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from neuron_watch.diagnosis.formkinds import Form, FormKind

#: The literals (digit-free) the lines :func:`round38d_form` reads hold: nvinfer's words of the rebuild it starts, each
#: with one of the batch search's marker characters (keyfinder._MARKERS: the "x" of "context", the "T"), so that no
#: needle needs a literal search of its own ("try rebuild" alone cost a third of bench_classify's typical scan)
NEEDLES: tuple[str, ...] = ("context from engine from file", "Trying to create engine from model files")

#: nvinfer starting an engine build from the model files (nvdsinfer_context_impl.cpp's WARN of the miss, its INFO of
#: the build)
_DS_REBUILD = re.compile(r"deserialize backend context from engine from file :.*\bfailed, try rebuild\b"
                         r"|\bTrying to create engine from model files\b")
#: nvinfer's model builder reporting that the engine file it was told to load is not there (the cache miss)
_DS_ENGINE_MISSING = re.compile(r"\bDeserialize engine failed because file path: \S+ open error\b")

#: the header Inductor puts over the user frames of a graph it will not capture ("skipping cudagraphs due to cpu
#: device (arg2_1). Found from : "), the line the frames follow
_SKIP_HEADER = re.compile(r"\bskipping cudagraphs due to .*\bFound from :\s*$")
#: a frame of a Python stack ('  File "x.py", line 12, in forward') and the indented source line under it
_FRAME = re.compile(r'^\s*File "[^"]+", line \d+, in \S')
_SOURCE = re.compile(r"^(?: {4,}|\t)\S")
#: a traceback's header, or the line that chains one to the exception before it: frames under it are a traceback's
_TRACEBACK_HEADER = re.compile(r"Traceback \(most recent call last\)|^\s*During handling of the above exception"
                               r"|^\s*The above exception was the direct cause")
#: how far up the frames of one stack are followed to their header
_STACK_LINES = 60


def round38d_form(text: str) -> Form | None:
    """The form ``text`` holds among this round's, or None."""
    if ("try rebuild" in text or "Trying to create engine" in text) and _DS_REBUILD.search(text):
        return Form(FormKind.COMPILE_RUNNING, "DeepStream building the TensorRT engine it found no file for")
    return None


def round38d_quiet(text: str) -> bool:
    """nvinfer's ERROR of an engine file that is not there yet: the cache miss before the rebuild, a warning."""
    return "open error" in text and _DS_ENGINE_MISSING.search(text) is not None


def round38d_warning_stack(texts: Sequence[str]) -> bool:
    """Whether the frames ``texts`` end on are the user stack under Inductor's "skipping cudagraphs ... Found from :",
    not a traceback: going up from the end over the frames and their source lines, that header comes before any
    traceback's header. Other lines between are passed over: an unmarked stream of two processes puts another
    process's lines among the stack's frames (bench_form_robustness's interleave kind put a healthy run's
    progress records there, and the frames at the end then read as a traceback cut before its exception)."""
    for text in reversed(texts[-_STACK_LINES:]):
        if not text.strip() or _FRAME.search(text) or _SOURCE.search(text):
            continue
        if "Found from" in text and _SKIP_HEADER.search(text) is not None:
            return True
        if _TRACEBACK_HEADER.search(text):
            return False
    return False

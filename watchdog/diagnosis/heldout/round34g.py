"""Failure forms read for the misses of round issue23-heldout-34 (part G: never kill a healthy job): XLA's GPU timer
reporting the accuracy of a measurement at ERROR, TensorRT's builder skipping a tactic whose check threw, and Hugging
Face Trainer's notice that its epoch iterator held no sample, and the nerfstudio libraries' notice of a CUDA
extension's JIT build.

Pure: no I/O. :func:`round34g_quiet` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` before any
form (and through ``read_quiet`` by the table's last rule, which then calls no error), :func:`round34g_form` after
the forms of round 33, :func:`round34g_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of
a line that is already an error.

Each form is read where its program prints it:

* XLA's stream executor times kernels (the autotuner's candidates, a profiler) with a GPU timer that first launches a
  delay kernel so that the start event is recorded before the work; when that kernel times out, the timer still
  returns the time and says only that it is less accurate: ``LOG(ERROR) << "Delay kernel timed out: measured time has
  sub-optimal accuracy. There may be a missing warmup execution, please investigate in Nsight Systems."``
  (xla/stream_executor/cuda/cuda_timer.cc ``CudaTimer::GetElapsedDuration``; gpu_timer.cc before it, whose older
  notice was "Skipping the delay kernel, measurement accuracy will be reduced"; rocm_timer.cc prints the same at
  WARNING). It is an E record of absl/glog but reports nothing that failed: TensorFlow's and JAX's runs print it
  hundreds of times while they train (tensorflow#73487, openxla/xla#26466, read as crashes to restart). Only the
  timer's own files with the accuracy notice are read: the timer's other ERROR (a stream that could not be waited
  for, the status's message) is an error.
* TensorRT's builder times the tactics (kernel implementations) of each layer and drops those whose implementation
  check throws, logging each at ERROR as ``Error Code 9: Skipping tactic 0x... due to exception <what>``
  (``[TRT] [E] 9: Skipping tactic0x... due to exception ...`` through the Python logger; ONNX Runtime's TensorRT
  provider relays it as ``E onnxruntime: [... ERROR] Error Code: 9: Skipping tactic ...``,
  microsoft/onnxruntime#22164, read as a crash to restart). A tactic skipped is the build choosing among the ones
  left: the engine build goes on, and fails in a record of its own ("Could not find any implementation for node")
  only when none is left: a notice of the build at work, no error (read quiet; a log of skips alone is not called a
  compile running, whose end the builder's errors after it would not close). The builder's skips for want of memory
  ("due to insufficient memory") are not read here: they are the evidence of a build out of memory.
* Hugging Face's ``Trainer`` (and the trainers built on it: TRL's, LLaMA-Factory's) warns when an epoch's iterator
  yields no batch and stops the run: ``"There seems not to be a single sample in your epoch_iterator, stopping
  training at step {global_step}! This is expected if you're using an IterableDataset and set num_steps ({max_steps})
  higher than the number of available samples."`` (transformers trainer.py ``_inner_training_loop``; older releases
  word it "There seems to be not a single sample"). At step 0 the run stops without having trained on anything: a
  dataset smaller than one batch, empty or unread (RUC-GSAI/YuLan-IR#5: 9 examples for a batch of 64, read as
  healthy), which a restart reads the same: configuration. At a later step it is an iterable dataset run out, as the
  notice says: not read.
* nerfacc, gsplat and the libraries copied from them build their CUDA extension just in time on first use
  (torch.utils.cpp_extension.load) under a rich console's spinner whose text is ``"<lib>: Setting up CUDA (This may
  take a few minutes the first time)"`` (gsplat/cuda/_backend.py: ``f"gsplat: Setting up CUDA with MAX_JOBS={...}
  (This may take a few minutes the first time)"``; nerfacc's "NerfAcc: Setting up CUDA ..."), printed once, then
  nothing for minutes (nerfstudio-project/nerfacc#116, read as healthy): a compile at work, as DeepSpeed's and
  torch's own "Building extension module" are. Progress after it closes it as any compile's.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round34g_form` reads hold, besides the needles failureforms already
#: searches: the Trainer's empty epoch iterator
NEEDLES: tuple[str, ...] = ("single sample in your epoch_iterator", "Setting up CUDA")

#: the GPU timer's notice that a measurement is less accurate, in its own source files' records (absl/glog heads
#: name the file: "cuda_timer.cc:86]", "gpu_timer.cc:183]")
_TIMER_ACCURACY = re.compile(r"\b(?:cuda|gpu|rocm)_timer\.cc:\d+\]\s*(?:Delay kernel timed out: measured time has "
                             r"sub-optimal accuracy|Skipping the delay kernel, measurement accuracy will be reduced)")

#: TensorRT's builder dropping a tactic whose implementation check threw (the tactic's id may be glued to the word)
_TACTIC_SKIPPED = re.compile(r"\bSkipping tactic\s*(?:0x[0-9a-fA-F]+|\d+)? due to exception\b")

#: the nerfstudio libraries' notice of their CUDA extension's JIT build (the MAX_JOBS clause is gsplat's)
_JIT_SETUP = re.compile(r"\bSetting up CUDA(?: with MAX_JOBS=\S+)? \(This may take a few minutes the first time\)")

#: the Trainer's notice of an epoch without a batch, at step 0 (both wordings); a digit after the 0 is another step
_NO_SAMPLE_AT_START = re.compile(r"\bThere seems (?:not to be|to be not) a single sample in your epoch_iterator, "
                                 r"stopping training at step 0(?!\d)")


def round34g_quiet(text: str) -> bool:
    """Whether ``text`` is a record its program prints at ERROR whatever it reports: XLA's GPU timer on a
    measurement's accuracy, TensorRT's builder skipping a tactic whose check threw. It holds no failure."""
    return (("_timer.cc:" in text and _TIMER_ACCURACY.search(text) is not None)
            or ("Skipping tactic" in text and _TACTIC_SKIPPED.search(text) is not None))


def round34g_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "Setting up CUDA" in text and _JIT_SETUP.search(text):
        return Form(FormKind.COMPILE_RUNNING, "a CUDA extension's JIT build (the library's own notice)")
    if "epoch_iterator" in text and _NO_SAMPLE_AT_START.search(text):
        return Form(FormKind.ERROR, "a trainer that stopped at step 0: its epoch held no sample (a dataset smaller "
                    "than a batch, empty or unread)", Label.CONFIG_ERROR)
    return None


def round34g_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round34g_form(text))

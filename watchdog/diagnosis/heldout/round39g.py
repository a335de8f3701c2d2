"""Failure forms read for the misses of round issue23-heldout-39 (part G: scientific machine learning, protein
structure and docking models, interatomic potentials, physics-informed nets): TensorFlow's BFC allocator's record of
an allocation that failed and the memory dump it prints only then, Boltz's count of the examples it skipped, ColabFold's
guess of a memory shortage in front of the error it caught, Hydra's bare report of a config it cannot find, and a loss
that went NaN in DeepXDE's training table and in TensorFlow's L-BFGS summary.

Pure: no I/O. :func:`round39g_form` is asked after the forms of round 38, :func:`round39g_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

Each form is read where its program prints it:

* TensorFlow's and XLA's BFC allocator (tensorflow/core/common_runtime/bfc_allocator.cc, later
  tsl/framework/bfc_allocator.cc, ``AllocateRawInternal``) logs, when no free chunk is left and the caller logs
  the failure, ``LOG(WARNING) << "Allocator (" << Name() << ") ran out of memory trying to allocate " << size
  << " (rounded to " << rounded_bytes << ")" << "requested by op " << op`` (TF 1.x: "Ran out of memory trying to
  allocate 39.81MiB.  See logs for memory state."), then ``DumpMemoryLog``: "N Chunks of size ... totalling",
  "Sum Total of in-use chunks: ...", "Total bytes in pool: N memory_limit_: N available bytes: N ...". The dump is
  printed only for that failure, and the op fails with ResourceExhausted after it: the record or any line of its
  dump stands for the out-of-memory error when the excerpt is cut before the error (round issue23-heldout-39:
  deepmd-kit#1149 cut after "Current allocation summary follows.", deepmd-kit#3960 inside the dump, both read as
  healthy at W and I level; part B's transformers#8305, a TF model trained in a loop until the GPU had no room,
  only the chunk summary pasted: "<n> Chunks of size <bytes> totalling <size>", one per chunk size in use, read
  wherever it stands, since a program's own "splitting into chunks of size N" has no count before the words and no
  "totalling"). The allocator's other warning, "ran out of memory trying to allocate 9.84GiB with
  freed_by_count=0. The caller indicates that this is not a failure", is a caller that retries: not this form.
* Boltz (src/boltz/model/model.py ``predict_step``) catches only an out-of-memory RuntimeError, prints "| WARNING:
  ran out of memory, skipping batch" and returns ``{"exception": True}``; its writer (src/boltz/data/write/
  writer.py) counts those and prints ``f"Number of failed examples: {self.failed}"`` at the end, the command
  exiting 0 with no structure for them. A count of one or more is examples lost to device memory (round
  issue23-heldout-39: boltz#167, read as healthy). The skip warning alone is not read: fairseq and DiffDock print
  the same words while training goes on; a count of 0 is a run that lost nothing.
* ColabFold (colabfold/batch.py ``run``) catches every RuntimeError of a prediction and logs
  ``logger.error(f"Could not predict {jobname}. Not Enough GPU memory? {e}")`` through a format without a level,
  then goes on to the next query and prints "Done". The question is ColabFold's guess; the cause is the error
  after it: XLA's RESOURCE_EXHAUSTED is memory, while "DNN library initialization failed", "the provided PTX was
  compiled with an unsupported toolchain", "Couldn't get ptxas version string" or a CUDA symbol not found are a
  jax/jaxlib built for another CUDA, cuDNN or driver than the machine's, which every query meets again
  (round issue23-heldout-39: localcolabfold#236, jax for CUDA 12 on CUDA 11.8, read as healthy). Any other error
  after the question is an error of no stated cause.
* Hydra (hydra/_internal/config_loader_impl.py and defaults_list.py) raises MissingConfigException("Cannot find
  primary config '<name>'. Check that it's in your config search path.", "Primary config directory not found.",
  "In '<parent>': Could not find '<group/option>'"), and its ``run_and_report`` prints the message alone, without
  the class, above "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.": the config
  the command names is not where Hydra looks, which a restart meets again (round issue23-heldout-39:
  schnetpack-gschnet#16, a schnetpack release whose package no longer held the config, read as healthy).
* DeepXDE's training display (deepxde/display.py ``TrainingDisplay``) prints per display step a row of the step
  and its bracketed lists of train losses, test losses and test metrics ("2000      [nan]         [nan]
  [nan]"); a NaN in the train-loss list is the loss gone non-finite, and DeepXDE goes on printing it
  (round issue23-heldout-39: deepxde PR #491, read as healthy). TensorFlow's ScipyOptimizerInterface
  (tensorflow/contrib/opt external_optimizer.py, which DeepXDE's L-BFGS-B used) logs "Optimization terminated
  with:" and "  Objective function value: %f": nan there is the objective the optimizer ended on (deepxde#338).
  Both are metric forms, cleared by a finite row after them.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round39g_form` reads hold, besides the needles failureforms already
#: searches: the BFC allocator's failure and dump, Boltz's count, ColabFold's question, Hydra's messages, a NaN in
#: DeepXDE's lists and the L-BFGS summary
NEEDLES: tuple[str, ...] = (
    "(rounded to ", "See logs for memory state", "Sum Total of in-use chunks", "Total bytes in pool",
    " Chunks of size ",
    "Number of failed examples",
    "Not Enough GPU memory?",
    "Cannot find primary config", "Primary config directory not found", "': Could not find '",
    "nan]", "nan,", "Objective function value",
)

#: the BFC allocator's record of an allocation that failed, and the dump it prints only then
_BFC_FAILED = re.compile(
    r"\bran out of memory trying to allocate [\d.]+ ?[KMGTP]?i?B \(rounded to \d+\)|"
    r"(?<![A-Za-z])Ran out of memory trying to allocate [\d.]+ ?[KMGTP]?i?B\.\W*See logs for memory state|"
    r"\bbfc_allocator\.cc:\d+\] (?:Sum Total of in-use chunks: [\d.]+ ?[KMGTP]?i?B|"
    r"Total bytes in pool: \d+ memory_limit_: \d+ available bytes: \d+)|"
    r"\b\d+ Chunks of size \d+ totalling \d")

#: Boltz's writer's count of examples it skipped for memory, at a line's head or glued behind a progress bar
_FAILED_EXAMPLES = re.compile(r"(?:^|[\]|]\s?)Number of failed examples: [1-9]\d*\s*$")

#: ColabFold's guess in front of the error it caught (group 1: the error)
_COLABFOLD_COULD_NOT = re.compile(r"\bCould not predict \S+\. Not Enough GPU memory\? (\S.*)")
_COLABFOLD_MEMORY = re.compile(r"\bRESOURCE_EXHAUSTED\b|\b[Oo]ut of memory\b")
_COLABFOLD_STACK = re.compile(
    r"DNN library initialization failed|PTX was compiled with an unsupported toolchain|"
    r"Couldn't get ptxas version|Running ptxas --version returned|\bsymbol not found\b")

#: Hydra's MissingConfigException, printed bare by run_and_report (or with its class)
_HYDRA_MISSING = re.compile(
    r"^(?:hydra\.errors\.MissingConfigException: )?(?:Cannot find primary config '[^']*'\. Check that it's in "
    r"your config search path|Primary config directory not found\.|In '[^']+': Could not find '[^']+')")

#: DeepXDE's display row: a step, then a train-loss list holding nan, then the test-loss list
_DEEPXDE_ROW = re.compile(r"^\s*\d+\s+\[[^\]]*\bnan\b[^\]]*\]\s+\[")

#: TensorFlow's ScipyOptimizerInterface summary of an optimization that ended on a NaN objective
_OBJECTIVE_NAN = re.compile(r"^\s*(?:INFO:tensorflow:\s*)?Objective function value: nan\b")


def round39g_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ("memory" in text or "bfc_allocator" in text or "Chunks of size" in text) and _BFC_FAILED.search(text):
        return Form(FormKind.ERROR, "the BFC allocator's record of an allocation that failed", Label.OOM)
    if "Number of failed examples" in text and _FAILED_EXAMPLES.search(text):
        return Form(FormKind.ERROR, "Boltz skipped examples for want of device memory", Label.OOM)
    if "Not Enough GPU memory?" in text:
        match = _COLABFOLD_COULD_NOT.search(text)
        if match:
            caught = match.group(1)
            if _COLABFOLD_MEMORY.search(caught):
                return Form(FormKind.ERROR, "ColabFold could not predict a query: device memory", Label.OOM)
            if _COLABFOLD_STACK.search(caught):
                return Form(FormKind.ERROR, "ColabFold could not predict a query: jax built for another CUDA stack",
                            Label.CONFIG_ERROR)
            return Form(FormKind.ERROR, "ColabFold could not predict a query")
    if "config" in text and _HYDRA_MISSING.search(text):
        return Form(FormKind.ERROR, "Hydra cannot find the config it was asked for", Label.CONFIG_ERROR)
    if "nan" in text and (_DEEPXDE_ROW.search(text) or _OBJECTIVE_NAN.search(text)):
        return Form(FormKind.METRIC, "a loss that went non-finite (DeepXDE's table, TensorFlow's L-BFGS)",
                    Label.NUMERICAL_ERROR)
    return None


def round39g_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round39g_form(text))

"""Failure forms read for the misses of round issue23-heldout-17 (half A): TorchScript's refusal of an operator no
library registered, Open MPI's abort for an MPI call outside MPI_Init/MPI_Finalize, the TPU compile op's record of
a compilation that failed, libtpu's refusal of a TPU another user's process holds, and the Neuron collectives'
records of network buffers that could not be registered.

Pure: no I/O. :func:`round17a_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 16, and :func:`round17a_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error. (The other forms of this round extend the readers they belong to: the
second line of Open MPI's wrapped "could not access or execute an executable" help text and its errhandler's
"Your MPI job will now abort.", forms_errors._JOB_NOT_RUN; the TPU compiler's HBM report without its status,
forms_errors._XLA_OOM_REPORT; an AWS service's refusal in the Java SDK's words, forms_errors._CONTROL_PLANE_REFUSED;
horovodrun's "Neither MPI nor Gloo support has been built", heldout.round13a._NONE_BUILT.)

Each form is read where its program prints it:

* TorchScript's schema matching (torch/csrc/jit/frontend/schema_matching.cc matchSchemas' caller: ``error <<
  "Unknown builtin op: " << name << ".\\n"`` then "Could not find any similar ops to <name>. This op may not exist
  or may not be currently supported in TorchScript."): a scripted or traced model calls an operator that no loaded
  library registered -- the extension that defines it not imported (``torch_neuron``'s ``neuron::forward_*``,
  ``torchvision::nms``), a runtime plugin of another version (``tensorrt::execute_engine``), a static build whose
  linker dropped the registrations. The model cannot load in that process, whatever the retry.
* Open MPI's errors-are-fatal handler (ompi/errhandler/errhandler_predefined.c, "Per #2152"): "*** The %s()
  function was called before MPI_INIT was invoked." / "... after MPI_FINALIZE was invoked.", "*** An MPI function
  was called before MPI_INIT was invoked.", then "*** This is disallowed by the MPI standard." and "*** Your MPI job
  will now abort.": the program (or a library linked into it in the wrong order) calls MPI outside the library's
  lifetime, a mistake every run repeats.
* TensorFlow's TPU compile op (tensorflow/core/tpu/kernels/tpu_compile_op_common.cc, the file each record names):
  an INFO record "Compilation of <key> with session name <name> took <duration> and failed" closes a compilation
  whose status was an error (it says "and succeeded" otherwise): the model's XLA compilation for the TPU failed,
  before the fatal record or the status that follow it (round issue23-heldout-17: tensorflow-50980).
* libtpu's device lock (the TPU runtime's initializer, as JAX and TensorFlow print it: "libtpu.so already in use by
  another process probably owned by another user. Run "$ sudo lsof -w /dev/accel0" to figure out which process is
  using the TPU. Not attempting to load libtpu.so in this process."; later "The TPU is already in use by another
  process probably owned by another user. ... If you still get this message, run "$ sudo rm
  /tmp/libtpu_lockfile"."): the lock is held by a process, or was left by one, of another user, so this job runs
  without its TPU (JAX then falls back to the CPU): a device held elsewhere, as a NeuronCore in use is. The
  same-user wording ("already in use by process with pid N", or torch_xla's child processes finding their parent's
  lock) names no foreign holder and is left alone.
* the Neuron collectives' network engine (the Neuron runtime's log records, "<date> <pid>:<tid> ERROR ENC:<function>
  <message>"): "failed neuronNetRegMr request to NCCL", "[rank r, channel c] failed to register channel buffer",
  "failed to configure network connector for RING": the EFA transport refused the collectives' buffers, and the
  collectives cannot run over it (round issue23-heldout-17: aws-neuron-parallelcluster-samples-25). When the
  refusal states EINVAL the reader of memory registrations takes it as the node's software
  (failureforms._REGISTRATION); without an errno it is the transport's.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free, each with a marker character of the classifier's batch search before its last: a
#: capital, a quote, a "w") that the lines these forms read hold, besides the failure forms' needles they hold
#: already ("Error" in an exception's line, "ERROR" in the Neuron runtime's records); the failure forms' needles
#: include them.
NEEDLES: tuple[str, ...] = ("Unknown builtin op", "function was called", "Compilation of ", 'Run "$ sudo lsof',
                            "Neither ")

#: TorchScript's refusal of an operator no library registered ("Unknown builtin op: torchvision::nms."); not after a
#: letter, but after markdown's "_" of a message pasted in italics (aws-neuron-sdk-240) as after a line's start
_UNKNOWN_OP = re.compile(r"(?<![A-Za-z])Unknown builtin op: \w+::\w+")
#: Open MPI's errhandler for an MPI call outside the library's lifetime
_MPI_OUTSIDE_LIFETIME = re.compile(r"\b(?:The \w+\(\) function|An MPI function) was called "
                                   r"(?:before MPI_INIT|after MPI_FINALIZE) was invoked\b")
#: the TPU compile op's record of a compilation that ended in an error
_TPU_COMPILE_FAILED = re.compile(r"\bCompilation of \S+ with session name .*? took \S+ and failed\b")
#: libtpu's refusal of a TPU whose lock another user's process holds
_TPU_HELD_BY_OTHER_USER = re.compile(
    r"\b(?:libtpu\.so|The TPU is) already in use by another process probably owned by another user\b")
#: the Neuron collectives' network engine refusing its buffers
_COLLECTIVES_NET_REFUSED = re.compile(
    r"\bfailed \w*NetRegMr request\b|\bfailed to register channel buffer\b|"
    r"\bfailed to configure network connector for \w+")


def round17a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "builtin op" in text and _UNKNOWN_OP.search(text):
        return Form(FormKind.ERROR, "TorchScript's refusal of an operator no loaded library registered",
                    Label.CONFIG_ERROR)
    if "was called" in text and _MPI_OUTSIDE_LIFETIME.search(text):
        return Form(FormKind.ERROR, "Open MPI's abort for an MPI call before MPI_Init or after MPI_Finalize",
                    Label.CONFIG_ERROR)
    if "Compilation of" in text and _TPU_COMPILE_FAILED.search(text):
        return Form(FormKind.ERROR, "the TPU compile op's record of a compilation that failed", Label.COMPILE_ERROR)
    if "another user" in text and _TPU_HELD_BY_OTHER_USER.search(text):
        return Form(FormKind.ERROR, "libtpu refusing a TPU another user's process holds", Label.CONFIG_ERROR)
    return None


def round17a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in these forms (whatever its level: the line is an error already)."""
    if (stated := stated_cause(round17a_form(text))) is not None:
        return stated
    if _COLLECTIVES_NET_REFUSED.search(text):
        return Label.COMM_ERROR, "the Neuron collectives' network transport refusing their buffers"
    return None

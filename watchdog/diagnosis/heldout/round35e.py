"""Failure forms read for the misses of round issue23-heldout-35 (part E: TensorFlow 2 and Keras 3 distributed):
TensorFlow's statuses of a tensor it could not allocate, of an op its build has no kernel for, of collective groups
the workers set up unlike, of a collective aborted under a peer's failure, and of an input pipeline that ran out
inside a step.

Pure: no I/O. :func:`round35e_form` is asked after the forms of round 34, :func:`round35e_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

Each form is read in the words TensorFlow's sources give the status, wherever the line carries it (a raised
exception, an absl record, a server's JSON answer, a status group's entry):

* ``OpKernelContext::allocate_tensor`` (tensorflow/core/framework/op_kernel.cc) fails a step whose output the
  allocator cannot give with ``errors::ResourceExhausted("OOM when allocating tensor with shape", shape, " and type ",
  dtype, " on ", device, " by allocator ", name)``. The words are the status's own, so they say device memory
  wherever they are printed: TensorFlow Serving returns them in its REST answer (``{'error': 'OOM when allocating
  tensor with shape[150,256,160,160] ... by allocator GPU_0_bfc ...``, tensorflow/serving#1107, read as healthy).
* ``FindKernelRegistration`` (tensorflow/core/framework/op_kernel.cc) refuses a node whose op has no kernel for the
  devices at hand: ``No OpKernel was registered to support Op 'NcclAllReduce' used by {{node ...}} with these attrs:
  [...]`` and the kernels it does know ("Registered kernels: <no registered kernels>"). The build in use lacks the
  op on this platform (NCCL's all-reduce on Windows, tensorflow#44281; a GPU op on a CPU-only build): the set-up,
  which a restart repeats. XLA's refusal of an op it cannot compile for a device is worded otherwise ("No registered
  'X' OpKernel for XLA_TPU_JIT devices") and stays a compile error.
* The collective parameter resolver (tensorflow/core/common_runtime/collective_param_resolver_local.cc) refuses an
  instance whose group does not match the group already formed under its key: ``Collective Op <name> has
  group_size 8 and group_key 2 but that group has size 4`` (TF 1.x-2.4), ``Device <dev> is joining a group with
  size 8, but that group has size 4 (group_key=2)`` (later releases), and the same for the device type ("but that
  group has type", "is joining a group with incompatible device type"). MultiWorkerMirroredStrategy's workers with
  unlike GPU counts meet it ("The same number of GPUs is expected in each node", a multi-worker guide's
  troubleshooting; tensorflow#33979, read as healthy): the cluster's set-up, which a restart repeats.
* ``BaseCollectiveExecutor::StartAbort`` (tensorflow/core/common_runtime/base_collective_executor.cc) derives the
  status every pending collective fails with from the first failure: ``Collective ops is aborted by: <its message>
  \\nThe error could be from a previous operation. Restart your program to reset.``. It is printed where the abort
  is reported (the gRPC error JSON of a remote worker's call: yahoo/TensorFlowOnSpark#607, read as healthy), and
  says a failure; the peer's words inside it ("Socket closed", "failed to connect to all addresses", a reset or
  refused connection) name the transport. An abort for a dataset's end ("End of sequence") is how an input ends.
* An input pipeline that ran out inside a step raises ``OutOfRangeError`` with the iterator's status ``End of
  sequence`` (tensorflow/core/kernels/data/iterator_ops.cc) where the training loop does not end the epoch on it:
  TPUEstimator's infeed and the TF 1.x sessions print ``OutOfRangeError (see above for traceback): End of
  sequence`` (tensorflow/tpu#159, google-research/bert#486) or ``Error recorded from infeed: End of sequence``, and
  its infeed thread's warning ("Error occurred during infeed/outfeed. This may be due to a compile error in the main
  session. ...", tpu_estimator.py) puts the status's message on a line of its own (tensorflow/tpu#132). A dataset
  shorter than the steps asked of it (no repeat, TFRecords empty, missing or unlike what the input function
  expects): a restart reads the same files to the same end. The records TensorFlow prints as a dataset ends in
  a healthy epoch ("W ... op_kernel.cc] Out of range: End of sequence", "Local rendezvous is aborting with status:
  OUT_OF_RANGE: End of sequence", "BaseCollectiveExecutor::StartAbort Out of range: End of sequence") are not read.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round35e_form` reads hold, besides the needles failureforms already
#: searches: the allocator's OOM status, the kernel registry's refusal, the collective group resolver's refusals,
#: the collective executor's abort, the iterator's end
NEEDLES: tuple[str, ...] = ("OOM when allocating tensor", "No OpKernel was registered", "but that group has",
                            "joining a group with incompatible", "Collective ops is aborted by", "End of sequence")

#: the allocator's status for a tensor it could not give (the shape follows, bracketed, with or without a space)
_TF_OOM_STATUS = re.compile(r"\bOOM when allocating tensor with shape ?\[")

#: the kernel registry's refusal of an op without a kernel for the devices at hand (the op's name quoted)
_NO_KERNEL = re.compile(r"\bNo OpKernel was registered to support Op '[\w>.-]+'")

#: the collective group resolver's refusals of an instance whose group's size or device type differs
_GROUP_UNLIKE = re.compile(r"\bhas group_size \d+ and group_key ?\d+ but that group has size \d+|"
                           r"\bis joining a group with size ?\d+, but that group has size \d+|"
                           r"\bbut that group has type \w+|\bis joining a group with incompatible device type\b")

#: the collective executor's derived status, with the first failure's message after it
_COLLECTIVE_ABORTED = re.compile(r"\bCollective ops is aborted by: (?:Collective ops is aborted by: )*(.{0,120})")
#: ... whose message names the transport: the peer's connection gone or never made
_PEER_WORDS = re.compile(r"(?i:\bsocket closed\b|\bfailed to connect to all addresses\b|\bconnection (?:reset|refused|"
                         r"closed|timed out)\b|\bunavailable\b|\bconnect(?:ion)? failed\b|\bbroken pipe\b)")

#: an iterator's end raised out of a step: the exception's class with its status ("OutOfRangeError: End of sequence",
#: "OutOfRangeError (see above for traceback): End of sequence"), TPUEstimator's record of it, or the status's
#: message alone on its line (the infeed warning prints it so)
_INPUT_RAN_OUT = re.compile(r"\bOutOfRangeError\b(?: \(see above for traceback\))?: End of sequence\b|"
                            r"\bError recorded from (?:infeed|outfeed|training_loop): End of sequence\b|"
                            r"^\s*End of sequence\s*$")


def round35e_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "OOM when allocating tensor" in text and _TF_OOM_STATUS.search(text):
        return Form(FormKind.ERROR, "TensorFlow's allocator could not give a tensor (OOM when allocating)", Label.OOM)
    if "No OpKernel was registered" in text and _NO_KERNEL.search(text):
        return Form(FormKind.ERROR, "an op TensorFlow's build has no kernel for on these devices (the build or the "
                    "platform lacks it)", Label.CONFIG_ERROR)
    if ("that group has" in text or "joining a group" in text) and _GROUP_UNLIKE.search(text):
        return Form(FormKind.ERROR, "a collective group the workers set up unlike (its size or device type differs "
                    "between them)", Label.CONFIG_ERROR)
    if "Collective ops is aborted by" in text:
        aborted = _COLLECTIVE_ABORTED.search(text)
        if aborted is not None and not aborted.group(1).startswith("End of sequence"):
            peer = _PEER_WORDS.search(aborted.group(1)) is not None
            return Form(FormKind.ERROR, "TensorFlow's collectives aborted by a failure" + (" of a peer's connection"
                        if peer else ""), Label.COMM_ERROR if peer else None)
    if "End of sequence" in text and _INPUT_RAN_OUT.search(text):
        return Form(FormKind.ERROR, "an input pipeline that ran out inside a step (a dataset shorter than the steps "
                    "asked of it)", Label.CONFIG_ERROR)
    return None


def round35e_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round35e_form(text))

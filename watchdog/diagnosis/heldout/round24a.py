"""Failure forms read for the misses of round issue23-heldout-24 (half A): a transport library that found no
libfabric provider, an MPI process that stopped before MPI was initialised, and numbers or exceptions that say
the training is numerically broken in two frameworks' own words.

Pure: no I/O. :func:`round24a_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 23, and :func:`round24a_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error.

Each form is read where its program prints it:

* aws-ofi-nccl's functional tests (tests/functional: nccl_message_transfer, nccl_connection, ring) log through
  their own ``logger``: ``printf("WARN: Function: %s Line: %d: ", filefunc, line)`` then the message, and their
  ``OFINCCLCHECK`` reports a failed plugin call as ``NCCL_OFI_WARN("OFI NCCL failure: %d", res)``. A WARN of
  that logger is the plugin's warning as NCCL's "NCCL WARN" is: an error line, whose cause the plugin's words
  state (errorclass reads "NET/OFI Couldn't find any optimal provider", fi_getinfo's FI_ENODATA, as no fabric
  for this process). Round issue23-heldout-24: aws-ofi-nccl#67, a p4d test that found no EFA provider, read as
  healthy; the same logger's "Couldn't open AV. RC: -22" in aws-ofi-nccl#22 (round 2).
* oneCCL's ATL over libfabric (src/atl/ofi/atl_ofi.cpp, atl_ofi_helper.cpp) logs ``|CCL_ERROR|`` records when
  no provider serves it: ``atl_ofi_get_prov_list: fi_getinfo error: ret -61, providers 0`` (fi_getinfo's
  -FI_ENODATA), ``can't create providers for name <prov>``, ``can not open network providers`` and, at its
  ``err:`` label, ``LOG_ERROR("can't find suitable provider")``, before the exception "failed to initialize
  ATL". The fabric it was told to use is not there for this process (a provider named by FI_PROVIDER that
  the host or the container does not offer, a shm provider without /dev/shm): the set-up, which a restart
  meets again, as errorclass reads fi_getinfo's FI_ENODATA in libfabric's and aws-ofi-nccl's words. Round
  issue23-heldout-24: ipex-llm#11877 and #11881 (vLLM on Intel GPUs in a container started without
  --shm-size), restarted; intel-extension-for-pytorch#810 prints the same record for psm3.
* Open MPI's process that aborts before MPI is initialised: ompi_mpi_abort, when the runtime is not up,
  prints ``[host:pid] Local abort before MPI_INIT completed completed successfully, but am not able to
  aggregate error messages, ...`` (ompi/runtime/ompi_mpi_abort.c, "before MPI_INIT completed" against
  "after MPI_FINALIZE started"); the predefined MPI_ERRORS_ARE_FATAL handler names the call it failed in,
  ``*** An error occurred in MPI_Init_thread`` / ``*** on a NULL communicator``
  (ompi/errhandler/errhandler_predefined.c); and the runtime's ORTE_ERROR_LOG records, printed before the
  process has a name, carry the invalid name ``[[INVALID],INVALID]`` (orte_init and its ess and plm
  components failing at start-up). Each is MPI failing to start the program, not the program failing: the
  launch environment (no PMIx server for a direct launch, no ssh/rsh agent, an installation moved from its
  prefix), read as MPICH's fatal error in MPI_Init already is (heldout.round15a). Round issue23-heldout-24:
  yjxiong/caffe#218, firemodels/fds#6346, open-mpi/ompi#6533, all restarted; the corpus's deepmimic-85,
  mpi4py-141 and shapepipe-744 carry the same records.
* Keras's TerminateOnNaN callback (keras/src/callbacks/terminate_on_nan.py; tf.keras callbacks.py) prints
  ``Batch {batch}: Invalid loss, terminating training`` when a batch's loss is NaN or inf: the framework's own
  words for a non-finite loss. Round issue23-heldout-24: keras#6747 (the line alone), read as healthy; the
  same callback in Hey-Jetson#7 and keras-tuner#442.
* PaddlePaddle's AmpScaler (python/paddle/amp/grad_scaler.py, fluid/dygraph/amp/loss_scaler.py) prints ``Found
  inf or nan, current scale is: {scale}, decrease to: {scale}*{decr_ratio}`` each time it lowers the loss
  scale; it has no floor, so a scale that keeps falling reaches values no fp16 gradient can use. The scale it
  decreases to (the product) below fp16's smallest subnormal, 2**-24 (the floor forms_metric reads in other
  scalers' words), is a loss scale collapsed to nothing: the gradients are not finite at any scale. At a
  usable scale (32768.0, Paddle#37021) the record is dynamic loss scaling at work. Round issue23-heldout-24:
  PaddleOCR#6848 (2.8e-14), read as healthy; PaddleClas#2457 (5.96e-08, solved by turning AMP off).
* IPython's traceback (IPython/core/ultratb.py, as Jupyter and Colab print a cell's exception) opens with a
  rule and the exception's type padded before ``Traceback (most recent call last)``: the type is named at the
  head, before the frames, so a paste cut before the last line still says which exception was raised. Read
  here only for the class that is a cause by itself, FloatingPointError: what NumPy's seterr(all="raise") and
  JAX's debug_nans/debug_infs checks raise for a NaN or inf (jax/_src/dispatch.py check_special); any other
  class is left to its traceback's last line, which says more (an XlaRuntimeError's status, a NotFoundError's
  message). Round issue23-heldout-24: mujoco#1484 (MJX under jax_debug_nans, cut inside the frames), read as
  healthy; jax#9092's head in the corpus.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind
from neuron_watch.events import Label

#: The literals (digit-free) that the lines :func:`round24a_form` reads hold, besides the needles failureforms
#: already searches ("ERROR" holds the ORTE_ERROR_LOG record, "Error" the IPython head, "loss" Keras's words;
#: each literal more is a cost of the classifier's batch search on every line)
NEEDLES: tuple[str, ...] = ("WARN: Function: ", "before MPI_INIT completed", "An error occurred in MPI_Init",
                            "current scale is")

#: a WARN record of aws-ofi-nccl's functional-test logger ("WARN: Function: <function> Line: <n>: <message>"),
#: behind whatever prefix a launcher adds (pdsh's "<host>: ", mpirun's "[1,0]<stdout>:")
_OFI_TEST_WARN = re.compile(r"(?:^|[\s:>])WARN: Function: \S+ Line: \d+: \S")

#: oneCCL's ATL records of a libfabric provider it could not get (each a |CCL_ERROR| record of atl_ofi)
_CCL_NO_PROVIDER = re.compile(r"\|CCL_ERROR\|.*?(?:\bcan't find suitable provider\b|\bcan not open network providers\b|"
                              r"\bcan't create providers for name\b|\bfi_getinfo error: ret -61\b)")

#: Open MPI's abort of a process whose runtime never came up
_OMPI_ABORT_BEFORE_INIT = re.compile(r"\bLocal abort before MPI_INIT completed\b")
#: ... the fatal handler's report of the call that failed, when that call is MPI's initialisation
_OMPI_INIT_FAILED = re.compile(r"^\s*\*\*\* An error occurred in MPI_Init(?:_thread)?\s*$")
#: ... and the runtime's error record of a process that has no name yet
_ORTE_UNNAMED = re.compile(r"\[\[INVALID\],INVALID\] ORTE_ERROR_LOG: \S")

#: Keras's TerminateOnNaN (no word boundary before it: the callback prints on the progress bar's line, after its
#: last metric's digits, "accuracy: 0.2188Batch 1: ...")
_KERAS_INVALID_LOSS = re.compile(r"Batch \d+: Invalid loss, terminating training\b")

#: Paddle's AmpScaler lowering its loss scale (the spaces after the commas as printed; pasted copies drop them)
_NUMBER = r"([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)"
_PADDLE_SCALE = re.compile(rf"\bFound inf or nan, ?current scale is: ?{_NUMBER}, ?decrease to: ?{_NUMBER}\*{_NUMBER}")
#: fp16's smallest subnormal: a loss scale below it leaves no gradient representable
_SCALE_FLOOR = 2.0 ** -24

#: the head of an IPython traceback of a FloatingPointError: the class, two or more spaces of padding, the banner
_IPYTHON_NAN_HEAD = re.compile(r"^\s*FloatingPointError\s{2,}Traceback \(most recent call last\)\s*$")


def round24a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "Function: " in text and _OFI_TEST_WARN.search(text):
        return Form(FormKind.ERROR, "a WARN of aws-ofi-nccl's test logger")
    if "MPI_INIT" in text and _OMPI_ABORT_BEFORE_INIT.search(text):
        return Form(FormKind.CRASH, "an MPI process that aborted before MPI_INIT completed (Open MPI)",
                    Label.CONFIG_ERROR)
    if "MPI_Init" in text and _OMPI_INIT_FAILED.search(text):
        return Form(FormKind.CRASH, "Open MPI's fatal error in MPI_Init", Label.CONFIG_ERROR)
    if "INVALID" in text and _ORTE_UNNAMED.search(text):
        return Form(FormKind.ERROR, "an Open MPI runtime error before the process had a name (start-up)",
                    Label.CONFIG_ERROR)
    if "Invalid loss" in text and _KERAS_INVALID_LOSS.search(text):
        return Form(FormKind.METRIC, "a loss Keras's TerminateOnNaN found not finite")
    if "FloatingPointError" in text and _IPYTHON_NAN_HEAD.search(text):
        return Form(FormKind.METRIC, "an IPython traceback of a FloatingPointError (a NaN or inf check)")
    if "current scale" in text:
        scale = _PADDLE_SCALE.search(text)
        if scale is not None and float(scale.group(2)) * float(scale.group(3)) < _SCALE_FLOOR:
            return Form(FormKind.METRIC, "a loss scale Paddle's AmpScaler lowered to nothing")
    return None


def round24a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    if "CCL_ERROR" in text and _CCL_NO_PROVIDER.search(text):
        return Label.CONFIG_ERROR, "oneCCL's ATL finding no libfabric provider"
    form = round24a_form(text)
    return None if form is None or form.label is None else (form.label, form.name)

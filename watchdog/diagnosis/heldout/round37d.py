"""Failure forms read for the misses of round issue23-heldout-37 (part D: the AWS Neuron ecosystem, inference side): the
Neuron runtime daemon's return code as the frameworks that call it print it, the frames of TVM's compiler library in
a native backtrace, and torch-neuron's report of a compiler that failed on a subgraph.

Pure: no I/O. :func:`round37d_form` is asked after the forms of round 36, :func:`round37d_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

Each form is read where its program prints it:

* The inf1 runtime daemon (neuron-rtd, and the kernel-mode runtime before it, KRTD) answers every request with a
  return code of its documented table (the Neuron runtime return codes: NERR_INVALID 2, NERR_TIMEOUT 5,
  NERR_RESOURCE_NC 9, NERR_UNSUPPORTED_VERSION 10, NERR_INFER_BAD_INPUT 1002, NERR_INFER_COMPLETED_WITH_NUM_ERR
  1003, ...), and the frameworks that call it print the number after the daemon's name: MXNet-Neuron's failed
  ``CHECK`` (``Failed to create NEURONCORE_GROUP with Neuron-RTD Error. Neuron-RTD Status Code: 9``, ``Infer Wait
  with Neuron-RTD Error. Neuron-RTD Status Code: 1002``, ``KRTD Status Code: 4``), tensorflow-neuron's shard error
  (``nrt::infer_wait failed with grpc status code 0, error message ""; nrt status code 1004``). The runtime's own
  forms (``status=<n> message=``, ``Failure: NRT_<NAME>``) are read by failureforms; these name the same codes in
  the client's words (round issue23-heldout-37: MXNet-Neuron's troubleshooting guide, status 9 after models were
  unloaded, the cores still held, and 1002, an input larger than the compiled shape, both read as crashes to
  restart; aws-neuron-sdk#429 prints 1004 in tensorflow-neuron's words). Only the codes whose cause is the code's:
  an invalid or too new NEFF, too few NeuronCores free, inputs the compiled model does not take (configuration), a
  timeout (a hang), NaN produced. NERR_RESOURCE (4) is any resource (the daemon answers it for a NeuronCore group
  it cannot make as for memory) and NERR_HW_ERROR (6) is a runtime that failed to start (hugepages as often as the
  device): no cause of their own; the codes the table does not name, none.
* TVM (and neuron-cc, which compiles with it) reports an error with dmlc-core's backtrace, one frame a line:
  ``[bt] (<n>) <library>(<symbol>+0x<offset>) [0x<address>]``. Frames in ``libtvm.so``, TVM's compiler library,
  are the compiler's stack: the compile failed (round issue23-heldout-37: aws-neuron-sdk#639, a GPT-2 compiled for
  inf1 whose paste holds only these frames, read as a crash to restart; aws-neuron-sdk#807 and tvm#6405 print them
  under neuron-cc's and Relay's error). TVM's runtime library (``libtvm_runtime.so``) runs compiled models, and
  other programs print the same backtrace (MXNet's ``libmxnet.so``, XGBoost's ``libxgboost.so``): their frames are
  not read here.
* torch-neuron runs neuron-cc on each subgraph its partitioner makes and raises, when the compiler fails,
  ``subprocess.SubprocessError('neuron-cc failed with the following command line call:\\n{}'.format(command))``
  (torch_neuron/decorators.py ``trace``), which its converter logs (``ERROR:Neuron:neuron-cc failed with the
  following command line call:``, read by the signature table) and its traceback ends with: the compiler failed on
  the graph (round issue23-heldout-37: aws-neuron-sdk#410, a TrOCR model traced for inf1, read as a crash to
  restart). The same words from neuronx-cc's wrappers are read the same.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round37d_form` reads hold, besides the needles failureforms already
#: searches: the daemon's return code in its clients' words, a frame of TVM's compiler library, torch-neuron's failed
#: compiler call
NEEDLES: tuple[str, ...] = ("Status Code", "status code", "/libtvm.so(", "failed with the following command line call")

#: the daemon's return code after the daemon's name, as its clients print it
_DAEMON_CODE = re.compile(r"\b(?:Neuron-RTD|KRTD|NRTD|nrt) [Ss]tatus [Cc]ode:? (\d+)\b")
#: the return codes whose cause is the code's (the runtime return-code table's names)
_DAEMON_CAUSES: dict[int, tuple[Label, str]] = {
    2: (Label.CONFIG_ERROR, "NERR_INVALID (an invalid or corrupted NEFF)"),
    5: (Label.COLLECTIVE_HANG, "NERR_TIMEOUT (a request that timed out)"),
    9: (Label.CONFIG_ERROR, "NERR_RESOURCE_NC (not enough NeuronCores free for the model)"),
    10: (Label.CONFIG_ERROR, "NERR_UNSUPPORTED_VERSION (a NEFF this runtime does not support)"),
    1002: (Label.CONFIG_ERROR, "NERR_INFER_BAD_INPUT (inputs the compiled model does not take)"),
    1003: (Label.NUMERICAL_ERROR, "NERR_INFER_COMPLETED_WITH_NUM_ERR (NaN produced)"),
}

#: a frame of dmlc-core's backtrace in TVM's compiler library (not its runtime library, libtvm_runtime.so)
_TVM_FRAME = re.compile(r"^\s*\[bt\] \(\d+\) \S*/libtvm\.so\(")

#: torch-neuron's (and neuronx-cc wrappers') report of the compiler failing on a graph
_COMPILER_CALL_FAILED = re.compile(r"\bneuronx?-cc failed with the following command line call\b")


def round37d_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ("tatus " in text and (daemon := _DAEMON_CODE.search(text)) is not None
            and (known := _DAEMON_CAUSES.get(int(daemon.group(1)))) is not None):
        return Form(FormKind.ERROR, f"the Neuron runtime daemon's return code {daemon.group(1)}, {known[1]}",
                    known[0])
    if "/libtvm.so(" in text and _TVM_FRAME.search(text):
        return Form(FormKind.CRASH, "a frame of TVM's compiler library in a native backtrace (the compiler's stack)",
                    Label.COMPILE_ERROR)
    if "failed with the following command line call" in text and _COMPILER_CALL_FAILED.search(text):
        return Form(FormKind.ERROR, "the Neuron compiler failing on a graph torch-neuron gave it",
                    Label.COMPILE_ERROR)
    return None


def round37d_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round37d_form(text))

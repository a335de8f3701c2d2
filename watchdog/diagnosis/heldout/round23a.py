"""Failure forms read for the misses of round issue23-heldout-23 (half A): torch-neuron's compile of a graph by
neuron-cc, begun and ended, and a gRPC status that an RPC client's own record carries as a number.

Pure: no I/O. :func:`round23a_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 22, and :func:`round23a_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error.

Each form is read where its program prints it:

* torch-neuron's (and tensorflow-neuron's) trace hands each graph it partitioned to the neuron-cc compiler and
  logs it through its Python logger, ``logging.getLogger("Neuron")``: ``INFO:Neuron:Compiling function
  _NeuronGraph$<n> with neuron-cc`` (then ``Compiling with command line: '<neuron-cc compile ...>'``), and when
  the compiler process exits, ``Compile command returned: <its exit code>``. A log that ends after the first and
  before the second ends inside a compile that can run for hours (round issue23-heldout-23:
  aws-neuron-sdk#352, neuron-cc printing dots for more than eight hours after it, read as healthy). The record
  of the start is a beat of a compile at work, the record of the exit code its end, whatever the code: a
  non-zero code is read by its own rule (the table's ``-9``, an OOM kill) or by the compiler's error records
  printed before it.
* A gRPC call's failure as C++ RPC clients log it, ``<call> meets grpc error, error_code:<n> error_message:<the
  status's message>`` (PaddlePaddle's distributed grpc_client.cc, ``LOG(FATAL)`` of ``status.error_code()``,
  ``error_message()`` and ``error_details()`` after a DEADLINE_EXCEEDED; the same sentence at ERROR in other
  parameter-server trainers' grpc_client.h): the number is grpc::StatusCode's
  (include/grpcpp/support/status_code_enum.h, the same numbers as the core's grpc_status_code), so it names the
  cause as the status word would. Read with the
  codes failureforms reads in gRPC's own error strings (DEADLINE_EXCEEDED 4, UNAVAILABLE 14: the peer or the
  link; NOT_FOUND 5, PERMISSION_DENIED 7, UNIMPLEMENTED 12, UNAUTHENTICATED 16: the request is wrong for this
  set-up); the others (INTERNAL 13, UNKNOWN 2, ...) say nothing of a cause (round issue23-heldout-23:
  Paddle#21881, a trainer's RPC to its parameter server read as a plain crash).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind
from neuron_watch.events import Label

#: The literals (digit-free, each from a marker character of the classifier's batch search: "w", "C") that the
#: lines :func:`round23a_form` reads hold
NEEDLES: tuple[str, ...] = ("with neuron-cc", "Compile command returned: ")

#: torch-neuron's record of a graph handed to neuron-cc (the graph's name as its partitioner names it,
#: "_NeuronGraph$<n>", or any name the caller gave)
_NEURON_CC_STARTED = re.compile(r"\bCompiling function \S+ with neuron-cc\s*$")
#: ... and of the compiler process's exit code
_NEURON_CC_RETURNED = re.compile(r"\bCompile command returned: -?\d+\s*$")

#: a gRPC status number in an RPC client's record of a failed call (the words before it name gRPC, so a number
#: called error_code elsewhere is not read as a gRPC status)
_GRPC_CLIENT_STATUS = re.compile(r"(?i:\bgrpc\b)[^\n]{0,60}?\berror_code\s*[:=]\s*(\d+)\b")
#: grpc::StatusCode numbers whose cause does not depend on the service (failureforms' reading of gRPC's error
#: strings keeps the same set: RESOURCE_EXHAUSTED is as often a message over gRPC's size limit as memory)
_GRPC_CODE_CAUSES: dict[int, tuple[Label, str]] = {
    4: (Label.COMM_ERROR, "DEADLINE_EXCEEDED"), 14: (Label.COMM_ERROR, "UNAVAILABLE"),
    5: (Label.CONFIG_ERROR, "NOT_FOUND"), 7: (Label.CONFIG_ERROR, "PERMISSION_DENIED"),
    12: (Label.CONFIG_ERROR, "UNIMPLEMENTED"), 16: (Label.CONFIG_ERROR, "UNAUTHENTICATED"),
}


def round23a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "neuron-cc" in text and _NEURON_CC_STARTED.search(text):
        return Form(FormKind.COMPILE_RUNNING, "a graph torch-neuron handed to neuron-cc")
    if "Compile command" in text and _NEURON_CC_RETURNED.search(text):
        return Form(FormKind.COMPILE_DONE, "neuron-cc's exit, as torch-neuron records it")
    return None


def round23a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    if "error_code" in text:
        grpc = _GRPC_CLIENT_STATUS.search(text)
        if grpc is not None and (known := _GRPC_CODE_CAUSES.get(int(grpc.group(1)))) is not None:
            return known[0], f"a gRPC status {known[1]} ({grpc.group(1)}) in an RPC client's record"
    return None

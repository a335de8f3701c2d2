"""Failure forms read for the misses of round issue23-heldout-40 (part F: communication backends other than the plain
NCCL defaults: MPI launchers, Horovod, Gloo, oneCCL, UCX, libfabric): NCCL's result under the "<call> failed:"
wrapper of Horovod and the libraries that copied it, Gloo refusing an interface or host it finds no address for,
Open MPI's runtime unpacking a message longer than the one its peer packed, and TensorFlow 1.x's summary of an
error when a paste indents it.

Pure: no I/O. :func:`round40f_form` is asked after the forms of round 39, :func:`round40f_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error (an exception
line, an ``ORTE_ERROR_LOG`` record).

Each form is read where its program prints it:

* Horovod checks every NCCL call it makes and throws the call's name and NCCL's result string
  (horovod/common/ops/nccl_operations.cc ``NCCLContext::ErrorCheck``: ``throw std::logic_error(std::string(op_name)
  + " failed: " + ncclGetErrorString(nccl_result))``; its op names are the NCCL calls, "ncclAllReduce",
  "ncclBroadcast", "ncclAllGather", "ncclReduceScatter", "ncclGroupEnd", "ncclCommInitRank"). Other libraries copy
  the wrapper with the whole call as the expression (``check_nccl(ncclAllReduce(...), "ncclAllReduce(...)")``:
  "<expression> failed: <string>"). TensorFlow prints Horovod's exception as ``UnknownError (see above for
  traceback): ncclAllReduce failed: invalid data type``, PyTorch as ``RuntimeError: ncclAllReduce failed: ...``.
  The string names the cause as round 29 part C's reader of the other wrappers reads it (heldout.round29c
  NCCL_CAUSES): the transport or a peer (system, internal, remote), a CUDA call inside NCCL, a mistake in the call
  (usage, argument, rank, data type, device pointer). Horovod's troubleshooting guide names "ncclAllReduce failed:
  invalid data type" as Horovod linked against the wrong NCCL (round issue23-heldout-40 part F: read as healthy,
  its line indented in the guide's literal block; unindented it was a crash of no cause). Only the wrapper at the
  head of a message (a line's start, after an exception's ``Class: `` or TensorFlow's ``): ``) is the form.
* Gloo's TCP device finds the address it binds to from the interface it is given (GLOO_SOCKET_IFNAME, or the
  interface of the address the hostname resolves to) and refuses one it cannot find
  (gloo/transport/tcp/device.cc: ``GLOO_ENFORCE(ifa != nullptr, "Unable to find address for: ", iface)`` in the
  interface lookup, ``GLOO_ENFORCE(rp != nullptr, "Unable to find address for: ", hostname)`` when no address of
  the hostname can be bound), printed as ``[enforce fail at .../gloo/transport/tcp/device.cc:<n>] ifa != nullptr.
  Unable to find address for: <name>``. The name is an interface that does not exist or has no address (NCCL's
  exclusion list "^lo,docker" given to Gloo, a bond slave, "eth0" on a host whose interfaces have other names) or
  a hostname that resolves to no local address: the job's network setting, which every restart meets again
  (aws-samples/aws-do-eks#51, round issue23-heldout-40 part F: read as a crash and restarted). Only the line with
  the failed check (``ifa != nullptr.``/``rp != nullptr.``) or an exception's ``Class: `` before the words is the
  form: other programs print the same words as a message of their own.
* Open MPI's runtime (ORTE, and PMIx after it) packs its control messages with its data-serialisation service and
  reports an unpack that runs past the end of the buffer it received (opal/dss/dss_unpack.c
  OPAL_ERR_UNPACK_READ_PAST_END_OF_BUFFER, opal_err2str "Data unpack would read past end of buffer"; the
  ``ORTE_ERROR_LOG: <string> in file <file> at line <n>`` records and ``FORCE-TERMINATE AT Data unpack would read
  past end of buffer:-26 - error grpcomm_direct.c(<n>)``). A peer packed a message of another layout: the nodes run
  different builds of Open MPI (Ralph Castain, users list, "Re: mpirun error in OpenMPI 1.5", 2010: "version
  confusion on the backend nodes"), or a library it packs with differs (Horovod's troubleshooting guide: the wrong
  hwloc installed, "purge hwloc and reinstall Open MPI"; round issue23-heldout-40 part F: read as a crash and
  restarted). "Pack data mismatch" (OPAL_ERR_PACK_MISMATCH) says the same of a type the peers disagree on. An
  installation to make consistent, not a fault a restart clears.
* TensorFlow 1.x's summary of an op's error, ``<Class> (see above for traceback): <message>``, indented by a paste (a
  reStructuredText literal block, a Markdown list's code), is the same error: forms_errors reads it whatever the
  indentation (round issue23-heldout-40 part F's NCCL result, read as healthy).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.diagnosis.heldout.round29c import NCCL_CAUSES
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round40f_form` reads hold, besides the needles failureforms already
#: searches: the NCCL call wrapper's "failed: " with NCCL's result, Gloo's device refusing a name, Open MPI's
#: unpack
NEEDLES: tuple[str, ...] = (
    " failed: unhandled ", " failed: internal error", " failed: invalid ", " failed: remote process exited",
    "Unable to find address for: ",
    "Data unpack would read past end of buffer", "Pack data mismatch",
)

_NCCL_STRINGS = "|".join(re.escape(s) for s in NCCL_CAUSES)

#: an NCCL call (its name, or the whole call as the expression) then " failed: " and NCCL's result string, at the
#: head of a message: a line's start (after a rank's tag or a quote mark), an exception's "Class: ", TF's "): "
_NCCL_CALL_FAILED = re.compile(
    r"(?:^(?:[>\s]*|\[[^\]\n]{1,40}\]\s*)|(?:Error|Exception|Failure|\)): |NcclBackend: )"
    r"nccl[A-Z]\w*(?:\([^()\n]{0,200}\))? failed: (" + _NCCL_STRINGS + r")\b", re.MULTILINE)

#: Gloo's TCP device refusing the interface or hostname it was given: the failed check, or an exception's class,
#: then the words and the name
_GLOO_NO_ADDRESS = re.compile(
    r"(?:\b(?:ifa|rp) != nullptr\.\s*|(?:Error|Exception): )Unable to find address for: \S")

#: Open MPI's data-serialisation service finding a message of another layout than its peer packed
_OPAL_UNPACK = re.compile(
    r"(?:\bORTE_ERROR_LOG: |\bFORCE-TERMINATE AT |\bReturned (?:value )?\"?|\bPMIX ERROR: )"
    r"(?:Data unpack would read past end of buffer|Pack data mismatch)\b")


def round40f_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if " failed: " in text and (call := _NCCL_CALL_FAILED.search(text)) is not None:
        return Form(FormKind.ERROR, f"an NCCL call failed with '{call.group(1)}' (Horovod's wrapper of NCCL's result)",
                    NCCL_CAUSES[call.group(1)])
    if "Unable to find address for" in text and _GLOO_NO_ADDRESS.search(text):
        return Form(FormKind.ERROR, "Gloo found no address for the interface or hostname it was given "
                    "(GLOO_SOCKET_IFNAME, the hostname's address)", Label.CONFIG_ERROR)
    if ("Data unpack would read" in text or "Pack data mismatch" in text) and _OPAL_UNPACK.search(text):
        return Form(FormKind.ERROR, "Open MPI's runtime could not unpack its peer's message (different Open MPI "
                    "or library builds on the nodes)", Label.CONFIG_ERROR)
    return None


def round40f_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round40f_form(text))

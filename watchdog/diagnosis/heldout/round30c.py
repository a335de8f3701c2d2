"""Failure forms read for the misses of round issue23-heldout-30 (part C: hangs and stalls in any ecosystem): Open
MPI's and PRRTE's report of a TCP connection the launch could not complete, NCCL's report of a collective whose
sizes differ between two ranks, and a native backtrace through an abort routine.

Pure: no I/O. :func:`round30c_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the forms
of round 29, :func:`round30c_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line
that is already an error.

Each form is read where its program prints it:

* Open MPI's out-of-band TCP component (orte/mca/oob/tcp/oob_tcp_connection.c, and PRRTE's copy in
  prte/mca/oob/tcp/oob_tcp_connection.c) prints, when a daemon or a process cannot connect back to another, a box
  that it writes with ``opal_output``/``pmix_output`` rather than show_help, because at that point it may not be
  connected to mpirun: "A process or daemon was unable to complete a TCP connection\\nto another process:\\n  Local
  host: ...\\n  Remote host: ...\\nThis is usually caused by a firewall on the remote host. ...". The launch stops
  there and every retry meets the same network set-up (a firewall, an interface the hosts cannot route between):
  configuration (horovod#2043, round issue23-heldout-30 part C, printed among ssh's debug records and read as
  healthy).
* NCCL's InfiniBand transport checks the size a peer posted for a receive against the size it sends (nccl
  src/transport/net_ib.cc ncclIbIsend: ``WARN("NET/IB : req %d/%d tag %x peer %s collective mismatch error, local
  size %lu remote size %lu", ...); return ncclInvalidUsage;``, before 2.7.8 "NET/IB : collective mismatch error
  local size %d remote %d addr ..."), and NCCL's init of older releases checks the collectives' order
  (src/init.cc: "Mismatched collective detected, please check your collective calls at and around rank %d"). Both
  return ncclInvalidUsage: the ranks called collectives that do not match (sizes, order), or the NICs' ordering
  setting corrupts the exchange; a restart repeats it (nccl#969, round issue23-heldout-30 part C: the reporter
  found it an environment configuration error; read as the transport failing and restarted).
* glibc's ``backtrace_symbols_fd`` prints one frame a line as ``<object>(<symbol>+0x<offset>)[0x<address>]`` (some
  wrappers put a space before the bracket); crash handlers print it before the process dies: ggml's
  ``ggml_print_backtrace`` under ``ggml_abort`` (ggml/src/ggml.c, in llama.cpp, whisper.cpp, ollama), a SIGABRT
  handler under glibc's ``abort``, an assertion's ``__assert_fail``, C++'s ``std::terminate``. A frame of one of those
  routines says the process aborted, even when the paste kept only the frames and not the message above them
  (llama.cpp#17060, round issue23-heldout-30 part C's whole-corpus check: a llama-server's abort read as healthy).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round30c_form` reads hold, besides the needles failureforms already
#: searches: Open MPI's unreachable peer, NCCL's mismatched collective
NEEDLES: tuple[str, ...] = ("unable to complete a TCP connection", "collective mismatch error",
                            "Mismatched collective detected", "abort+", "assert_fail+", "terminatev+")

#: the first line of Open MPI's and PRRTE's out-of-band TCP report of a peer it could not connect to (quoted by a
#: mailing list's "> " or a log prefix before it)
_OOB_TCP_UNREACHABLE = re.compile(r"\bA process or daemon was unable to complete a TCP connection\b")

#: NCCL's report of a collective the ranks do not call alike (its IB transport's size check, 2.3 to today's words,
#: and the older init's order check)
_NCCL_MISMATCH = re.compile(r"\bNET/IB ?: (?:req \d+/\d+ tag \w+ peer \S+ )?collective mismatch error\b|"
                            r"\bMismatched collective detected\b")


#: a frame of glibc's backtrace_symbols in an abort routine (ggml's, glibc's, an assertion's, std::terminate)
_ABORT_FRAME = re.compile(r"\S\((?:ggml_abort|abort|__GI_abort|__assert_fail|__GI___assert_fail|_ZSt9terminatev)"
                          r"\+0x[0-9a-fA-F]+\) ?\[0x[0-9a-fA-F]+\]")


def round30c_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "TCP connection" in text and _OOB_TCP_UNREACHABLE.search(text):
        return Form(FormKind.ERROR, "Open MPI's out-of-band TCP connection to another process that failed "
                                    "(a firewall, an interface the hosts cannot route)", Label.CONFIG_ERROR)
    if "ollective" in text and _NCCL_MISMATCH.search(text):
        return Form(FormKind.ERROR, "NCCL's collective that the ranks do not call alike (ncclInvalidUsage)",
                    Label.CONFIG_ERROR)
    if "+0x" in text and _ABORT_FRAME.search(text):
        return Form(FormKind.CRASH, "a native backtrace (glibc's backtrace_symbols) through an abort routine")
    return None


def round30c_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round30c_form(text))

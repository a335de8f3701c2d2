"""Failure forms read for the misses of round issue23-heldout-37 (part C: federated, privacy-preserving and on-device
training): gRPC Python's report of a call whose stream the transport dropped, a metric's transition whose new value is
not finite, and the C library's getopt refusing a command line's option.

Pure: no I/O. :func:`round37c_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the forms
of round 36, :func:`round37c_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line
that is already an error.

Each form is read where its program prints it:

* gRPC Python's error of a finished call (``<_InactiveRpcError of RPC that terminated with:``, a streaming call's
  ``<_MultiThreadedRendezvous of RPC ...>``, ``_Rendezvous`` before grpcio 1.26) puts the call's status and message on
  lines of their own, ``\\tstatus = StatusCode.<CODE>`` and ``\\tdetails = "<message>"`` (grpc/_channel.py
  ``_rpc_state_string``). Round 35 part D reads the status UNAVAILABLE (a server not reachable yet: a wait). The
  message says more than the code when the HTTP/2 transport under an open call failed: gRPC core ends the call with
  ``Stream removed`` (status UNKNOWN) when its stream is torn down with the connection, and with ``Received RST_STREAM
  with error code <n>`` (status INTERNAL or CANCELLED) when the peer reset it (chttp2's frame_rst_stream). Both are
  the connection between the two processes failing mid-call: the transport, as NCCL's or a store's lost socket is
  (round issue23-heldout-37: a Flower client's stream to its server removed after ten rounds, flower#699, read as
  healthy: the repr's exception class names no error and no line has a level). Only the repr's ``details`` line is
  read, on a line of its own; the code is not needed (the message is gRPC core's own), and a message that names
  anything else (``Exception calling application: ...``, the server's handler raising) is not read here.
* A metric printed as its transition, ``<key>: <before> -> <after>``: FL-bench logs each client's loss and accuracy
  before and after its local training so (``loss: 2.3616 -> 0.4791  accuracy: 47.06% -> 84.49%``), and other
  trainers print a value's change the same way. The value the line reports is the one after the arrow; the one before
  it is the past. When the new value of a loss or gradient norm is NaN or infinite, the model the step produced is
  not finite: the reader's own metric form reads ``loss: nan`` but not a finite loss before an arrow, which it takes
  for the step's loss (round issue23-heldout-37: FedDyn's clients, ``loss: 8.3066 -> nan`` every round, read as
  healthy, FL-bench#133). Keras's ``val_loss improved from inf to 0.69314`` is prose, no arrow, and a finite new value.
* The C library's getopt (and getopt_long) rejects an option it was not given in its option table with
  ``"%s: unrecognized option '%s%s'"`` (glibc posix/getopt.c; ```--%s'`` with a backquote before glibc 2.26), a short
  one with ``"%s: invalid option -- '%c'"`` (BSD libc: ``illegal option -- %c``), an option without its argument with
  ``"%s: option requires an argument -- '%c'"``, the program's name (argv[0]) first; the program then prints its usage
  and exits. A launcher script, a daemon's bootstrap or a tool of the job refusing its own command line is a command
  line built for another version of it: configuration, a restart runs the same command (round issue23-heldout-37:
  eggroll's ``egg_pair_bootstrap.sh: unrecognized option '--python-venv'`` under FATE, after which every call to its
  node manager failed UNAVAILABLE, read as a transient wait, FATE#4159). Only the line that starts with a program's
  name and getopt's words is read; a program's own sentence about an option it ignores is not getopt's.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round37c_form` reads hold, besides the needles failureforms already
#: searches ("loss", "nan" for the metric's transition): gRPC core's messages of a dropped stream, getopt's refusals
NEEDLES: tuple[str, ...] = ("Stream removed", "Received RST_STREAM", "unrecognized option", "invalid option -- ",
                            "illegal option -- ", "option requires an argument -- ")

#: the repr's details line (a tab, or the spaces a paste made of it) whose message is gRPC core's for a stream the
#: transport dropped under the call
_GRPC_STREAM_LOST = re.compile(r"^\s+details = \"(?:Stream removed|Received RST_STREAM with error code \d+)\"\s*$")

#: a loss, gradient norm or perplexity printed as its transition, the new value after the arrow not finite (the old
#: value a number, or itself not finite)
_VALUE = r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf)"
_TRANSITION_NONFINITE = re.compile(
    r"(?i:\b(?:[\w.-]*loss[\w.-]*|grad(?:ient)?[ _-]?norm\w*|perplexity))['\"]?\s*[=:]\s*(?i:" + _VALUE + r")"
    r"\s*(?:->|=>|\u2192)\s*(?i:[-+]?(?:nan|inf(?:inity)?))\b")

#: a word a non-finite value prints as, looked for before the transition's pattern (most arrows are not metrics)
_NOT_FINITE_WORD = re.compile(r"(?i:nan|inf)")

#: getopt's refusal of an option, the program's name first (argv[0]: a path, a script, a name with its version; a
#: level word is a record's head, not a program's name)
_GETOPT_REFUSED = re.compile(r"^(?!(?i:warn\w*|info|note|notice|debug|error|fatal)\b)[\w./+-]+(?: v?\d[\w.]*)?: "
                             r"(?:unrecognized option [`'](?:--|-W )?[^\s'`]+'|(?:invalid|illegal) option -- '?\S'?|"
                             r"option requires an argument -- '?\S'?)\s*$")


def round37c_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ("Stream removed" in text or "RST_STREAM" in text) and _GRPC_STREAM_LOST.search(text):
        return Form(FormKind.ERROR, "an RPC whose stream the transport dropped (gRPC's details: the connection "
                    "between the processes failed mid-call)", Label.COMM_ERROR)
    if ("->" in text or "=>" in text or "\u2192" in text) and _NOT_FINITE_WORD.search(text) \
            and _TRANSITION_NONFINITE.search(text):
        return Form(FormKind.METRIC, "a non-finite loss or gradient norm as the new value of a metric's transition",
                    Label.NUMERICAL_ERROR)
    if ("unrecognized option" in text or "option -- " in text) and _GETOPT_REFUSED.search(text.strip()):
        return Form(FormKind.ERROR, "a program refusing an option of its command line (getopt's words)",
                    Label.CONFIG_ERROR)
    return None


def round37c_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round37c_form(text))

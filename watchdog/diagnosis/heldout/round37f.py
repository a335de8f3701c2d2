"""Failure forms read for the misses of round issue23-heldout-37 (part F: elastic and fault-tolerant training
frameworks): torch.distributed's monitored barrier, the hang detector of Gloo process groups, reporting the ranks
that did not pass it and, on the other ranks, that their coordinator answered with an error.

Pure: no I/O. :func:`round37f_form` is asked after the forms of round 36, :func:`round37f_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

The form is read where its program prints it:

* ``torch.distributed.monitored_barrier`` (and ProcessGroupWrapper, which runs it before every collective under
  ``TORCH_DISTRIBUTED_DEBUG=DETAIL``) is a barrier with a timeout that names who failed it (c10d
  ProcessGroupGloo.cpp ``monitoredBarrier``). Rank 0 waits for every other rank's message; a rank that does not
  send it in time (stuck before the barrier, or dead) makes rank 0 raise ``"[Rank 0]: Rank {r} failed to pass
  monitoredBarrier in {timeout} ms"`` (with ``wait_all_ranks``, every late rank: ``"Ranks {r1, r2} failed to pass
  monitoredBarrier in {timeout} ms"``), or, when its whole timeout ran out before it had heard from every rank,
  ``"Rank 0 timed out in monitoredBarrier after {timeout} ms."`` followed by the ranks it did process
  (``checkRemainingTime``). The ranks the barrier was built to watch did not reach a collective within
  its timeout: a collective hang, the named ranks the place to look (PyTorch's distributed documentation prints
  ``RuntimeError: Rank 1 failed to pass monitoredBarrier in 2000 ms`` for a rank that skipped the barrier; c10d's
  tests expect ``Ranks 1 failed to pass monitoredBarrier`` from a wrapper whose rank 1 never called the collective).
  Every other rank, which did reach it, waits for rank 0's reply and, when that fails, logs
  ``"Rank {r} successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank
  {src}. Please check rank {src} logs for faulty rank."``: this rank was well, the transport to its coordinator
  failed because a peer (rank 0, or the rank rank 0 gave up on) is gone. A lost peer, which the elastic agent's
  restart recovers (round issue23-heldout-37: torch elastic on Kubernetes, an agent's pod dying, the survivor's
  line read as a crash of unknown cause, pytorch#76198, whose group re-formed once restarts were enabled; c10d's own
  tests expect ``"Please check rank 0 logs for faulty rank"`` from the ranks that are not faulty). Both causes are
  secondary ones (:data:`~neuron_watch.diagnosis.judge.SECONDARY`): a primary cause elsewhere in the log (the dead
  rank's own exception) still decides.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literal (digit-free) the lines :func:`round37f_form` reads hold, besides the needles failureforms already
#: searches: c10d's monitored barrier's name in its reports
NEEDLES: tuple[str, ...] = ("monitoredBarrier",)

#: rank 0's report of the ranks that did not pass the barrier in time (one rank, or "Ranks" and their list), or of
#: its timeout running out before every rank was heard from
_FAILED_TO_PASS = re.compile(r"\bRanks? \d+(?:, \d+)* failed to pass monitoredBarrier in \d+ ms\b"
                             r"|\bRank \d+ timed out in monitoredBarrier after \d+ ms\b")

#: another rank's report that it passed but its coordinator's reply failed
_REPLY_FAILED = re.compile(r"\bsuccessfully reached monitoredBarrier, but received errors while waiting for "
                           r"send/recv from rank \d+\b")


def round37f_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "monitoredBarrier" not in text:
        return None
    if _FAILED_TO_PASS.search(text):
        return Form(FormKind.ERROR, "c10d's monitored barrier naming ranks that did not reach it in time (stuck or "
                    "gone: a collective hang)", Label.COLLECTIVE_HANG)
    if _REPLY_FAILED.search(text):
        return Form(FormKind.ERROR, "a rank that passed c10d's monitored barrier but whose coordinator's reply "
                    "failed (a peer lost)", Label.COMM_ERROR)
    return None


def round37f_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round37f_form(text))

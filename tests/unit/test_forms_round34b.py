# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part B of the misses of round issue23-heldout-34 (HPC and scientific ML on supercomputers), each as
a rule of its family, with real lines and the near misses the rule must leave alone: Cray MPICH's warning that it
suspects a hang, an assertion in MPICH's layout, Open MPI's refusal of a direct launch its build has no support for,
Open MPI's failed libfabric set-up call, and the provider's code in MPICH's completion error. Each line is from the
corpus (named by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind, read_line
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR
CRASH = FormKind.CRASH

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # Cray MPICH's warning that it cannot make progress and suspects a hang
    ("`PE 4: MPICH WARNING: OFI is failing to make progress on posting a receive. MPICH suspects a hang due to completion queue exhaustion. Setting environment variable FI_CXI_DEFAULT_CQ_SIZE to a higher number might circumvent this scenario. OFI retry continuing...`",
     ERROR, Label.COLLECTIVE_HANG, "corpus (hipace-1185-perlmutter-mpich-cq-exhaustion-hang)"),
    ('"PE 0: MPICH WARNING: OFI is failing to make progress on posting a receive. MPICH suspects a hang due to completion queue exhaustion. Setting environment variable FI_CXI_DEFAULT_CQ_SIZE to a higher number might circumvent this scenario. OFI retry continuing..."',
     ERROR, Label.COLLECTIVE_HANG, "corpus (libfabric-9286-perlmutter-cq-exhaustion-warning-hang)"),
    ("     *    MPICH suspects a hang due to completion queue exhaustion. Setting",
     ERROR, Label.COLLECTIVE_HANG, "PnetCDF's adio driver, quoting what a hang prints (the wrapped second line)"),
    # an assertion in MPICH's layout
    ("Assertion failed in file src/mpid/ch4/src/init_comm.c at line 72: in_use == 0",
     CRASH, None, "corpus (mpich-7200-aurora-assertion-init-comm-in-use)"),
    ("Assertion failed in file ../src/mpid/ch4/shm/cray_common/cray_common_memops.c at line 461: 0",
     CRASH, None, "spectral-compute/scale-validation#66 (Cray MPICH with GTL on a ROCm node)"),
    # Open MPI's refusal of a direct launch its build has no support for
    ('The application appears to have been direct launched using "aprun",',
     ERROR, Label.CONFIG_ERROR, "corpus (horovod-2105-cray-xc40-aprun-ompi-without-alps)"),
    ("but OMPI was not built with ALPS support. This usually happens",
     ERROR, Label.CONFIG_ERROR, "corpus (horovod-2105-cray-xc40-aprun-ompi-without-alps), the head cut"),
    ("    but OMPI was not built with SLURM support. This usually happens",
     ERROR, Label.CONFIG_ERROR, "TensorRT-LLM's installation notes (MPI in the Slurm environment)"),
    ('The application appears to have been direct launched using "mpirun",',
     ERROR, Label.CONFIG_ERROR, "a Raspberry Pi cluster's notes (Open MPI 5 launching 4.1 daemons)"),
    ("but OMPI was not found to be installed.  No OMPI magic entry point was found.",
     ERROR, Label.CONFIG_ERROR, "the same notes, the help text's second line"),
    # Open MPI's libfabric set-up call that failed
    ("Open MPI failed an OFI Libfabric library call (fi_domain).  This is highly",
     ERROR, Label.CONFIG_ERROR, "corpus (ompi-12038-crusher-ofi-fi-domain-not-implemented)"),
    ("Open MPI failed an OFI Libfabric library call (fi_endpoint).  This is highly",
     ERROR, Label.CONFIG_ERROR, "corpus (libfabric-6710-psm3-provider-fi-endpoint-invalid-argument)"),
    # MPICH's completion error with the provider's code
    ("MPIDI_OFI_handle_cq_error(1062): OFI poll failed (ofi_events.c:1064:MPIDI_OFI_handle_cq_error:Input/output error - UNDELIVERABLE)",
     ERROR, Label.COMM_ERROR, "corpus (warpx-4234), Frontier"),
    ("MPIDI_OFI_handle_cq_error(789): OFI poll failed (default nic=cxi0: Input/output error)",
     ERROR, Label.COMM_ERROR, "corpus (mpich-7427-aurora-probe-ofi-poll-failed-cxi0)"),
    ("MPIDI_OFI_handle_cq_error(1075): OFI poll failed (ofi_events.c:1077:MPIDI_OFI_handle_cq_error:Input/output error - PTLTE_NOT_FOUND)",
     ERROR, Label.COMM_ERROR, "ofiwg/libfabric#10072 (MUMPS on Adastra)"),
    ("MPIDI_OFI_handle_cq_error(1075)......: OFI poll failed (ofi_events.c:1077:MPIDI_OFI_handle_cq_error:Input/output error - CANCELED)",
     ERROR, None, "corpus (libfabric-11307): operations cancelled by a job being killed, no cause stated"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # Cray MPICH's warnings of a setting, on runs that go on
    "PE 0: MPICH Warning: MPICH_NO_LOCAL is set to 1.",  # a public repository's notes on pinned host buffers
    "PE 0: MPICH Warning: For one-sided operations, XPMEM will not be used for a specific",  # a Cray job's output
    # an assert macro's format in source code
    '    printf("Assertion failed in file %s at line %d\\n", file, line);',  # FreeRTOS' vAssertCalled in an application
    # a cluster guide quoting the help text's words, cut before the launcher
    '    beginning "The application appears to have been direct launched using',  # a cluster's MPI guide
    # Open MPI's help file, the call not filled in
    "Open MPI failed an OFI Libfabric library call (%s).  This is highly",  # help-mtl-ofi.txt's template
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_a_cancelled_completion_leaves_the_cause_to_the_record_before_it(tmp_path: Path) -> None:
    """MPICH's abort record whose stack ends in a CANCELED completion (a job torn down) is a crash of unstated
    cause; the same stack ending in UNDELIVERABLE is a communication failure."""
    head = ("MPICH ERROR [Rank 8281] [job id 1410467.0] [Wed Aug 23 06:05:55 2023] [frontier01982] - Abort(136982671) "
            "(rank 8281 in comm 0): Fatal error in PMPI_Waitall: Other MPI error, error stack:\n"
            "PMPI_Waitall(339)..............: MPI_Waitall(count=26, req_array=0x1006e9b0, status_array=0xfefafb0) failed\n"
            "MPIDI_Progress_test(89)........: \n")
    tail = "MPIDI_OFI_handle_cq_error(1062): OFI poll failed (ofi_events.c:1064:MPIDI_OFI_handle_cq_error:Input/output error - {})\n"
    undelivered = tmp_path / "undelivered.log"
    undelivered.write_text(head + tail.format("UNDELIVERABLE"))
    assert diagnose_paths([str(undelivered)], now=0.0).verdict.label is Label.COMM_ERROR
    cancelled = tmp_path / "cancelled.log"
    cancelled.write_text(head + tail.format("CANCELED"))
    assert diagnose_paths([str(cancelled)], now=0.0).verdict.label is Label.OTHER_CRASH


#: PMIx's record of its data store's lock, printed by jobs that run (read as no form, and benign.pmix_dstore_lock)
PMIX_LOCK_LINES = [
    "[qbd487:400139] PMIX ERROR: ERROR in file ../../../../../../src/mca/gds/ds12/gds_ds12_lock_pthread.c at line 169",  # corpus (llmc-426-slurm-pmix-gds-lock-error-then-training)
    "[Gautams-MacBook-Air.local:35779] PMIX ERROR: ERROR in file gds_ds12_lock_pthread.c at line 206",  # openpmix#1716
    "[Mac-802.local:41496] PMIX ERROR: ERROR in file gds_ds12_lock_pthread.c at line 206",  # ompi#7516
]


def test_pmix_lock_records_are_no_form_and_the_failure_after_them_still_decides(tmp_path: Path) -> None:
    """Ranks that print PMIx's data-store lock record and go on to train are healthy; the same records before an
    out-of-memory error leave the verdict to that error."""
    for line in PMIX_LOCK_LINES:
        assert read_line(line) is None, line
    started = tmp_path / "started.log"
    started.write_text("\n".join(PMIX_LOCK_LINES) + "\nStarted Multi Node training managed by Slurm: ProcessID:0, NumProcess::4, DeviceId:0\n")
    assert diagnose_paths([str(started)], now=0.0).verdict.label is Label.HEALTHY
    failed = tmp_path / "failed.log"
    failed.write_text("\n".join(PMIX_LOCK_LINES) + "\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.02 GiB is free.\n")
    assert diagnose_paths([str(failed)], now=0.0).verdict.label is Label.OOM

# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for the misses of round issue23-heldout-15, half A (MPICH and Intel MPI, Open MPI and PMIx, the
Ray GCS, Slurm's MPI plugins, pyxis relaying enroot, MLIR's dialect conversion, XLA's CPU/GPU collectives), each
as a rule of its family (MPICH's fatal error record, Open MPI's help texts, the GCS's worker-exit record, a
launcher's plugin that could not load, a registry's refusal, an operation that could not be legalized, a
collective's participant that waits), with real lines and the near misses the rule must leave alone.

Each line is from the corpus (tests/data/real-logs, named by its excerpt) or is the format a project's
source prints, filled in (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind, read_line
from neuron_watch.events import Action, Label
from tests.unit.form_table import cause_tests, table_tests
from tests.unit.test_forms_round11 import PROGRESS, _verdict

E, CRASH = FormKind.ERROR, FormKind.CRASH

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # MPICH's fatal error record: MPI_Init's a set-up, another function's a crash of no stated cause
    ("Abort(1614735) on node 0 (rank 0 in comm 0): Fatal error in PMPI_Init: Unknown error class, error stack:", CRASH, Label.CONFIG_ERROR, "corpus (onedal-3741)"),
    ("Abort(1094543) on node 0 (rank 0 in comm 0): Fatal error in PMPI_Init_thread: Other MPI error, error stack:", CRASH, Label.CONFIG_ERROR, "corpus (qmcpack-1158)"),
    ("Abort(1091471) on node 0 (rank 0 in comm 0): Fatal error in internal_Init_thread: Other MPI error, error stack:", CRASH, Label.CONFIG_ERROR, "MPICH 4's errutil.c with the internal_ prefix"),
    ("Fatal error in PMPI_Allreduce: Other MPI error, error stack:", CRASH, None, "errutil.c's format, another function"),
    # Open MPI's help texts
    ("An MPI communication peer process has unexpectedly disconnected.  This", E, Label.COMM_ERROR, "corpus (horovod-1950)"),
    ("A requested component was not found, or was unable to be opened.  This", E, Label.CONFIG_ERROR, "corpus (pmix-standard-363)"),
    ("It looks like pmix_init failed for some reason; your parallel process is", CRASH, Label.CONFIG_ERROR, "corpus (pmix-standard-363)"),
    ("It looks like orte_init failed for some reason; your parallel process is", CRASH, Label.CONFIG_ERROR, "help-orte-runtime.txt"),
    ("It looks like MPI_INIT failed for some reason; your parallel process is", CRASH, Label.CONFIG_ERROR, "help-mpi-runtime.txt"),
    # the Ray GCS's record of a worker the memory monitor ended, and the raylet's words for it
    ("[2023-10-23 03:15:21,685 W 921 921] (gcs_server) gcs_worker_manager.cc:55: Reporting worker exit, worker id = 6c4001f83e43de267c8a3e884c6beb9324a5ebcfcd05ea24bb07f8b3, node id = ffffffffffffffffffffffffffffffffffffffffffffffffffffffff, address = , exit_type = NODE_OUT_OF_MEMORY, exit_detail = Task was killed due to the node running low on memory.", CRASH, Label.OOM, "corpus (ray-40687)"),
    ("Worker exit type: NODE_OUT_OF_MEMORY Worker exit detail: Task was killed due to the node running low on memory.", CRASH, Label.OOM, "common.proto's WorkerExitType in the raylet's words"),
    # Slurm's launcher that could not load its MPI plugin
    ("srun: error: Couldn't load specified plugin name for mpi/pmix: Plugin init() callback failed", E, Label.CONFIG_ERROR, "corpus (executorlib-761)"),
    ("srun: error:  mpi/pmix_v5: init: (null) [0]: mpi_pmix.c:193: pmi/pmix: can not load PMIx library", E, Label.CONFIG_ERROR, "corpus (executorlib-761)"),
    ("srun: error: MPI: Unable to load any plugin", E, Label.CONFIG_ERROR, "corpus (executorlib-761)"),
    ("srun: error: Invalid MPI type 'pmix', --mpi=list for acceptable types", E, Label.CONFIG_ERROR, "corpus (executorlib-761)"),
    # a container registry's refusal relayed by pyxis
    ("slurmstepd: error: pyxis:     [ERROR] URL https://registry-1.docker.io/v2/evuedsoacr.azurecr.io/dc-ecosys-appl-eng/mlperf-nvidia/manifests/stable_diffusion-pyt returned error code: 401 Unauthorized", E, Label.CONFIG_ERROR, "corpus (pyxis-168)"),
    ("[ERROR] URL https://nvcr.io/v2/nvidia/pytorch/manifests/99.01-py3 returned error code: 404 Not Found", E, Label.CONFIG_ERROR, "enroot docker.sh's format, a tag that is not there"),
    # an MLIR conversion that could not legalize an operation
    ("<jit>:7:10: error: failed to legalize operation 'mhlo.tuple' that was explicitly marked illegal", E, Label.COMPILE_ERROR, "corpus (openxla-pjrt-plugin-140)"),
    ("loc(\"main\"): error: failed to legalize operation 'stablehlo.custom_call'", E, Label.COMPILE_ERROR, "DialectConversion.cpp's format"),
]

#: lines that look like one of the forms above and must read as nothing
NEAR_MISSES = [
    "MPICH prints a fatal error in the function's name when MPI_Init fails",  # the words in prose
    "the MPI communication peer process has unexpectedly disconnected, says the FAQ",  # prose, lower case
    "It looks like the run failed for some reason, retry later",  # not a runtime's help text
    "[2023-10-23 03:15:21,685 I 921 921] (gcs_server) gcs_worker_manager.cc:55: Reporting worker exit, worker id = 6c40, node id = ffff, address = , exit_type = INTENDED_USER_EXIT, exit_detail = Worker exits by an user request.",  # an intended exit
    "srun: MPI types are...",  # srun --mpi=list
    "pyxis:     [INFO] Fetching image manifest",  # enroot's progress
    "note: failed to legalize operations are listed below",  # not MLIR's diagnostic
]

#: (line, the cause its form states): causes read from an error line another rule reads as unexplained
CAUSES = [
    ("srun: error: Couldn't load specified plugin name for mpi/pmix: Plugin init() callback failed", Label.CONFIG_ERROR),
    ("slurmstepd: error: pyxis:     [ERROR] URL https://registry-1.docker.io/v2/a/b/manifests/c returned error code: 403 Forbidden", Label.CONFIG_ERROR),
    ("<jit>:7:10: error: failed to legalize operation 'mhlo.tuple' that was explicitly marked illegal", Label.COMPILE_ERROR),
]

#: error lines whose form says nothing of a cause
NO_CAUSE = [
    "slurmstepd: error: pyxis:     [ERROR] URL https://registry-1.docker.io/v2/a/b/manifests/c returned error code: 502 Bad Gateway",  # the registry's own state
    "slurmstepd: error: pyxis: child 1022281 failed with error code: 1",  # the launcher's wrapper
    "Abort(1) on node 3 (rank 3 in comm 0): Fatal error in PMPI_Recv: Message truncated, error stack:",  # a failure of no stated cause
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


def test_form_rules_were_bumped() -> None:
    """What a line reads as changed: the reader's version, part of the classifier's cache key, moved on."""
    assert FORM_RULES >= 16


# -- whole logs, as the judge reads them ------------------------------------------------------------

PYXIS = [
    "pyxis: importing docker image: evuedsoacr.azurecr.io/dc-ecosys-appl-eng/mlperf-nvidia:stable_diffusion-pyt",
    "slurmstepd: error: pyxis: child 1022281 failed with error code: 1",
    "slurmstepd: error: pyxis: failed to import docker image",
    "slurmstepd: error: pyxis: printing enroot log file:",
    "slurmstepd: error: pyxis:     [INFO] Querying registry for permission grant",
    "slurmstepd: error: pyxis:     [INFO] Fetching image manifest",
    "slurmstepd: error: pyxis:     [ERROR] URL https://registry-1.docker.io/v2/evuedsoacr.azurecr.io/dc-ecosys-appl-eng/mlperf-nvidia/manifests/stable_diffusion-pyt returned error code: 401 Unauthorized",
    "slurmstepd: error: pyxis: couldn't start container",
]

XLA_STUCK = "E0000 00:00:1725834192.702937  625990 collective_ops_utils.h:310] This thread has been waiting for 5000ms for and may be stuck: participant AllReduceParticipantData{rank=1, element_count=7840, type=F32, rendezvous_key=RendezvousKey{run_id=RunId: 0, global_devices=[0,1], num_local_participants=2, collective_op_kind=cross_replica, op_id=0}} waiting for all participants to arrive at rendezvous RendezvousKey{run_id=RunId: 0, global_devices=[0,1], num_local_participants=2, collective_op_kind=cross_replica, op_id=0}"

ENDINGS = [
    # MPICH could not start: the fabric's provider, the address (Intel MPI 2019 over OFI)
    (["Abort(1094543) on node 0 (rank 0 in comm 0): Fatal error in PMPI_Init_thread: Other MPI error, error stack:",
      "MPIR_Init_thread(639)......:",
      "MPID_Init(860).............:",
      "MPIDI_NM_mpi_init_hook(689): OFI addrinfo() failed (ofi_init.h:689:MPIDI_NM_mpi_init_hook:No data available)"], Label.CONFIG_ERROR, Action.STOP),
    # Open MPI's help text for a peer that hung up, the job's only word
    (["An MPI communication peer process has unexpectedly disconnected.  This",
      "usually indicates a failure in the peer process (e.g., a crash or",
      "otherwise exiting without calling MPI_FINALIZE first)."], Label.COMM_ERROR, Action.RESTART),
    # a PMIx built without the component the launch asks for
    (["A requested component was not found, or was unable to be opened.  This",
      "Framework: psec",
      "Component: munge",
      "It looks like pmix_init failed for some reason; your parallel process is"], Label.CONFIG_ERROR, Action.STOP),
    # the memory monitor ended a worker
    (["[2023-10-23 03:15:21,685 W 921 921] (gcs_server) gcs_worker_manager.cc:55: Reporting worker exit, worker id = 6c40, node id = ffff, address = , exit_type = NODE_OUT_OF_MEMORY, exit_detail = Task was killed due to the node running low on memory."], Label.OOM, Action.RESTART),
    # srun's MPI plugin could not load libpmix
    (["srun: error:  mpi/pmix_v5: init: (null) [0]: mpi_pmix.c:193: pmi/pmix: can not load PMIx library",
      "srun: error: Couldn't load specified plugin name for mpi/pmix: Plugin init() callback failed",
      "srun: error: MPI: Unable to load any plugin",
      "srun: error: Invalid MPI type 'pmix', --mpi=list for acceptable types"], Label.CONFIG_ERROR, Action.STOP),
    # pyxis' failure lines state no cause; the enroot log it relays after them does
    (PYXIS, Label.CONFIG_ERROR, Action.STOP),
    # ... and a relayed error of no stated cause leaves the failure unexplained
    ([*PYXIS[:6], "slurmstepd: error: pyxis:     [ERROR] URL https://registry-1.docker.io/v2/a/b/manifests/c returned error code: 502 Bad Gateway",
      PYXIS[-1]], Label.OTHER_CRASH, Action.RESTART),
    # ... nor is a later cause pyxis did not relay taken for it
    ([*PYXIS[1:3], "slurmstepd: error: pyxis: couldn't start container",
      "[ERROR] URL https://nvcr.io/v2/nvidia/pytorch/manifests/99.01-py3 returned error code: 404 Not Found"], Label.OTHER_CRASH, Action.RESTART),
    # an MLIR conversion that could not lower an operation
    (["<jit>:7:10: error: failed to legalize operation 'mhlo.tuple' that was explicitly marked illegal",
      "    %4 = stablehlo.tuple %1, %3 {xla_shape = \"(u32[2]{0}, u32[2]{0})\"} : tuple<tensor<2xui32>, tensor<2xui32>>"], Label.COMPILE_ERROR, Action.STOP),
    # an XLA CPU/GPU collective's participant waiting for its peers
    ([XLA_STUCK], Label.COLLECTIVE_HANG, Action.RESTART),
]


@pytest.mark.parametrize(("lines", "label", "action"), ENDINGS, ids=[f"ending:{i}" for i in range(len(ENDINGS))])
def test_log_ending_in_the_form(lines: list[str], label: Label, action: Action) -> None:
    assert _verdict(lines) == (label, action)


def test_mpich_frames_after_a_non_init_function_state_no_cause() -> None:
    assert read_line("Fatal error in PMPI_Send: Invalid rank, error stack:") is not None
    assert read_line("Fatal error in PMPI_Send: Invalid rank, error stack:").label is None  # type: ignore[union-attr]


@pytest.mark.parametrize("lines", [
    [XLA_STUCK, "E0000 00:00:1725834193.702937  625990 collective_ops_utils.h:314] Thread is unstuck! Warning above was a false-positive. Perhaps the timeout is too short: participant AllReduceParticipantData{rank=1, element_count=7840, type=F32}"],
    [XLA_STUCK],
    ["[2023-10-23 03:15:21,685 W 921 921] (gcs_server) gcs_worker_manager.cc:55: Reporting worker exit, worker id = 6c40, node id = ffff, address = , exit_type = NODE_OUT_OF_MEMORY, exit_detail = Task was killed due to the node running low on memory."],
], ids=["xla-unstuck", "xla-stuck", "ray-oom"])
def test_progress_after_the_form_is_healthy(lines: list[str]) -> None:
    """A rank that goes on after the line (a wait that ended, a task Ray retried) is healthy."""
    assert _verdict([*lines, *PROGRESS])[0] is Label.HEALTHY

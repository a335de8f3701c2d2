# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for the misses of round issue23-heldout-21, half A (a TPU slice's failure code, the entries of XLA's
out-of-memory report without its head, the Ascend runtime's codes of a stream that never completed; and, in
heldout.round14a, MPICH Hydra's records of a launch that never started the program and HCCL's EI0009), each as a rule
of its family (a runtime's failure enum, a compiler's report layout, a runtime's error codes, a launcher's error
macro, a registry's code), with real lines and the near misses the rule must leave alone.

Each line is from the corpus (tests/data/real-logs, named by its excerpt) or is the format a project's source
prints, filled in (the source is named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.events import Action, Label
from tests.unit.form_table import cause_tests, table_tests

E = FormKind.ERROR
C = FormKind.CRASH

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # libtpu's detection of a slice failure (PJRT_Callback_Tpu_SliceFailureType, pjrt_c_api_tpu.h)
    ("E0511 18:18:50.796852     915 tpunetd_client.cc:311] Detected failure SLICE_FAILURE_CHIP_DRIVER_ERROR in session e6c885828b538167; Start failure handling",
     C, Label.HARDWARE_ERROR, "corpus (maxtext-maxtest-slice-failure-chip-driver-error)"),
    ("E0731 09:47:48.898259     514 tpunetd_client.cc:311] Detected failure SLICE_FAILURE_WORKER_UNAVAILABLE in session 0a1b2c3d4e5f6789; Start failure handling",
     C, None, "the same record with another type of the enum (no device fault named), filled in"),
    # XLA's TPU out-of-memory report, its entries
    ("     Allocation type: HLO temp", E, Label.OOM, "corpus (colabfold-62-tpu-hbm-allocation-report)"),
    ("     Extra memory due to padding: 2.75M (1.0x expansion)", E, Label.OOM, "corpus (colabfold-62-tpu-hbm-allocation-report)"),
    ("     Extra memory due to padding: 12.91G (12.8x expansion)", E, Label.OOM, "a TPU OOM report's first entry (code corpus: a pasted report)"),
    # the Ascend runtime's timeout codes (acl rt_error_codes.h ACL_ERROR_RT_STREAM_SYNC_TIMEOUT 507046 ...)
    ("W NPUStream.cpp:409] Warning: NPU warning, error code is 507046[Error]: ", E, Label.COLLECTIVE_HANG,
     "corpus (ascend-pytorch-48-stream-sync-timeout)"),
    ("[W NPUStream.cpp:365] Warning: NPU warning, error code is 507048[Error]: .", E, Label.COLLECTIVE_HANG,
     "torch_npu's warning with ACL_ERROR_RT_FFTS_PLUS_TIMEOUT, filled in"),
    # ... raised from a failed call by torch_npu's NPU_CHECK_ERROR ("NPU function error: <call>, error code is <code>")
    ("RuntimeError: npuSynchronizeDevice:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:479 NPU function error: "
     "AclrtSynchronizeDeviceWithTimeout, error code is 507048", E, Label.COLLECTIVE_HANG,
     "corpus (vllm-ascend-1443-507048-allreduce-notify, under Ray's (train pid=N) prefix)"),
    ("RuntimeError: npuSynchronizeDevice:torch_npu/csrc/core/npu/NPUStream.cpp:435 NPU function error: aclrtSynchronizeDevice, "
     "error code is 507046", E, Label.COLLECTIVE_HANG, "Ascend/pytorch#62 (issues corpus)"),
    # heldout.round14a: MPICH Hydra's records of a launch that never started the program (pm/pmiserv/pmip_cb.c, tools/topo/topo.c)
    ("[proxy:0:0@8f731690f735] launch_procs (pm/pmiserv/pmip_cb.c:730): create process returned error", E, Label.CONFIG_ERROR,
     "corpus (khiops-164-hydra-no-topology-library)"),
    ("[proxy:0:0@8f731690f735] HYD_pmcd_pmip_control_cmd_cb (pm/pmiserv/pmip_cb.c:904): launch_procs returned error", E, Label.CONFIG_ERROR,
     "corpus (khiops-164-hydra-no-topology-library)"),
    ("[proxy:0:0@8f731690f735] HYDT_topo_bind (tools/topo/topo.c:89): no topology library available", E, Label.CONFIG_ERROR,
     "corpus (khiops-164-hydra-no-topology-library)"),
    ("[mpiexec@node01] HYDT_bscd_common_launch_procs (tools/bootstrap/external/external_common.c:146): create process returned error",
     E, Label.CONFIG_ERROR, "the bootstrap's HYDU_ERR_POP after HYDU_create_process of a proxy, filled in"),
    # heldout.round14a: HCCL's registry code EI0009 (Communication_Error_Initialize_Transport)
    ("[rank1]: EI0009: [PID: 2225827] 2025-09-24-20:59:48.119.066 Transport init error. Reason: [Create][DestLink]Create Dest error! createLink para:rank[1]-localUserrank[1]-localIpAddr[172.16.0.114], dst_rank[0]-remoteUserrank[0]-remote_ip_addr[172.16.0.114]",
     C, Label.COMM_ERROR, "corpus (vllm-ascend-3162-hccl-transport-init-create-dest)"),
]

#: lines that look like one of the forms above and must read as nothing
NEAR_MISSES = [
    "    SLICE_FAILURE_CHIP_DRIVER_ERROR = 0x0000000000000005",  # the enum's listing in a binding, no detection
    "# libtpu kills non-contiguous hosts with SLICE_FAILURE_CHIP_DRIVER_ERROR, see tpu/probe_topology.py",  # a comment about it
    "Returns the internal length of the vector, which is given by size() plus the extra memory due to padding the memory with zeros",  # ViennaCL's docs
    "Allocation type: HLO temp buffers are listed by the memory report tool",  # prose after the words
    "I1029 07:57:57.650648 memory_report.cc:12] padding policy: Extra memory due to padding is reported per buffer",  # the words in an INFO record
    "[W NPUStream.cpp:365] Warning: NPU warning, error code is 507033 ...",  # another runtime code: left to the coded records' readers
    "INFO: set HCCL_EXEC_TIMEOUT=507046 for this run",  # the number as a setting
]

#: (line, the cause its form states): causes read from an error line another rule reads as unexplained
CAUSES = [
    ("        wait for compute device to finish failed, runtime result = 507046.[FUNC:ReportCallError][FILE:log_inner.cpp][LINE:161]",
     Label.COLLECTIVE_HANG),  # corpus (ascend-pytorch-48): CANN's report of the failed synchronize
    ("EH9999: 2024-07-03-11:28:40.450.757  wait for compute device to finish failed, runtime result = 507047.", Label.COLLECTIVE_HANG),  # the event sync code, filled in
]

#: error lines whose form states no cause
NO_CAUSE = [
    # a failed call with another runtime code (507035, the vector core's exception: vllm-ascend, issues corpus)
    "RuntimeError: operator():build/CMakeFiles/torch_npu.dir/compiler_depend.ts:26 NPU function error: "
    "c10_npu::acl::AclrtSynchronizeStreamWithTimeout(copy_stream), error code is 507035",
    "        wait for compute device to finish failed, runtime result = 107020.[FUNC:ReportCallError][FILE:log_inner.cpp][LINE:161]",  # another code
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


def test_form_rules_were_bumped() -> None:
    """What a line reads as changed: the reader's version, part of the classifier's cache key, moved on."""
    assert FORM_RULES >= 28


# -- whole logs, as diagnose reads them --------------------------------------------------------------

ENDINGS = [
    # the coordinator's records of a slice that failed (corpus, maxtext-maxtest-slice-failure-chip-driver-error)
    (["W0511 18:18:50.796322     914 session_master.cc:539] The task with address tpu-job-jax-v6e-8-5-38.headless-svc:8471 missed 1 health checks.",
      "E0511 18:18:50.796514     915 session_master.cc:505] Session is failing with the following status: Session master detected TPU session error from worker tpu-job-jax-v6e-8-5-15.headless-svc:8471. The reporting TPU chip locations are:tpu31:pe4:3, ",
      "E0511 18:18:50.796852     915 tpunetd_client.cc:311] Detected failure SLICE_FAILURE_CHIP_DRIVER_ERROR in session e6c885828b538167; Start failure handling"],
     Label.HARDWARE_ERROR, Action.DRAIN_AND_RESTART),
    # XLA's report cut to an entry (corpus, colabfold-62-tpu-hbm-allocation-report): device memory, which the judge
    # restarts like a CUDA OOM reported without its allocator's settings (docs/diagnosis.md, "Labels and actions")
    (["  17. Size: 64.00M",
      "     Shape: f32[1024,245,64]{1,2,0:T(8,128)}",
      "     Unpadded size: 61.25M",
      "     Extra memory due to padding: 2.75M (1.0x expansion)",
      "     Allocation type: HLO temp",
      "     =========================="], Label.OOM, Action.RESTART),
    # torch_npu's warning of a stream sync timeout and CANN's report (corpus, ascend-pytorch-48)
    (["W NPUStream.cpp:409] Warning: NPU warning, error code is 507046[Error]: ",
      "[Error]: In the specified timeout waiting event, all tasks in the specified stream are not completed. ",
      "EE1002: 2024-09-03-16:50:00.041.231 Stream synchronize timeout. rtDeviceSynchronize execute failed, reason=[stream sync timeout]",
      "        wait for compute device to finish failed, runtime result = 507046.[FUNC:ReportCallError][FILE:log_inner.cpp][LINE:161]"],
     Label.COLLECTIVE_HANG, Action.RESTART),
    # Hydra's proxy that could not bind the program (corpus, khiops-164-hydra-no-topology-library)
    (["[proxy:0:0@8f731690f735] HYDT_topo_bind (tools/topo/topo.c:89): no topology library available",
      "[proxy:0:0@8f731690f735] HYDU_create_process (utils/launch/launch.c:66): bind process failed",
      "[proxy:0:0@8f731690f735] launch_procs (pm/pmiserv/pmip_cb.c:730): create process returned error"],
     Label.CONFIG_ERROR, Action.STOP),
]


@pytest.mark.parametrize(("lines", "label", "action"), ENDINGS, ids=[f"ending:{i}" for i in range(len(ENDINGS))])
def test_log_ending_in_the_form(lines: list[str], label: Label, action: Action, tmp_path: Path) -> None:
    log = tmp_path / "rank.log"
    log.write_text("\n".join(lines) + "\n")
    verdict = diagnose_paths([str(log)]).verdict
    assert (verdict.label, verdict.action) == (label, action)


def test_an_oom_report_entry_after_training_goes_on_is_not_a_failure(tmp_path: Path) -> None:
    """A report's entry followed by the job's progress is a report the job outlived (a retried compile): not its end."""
    log = tmp_path / "rank.log"
    log.write_text("     Allocation type: HLO temp\n"
                   + "".join(f"step {n} loss 2.{n:02d} lr 1e-4 throughput 410 seq/s\n" for n in range(1, 40)))
    assert diagnose_paths([str(log)]).verdict.label is Label.HEALTHY

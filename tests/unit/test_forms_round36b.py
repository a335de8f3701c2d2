# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part B of the misses of round issue23-heldout-36 (mixture-of-experts and long-context parallel
training), each as a rule of its family, with real lines and the near misses the rule must leave alone: DeepEP's
reports of a dispatch or combine whose peer never came, and NVSHMEM's error-check records. Each line is from the
corpus (named by its excerpt), from a public thread, or rendered from its program's format string (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.events import Action, Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR

DEEPEP_FORWARDER = "DeepEP dispatch forwarder timeout (RDMA meta), channel: 4, RDMA: 1, nvl: 4, src RDMA lane: 0, dst NVL: 5, meta: 0, 0, 0, 0"
NVSHMEM_NO_AH = "/dvs/p4/build/sw/rel/gpgpu/toolkit/r12.9/main_nvshmem/src/modules/transport/ibgda/ibgda.cpp:2234: NULL value Unable to create ah."

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # DeepEP's kernels timing out on a peer's counter (printf before trap()), and the host's exceptions
    (DEEPEP_FORWARDER, ERROR, Label.COLLECTIVE_HANG, "corpus (deepep-137-internode-dispatch-timeout-roce-multi-qp)"),
    ("DeepEP dispatch NVL receiver timeout, channel: 5, RDMA: 0, nvl: 6, src RDMA: 1, src nvl: 2, start: 0, end: 0",
     ERROR, Label.COLLECTIVE_HANG, "corpus (deepep-pr181-dispatch-forwarder-timeout-concurrent-qp)"),
    ("DeepEP combine forwarder (NVL check) timeout, channel: 3, RDMA: 1, nvl: 2, src NVL: 5, dst RDMA: 0, head: 12, tail: 12",
     ERROR, Label.COLLECTIVE_HANG, "DeepEP csrc/kernels/internode.cu's combine forwarder printf, rendered"),
    ("DeepEP RDMA sender coordinator timeout, channel: 2, IB: 1, nvl 0, dst IB: 0, tail: 40, remaining: 8",
     ERROR, Label.COLLECTIVE_HANG, "DeepEP csrc/kernels/internode.cu's coordinator printf, rendered"),
    ("DeepEP timeout for dispatch receivers, rank 3, responsible_channel = 5, tokens remained: 12", ERROR,
     Label.COLLECTIVE_HANG, "DeepEP csrc/kernels/intranode.cu's receivers printf, rendered"),
    ("DeepEP timeout check failed: rank = 6, thread = 0, value = 0)", ERROR, Label.COLLECTIVE_HANG,
     "DeepEP csrc/kernels/utils.cuh's barrier check, rendered"),
    ("RuntimeError: DeepEP error: timeout (dispatch CPU)", ERROR, Label.COLLECTIVE_HANG,
     "NVIDIA-NeMo/Automodel#3967 (internode dispatch stalled; the exception DeepEP's buffer.hpp throws)"),
    # NVSHMEM's failed checks on its set-up path: the host's configuration
    (NVSHMEM_NO_AH, ERROR, Label.CONFIG_ERROR, "corpus (nvshmem-33-deepep-low-latency-ibgda-unable-to-create-ah)"),
    ("/sgl-workspace/nvshmem/src/modules/transport/ibgda/ibgda.cpp:3025: non-zero status: 7 ", ERROR,
     Label.CONFIG_ERROR, "corpus (deepep-307-low-latency-l20-ibgda-unable-to-create-ah): the message on the next line"),
    ("/sgl-workspace/nvshmem/src/modules/transport/ibrc/ibrc.cpp:304: NULL value cq creation failed ", ERROR,
     Label.CONFIG_ERROR, "deepseek-ai/DeepEP#126 (test_internode on two H20 nodes)"),
    ("/dvs/p4/build/sw/rel/gpgpu/toolkit/r12.8/main_nvshmem/src/host/mem/mem_heap.cpp:1510: non-zero status: 101 cuMemCreate failed ",
     ERROR, Label.CONFIG_ERROR, "aikitoria/open-gpu-kernel-modules#4 (NVSHMEM's examples on two 5090s)"),
    ("/sgl-workspace/nvshmem/src/modules/transport/ibrc/ibrc.cpp:418: non-zero status: 110 ibv_modify_qp failed", ERROR,
     Label.CONFIG_ERROR, "deepseek-ai/DeepEP#289 (test_low_latency over RoCE)"),
    # the proxy's completion polling failing in flight: an error, no cause stated
    ("/opt/nvshmem/src/modules/transport/ibrc/ibrc.cpp:950: non-zero status: 5 ibv_poll_cq failed ", ERROR, None,
     "NVIDIA/nvshmem src/modules/transport/ibrc/ibrc.cpp's NVSHMEMI_NZ_ERROR_JMP, rendered"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # the low-latency kernels mask the rank that timed out and go on without it
    "Warning: DeepEP timeout for dispatch receive, rank 2, local_expert_idx 5, src_rank 9",  # DeepEP internode_ll.cu, rendered
    # DeepEP's tests passing, and a launcher's argument naming it
    "[testing] Running with BF16, with top-k (async=False, previous=False) ... passed",  # corpus (deepep-237-intranode-tests-pass-before-internode)
    "--enable-deepep-moe --deepep-mode low_latency --moe-dense-tp-size 1",  # sgl-project/sglang#6733
    # NVSHMEM's transport-init print (it goes on with the transports that started) and its debug trace
    "/home/bit/zhangzhiwei/nvshmem-3.5.19-1/src/host/transport/transport.cpp:nvshmemi_transport_init:282: init failed for transport: IBGDA",  # NVIDIA/nvshmem#51
    "/home/bit/zhangzhiwei/nvshmem-3.5.19-1/src/modules/transport/ibgda/ibgda.cpp 4796 End - Enumerating IB devices in the system",  # NVIDIA/nvshmem#51
    # other programs' exit statuses in prose
    "The pid 4242 exit with non-zero status: 1",  # a public repository's fork helper
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_deepep_dispatch_timeouts_are_a_collective_hang(tmp_path: Path) -> None:
    """Every rank's DeepEP kernels reporting the peers they waited for: a collective that never completed."""
    log = tmp_path / "deepep.log"
    log.write_text(DEEPEP_FORWARDER + "\n"
                   "DeepEP dispatch NVL receiver timeout, channel: 9, RDMA: 1, nvl: 3, src RDMA: 0, src nvl: 3, start: 0, end: 0\n"
                   "DeepEP dispatch NVL receiver timeout, channel: 5, RDMA: 1, nvl: 6, src RDMA: 0, src nvl: 4, start: 0, end: 0\n")
    verdict = diagnose_paths([str(log)], now=0.0).verdict
    assert verdict.label is Label.COLLECTIVE_HANG


def test_nvshmem_setup_failure_stops_but_a_run_that_goes_on_is_healthy(tmp_path: Path) -> None:
    """NVSHMEM failing its set-up is configuration to stop for; the same record for one NIC, with NVSHMEM's warning
    that it goes on with the others and training steps after it, is a healthy run."""
    failed = tmp_path / "failed.log"
    failed.write_text(NVSHMEM_NO_AH + "\n\n"
                      "/dvs/p4/build/sw/rel/gpgpu/toolkit/r12.9/main_nvshmem/src/modules/transport/ibgda/ibgda.cpp:2966: non-zero status: 7 create DCT share err.\n"
                      "/dvs/p4/build/sw/rel/gpgpu/toolkit/r12.9/main_nvshmem/src/host/transport/transport.cpp:420: non-zero status: 7 connect EPS failed \n")
    verdict = diagnose_paths([str(failed)], now=0.0).verdict
    assert (verdict.label, verdict.action) == (Label.CONFIG_ERROR, Action.STOP)
    went_on = tmp_path / "went_on.log"
    went_on.write_text(
        NVSHMEM_NO_AH + "\nWARN: Failed to initialize all selected devices. Perf may be limited.\n"
        "[rank0]:[titan] 2026-03-03 15:24:02,281 - root - INFO - step:  1  loss:  8.06832  grad_norm:  1.4637  memory:  1.02GiB(1.08%)  tps: 1,191  tflops: 0.09  mfu: 0.01%\n"
        "[rank0]:[titan] 2026-03-03 15:24:02,458 - root - INFO - step:  2  loss:  7.74952  grad_norm:  1.5518  memory:  1.07GiB(1.13%)  tps: 92,412  tflops: 6.62  mfu: 0.67%\n"
        "[rank0]:[titan] 2026-03-03 15:24:02,506 - root - INFO - step:  3  loss:  6.99885  grad_norm:  2.0142  memory:  1.07GiB(1.13%)  tps: 350,428  tflops: 25.09  mfu: 2.54%\n")
    assert diagnose_paths([str(went_on)], now=0.0).verdict.label is Label.HEALTHY

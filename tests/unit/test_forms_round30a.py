# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part A of the misses of round issue23-heldout-30, each as a rule of its family, with real lines and
the near misses the rule must leave alone: MindSpore's refused device allocations, log15's error levels and Go
net/rpc's closed connection, CUDA's words for a node or a build that cannot run under a fatal check, and
PaddlePaddle's FATAL error type, which is no set-up refused. Each line is from the corpus (named by its excerpt),
from a public thread or repository (named), or is the format the program's source prints (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.errorblock import cause_from
from neuron_watch.diagnosis.exctaxonomy import setup_refusal
from neuron_watch.diagnosis.failureforms import FormKind, cause_of
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import cause_tests, table_tests

ERROR = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # MindSpore's runtime refusing a device allocation
    ("RuntimeError: Malloc for kernel output failed, Memory isn't enough, node:Default/Cast-op446", ERROR, Label.OOM,
     "corpus (mindone-465-sd-lora-malloc-kernel-output-failed)"),
    ("[ERROR] PRE_ACT(54175,fffdbcff91e0,python):2024-10-22-11:24:55.301.443 [mindspore/ccsrc/backend/common/mem_reuse/mem_dynamic_allocator.cc:392] AddMemBlockAndMemBufByEagerFree] TotalUsedMemStatistics : 29356337664 plus TotalUsedByEventMemStatistics : 0 and plus alloc size : 301990400 is more than total mem size : 29464985600.",
     ERROR, Label.OOM, "candle-org/MindAct#1761 (MindNLP's gemma-7b generate on an NPU)"),
    ("Out of Memory!!! Request memory size: 33100113920B, Memory Statistic:", ERROR, Label.OOM,
     "MindSpore's heterogeneous-storage tutorial (the log it shows at batch_size=512 without it)"),
    ("RuntimeError: Device(id:0) memory isn't enough and alloc failed, kernel name: Default/network-WithLossCell/_backbone-Net/Conv2D-op5, alloc size: 1048576B.",
     ERROR, Label.OOM, "the format of MindSpore's device address allocation (mindspore/ccsrc runtime), filled in"),
    # log15's error levels; Go net/rpc's closed connection names the cause
    ('t=2017-10-28T07:31:09+0000 lvl=eror msg="error send grads" error="connection is shut down" stack="[c/cclient.go:217 _obj/_cgo_gotypes.go:174]"',
     ERROR, Label.COMM_ERROR, "corpus (paddle-5189-go-pserver-client-connection-shut-down)"),
    ('grafana         | t=2019-04-24T13:03:38+0000 lvl=eror msg="Exec failed" logger=migrator error="attempt to write a readonly database" sql="UPDATE org_user SET role = \'Viewer\' WHERE role = \'Read Only Editor\'"',
     ERROR, None, "a Grafana image's migration log (a docker-compose note)"),
    ('Dec 13 18:28:12 a3d-laptop lxd[5818]: lvl=eror msg="Failed to start the daemon: ZFS storage pool \\"default\\" could not be imported:',
     ERROR, None, "an LXD daemon's journal (a public bug report)"),
    # glog's native frames of a fatal check in a graph compiler's compile
    ("    @     0x7f90e87a6563  oneflow::Compiler::Compile()", ERROR, Label.COMPILE_ERROR,
     "corpus (libai-497-oneflow-graph-compile-shape-check-failed)"),
    ("    @     0x7f90e7ce1131  oneflow::NNGraph::CompilePlanForRuntime()", ERROR, Label.COMPILE_ERROR,
     "corpus (libai-497-oneflow-graph-compile-shape-check-failed)"),
    ("    @     0x7f7a8d1f671c  xla::gpu::GpuCompiler::RunBackend()", ERROR, Label.COMPILE_ERROR,
     "an XLA GPU autotuner's fatal check, as a public repository's notes keep its stack"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # log15 records at levels that are no failure
    't=2019-04-26T11:05:28+0200 lvl=info msg="Initializing DatasourceCacheService" logger=server',
    'Dec 13 18:28:12 a3d-laptop lxd[5818]: lvl=warn msg="CGroup memory swap accounting is disabled, swap limits will be ignored." t=2018',
    # MindSpore's memory statistics, and the words in prose
    "MindSpore Used memory size: 30684M",
    "When main memory isn't enough, we can use swap memory stored on-disk.",
    # glog frames of the same trace outside the compile's own functions, and glog's own frames
    "    @     0x7f90e868117e  oneflow::SubTskGphBuilderUtil::HasEmptySliceIfSplit()",
    "    @     0x7f90eff21c9a  google::LogMessage::Fail()",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES, cause_of_kinds=frozenset({ERROR}))

#: error lines and the cause their form states
CAUSES: list[tuple[str, Label]] = [
    # CUDA's words under a program's fatal check (a crash, whose cause CUDA states)
    ("F0227 21:38:54.077792  2661 hl_cuda_device.cc:566] Check failed: cudaSuccess == cudaStat (0 vs. 38) Cuda Error: no CUDA-capable device is detectedF0227 21:38:54.077803  2642 hl_cuda_device.cc:566] Check failed: cudaS",
     Label.CONFIG_ERROR),  # corpus (paddle-1468-use-gpu-false-no-cuda-device)
    ("F0123 11:55:36.803860    19 hl_gpu_matrix_kernel.cuh:181] Check failed: cudaSuccess == err (0 vs. 8) [hl_gpu_apply_unary_op failed] CUDA error: invalid device function",
     Label.CONFIG_ERROR),  # corpus (paddlespeech-302-docker-invalid-device-function)
    # Go net/rpc's ErrShutdown under another program's error (Terraform's provisioner, as a troubleshooting note
    # quotes it)
    ("Error: connection is shut down", Label.COMM_ERROR),
]
#: error lines whose form states no cause: a check whose CUDA words name no set-up (cuBLAS's failed execution),
#: CUDA's own memory error (no set-up either)
NO_CAUSE = [
    "F1214 10:55:30.027999    10 hl_cuda_cublas.cc:386] Check failed: stat == CUBLAS_STATUS_SUCCESS (13 vs. 0) [cublas status]: execution failed",
    "F1229 11:45:09.434870 8013 hl_cuda_device.cc:646] Check failed: cudaSuccess == cudaStat (0 vs. 77) Cuda Error: an illegal memory access was encountered",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


@pytest.mark.parametrize("line", [
    # corpus (paddledetection-5879-picodet-blocking-queue-killed): the enforce hint is the check that caught it
    "SystemError: (Fatal) Blocking queue is killed because the data reader raises an exception.   [Hint: Expected killed_ != true, but received killed_:1 == true:1.] (at /paddle/paddle/fluid/operators/reader/blocking_queue.h:166)",
    # corpus (paddledetection-7252-dataloader-process-killed-by-signal)
    "SystemError: (Fatal) DataLoader process (pid 1104) exited is killed by signal: Killed. (at /paddle/paddle/fluid/imperative/data_loader.cc:181)",
])
def test_paddle_fatal_is_no_setup_refused(line: str) -> None:
    assert setup_refusal(line) is None


def test_paddle_invalid_argument_still_states_a_refusal() -> None:
    """Paddle's other error types keep their reading: an InvalidArgument worded as a refusal is one."""
    line = "ValueError: (InvalidArgument) Expected dim_x == dim_y, but received dim_x:3 != dim_y:4. [Hint: Expected dim_x == dim_y, but received dim_x:3 != dim_y:4.]"
    assert setup_refusal(line) is not None


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("oom/mindone-465-sd-lora-malloc-kernel-output-failed.log", Label.OOM, Action.RESTART),
    ("comm_error/paddle-5189-go-pserver-client-connection-shut-down.log", Label.COMM_ERROR, Action.RESTART),
    ("config_error/paddlespeech-302-docker-invalid-device-function.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/paddle-1468-use-gpu-false-no-cuda-device.log", Label.CONFIG_ERROR, Action.STOP),
    ("compile_error/libai-497-oneflow-graph-compile-shape-check-failed.log", Label.COMPILE_ERROR, Action.STOP),
    ("other_crash/paddledetection-5879-picodet-blocking-queue-killed.log", Label.OTHER_CRASH, Action.RESTART),
    # the same convention's healthy records stay healthy, and so do MindSpore's runs
    ("healthy/mindaudio-92-deepspeech2-gpu-regression-loss-records.log", Label.HEALTHY, Action.WAIT),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason


def _explain(text: str) -> Label | None:
    stated = cause_of(text)
    return None if stated is None else stated[0]


def test_a_failure_line_outside_any_block_is_read_with_the_block_right_under_it() -> None:
    """glog's stack-trace header that interleaved threads printed above the check's own record (corpus,
    paddle-1468-use-gpu-false-no-cuda-device): the record under it states the cause."""
    lines = (CORPUS / "config_error/paddle-1468-use-gpu-false-no-cuda-device.log").read_text().splitlines()
    header = lines.index("*** Check failure stack trace: ***")
    decision = cause_from(lines, header, _explain)
    assert decision is not None and decision.label is Label.CONFIG_ERROR and decision.index == header + 1


def test_a_line_between_the_failure_and_a_block_is_another_report() -> None:
    """Output of the program between the header and a later block means it went on: not this failure's cause."""
    lines = ["*** Check failure stack trace: ***",
             "I0227 21:38:53.474694  2632 GradientMachine.cpp:93] Init parameters done.",
             "F0123 11:55:36.803860    19 hl_gpu_matrix_kernel.cuh:181] Check failed: cudaSuccess == err (0 vs. 8) [hl_gpu_apply_unary_op failed] CUDA error: invalid device function"]
    assert cause_from(lines, 0, _explain) is None

# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part B of the misses of round issue23-heldout-30 (accelerators other than NVIDIA's), each as a rule
of its family, with real lines and the near misses the rule must leave alone: spdlog's and emilk/loguru's severity
fields, libc++abi's uncaught exception, Metal's and oneAPI's out-of-memory statuses, a mach exception, a compile's
progress bar, a device not acquired, a compile that failed, PJRT's version handshake, Tensile's missing kernels.
Each line is from the corpus (named by its excerpt), from a public thread or repository (named), or is the format
the program's source prints (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.diagnosis.heldout.round30b import round30b_form
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import cause_tests, table_tests

ERROR, CRASH = FormKind.ERROR, FormKind.CRASH

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # spdlog's level in small letters: in brackets, or between bars
    ("[16:18:46.542] [poptorch::python] [critical] poptorch.poptorch_core.Error: In poptorch/popart_compiler/source/CompilerImpl.cpp:627: 'poptorch_cpp_error': Failed to acquire 1 IPU(s)",
     ERROR, Label.CONFIG_ERROR, "corpus (poptorch-3-failed-to-acquire-ipu-after-training)"),
    ("2026-07-18 00:48:19.094 | critical |          Always | TT_THROW: TIMEOUT: device timeout, potential hang detected, the device is unrecoverable (assert.hpp:104)",
     ERROR, None, "corpus (tt-xla-5788-device-timeout-potential-hang)"),
    ("2026-07-24 01:16:56.559 | critical |          Always | TT_THROW: Device 0: Timeout (240000 ms) waiting for physical cores to finish: 14-3, 14-2. (assert.hpp:104)",
     ERROR, None, "corpus (tt-xla-5789-wan14b-device-timeout-waiting-for-cores)"),
    ("[2024-05-01 10:00:00.000] [basic_logger] [error] Some error message with arg: 1",
     ERROR, None, "spdlog's default pattern, its README's example message filled in"),
    # emilk/loguru's verbosity column
    ("2026-07-24 01:12:56.441 ( 453.484s) [        FC9F56C0]                utils.h:62     ERR| Exception:",
     ERROR, None, "corpus (tt-xla-5789-wan14b-device-timeout-waiting-for-cores)"),
    ("2015-10-04 14:30:02.101 (   0.101s) [main thread     ]             loguru_test.cpp:82   FATL| CHECK FAILED:  x == 5",
     CRASH, None, "emilk/loguru's preamble (loguru.cpp print_preamble) with its FATL verbosity, filled in"),
    # libc++abi's uncaught exception, and Metal's out-of-memory status in it
    ("[error] libc++abi: terminating due to uncaught exception of type std::runtime_error: [METAL] Command buffer execution failed: Insufficient Memory",
     CRASH, Label.OOM, "corpus (vmlx-58-metal-command-buffer-insufficient-memory)"),
    ("libc++abi: terminating due to uncaught exception of type std::runtime_error: [METAL] Command buffer execution failed: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)",
     CRASH, Label.OOM, "ml-explore/mlx#479 (mx.eye(28000) on an 8 GB machine)"),
    ("libc++abi.dylib: terminating with uncaught exception of type NSException",
     CRASH, None, "the older libc++abi wording, as macOS applications print it"),
    ("error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)",
     ERROR, Label.OOM, "ollama/ollama#6257 (ggml-metal's log of a failed command buffer)"),
    # a mach exception
    ("EXC_BAD_ACCESS  SIGSEGV  KERN_INVALID_ADDRESS at 0x0000000104ac4008",
     CRASH, None, "corpus (mlx-4192-jaccl-sigsegv-thunderbolt-unplugged)"),
    ("Exception Type:        EXC_BAD_ACCESS (SIGSEGV)", CRASH, None, "a macOS crash report's header (Apple's format)"),
    ("* thread #1, queue = 'com.apple.main-thread', stop reason = EXC_BAD_ACCESS (code=1, address=0x0)",
     CRASH, None, "lldb's stop reason as users paste it"),
    # a compile's progress bar
    ("Graph compilation:  84%|████████▍ | 84/100 [1:09:59<20:26]  ", FormKind.COMPILE_RUNNING, None,
     "corpus (poptorch-8-graph-compilation-84-percent)"),
    ("Graph compilation: 100%|██████████| 100/100 [08:16<00:00]", FormKind.COMPILE_DONE, None,
     "graphcore examples (a PopTorch CIFAR-10 run's log)"),
    # a device the runtime could not acquire
    ("RuntimeError: synStatus=20 [Device already acquired] Device acquire failed.", ERROR, Label.CONFIG_ERROR,
     "huggingface/tgi-gaudi#93 (the maintainer's reading of the container's log)"),
    ("HCCL demo error: In function initDevice(): synDeviceAcquire(&resources.deviceHandle, nullptr) failed with synapse error: 20",
     ERROR, Label.CONFIG_ERROR, "corpus (hccl-demo-44-invalid-server-type-device-acquire)"),
    ("RuntimeError: Unable to initialize backend 'tpu': ABORTED: The TPU is already in use by process with pid 2718466. Not attempting to load libtpu.so in this process. (set JAX_PLATFORMS='' to automatically choose an available backend)",
     ERROR, Label.CONFIG_ERROR, "corpus (sglang-jax-857-tpu-already-in-use-child-exit)"),
    # a compile that failed, in the compiler's words
    ("[rank2]: RuntimeError: Graph compile failed. synStatus=synStatus 26 [Generic failure].", ERROR,
     Label.COMPILE_ERROR, "corpus (optimum-habana-1426-graph-compile-failed-synstatus-26)"),
    ("[rank0]: RuntimeError: Graph compile failed. synStatus=synStatus 26 [Generic failure]", ERROR,
     Label.COMPILE_ERROR, "HabanaAI/vllm-fork#484 (8x Gaudi2)"),
    ("MIOpen Error: /MIOpen/src/hipoc/hipoc_program.cpp:286: Code object build failed. Source: MIOpenIm2d2Col.cl",
     ERROR, Label.COMPILE_ERROR, "corpus (miopen-1204-code-object-build-failed-im2d2col)"),
    ("MIOpen Error: /MIOpen/src/hipoc/hipoc_program.cpp:304: Code object build failed. Source: convolution_forward_implicit_gemm_v6r1_dlops_nchw_kcyx_nkhw.cpp",
     ERROR, Label.COMPILE_ERROR, "a public report of MIOpen on gfx1100 (the compile's error before it)"),
    # PJRT's version handshake
    ("F0000 00:00:1713630999.125092  494916 pjrt_computation_client.cc:158] Non-OK-status: tpu_status status: INVALID_ARGUMENT: Mismatched PJRT plugin PJRT API version (0.47) and framework PJRT API version 0.40).",
     ERROR, Label.CONFIG_ERROR, "corpus (pytorch-xla-6949-mismatched-pjrt-plugin-api-version)"),
    # Tensile's kernel library not there
    ("rocblaslt error: Could not load /opt/rocm-6.1.3/lib/hipblaslt/library/TensileLibrary.dat", ERROR,
     Label.CONFIG_ERROR, "corpus (hipblaslt-856-could-not-load-tensilelibrary-segfault)"),
    ("rocBLAS error: Could not load C:\\Program Files\\AMD\\ROCm\\6.1\\bin\\/rocblas/library/TensileLibrary_lazy_gfx1103.dat",
     ERROR, Label.CONFIG_ERROR, "likelovewant/ROCmLibs-for-gfx1103-AMD780M-APU#12 (HIP SDK on Windows)"),
    # Poplar's unrecoverable system error
    ("poptorch.poptorch_core.UnrecoverableError: In unknown:0: 'poplar_unrecoverable_runtime_error': fabric_atomic_increment_hsp_register: Could not complete operation. Fabric error: connection not established: CONNECTION_KILL, device 3, IP 10.5.17.11:50052. IPUoF Server unreachable at 2023-02-03T15:32:48.181819Z",
     ERROR, Label.HARDWARE_ERROR, "corpus (poptorch-14-ipuof-fabric-connection-not-established)"),
    ("[00:02:21.356] [poptorch::python] [critical] poptorch.poptorch_core.UnrecoverableError: In unknown:0: 'poplar_unrecoverable_runtime_error': read_config_space(offset=0x3030): Could not complete operation. Fabric error: QP is not operational, device 1, IP 10.1.5.1:50054. IPUoF Server unreachable at 2024-11-14T00:02:21.345390Z",
     ERROR, Label.HARDWARE_ERROR, "a public MNIST PopTorch run's log (an IPU-over-fabric server lost)"),
    # a kernel that needs double precision on a GPU without it
    ("RuntimeError: Native API failed. Native API returns: -996 (Function exists but address is not available)",
     ERROR, None, "corpus (ipex-285-invalid-kernel-uses-fp64-math-arc): the status alone states no cause"),
    ("invalid_kernel(\"uses-fp64-math\")", ERROR, Label.CONFIG_ERROR,
     "corpus (ipex-285-invalid-kernel-uses-fp64-math-arc)"),
    ("RuntimeError: Required aspect fp64 is not supported on the device", ERROR, Label.CONFIG_ERROR,
     "SYCL's refusal as PyTorch's XPU oneDNN wrapper matches it (its FP64 error strings)"),
    # oneAPI's out-of-memory status
    ("level_zero backend failed with error: 39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)", ERROR, Label.OOM,
     "corpus (physical-ai-studio-440-level-zero-out-of-device-memory)"),
    ("RuntimeError: level_zero backend failed with error: 39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)", ERROR,
     Label.OOM, "a public report of a ComfyUI workflow on an Intel XPU"),
]

#: lines of the same words, or of the same programs, that are not these forms
NEAR_MISSES = [
    # spdlog's and tt-metal's records at levels that are no failure
    "[2024-05-01 10:00:00.000] [basic_logger] [info] Welcome to spdlog!",
    "[12:13:07.892] [poptorch::python] [warning] No device set in torch.randn(): forcing to IPU",
    "2025-06-10 12:00:00.000 | info     |          Device | Opening user mode device driver (tt_cluster.cpp:190)",
    # loguru's INFO and numbered verbosities
    "2015-10-04 14:30:02.101 (   0.000s) [main thread     ]             loguru.cpp:362      0| arguments: ./loguru_test test -v1",
    # healthy runs of the corpus (an MLX LoRA row, vLLM-HPU's warmup, a compile announced, a c10 warning)
    "Iter 46: Train loss 0.097, Learning Rate 1.179e-04, It/sec 2.132, Tokens/sec 526.522, Trained Tokens 11086, Peak mem 2.791 GB",
    "INFO 08-26 07:34:40 habana_model_runner.py:1192] [Warmup][Prompt][8/56] batch_size:32 seq_len:768 free_mem:13.86 GiB",
    "compiling the model...",
    "MIOpen(HIP): Warning [IsEnoughWorkspace] [GetSolutionsFallback WTI] Solver <GemmFwdRest>, workspace required: 25657344, provided ptr: 0 size: 0",
    # a progress bar that is no compile
    "Epochs: 100%|██████████| 10/10 [01:35<00:00,  9.57s/it]",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES, cause_of_kinds=frozenset({ERROR}))

#: error lines and the cause their form states
CAUSES: list[tuple[str, Label]] = [
    ("Kaggle's pjrt_c_api_helpers.cc:258] Unexpected error status Unexpected PJRT_Plugin_Attributes_Args size: expected 32, got 24. The plugin is likely built with a later version than the framework. This plugin is built with PJRT API version 0.75.",
     Label.CONFIG_ERROR),  # Kaggle/docker-python#1499 (libtpu for jax beside torch_xla), its tag added to read it as an error
    ("rocBLAS error: Cannot read /home/redacted/venv/lib/python3.10/site-packages/torch/lib/rocblas/library/TensileLibrary.dat: Illegal seek",
     Label.CONFIG_ERROR),  # ROCm/rocBLAS#1339 (a 7800 XT without the architecture's kernels)
    ("  what():  /MIOpen/src/hipoc/hipoc_program.cpp:299: Code object build failed. Source: naive_conv.cpp",
     Label.COMPILE_ERROR),  # a public report of MIOpen's naive_conv kernel under a C++ terminate
]
#: error lines whose form states no cause
NO_CAUSE = [
    "level_zero backend failed with error: 40 (UR_RESULT_ERROR_OUT_OF_RESOURCES)",
    "[METAL] Command buffer execution failed: Caused GPU Timeout Error (00000002:kIOGPUCommandBufferCallbackErrorTimeout)",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


def test_a_port_in_use_is_not_a_device_held() -> None:
    """A device held by another process is configuration; a server's port in the same words is not this round's form
    (a port the program moves off is another form's, or none)."""
    assert round30b_form("Port 8000 is already in use by another process, trying 8001") is None


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("oom/vmlx-58-metal-command-buffer-insufficient-memory.log", Label.OOM, Action.RESTART),
    ("oom/physical-ai-studio-440-level-zero-out-of-device-memory.log", Label.OOM, Action.RESTART),
    ("compiling/poptorch-8-graph-compilation-84-percent.log", Label.COMPILING, Action.WAIT),
    ("compile_error/miopen-1204-code-object-build-failed-im2d2col.log", Label.COMPILE_ERROR, Action.STOP),
    ("compile_error/optimum-habana-1426-graph-compile-failed-synstatus-26.log", Label.COMPILE_ERROR, Action.STOP),
    ("config_error/sglang-jax-857-tpu-already-in-use-child-exit.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/pytorch-xla-6949-mismatched-pjrt-plugin-api-version.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/hipblaslt-856-could-not-load-tensilelibrary-segfault.log", Label.CONFIG_ERROR, Action.STOP),
    # a crash that holds no cause but is no longer healthy: the hang and the lost link restart as a crash does
    ("collective_hang/tt-xla-5789-wan14b-device-timeout-waiting-for-cores.log", Label.OTHER_CRASH, Action.RESTART),
    ("comm_error/mlx-4192-jaccl-sigsegv-thunderbolt-unplugged.log", Label.OTHER_CRASH, Action.RESTART),
    # healthy runs of the same ecosystems stay healthy
    ("hardware_error/poptorch-14-ipuof-fabric-connection-not-established.log", Label.HARDWARE_ERROR,
     Action.DRAIN_AND_RESTART),
    ("healthy/ipex-808-operatorentry-overriding-kernel-warning.log", Label.HEALTHY, Action.WAIT),
    ("healthy/unsloth-1289-mlx-lora-iter-train-loss.log", Label.HEALTHY, Action.WAIT),
    ("healthy/alltalk-tts-397-miopen-isenoughworkspace-warnings.log", Label.HEALTHY, Action.WAIT),
])
def test_excerpts_of_the_round(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason

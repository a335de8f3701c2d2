# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half B of the misses of round issue23-heldout-25 (an allocator's failure in its own layout: ggml's
device buffers and tcmalloc's large allocation answered NULL; CUDA samples' check macro; CUDA's error 802 in its
words; systemd's record of a unit that failed), as rules of their families, with real lines and the near misses
each rule must leave alone. Each line is from the corpus (named by its excerpt), from a public thread or page
(named), or is the format the program's source prints, filled in (the source is named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind, cause_of
from neuron_watch.diagnosis.heldout.round25b import large_allocation
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import table_tests

E = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # a GPU allocation call named as failed, out of memory (ggml-cuda.cu), bare and under ggml's level letter
    ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 279356.51 MiB on device 0: cudaMalloc failed: out of memory", E, Label.OOM,
     "corpus (ik-llama-cpp-749-cudamalloc-compute-buffer-280gb)"),
    ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 14136.04 MiB on device 0: cudaMalloc failed: out of memory", E, Label.OOM,
     "corpus (llama-cpp-16725-rocm-compute-buffer-cudamalloc-oom), a ROCm build"),
    ("E ggml_backend_cuda_buffer_type_alloc_buffer: allocating 13285.50 MiB on device 0: cudaMalloc failed: out of memory", E, Label.OOM,
     "a llama-server supervisor's README, the reason it reports for a model that did not fit (code corpus)"),
    # Vulkan's refusal of memory (ggml-vulkan.cpp and vulkan.hpp's result name)
    ("ggml_vulkan: Device memory allocation of size 1056622080 failed.", E, Label.OOM,
     "a llama-cli user's notes, a Qwen3 35B model on an AMD card (code corpus)"),
    ("ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory", E, Label.OOM,
     "the same notes, the exception ggml caught (code corpus)"),
    ("ggml_vulkan: Device memory allocation of size 268435456 failed.", E, Label.OOM,
     "a project's notes, a 4 GB RTX 2050 offloading every layer (code corpus)"),
    # a buffer an allocator could not give (ggml-alloc.c, llama.cpp)
    ("ggml_gallocr_reserve_n: failed to allocate ROCm0 buffer of size 14822711296", E, Label.OOM,
     "corpus (llama-cpp-16725-rocm-compute-buffer-cudamalloc-oom)"),
    ("alloc_tensor_range: failed to allocate CUDA0 buffer of size 151851674624", E, Label.OOM,
     "corpus (llama-cpp-20431-cudamalloc-oom-unable-to-allocate-cuda0-buffer)"),
    ("llama_model_load: error loading model: unable to allocate CUDA0 buffer", E, Label.OOM,
     "corpus (llama-cpp-20431-cudamalloc-oom-unable-to-allocate-cuda0-buffer)"),
    ("graph_reserve: failed to allocate compute buffers", E, Label.OOM,
     "ggml-org/llama.cpp#16748 (a compute buffer that did not fit with pipeline parallelism)"),
    ("E llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache", E, Label.OOM,
     "a llama-server supervisor's README (code corpus)"),
    # tcmalloc's large allocation answered NULL (gperftools src/tcmalloc.cc ReportLargeAlloc, glibc's "(nil)")
    ("tcmalloc: large alloc 2147483648 bytes == (nil) @  0x20656772616c203a", E, Label.OOM,
     "a Chromium bug's renderer log before 'FATAL:process_util_linux.cc(726)] Out of memory.' (code corpus)"),
    ("tcmalloc: large alloc 2147487744 bytes == (nil) @  0x7fc56a4ab898 0x7fc56a4ab9aa 0x7fc56a4acb2f 0x7fc56a4ab69b", E, Label.OOM,
     "the same Chromium bug, another reporter's build (code corpus)"),
    # CUDA samples' check macro (helper_cuda.h), the cause its enum name states
    ('CUDA error at bandwidthTest.cu:256 code=802(cudaErrorSystemNotReady) "cudaSetDevice(currentDevice)" ', E, Label.CONFIG_ERROR,
     "corpus (pytorch-35710-bandwidthtest-802-system-not-ready)"),
    ('CUDA error at cgpu_cuda_malloc.cu:119 code=2(cudaErrorMemoryAllocation) "cudaMalloc( (void**)&dev_c, malloc_size)"', E, Label.OOM,
     "Alibaba Cloud's cGPU documentation, its memory-isolation test (code corpus)"),
    ('CUDA error at combosCheck.cu:301 code=2(cudaErrorMemoryAllocation) "cudaMalloc( reinterpret_cast<void **>( &comboStruct[ompId].d_treeCombos ), gpuWork[ompId].treesPerDevice * k_numEdges * sizeof(int) )"', E, Label.OOM,
     "a phylogenetics tool's README (code corpus)"),
    # CUDA's error 802 in the runtime's words
    ("  what():  Error (gpu_burn-drv.cpp:298): system not yet initialized", E, Label.CONFIG_ERROR,
     "corpus (gpu-burn-92-h100-hbm3-system-not-yet-initialized)"),
    ("ggml_cuda_init: failed to initialize CUDA: system not yet initialized", E, Label.CONFIG_ERROR,
     "ollama/ollama#12136 (the fabric manager at the wrong version)"),
    ("RuntimeError: cuda runtime error (802) : system not yet initialized at /opt/conda/conda-bld/pytorch_1579022034529/work/aten/src/THC/THCGeneral.cpp:50", E, Label.CONFIG_ERROR,
     "pytorch/pytorch#35710"),
    # systemd's record of a unit that failed (src/core/service.c, src/core/unit.c)
    ("Sep 18 03:19:01 ubuntu2404 systemd[1]: nvidia-fabricmanager.service: Control process exited, code=exited, status=1/FAILURE", E, None,
     "corpus (cube-studio-29-fabricmanager-nothing-to-do-on-4090)"),
    ("Mar 03 19:03:41 ubuntu-dev-vm systemd[1]: kafka.service: Main process exited, code=exited, status=1/FAILURE", E, None,
     "a Kafka service's journal in a tutorial (code corpus)"),
    ("Feb 21 22:52:16 blueharvestai systemd[1]: docker.service: Failed with result 'exit-code'.", E, None,
     "a GPU host's troubleshooting notes, dockerd failing to start (code corpus)"),
]

#: lines that look like the forms and must read as nothing
NEAR_MISSES = [
    # tcmalloc's note of a large allocation that succeeded (corpus: torch-ngp-113, actionvlad-7 is healthy)
    "tcmalloc: large alloc 11498029056 bytes == 0x7f52590bc000 @  0x7f568599a1e7 0x7f56152510ce 0x7f56152a7cf5",
    # a size no host has: an integer underflow tcmalloc also refuses (Vivado synthesis, code corpus), and malloc(-1)
    # reported as 0 bytes (a benchmark's notes on allocators, code corpus)
    "tcmalloc: large alloc 115875935977472 bytes == (nil)",
    'the error message says "tcmalloc: large alloc _0_ bytes == (nil)"',
    # a CUDA allocation that failed for another reason than memory states no cause of this form
    "ggml_cuda_host_malloc: failed to allocate 1900,00 MiB of pinned memory: invalid argument",
    # ggml's records of buffers it did allocate
    "llama_kv_cache_init:      CUDA0 KV buffer size =   379.23 MiB",
    "llama_new_context_with_model: pipeline parallelism enabled (n_copies=4)",
    # a unit that exited cleanly
    "Mar 03 19:04:46 ubuntu-dev-vm systemd[1]: kafka.service: Main process exited, code=exited, status=0/SUCCESS",
    "Feb 21 22:52:16 host systemd[1]: docker.service: Failed with result 'success'.",
    # CUDA's documentation of error 802 quoted in prose (cuda_runtime_api: cudaErrorSystemNotReady)
    "This error indicates that the system is not yet ready to start any CUDA work.",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_the_cause_is_read_whatever_the_level() -> None:
    """A line already known as an error (a warning that CUDA could not start) states 802's cause at any level."""
    line = ("/opt/conda/envs/workflow/lib/python3.9/site-packages/torch/cuda/__init__.py:129: UserWarning: CUDA "
            "initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
            "calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized "
            "(Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:109.)")  # corpus: dstack-2348
    stated = cause_of(line)
    assert stated is not None and stated[0] is Label.CONFIG_ERROR, stated


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("oom/ik-llama-cpp-749-cudamalloc-compute-buffer-280gb.log", Label.OOM, Action.RESTART),
    ("oom/llama-cpp-16725-rocm-compute-buffer-cudamalloc-oom.log", Label.OOM, Action.RESTART),
    ("oom/llama-cpp-20431-cudamalloc-oom-unable-to-allocate-cuda0-buffer.log", Label.OOM, Action.RESTART),
    ("config_error/pytorch-35710-bandwidthtest-802-system-not-ready.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/gpu-burn-92-h100-hbm3-system-not-yet-initialized.log", Label.CONFIG_ERROR, Action.STOP),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason


def test_a_failed_unit_is_not_a_healthy_log() -> None:
    """The fabric manager's unit exiting 1 (its words say there is no NVSwitch to manage: only the thread says
    configuration): a failure, not a healthy log."""
    verdict = diagnose_paths([str(CORPUS / "config_error/cube-studio-29-fabricmanager-nothing-to-do-on-4090.log")]).verdict
    assert verdict.label is not Label.HEALTHY, verdict.reason


@pytest.mark.parametrize(("line", "size"), [
    ("tcmalloc: large alloc 26052075520 bytes == 0x1fbca000 @  0x7f4a26405f21 0x7f4a23f93ae5", 26052075520),  # corpus: kchar-11
    ("tcmalloc: large alloc 1073741824 bytes == 0x7f9dcbd9a000 @ ", 1073741824),  # a Chromium bug's log (code corpus)
    ("**tcmalloc: large alloc 44581601280 bytes** == 0x7f6ef822c000 @  0x7f7a28081001", 44581601280),  # corpus: mixtext-15, markdown bold
    ("tcmalloc: large alloc 2147483648 bytes == (nil) @  0x20656772616c203a", None),  # refused, not granted
    ("large alloc warnings can be ignored", None),
])
def test_the_note_of_a_granted_large_allocation(line: str, size: int | None) -> None:
    assert large_allocation(line) == size


def test_a_kill_right_after_a_large_allocation_is_the_hosts_memory(tmp_path: Path) -> None:
    """SIGKILL on the line after tcmalloc's note: out of memory (corpus: kchar-11); the same note with no kill after
    it is a healthy run's (corpus: actionvlad-7), and a kill far from any note says nothing of its sender."""
    kchar = diagnose_paths([str(CORPUS / "oom/kchar-11-tcmalloc-large-alloc-26gb-killed.log")]).verdict
    assert (kchar.label, kchar.action) == (Label.OOM, Action.RESTART), kchar.reason
    healthy = diagnose_paths([str(CORPUS / "healthy/actionvlad-7-tcmalloc-large-alloc-warning.log")]).verdict
    assert healthy.label is Label.HEALTHY, healthy.reason
    far = tmp_path / "far.log"
    far.write_text("tcmalloc: large alloc 1073741824 bytes == 0x7f9dcbd9a000 @ \n"
                   + "".join(f"epoch 1 step {i} loss 0.5\n" for i in range(6)) + "Killed\n")
    verdict = diagnose_paths([str(far)]).verdict
    assert verdict.label is Label.OTHER_CRASH, verdict.reason

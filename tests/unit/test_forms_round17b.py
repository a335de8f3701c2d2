# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half B of the misses of round issue23-heldout-17 (a row of Inductor's autotune table without its
header, torch.compile's refusal of a GPU too old for Triton and dynamo's "raised:" over it, a C/C++ assertion record
whose message states a set-up), each as a rule of its family, with real lines and the near misses the rule must
leave alone. (The fourth, a gdb backtrace whose innermost frames the CUDA driver left unnamed, is tested with the
other dumps in test_dumps.py.)

Each line is from the corpus (tests/data/real-logs, named by its excerpt) or is the format a project's source
prints, filled in (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.events import Action, Label
from tests.unit.form_table import cause_tests, table_tests
from tests.unit.test_forms_round11 import PROGRESS, _verdict

E = FormKind.ERROR
RUNNING = FormKind.COMPILE_RUNNING

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # a Triton choice's row of Inductor's autotune table (select_algorithm.py log_results)
    ("  triton_mm_97 1.4538 ms 90.8% ACC_TYPE='tl.float32', ALLOW_TF32=True, BLOCK_K=32, BLOCK_M=128, BLOCK_N=128, EVEN_K=True, GROUP_M=8, USE_FAST_ACCUM=False, num_stages=3, num_warps=4",
     RUNNING, None, "corpus (kandinsky-5-35)"),
    ("  triton_mm_13 4.1953 ms 98.1% ACC_TYPE='tl.float32', ALLOW_TF32=False, BLOCK_K=32, BLOCK_M=128, BLOCK_N=128, EVEN_K=True, GROUP_M=8, USE_FAST_ACCUM=False, num_stages=3, num_warps=4",
     RUNNING, None, "ComfyUI's torch.compile on Windows (woct0rdho/triton-windows#169)"),
    ("[default0]:  triton_mm_337 0.0288 ms 96.4% ACC_TYPE='tl.float32', ALLOW_TF32=True, BLOCK_K=32, BLOCK_M=16, BLOCK_N=64, B_PROLOGUE_CAST_TYPE=None, EVEN_K=True, GROUP_M=8, num_stages=5, num_warps=4",
     RUNNING, None, "the format under torchrun's --tee prefix (sam2#592's row)"),
    # torch.compile's refusal of a GPU Triton cannot compile for (torch/_inductor/exc.py GPUTooOldForTriton)
    ("RuntimeError: Found NVIDIA GeForce GTX 1080 Ti which is too old to be supported by the triton GPU compiler, which is used as the backend. Triton only supports devices of CUDA Capability >= 7.0, but your device is of CUDA capability 6.1",
     E, Label.CONFIG_ERROR, "corpus (nnunet-2349)"),
    ("[rank0]: RuntimeError: Found Tesla P100-PCIE-16GB which is too old to be supported by the triton GPU compiler, which is used as the backend. Triton only supports devices of CUDA Capability >= 7.0, but your device is of CUDA capability 6.0",
     E, Label.CONFIG_ERROR, "vLLM on a P100 under dynamo (the rank prefix)"),
    ("as the backend. Triton only supports devices of CUDA Capability >= 7.0, but your device is of CUDA capability 5.2",
     E, Label.CONFIG_ERROR, "the same message wrapped by a terminal before its second sentence (a GTX 960)"),
]

#: lines that look like one of the forms above and must read as nothing
NEAR_MISSES = [
    # an aten choice's row (no Triton config: its neighbours say the same), the benchmarking summary's start
    "  mm 0.3848 ms 100.0% ",
    # Triton's own autotuner when it has chosen (triton/runtime/autotuner.py: "best config selected"), a done line
    "Triton autotuning for function _fwd_kernel finished after 2.31s; best config selected: BLOCK_M: 128, BLOCK_N: 64, num_warps: 4, num_ctas: 1, num_stages: 3, maxnreg: None;",
    # a config in Inductor's generated source (a kernel's heuristics, printed in a compile error's dump)
    "        triton.Config({'XBLOCK': 128, 'R0_BLOCK': 8}, num_warps=4, num_stages=1),",
    # the refusal as a warning that falls back to eager
    "UserWarning: Found Tesla P40 which is too old to be supported by the triton GPU compiler; falling back to eager",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


#: error lines whose words state a cause: (line, the cause)
CAUSES: list[tuple[str, Label]] = [
    # TensorRT-LLM's failed check (tllmException.h throwRuntimeError) with TLLM_CHECK_WITH_INFO's sentence
    ("[TensorRT-LLM][ERROR] Assertion failed: Unsupported architecture (/home/build/TensorRT_LLM/TensorRT-LLM-master/cpp/tensorrt_llm/kernels/contextFusedMultiHeadAttention/fmhaRunner.cpp:87)",
     Label.CONFIG_ERROR),  # corpus (tensorrt-llm-320)
    ("RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: Unsupported Arch (/opt/tritonserver/TensorRT-LLM/cpp/tensorrt_llm/kernels/cutlass_kernels/cutlass_preprocessors.cpp:147)",
     Label.CONFIG_ERROR),  # Tlntin/Qwen-TensorRT-LLM#15, the CUTLASS preprocessor on a pre-Volta card
    ("[TensorRT-LLM][ERROR] [TensorRT-LLM][ERROR] Assertion failed: Error opening engine file: ../../examples/gpt/gpt_175b/gpt_175b_float16_tp8_rank6.engine (/code/tensorrt_llm/cpp/tensorrt_llm/runtime/utils/sessionUtils.cpp:42)",
     Label.CONFIG_ERROR),  # corpus (tensorrt-llm-693)
]

#: error lines near those forms that state no cause
NO_CAUSE = [
    # a bare TLLM_CHECK(expr): the expression, no sentence (TensorRT-LLM#583, #699)
    "[TensorRT-LLM][ERROR] tensorrt_llm::common::TllmException: [TensorRT-LLM][ERROR] Assertion failed: d == a + length (/app/tensorrt_llm/cpp/tensorrt_llm/plugins/gptAttentionCommon/gptAttentionCommon.cpp:320)",
    "[TensorRT-LLM][ERROR] Assertion failed: mNextBlocks.empty() (/home/jenkins/agent/workspace/LLM/main/L0_PostMerge/llm/cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp:160)",
    # the words without the assertion's structure: a message about the architecture that is no check of ours
    "ERROR: Unsupported architecture reported by uname, see the install guide",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


# -- whole logs, as the judge reads them ------------------------------------------------------------

KANDINSKY_AUTOTUNE = [row for row, kind, _, _ in FORMS if kind is RUNNING][:2]

NNUNET_TOO_OLD = [
    " raise RuntimeError(",
    "torch._dynamo.exc.BackendCompilerFailed: backend='compile_fn' raised:",
    FORMS[3][0],
]

TRTLLM_ENGINE_MISSING = [
    CAUSES[2][0],
    "1       0x55af5ac89de2 tensorrt_llm::common::throwRuntimeError(char const*, int, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&) + 100",
    "2       0x7fb9b85da8b1 /code/tensorrt_llm/cpp/build/tensorrt_llm/libtensorrt_llm.so(+0x46c8b1) [0x7fb9b85da8b1]",
]

ENDINGS = [
    # a log cut inside Inductor's autotune table: a compile at work
    (KANDINSKY_AUTOTUNE, Label.COMPILING, Action.WAIT),
    # ... and the table's summary that ends it, then the training going on, is healthy (triton-windows#169's summary)
    ([*KANDINSKY_AUTOTUNE, "SingleProcess AUTOTUNE benchmarking takes 0.9773 seconds and 0.6039 seconds precompiling for 17 choices",
      *PROGRESS], Label.HEALTHY, Action.WAIT),
    # dynamo's "raised:" over Triton's refusal of the GPU (corpus nnunet-2349)
    (NNUNET_TOO_OLD, Label.CONFIG_ERROR, Action.STOP),
    # TensorRT-LLM's failed check for an engine file not built, its numbered frames after it (corpus tensorrt-llm-693)
    (TRTLLM_ENGINE_MISSING, Label.CONFIG_ERROR, Action.STOP),
]


@pytest.mark.parametrize(("lines", "label", "action"), ENDINGS, ids=[f"ending:{i}" for i in range(len(ENDINGS))])
def test_log_ending_in_the_form(lines: list[str], label: Label, action: Action) -> None:
    assert _verdict(lines) == (label, action)


def test_a_compile_raising_what_it_cannot_compile_stays_a_compile_error() -> None:
    """dynamo's "raised:" over an exception that states no set-up (Triton's own compilation error) is the
    compiler's failure, and a set-up line that is not right under the colon is not what it raised."""
    assert _verdict(["torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",
                     "CompilationError: at 8:11:"]) == (Label.COMPILE_ERROR, Action.STOP)
    assert _verdict(["torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:", "",
                     FORMS[3][0]])[0] is Label.COMPILE_ERROR

# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part C of the misses of round issue23-heldout-35 (compilers and kernels in training), each as a rule
of its family, with real lines and the near misses the rule must leave alone: LLVM's and MLIR's fatal errors in a
kernel compiler, XLA's conv autotuner at work, the error of a candidate Inductor's autotuner drops, bitsandbytes'
CUDA set-up finding no CUDA runtime, a compiler error in the C++ standard library's headers, and Triton's report of a failed ptxas whose output states the cause. Each line is
from the corpus (named by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind, cause_of, read_line, read_quiet
from neuron_watch.events import Action, Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR
COMPILE = FormKind.COMPILE_RUNNING

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # LLVM's fatal-error report inside a kernel compiler
    ("Pass execution failedLLVM ERROR: Failed to translate TritonGPU to LLVM IR.",
     ERROR, Label.COMPILE_ERROR, "corpus (pytorch-95445-nanogpt-triton-llvm-translate-failed-brokenprocesspool)"),
    ("LLVM ERROR: pthread_join failed: Invalid argument",
     ERROR, Label.COMPILE_ERROR, "corpus (pytorch-128039-user-triton-op-compile-llvm-pthread-join-failed)"),
    # MLIR's pass manager failing in Triton's pipeline
    ("RuntimeError: PassManager::run failed",
     ERROR, Label.COMPILE_ERROR, "corpus (unsloth-2947-vllm-load-triton-passmanager-run-failed)"),
    ("2025-03-09 22:21:06,271 - ERROR - Error in backward_x kernel: PassManager::run failed",
     ERROR, Label.COMPILE_ERROR, "a public repository's log of a Triton kernel's compile"),
    # XLA's conv autotuner timing a candidate past its alarm, with and without the alarm's record head
    ('2024-05-01 12:03:30.285255: E external/xla/xla/service/slow_operation_alarm.cc:65] Trying algorithm eng28{k2=3,k3=0} for conv (bf16[16,5,5,32]{3,2,1,0}, u8[0]{0}) custom-call(bf16[16,67,67,1024]{3,2,1,0}, bf16[32,63,63,1024]{3,2,1,0}), window={size=63x63 rhs_reversal=1x1}, dim_labels=b01f_o01i->b01f, custom_call_target="__cudnn$convForward", backend_config={"operation_queue_id":"0","wait_on_operation_queues":[],"cudnn_conv_backend_config":{"conv_result_scale":1,"activation_mode":"kNone","side_input_scale":0,"leakyrelu_alpha":0},"force_earliest_schedule":false} is taking a while...',
     COMPILE, None, "corpus (dreamerv3-126-xla-conv-autotune-slow-operation-alarm)"),
    ('Trying algorithm eng28{k2=3,k3=0} for conv (f32[100,1,501,1401]{3,2,1,0}, u8[0]{0}) custom-call(f32[100,1,530,1430]{3,2,1,0}, f32[1,1,30,30]{3,2,1,0}), window={size=30x30}, dim_labels=bf01_oi01->bf01, custom_call_target="__cudnn$convForward", backend_config={"cudnn_conv_backend_config":{"activation_mode":"kNone","conv_result_scale":1,"leakyrelu_alpha":0,"side_input_scale":0},"force_earliest_schedule":false,"operation_queue_id":"0","wait_on_operation_queues":[]} is taking a while...',
     COMPILE, None, "jax-ml/jax#25461 (the alarm's message repeated under 'The operation took')"),
    # a compiler error inside the C++ standard library's headers while nvcc builds an extension
    ("      /usr/include/c++/11/bits/std_function.h:435:145: error: parameter packs not expanded with ‘...’:",
     ERROR, Label.CONFIG_ERROR, "corpus (xformers-484-nvcc-115-gcc-11-std-function-parameter-packs)"),
    ("/usr/include/c++/11/bits/std_function.h:435:145: error: parameter packs not expanded with ‘...’:",
     ERROR, Label.CONFIG_ERROR, "a public repository's troubleshooting notes (RWKV-LM's CUDA operators built with nvcc)"),
    # bitsandbytes' CUDA set-up that found no CUDA runtime at all
    ("DEBUG: Possible options found for libcudart.so: set()",
     ERROR, Label.CONFIG_ERROR, "corpus (bitsandbytes-778-cuda-setup-libcudart-not-found)"),
    ("CUDA_SETUP: WARNING! libcudart.so not found in any environmental path. Searching in backup paths...DEBUG: Possible options found for libcudart.so: set()",
     ERROR, Label.CONFIG_ERROR, "a public blog post's Stable Diffusion web UI start-up log (the two records glued)"),
]

#: the error of a candidate Inductor's autotuner drops, in its record of select_algorithm.py: quiet
AUTOTUNE_CANDIDATE_ERRORS = [
    "E1118 11:32:55.100000 503992 site-packages/torch/_inductor/select_algorithm.py:2100] [0/0] No valid triton configs. OutOfResources: out of resource: shared memory, Required: 131072, Hardware limit: 101376. Reducing block sizes or `num_stages` may help.. ",  # corpus (lerobot-2471-pi0-train-inductor-autotuning-low-gpu-util)
    "E0912 11:54:57.775000 1121181 torch/_inductor/select_algorithm.py:2100] [7/0] No valid triton configs. OutOfResources: out of resource: shared memory, Required: 147456, Hardware limit: 101376. Reducing block sizes or `num_stages` may help.. ",  # corpus (openpi-654-pi05-inductor-autotune-ignoring-choice-out-of-resource)
    "  39 [rank0]:W0103 07:39:55.109000 353787 torch/_inductor/select_algorithm.py:1517] [1/2] out of resource: shared memory, Required: 196608, Hardware limit: 166912. Reducing block sizes or `num_stages` may help.",  # corpus (heavyball-30-psgd-inductor-autotune-out-of-resource-verbose)
    "[rank1]:E1012 00:28:45.382967 507 site-packages/torch/_inductor/select_algorithm.py:1322] [0/0] Exception out of resource: shared memory, Required: 163840, Hardware limit: 101376. Reducing block sizes or `num_stages` may help. for benchmark choice TritonTemplateCaller(/tmp/torchinductor_root/ba/cbavcg77ac2e6pcsausu3uztqnzqwn3slel32tlrrwib7matfnwx.py, ACC_TYPE='tl.float32', ALLOW_TF32=True, BLOCK_K=256, BLOCK_M=16, BLOCK_N=128, B_PROLOGUE_CAST_TYPE='tl.bfloat16', EVEN_K=True, GROUP_M=8, num_stages=5, num_warps=8)",  # pytorch/ao#1065
]

#: XLA's conv autotuner finding two candidates' outputs disagree: quiet
CONV_MISMATCHES = [
    "2024-06-14 09:05:12.700759: E external/xla/xla/service/gpu/conv_algorithm_picker.cc:697] Results mismatch between different convolution algorithms. This is likely a bug/unexpected loss of precision in cudnn.",  # corpus (dreamerv3-139-xla-conv-autotune-results-mismatch-at-init)
    "2024-03-06 09:57:23.380707: E external/local_xla/xla/service/gpu/conv_algorithm_picker.cc:705] Results mismatch between different convolution algorithms. This is likely a bug/unexpected loss of precision in cudnn.",  # a public repository's saved TensorFlow run
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # a warning of the compiler in the project's own source during the same kind of build
    "    /tmp/pip-install-zruba6fo/xformers_c3f4b10bded7460eaa800569194ec7d2/xformers/csrc/attention/cuda/fmha/attention.cu:612:58: warning: ‘at::GenericPackedTensorAccessor<T, N, PtrTraits, index_t> at::Tensor::packed_accessor() const & [with T = float; long unsigned int N = 3; PtrTraits = at::DefaultPtrTraits; index_t = long int]’ is deprecated: packed_accessor is deprecated, use packed_accessor32 or packed_accessor64 instead [-Wdeprecated-declarations]",  # facebookresearch/xformers#605
    # bitsandbytes' search that found the runtime: the set-up goes on
    "DEBUG: Possible options found for libcudart.so: {PosixPath('/usr/local/cuda/lib64/libcudart.so.11.0')}",  # a public repository's saved log
    *AUTOTUNE_CANDIDATE_ERRORS,
    *CONV_MISMATCHES,
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


@pytest.mark.parametrize("line", AUTOTUNE_CANDIDATE_ERRORS + CONV_MISMATCHES)
def test_autotuner_record_of_a_candidate_left_out_is_quiet(line: str) -> None:
    """An autotuner's record of a candidate it leaves out (Inductor's, XLA's conv picker's) reports no failure."""
    assert read_quiet(line)


@pytest.mark.parametrize("line", [
    # Triton's OutOfResources raised by a kernel launched outside the autotuner is still an error
    "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 147456, Hardware limit: 101376. Reducing block sizes or `num_stages` may help.",  # corpus (sglang-8513-glm45-fp8-triton-out-of-resource-child-sigquit)
    # Inductor's error raised when a kernel it compiled has no config that fits (not a candidate's record)
    "torch._inductor.exc.InductorError: RuntimeError: No valid triton configs. ",  # pytorch/pytorch#175250
])
def test_near_record_is_not_quiet(line: str) -> None:
    assert not read_quiet(line)


def test_llvm_out_of_memory_is_no_compile_error() -> None:
    """LLVM's "out of memory" report is left to the memory forms: it states no compile failure here."""
    stated = cause_of("LLVM ERROR: out of memory")
    assert stated is None or stated[0] is not Label.COMPILE_ERROR
    form = read_line("LLVM ERROR: out of memory")
    assert form is None or form.label is not Label.COMPILE_ERROR


#: Triton's report of a ptxas that refused the GPU's target, then ptxas's own output (corpus:
#: triton-8539-dgx-spark-ptxas-sm-121a-not-defined, whose first character was lost in the paste)
PTXAS_REPORT = [
    "riton.runtime.errors.PTXASError: PTXAS error: Internal Triton PTX codegen error",
    "`ptxas` stderr:",
    "ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'",
]


def test_triton_ptxas_report_takes_the_cause_its_output_states(tmp_path: Path) -> None:
    """Triton's PTXASError states no cause; ptxas's output under it does: the verdict is that cause (a compile
    that a restart repeats), not a crash of unknown cause to restart."""
    log = tmp_path / "ptxas.log"
    log.write_text("\n".join(PTXAS_REPORT) + "\n")
    verdict = diagnose_paths([str(log)], now=0.0).verdict
    assert verdict.label is Label.COMPILE_ERROR
    assert verdict.action is not Action.RESTART


def test_triton_ptxas_report_alone_is_a_cause_not_recognised(tmp_path: Path) -> None:
    """Without ptxas's output (a paste cut after the exception) nothing states the cause: still a failure."""
    log = tmp_path / "ptxas-alone.log"
    log.write_text(PTXAS_REPORT[0] + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.OTHER_CRASH


def test_autotuning_records_alone_read_as_a_compile_not_a_configuration(tmp_path: Path) -> None:
    """Inductor's three-line record of a candidate it dropped, after the trainer's start: the compile at work (wait),
    not a kernel too big for the device to stop the job for."""
    log = tmp_path / "autotune.log"
    log.write_text("INFO 2025-11-18 11:28:07 ot_train.py:324 Start offline training on a fixed dataset\n"
                   "E1118 11:32:55.100000 503992 site-packages/torch/_inductor/select_algorithm.py:2100] [0/0] Runtime error during autotuning: \n"
                   f"{AUTOTUNE_CANDIDATE_ERRORS[0]}\n"
                   "E1118 11:32:55.100000 503992 site-packages/torch/_inductor/select_algorithm.py:2100] [0/0] Ignoring this choice.\n")
    verdict = diagnose_paths([str(log)], now=0.0).verdict
    assert verdict.action is Action.WAIT
    assert verdict.label is not Label.CONFIG_ERROR

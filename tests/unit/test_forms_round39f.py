# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part F of the misses of round issue23-heldout-39 (model compression runs), each as a rule of its
family, with real lines and the near misses the rule must leave alone: llama.cpp's quantizer reporting that it failed,
a matrix a linear-algebra routine could not factor, a native extension whose import failed, PyTorch's dispatcher
without a kernel for the arguments' backend, a package without a constant its caller names; and the judge reading
TensorRT's bracketed error letter as the failed last word of an engine build. Each line is from the corpus (named by
its excerpt) or from a public thread or source (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.diagnosis.forms_severity import head_level, trt_level
from neuron_watch.diagnosis.heldout.round39f import round39f_form
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR

QUANTIZE_IOSTREAM = "llama_model_quantize: failed to quantize: basic_ios::clear: iostream error"
CHOLESKY = ("torch._C._LinAlgError: linalg.cholesky: The factorization could not be completed because the input is not "
            "positive-definite (the leading minor of order 1 is not positive-definite).")
AWQ_EXT = "NameError: name 'awq_ext' is not defined"

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # llama.cpp's quantizer
    (QUANTIZE_IOSTREAM, ERROR, Label.CONFIG_ERROR, "corpus (llama3-130-quantize-output-dir-typo)"),
    ("llama_model_quantize: failed to quantize: ios_base::clear: unspecified iostream_category error", ERROR,
     Label.CONFIG_ERROR, "ggml-org/llama.cpp#6945 (libc++'s words for the same failed ofstream, macOS)"),
    ("llama_model_quantize: failed to quantize: llama_model_loader: failed to load model from M:\\ComfyUI\\ComfyUI\\output\\Wan2_2-TI2V-5B.gguf",
     ERROR, Label.CONFIG_ERROR, "calcuis/gguf#46 (an input the model loader refuses)"),
    ("main: failed to quantize model from './models/llama_model/ggml-model-f32.gguf'", ERROR, None,
     "corpus (llama3-130-quantize-output-dir-typo: tools/quantize/quantize.cpp's own line, the cause is above it)"),
    ("llama_quantize: failed to quantize model from 'Qwen3.6-35B-A3B-BF16-00001-of-00002.gguf'", ERROR, None,
     "ggml-org/llama.cpp#24379 (a newer main's function name)"),
    ("llama_model_quantize: failed to quantize: Bad layer 40 for tensor blk.40.ffn_down_exps.weight. Must be in [0, 40)",
     ERROR, None, "ggml-org/llama.cpp#24379 (the quantizer's own check: a bug, no configuration)"),
    # a matrix a linear-algebra routine could not factor
    (CHOLESKY, ERROR, Label.NUMERICAL_ERROR, "corpus (neural-compressor-1965-gptq-cholesky-not-positive-definite)"),
    ("_LinAlgError: linalg.cholesky: The factorization could not be completed because the input is not positive-definite (the leading minor of order 3596 is",
     ERROR, Label.NUMERICAL_ERROR, "vllm-project/llm-compressor#142 (a notebook's last line, cut)"),
    ("torch._C._LinAlgError: linalg.inv: The diagonal element 2 is zero, the inversion could not be completed because the input matrix is singular.",
     ERROR, Label.NUMERICAL_ERROR, "aten/src/ATen/native/BatchLinearAlgebra.cpp _linalg_check_errors (linalg.inv)"),
    ("numpy.linalg.LinAlgError: Singular matrix", ERROR, Label.NUMERICAL_ERROR,
     "numpy/linalg/_linalg.py _raise_linalgerror_singular"),
    ("[rank3]: numpy.linalg.LinAlgError: SVD did not converge", ERROR, Label.NUMERICAL_ERROR,
     "numpy/linalg/_linalg.py _raise_linalgerror_svd_nonconvergence, under torchrun's rank tag"),
    ("numpy.linalg.LinAlgError: Last 2 dimensions of the array must be square", ERROR, None,
     "numpy/linalg/_linalg.py _assert_stacked_square (the program's shape mistake, no numerics)"),
    # a native extension whose import failed
    (AWQ_EXT, ERROR, Label.CONFIG_ERROR, "corpus (Qwen3-221-awq-ext-not-built)"),
    ("NameError: name 'quant_cuda' is not defined", ERROR, Label.CONFIG_ERROR,
     "GPTQ-for-LLaMa's quant.py (try: import quant_cuda), its kernels not built"),
    ("[rank0]: NameError: name 'autogptq_cuda_256' is not defined", ERROR, Label.CONFIG_ERROR,
     "AutoGPTQ's qlinear_cuda.py (try: import autogptq_cuda_256), under a rank tag"),
    ("NameError: name 'exllama_ext' is not defined", ERROR, Label.CONFIG_ERROR, "exllama's cuda_ext.py import"),
    # PyTorch's dispatcher without a kernel for the arguments' backend
    ("RuntimeError: Could not run 'quantized::conv2d_prepack' with arguments from the 'CPU' backend. ", ERROR,
     Label.CONFIG_ERROR, "corpus (pytorch-49331-qat-convert-model-left-on-cuda)"),
    ("NotImplementedError: Could not run 'torchvision::nms' with arguments from the 'CUDA' backend. This could be because the operator doesn't exist for this backend, or was omitted during the selective/custom build process (if using custom build).",
     ERROR, Label.CONFIG_ERROR, "c10/core/dispatch/OperatorEntry.cpp reportError (torchvision's CPU-only wheel on a GPU)"),
    # a package without a constant its caller names
    ("AttributeError: type object 'MODEL_ARCH' has no attribute 'ARCEE'", ERROR, Label.CONFIG_ERROR,
     "corpus (llama.cpp-14315-gguf-package-outdated)"),
    ("AttributeError: type object 'MODEL_ARCH' has no attribute 'DOTS1'", ERROR, Label.CONFIG_ERROR,
     "ggml-org/llama.cpp#14315 (the same gguf package, an older script)"),
]

#: lines of the same words that are not these forms (nothing reads them)
NEAR_MISSES = [
    "    H = torch.linalg.cholesky(H)",  # the routine's source line in a traceback
    "    except torch._C._LinAlgError:",  # a handler that catches it
    "    raise LinAlgError(\"Singular matrix\")",  # numpy's raise in a traceback
    "llama_model_quantize_internal: did not find weights for blk.0.attn_k_b.weight",  # the imatrix's notice
    "main: quantizing './models/llama_model/ggml-model-f32.gguf' to './model/llama_model/ggml-model-Q4_K_M.gguf' as Q4_K_M",
    "type object 'MODEL_ARCH' has no attribute 'ARCEE' when gguf is older than the script",  # prose, no exception
    "the dispatcher says it Could not run 'aten::add' with arguments from the 'CPU' backend when ...",  # prose
]

#: lines other readers read (an exception of no stated cause) that are not this round's forms
NOT_THIS_ROUND = [
    "NameError: name 'client_index' is not defined",  # corpus: a script's own undefined name
    "NameError: name 'file_ext' is not defined",  # a variable holding a file's extension, not a module
    "AttributeError: type object 'Config' has no attribute 'lr'",  # a field, not a constant
    "# raises LinAlgError: if the matrix is not positive-definite",  # a comment
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_other_readers_lines_are_not_this_rounds_forms() -> None:
    for line in NOT_THIS_ROUND:
        assert round39f_form(line) is None, line


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 64


def test_the_quantizer_ending_on_its_failure_is_configuration(tmp_path: Path) -> None:
    """llama.cpp's quantize whose output directory does not exist: its two lines end the log, configuration (stop),
    not a healthy run (round 39 part F's llama3-130)."""
    log = tmp_path / "quantize.log"
    log.write_text("main: quantizing './models/m/ggml-model-f32.gguf' to './model/m/ggml-model-Q4_K_M.gguf' as Q4_K_M\n"
                   "llama_model_loader: loaded meta data with 20 key-value pairs and 291 tensors from ./models/m/ggml-model-f32.gguf (version GGUF V3 (latest))\n"
                   + QUANTIZE_IOSTREAM + "\nmain: failed to quantize model from './models/m/ggml-model-f32.gguf'\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR


def test_a_cholesky_that_failed_is_numerical_and_one_out_of_memory_is_not(tmp_path: Path) -> None:
    """GPTQ's Cholesky of a Hessian not positive-definite: numerical (stop); the same source line followed by CUDA's
    out-of-memory (GPTQModel#383) stays device memory."""
    numerical = tmp_path / "gptq.log"
    numerical.write_text('  File "gptq.py", line 813, in fasterquant\n    H = torch.linalg.cholesky(H)\n' + CHOLESKY + "\n")
    assert diagnose_paths([str(numerical)], now=0.0).verdict.label is Label.NUMERICAL_ERROR
    oom = tmp_path / "gptqmodel.log"
    oom.write_text('  File "gptq.py", line 122, in fasterquant\n    H = torch.linalg.cholesky(H)\n'
                   "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 10.56 GiB. GPU 0 has a total capacity "
                   "of 31.75 GiB of which 3.81 GiB is free.\n")
    assert diagnose_paths([str(oom)], now=0.0).verdict.label is Label.OOM


def test_an_extension_never_imported_is_configuration_even_in_backward(tmp_path: Path) -> None:
    """The kernels' NameError raised in backward (a frame that runs the work): its form states configuration."""
    log = tmp_path / "awq.log"
    log.write_text('File "/usr/local/lib/python3.10/dist-packages/awq/modules/linear/gemm.py", line 66, in backward\n'
                   "    if awq_ext is None:\n" + AWQ_EXT + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR


def test_trtexec_error_letter_is_read_only_where_it_heads_the_record() -> None:
    assert trt_level("[08/02/2024-14:23:01] [E] Building engine failed") == "E"
    assert trt_level("[11/07/2023-08:45:41] [TRT] [E] 4: [network.cpp::validate::3062] Error Code 4") == "E"
    assert trt_level("[08/02/2024-14:21:11] [I] [TRT] Global timing cache in use.") is None
    assert trt_level("the log said [E] somewhere in a sentence") is None
    # head_level keeps its own reading (a level word or a glog letter): trtexec's letter is the judge's to ask
    assert head_level("[08/02/2024-14:23:01] [E] Building engine failed") is None


def test_a_trt_build_whose_last_records_are_errors_failed(tmp_path: Path) -> None:
    """trtexec's timing pass opens the build; its [E] records at the end of the input are the build's failure
    (compile_error, stop), not a build still running (Model-Optimizer#50). The pass alone is still compiling."""
    opened = "[08/02/2024-14:21:11] [I] [TRT] Global timing cache in use. Profiling results in this builder pass will be stored.\n"
    failed = tmp_path / "trtexec.log"
    failed.write_text(opened
                      + "[08/02/2024-14:23:01] [E] Error[10]: [optimizer.cpp::computeCosts::3869] Error Code 10: Internal "
                        "Error (Could not find any implementation for node model.10.attn.pe.conv.weight + /model.10/attn/Add.)\n"
                      + "[08/02/2024-14:23:01] [E] Engine could not be created from network\n"
                      + "[08/02/2024-14:23:01] [E] Building engine failed\n")
    assert diagnose_paths([str(failed)], now=0.0).verdict.label is Label.COMPILE_ERROR
    running = tmp_path / "trtexec-running.log"
    running.write_text(opened)
    assert diagnose_paths([str(running)], now=0.0).verdict.label is Label.COMPILING

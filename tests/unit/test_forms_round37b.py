# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part B of the misses of round issue23-heldout-37 (single-node inference servers and local runtimes),
each as a rule of its family, with real lines and the near misses the rule must leave alone: cuDNN's and CTranslate2's
reports of a shared library they could not load, and CPython's import failure quoted in another exception's message.
Each line is from the corpus (named by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR

CUDNN_CNN = "Unable to load any of {libcudnn_cnn.so.9.1.0, libcudnn_cnn.so.9.1, libcudnn_cnn.so.9, libcudnn_cnn.so}"
CUDNN_SYMBOL = "Invalid handle. Cannot load symbol cudnnCreateConvolutionDescriptor"

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # cuDNN 9's sub-library loader: none of the names it tried opens, then the call it could not forward
    (CUDNN_CNN, ERROR, Label.CONFIG_ERROR, "corpus (faster-whisper-1182-libcudnn-cnn-unable-to-load)"),
    ("whisper  | Unable to load any of {libcudnn_ops.so.9.1.0, libcudnn_ops.so.9.1, libcudnn_ops.so.9, libcudnn_ops.so}",
     ERROR, Label.CONFIG_ERROR, "corpus (docker-faster-whisper-42-gpu-image-libcudnn-ops)"),
    ("OSError: Unable to load any of {libcudnn_ops.so.9.1.0, libcudnn_ops.so.9.1, libcudnn_ops.so.9, libcudnn_ops.so}",
     ERROR, Label.CONFIG_ERROR, "a public repository's guide to CUDA libraries in Poetry environments (the error as Python raises it)"),
    (CUDNN_SYMBOL, ERROR, Label.CONFIG_ERROR, "corpus (faster-whisper-1182-libcudnn-cnn-unable-to-load)"),
    ("Oct 23, 2024, 11:39:31 AM | WARNING | Invalid handle. Cannot load symbol cudnnCreateTensorDescriptor",
     ERROR, Label.CONFIG_ERROR, "corpus (faster-whisper-1081-colab-kernel-restart-libcudnn): Colab's log viewer calls every stderr line a warning"),
    # cuDNN 8's sub-library not found on Windows, CTranslate2's loader of the CUDA libraries
    ("Could not locate cudnn_ops_infer64_8.dll. Please make sure it is in your library path!", ERROR, Label.CONFIG_ERROR,
     "a public repository's README on faster-whisper under Windows, and whisperX's troubleshooting notes"),
    ("RuntimeError: Library cublas64_12.dll is not found or cannot be loaded", ERROR, Label.CONFIG_ERROR,
     "whisperX's stderr quoted by a public repository's test of its tool-error reader; a voice assistant's troubleshooting notes"),
    # CPython's import failure quoted in another exception's message (the line reads as an exception; its cause is stated)
    ("bentoml.exceptions.MissingDependencyException: None (reason: No module named 'tensorflow')", ERROR, Label.CONFIG_ERROR,
     "corpus (openllm-104-bentoml-runner-missing-tensorflow)"),
    ("ray.exceptions.RaySystemError: System error: No module named 'evaluate_modules'", ERROR, Label.CONFIG_ERROR,
     "a public repository's note on Ray Tune with Hugging Face evaluate (a worker that cannot unpickle what it was sent)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    "INFO:faster_whisper:Processing audio with duration 03:52.176",  # corpus (faster-whisper-1182-libcudnn-cnn-unable-to-load): the line before
    "2022-05-13 16:56:12.039473: I tensorflow/stream_executor/platform/default/dso_loader.cc:49] Successfully opened dynamic library libcudart.so.11.0",  # corpus (dannce-107-slurm-activate-missing-tf-gpu-startup): a healthy run
    "/opt/conda/envs/repros/lib/python3.10/site-packages/torch/_subclasses/functional_tensor.py:271: UserWarning: Failed to initialize NumPy: No module named 'numpy' (Triggered internally at ../torch/csrc/utils/tensor_numpy.cpp:84.)",  # a warning's class (signatures.toml's near miss)
    "Error caught was: No module named 'triton'",  # corpus (lora-scripts-107-xformers-triton-warning-then-steps): xformers' warning, the run goes on
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 61


def test_cudnn_loader_report_ends_a_log_in_a_configuration_error(tmp_path: Path) -> None:
    """faster-whisper's log whose cuDNN cannot be loaded is a configuration error (stop, fix the library path), not a
    healthy run; the same log without the loader's lines is healthy."""
    log = tmp_path / "whisper.log"
    log.write_text(f"INFO:faster_whisper:Processing audio with duration 03:52.176\n{CUDNN_CNN}\n{CUDNN_SYMBOL}\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR
    log.write_text("INFO:faster_whisper:Processing audio with duration 03:52.176\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.HEALTHY


def test_cudnn_loader_report_before_an_abort_is_the_cause(tmp_path: Path) -> None:
    """whisper-ctranslate2's process aborts after cuDNN's loader reports: the abort's cause is the library, a
    configuration error, not a crash to restart."""
    log = tmp_path / "ct2.log"
    log.write_text("Detected language 'English' with probability 1.000000\n"
                   "Unable to load any of {libcudnn_ops.so.9.1.0, libcudnn_ops.so.9.1, libcudnn_ops.so.9, libcudnn_ops.so}\n"
                   "Invalid handle. Cannot load symbol cudnnCreateTensorDescriptor\n"
                   "Aborted (core dumped)\n")  # corpus (whisper-ctranslate2-115-libcudnn-ops-aborted)
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR


METAL_STATUS = "ggml_metal_synchronize: error: command buffer 0 failed with status 5"
METAL_OOM = "error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)"


def test_metal_status_line_is_explained_by_the_description_under_it(tmp_path: Path) -> None:
    """ggml-metal's status line states no cause; the error's description it prints next does, also with GGML_ABORT's
    line between them (llamafile#881): out of memory, not a crash of unknown cause."""
    log = tmp_path / "metal.log"
    log.write_text("common_init_from_params: warming up the model with an empty run - please wait ... (--no-warmup to disable)\n"
                   f"{METAL_STATUS}\n"
                   "/Users/mala/workspace/llama.cpp/ggml/src/ggml-metal/ggml-metal-context.m:235: fatal error\n"
                   f"{METAL_OOM}\n")  # corpus (llamafile-881-metal-warmup-insufficient-memory)
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.OOM
    log.write_text("ggml_metal_synchronize: error: command buffer 1 failed with status 5\n"
                   f"{METAL_OOM}\n")  # corpus (llama-cpp-22673-mtp-metal-insufficient-memory-repeated): MTP under test on a Mac
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.OOM


def test_metal_status_line_without_a_description_stays_a_crash_of_unknown_cause(tmp_path: Path) -> None:
    """Old ggml-metal printed the status and asserted, with no description: status 5 is MTLCommandBufferStatusError,
    whatever the error; the log states no cause (llama.cpp#1890)."""
    log = tmp_path / "metal-old.log"
    log.write_text("ggml_metal_graph_compute: command buffer 0 failed with status 5\n"
                   "GGML_ASSERT: /private/var/folders/zk/hd0v0z2910x13xv8hq213c600000gn/T/pip-install-pcxrvank/llama-cpp-python_c6c616faeeea45d696c56e85205281f2/vendor/llama.cpp/ggml-metal.m:969: false\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.OTHER_CRASH

# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part B of the misses of round issue23-heldout-38 (graph neural network training), each as a rule of
its family, with real lines and the near misses the rule must leave alone: setuptools' report of the compiler that
failed building a native extension, a compiler error inside PyTorch's installed headers, and graph-learn's status of a
traversal's end that its client logs at ERROR on healthy epochs. Each line is from the corpus (named by its excerpt)
or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind, read_quiet
from neuron_watch.events import Label
from tests.unit.form_table import cause_tests, table_tests

ERROR = FormKind.ERROR

NVCC_FAILED = "error: command '/usr/local/cuda/bin/nvcc' failed with exit status 1"
GRAPH_LEARN_END = "E0717 17:30:22.467953   589 notification.cc:194] RpcNotification:Failed\treq_type:GetNodes\tstatus:Out of range:No more nodes exist."

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # setuptools' report of a compiler that failed building an extension
    (NVCC_FAILED, ERROR, Label.CONFIG_ERROR, "corpus (pytorch_scatter-175-nvcc-invalid-static-cast-old-torch-headers)"),
    ("    error: command '/usr/local/cuda/bin/nvcc' failed with exit status 1`", ERROR, Label.CONFIG_ERROR,
     "corpus (pytorch_geometric-3471-segment-coo-cuda-48-errors-torch-150), pip's indented subprocess output"),
    ("error: command '/usr/local/cuda-9.2/bin/nvcc' failed with exit status 1", ERROR, Label.CONFIG_ERROR,
     "corpus (apex-1173-deviceutils-header-old-pytorch)"),
    ("      error: command '/usr/bin/gcc' failed with exit code 1", ERROR, Label.CONFIG_ERROR,
     "setuptools >= 60's distutils spawn (\"command {!r} failed with exit code {}\"), as pip prints a wheel's build"),
    ("error: command 'x86_64-linux-gnu-gcc' failed with exit status 1", ERROR, Label.CONFIG_ERROR,
     "rusty1s/pytorch_scatter#2 (a Debian Python's cross-prefixed compiler)"),
    ("  error: command '/usr/local/cuda/bin/nvcc' failed: No such file or directory", ERROR, Label.CONFIG_ERROR,
     "rusty1s/pytorch_scatter#272 (distutils' \"command {!r} failed: {}\": no CUDA compiler where CUDA_HOME says)"),
    ("error: command 'C:\\\\Program Files (x86)\\\\Microsoft Visual Studio\\\\2019\\\\BuildTools\\\\VC\\\\Tools\\\\MSVC\\\\14.29.30133\\\\bin\\\\HostX86\\\\x64\\\\cl.exe' failed with exit code 2",
     ERROR, Label.CONFIG_ERROR, "msvccompiler's CompileError as pip prints it on Windows (escaped backslashes)"),
    # a compiler error inside PyTorch's installed headers
    ("/usr/local/miniconda3/lib/python3.6/site-packages/torch/include/torch/csrc/api/include/torch/nn/cloneable.h:68:61: error: invalid static_cast from type ‘const torch::OrderedDict<std::basic_string<char>, std::shared_ptr<torch::nn::Module> >’ to type ‘torch::OrderedDict<std::basic_string<char>, std::shared_ptr<torch::nn::Module> >&’",
     ERROR, Label.CONFIG_ERROR, "corpus (pytorch_scatter-175-nvcc-invalid-static-cast-old-torch-headers)"),
    ("/usr/local/lib/python3.8/dist-packages/torch/include/c10/util/C++17.h(16): error: #error directive: \"You're trying to build PyTorch with a too old version of GCC. We need GCC 5 or later.\"",
     ERROR, Label.CONFIG_ERROR, "nvcc's form of the same error in c10's version check (torch/include/c10/util/C++17.h)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    "note: This error originates from a subprocess, and is likely not a problem with pip.",
    "/home/user/ext/csrc/scatter.cpp:42:10: error: 'foo' was not declared in this scope",  # the project's own source
    "/usr/local/lib/python3.8/site-packages/torch/include/ATen/core/TensorBody.h:225:1: note: declared here",  # a note
    "E0101 00:00:00.000000 1 op_kernel.cc:1] Out of range: End of sequence",  # TensorFlow's dataset end: quiet
    GRAPH_LEARN_END,  # graph-learn's traversal end: quiet
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)

#: error lines and the cause their form states
CAUSES: list[tuple[str, Label]] = [
    (NVCC_FAILED, Label.CONFIG_ERROR),
]
#: error lines whose form states no cause: pip's record of the wheel (round 28 part B), a command that is not a
#: compiler (a clone that failed)
NO_CAUSE = [
    "ERROR: Failed building wheel for torch-scatter",
    "error: command 'git' failed with exit status 128",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 63


def test_graph_learn_end_of_traversal_is_quiet() -> None:
    """graph-learn's client logs the OutOfRange status of a traversal's end at glog's E level on every epoch (corpus
    graph-learn-67): a record of the data's end, quiet at whatever level; another "out of range" is not."""
    assert read_quiet(GRAPH_LEARN_END)
    assert read_quiet("E0717 17:30:22.468039   589 distribute_runner.h:125] Rpc failed:Out of range:No more nodes exist.name:GetNodes")
    assert not read_quiet("RuntimeError: index out of range: Tried to access index 11 out of table with 3 rows.")
    assert not read_quiet("tensorflow.python.framework.errors_impl.OutOfRangeError: End of sequence")


def test_a_build_ending_on_the_compilers_failure_is_configuration(tmp_path: Path) -> None:
    """nvcc's count of errors then setuptools' report end a pip build: configuration (stop), not a crash to restart."""
    log = tmp_path / "build.log"
    log.write_text("    48 errors detected in the compilation of \"/tmp/tmpxft_00001782_00000000-6_segment_coo_cuda.cpp1.ii\".\n"
                   "    error: command '/usr/local/cuda/bin/nvcc' failed with exit status 1\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR


def test_healthy_epochs_with_graph_learn_end_records_stay_healthy(tmp_path: Path) -> None:
    log = tmp_path / "gl.log"
    log.write_text("Epoch 38, Iteration 6, Time(s) 0.0681, Loss 0.77587\n" + GRAPH_LEARN_END + "\n"
                   "Epoch 39, Iteration 0, Time(s) 0.0830, Loss 0.86335\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.HEALTHY

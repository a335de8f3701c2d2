# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part C of the misses of round issue23-heldout-40 (classic NLP and sequence-to-sequence training),
each as a rule of its family, with real lines and the near misses the rule must leave alone: the gpuAssert idiom's
report of a failed CUDA call and TensorFlow's refusal of a lookup table's text file. Each line is from the corpus
(named by its excerpt) or from a public repository or thread (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind, cause_of, read_line
from neuron_watch.diagnosis.heldout.round40c import round40c_form
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR

MARIAN_GPU_ASSERT = "GPUassert: out of memory marian-dev/src/tensors/device_gpu.cu 32"
TF_EMPTY_LINE = "2018-06-23 02:01:11.183505: W tensorflow/core/framework/op_kernel.cc:1278] OP_REQUIRES failed at lookup_table_init_op.cc:145 : Invalid argument: Invalid content in /tmp/nmt_model/vocab.tgt: empty line found at position 149."

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # the gpuAssert idiom: the form states no cause of its own, the CUDA error string does (cause_of reads "out
    # of memory" where it reads every CUDA error's words; the other strings state none)
    (MARIAN_GPU_ASSERT, ERROR, Label.OOM, "corpus (marian-120-workspace-95000-gpuassert-out-of-memory)"),
    ("GPUassert: an illegal memory access was encountered /home/user/project/src/kernel.cu 212", ERROR, None,
     "the idiom's fprintf(stderr, \"GPUassert: %s %s %d\\n\", cudaGetErrorString(code), file, line) in CUDA programs (cudamat's cudamat.cuh)"),
    ("> GPUassert: invalid device ordinal main.cu 47", ERROR, None, "the same idiom, quoted in a thread"),
    # TensorFlow's TextFileLineIterator (lookup_util.cc) refusing a table file
    (TF_EMPTY_LINE, ERROR, Label.CONFIG_ERROR, "corpus (tensorflow-nmt-321-vocab-empty-line-lookup-table-init)"),
    ("2018-06-23 02:01:11.183537: W tensorflow/core/framework/op_kernel.cc:1278] OP_REQUIRES failed at lookup_table_init_op.cc:145 : Invalid argument: Invalid content in /tmp/nmt_model/vocab.src: empty line found at position 77.",
     ERROR, Label.CONFIG_ERROR, "corpus (tensorflow-nmt-321-vocab-empty-line-lookup-table-init)"),
    ("tensorflow.python.framework.errors_impl.InvalidArgumentError: Invalid number of columns in vocab.tsv line 3 (a b c) : expected at least 2 got 1",
     ERROR, Label.CONFIG_ERROR, "tensorflow/core/kernels/lookup_util.cc TextFileLineIterator::Next (the session's exception)"),
    ("InvalidArgumentError: Invalid vocab_size in /data/vocab.txt: expected 32000 but got 31999",
     ERROR, Label.CONFIG_ERROR, "tensorflow/core/kernels/lookup_util.cc (a vocab_size the file does not have)"),
    ("Invalid argument: Invalid number of values in embeddings.txt line 12 (the 0.1 0.2) : expected 300 got 2",
     ERROR, Label.CONFIG_ERROR, "tensorflow/contrib/lookup (the vector-valued table's iterator)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    '      fprintf(stderr,"GPUassert: %s %s %d\\n", cudaGetErrorString(code), file, line);',  # the idiom's source
    "why does my program print GPUassert: out of memory when the card is empty?",  # prose quoting the words
    "#define gpuErrchk(ans) { gpuAssert((ans), __FILE__, __LINE__); }",
    '      status_ = errors::InvalidArgument("Invalid content in ", filename_,',  # TF's source
    "I get Invalid content in my vocab file, what does it mean",  # prose without the form's file and position
    "2018-06-23 02:01:11.183505: W tensorflow/core/framework/op_kernel.cc:1278] OP_REQUIRES failed at iterator_ops.cc:891 : Out of range: End of sequence",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 67


def test_gpu_assert_cause_is_its_cuda_error() -> None:
    """The idiom's line is an error; its cause is the CUDA error string's, read where every CUDA error is."""
    assert read_line(MARIAN_GPU_ASSERT) is not None
    assert cause_of(MARIAN_GPU_ASSERT) is not None
    assert cause_of(MARIAN_GPU_ASSERT)[0] is Label.OOM  # type: ignore[index]


def test_round_reads_only_its_words() -> None:
    """Other programs' words for a failed CUDA call or a bad argument are other readers' (or none)."""
    for line in ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB total capacity)",
                 "[2019-05-25 10:00:00] Error: CUDA error 2 'out of memory' - /marian/src/tensors/gpu/device.cu:32: cudaMalloc(&data_, size)",
                 "InvalidArgumentError: Incompatible shapes: [32,10] vs. [32,12]",
                 "ValueError: vocab_file '/tmp/nmt_data/vocab.vi' does not exist."):
        assert round40c_form(line) is None, line


def test_marian_workspace_out_of_memory_is_oom(tmp_path: Path) -> None:
    """Marian's reserve of a workspace the device cannot hold: the idiom's out of memory before the abort is the
    cause, not a crash of no cause."""
    log = tmp_path / "marian.log"
    log.write_text("[2017-10-19 22:35:21] [batching] Collecting statistics for batch fitting\n"
                   "[2017-10-19 22:35:21] [memory] Extending reserved space to 95232 MB (device 0)\n"
                   "terminate called after throwing an instance of 'util::Exception'\n"
                   "  what():  marian-dev/src/kernels/cuda_helpers.h:13 in void gpuAssert(cudaError_t, const char*, int, bool) threw util::Exception.\n"
                   + MARIAN_GPU_ASSERT + "\nAborted (core dumped)\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.OOM


def test_malformed_vocabulary_is_configuration(tmp_path: Path) -> None:
    """A vocabulary TensorFlow cannot read, then the session's traceback: configuration (stop), not a crash."""
    log = tmp_path / "nmt.log"
    log.write_text(TF_EMPTY_LINE + "\nTraceback (most recent call last):\n"
                   '  File "/usr/lib/python3.6/site-packages/tensorflow/python/client/session.py", line 1330, in _do_call\n'
                   "    return fn(*args)\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR

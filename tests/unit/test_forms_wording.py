# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read whatever the message's words, beside test_forms_words.py's (the ``words`` perturbation of tests/benchmarks/bench_form_robustness.py:
a failure line whose free-text words are replaced must not read as healthy): MPICH's abort record, a record's head
naming itself fatal, an exception behind a time stamp or pytest's short summary, an exception's type and value, a
Neuron runtime record whatever its spacing, the runtime dump's Failure field, TensorFlow's F record at a line's
start, and a compile whose last word is an error record.

Each line is from the corpus (tests/data/real-logs, named by its excerpt), a perturbed one (its words replaced,
the form kept, as the benchmark does), or the format a project's source prints, filled in (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.events import Action, Label
from tests.unit.form_table import cause_tests, table_tests
from tests.unit.test_forms_round11 import PROGRESS, _verdict

FORMS = [
    # MPICH's abort record (Intel MPI's, built on MPICH; corpus qmcpack-1158), and with its words replaced
    ("Abort(1094543) on node 0 (rank 0 in comm 0): Fatal error in PMPI_Init_thread: Other MPI error, error stack:",
     FormKind.CRASH, None, "qmcpack-1158"),
    ("Abort(1614735) on node 0 (rank 0 in comm 0): Fatal error filling PMPI_Init: Unknown error constexpr, error stack:",
     FormKind.CRASH, None, "onedal-3741, words perturbed"),
    ("[cli_3]: Abort(69) on node 3 (rank 3 in comm 0): application called MPI_Abort(MPI_COMM_WORLD, 69) - process 3",
     FormKind.CRASH, None, "MPICH's MPI_Abort under mpiexec's client prefix"),
    # a record's head naming itself fatal (corpus xla-47982; its words replaced)
    ("LLVM Fatal Error while compiling target binary for module: jit_iota", FormKind.CRASH, None, "xla-47982"),
    ("LLVM Fatal Error interactive streaming cola implemented expansion favor: jit_iota", FormKind.CRASH, None,
     "xla-47982, words perturbed"),
    ("FATAL ERROR: Ineffective mark-compacts near heap limit Allocation failed - JavaScript heap out of memory",
     FormKind.ERROR, None, "node's V8 fatal OOM (src/node_errors.cc OnFatalError: 'FATAL ERROR: %s %s')"),
    # an exception behind a CloudWatch copy's ISO stamp with its offset (corpus amazon-sagemaker-examples-3046)
    ("2021-12-02T11:01:44.277+01:00 ConversationBucketsError: CUDA scratch exported memory. Mmdet unusually activate 288.00 MiB",
     FormKind.ERROR, None, "amazon-sagemaker-examples-3046, words perturbed"),
    # ... behind pytest's short test summary (corpus trl-4237)
    ("FAILED tests/test_sft_trainer.py::TestSFTTrainer::test_train_toolcall_data - torch.OptimizePytorchjobError: CUDA rcount adversely memory.",
     FormKind.ERROR, None, "trl-4237, words perturbed"),
    ("ERROR tests/test_data.py::test_load - FileNotFoundError: [Errno 2] No such file or directory: 'data.json'",
     FormKind.ERROR, None, "pytest's summary of an error in a fixture"),
    # an exception's type and value (TensorFlow 1.x Coordinator.request_stop; corpus tf-models-5516)
    ("INFO:tensorflow:Error reported to Coordinator: <class 'tensorflow.python.framework.errors_impl.InvalidArgumentError'>, LossTensor flushes inf modelzoo nan.",
     FormKind.ERROR, None, "tf-models-5516, words perturbed"),
    # the Neuron runtime's record with two spaces after its pid:tid (corpus aws-neuron-sdk-1189)
    ("2025-Jun-28 22:19:15.506590  8652:8728  ERROR   NRT:nrt_infodump                            Failure: NRT_INVALID criterion nrt_load()",
     FormKind.ERROR, None, "aws-neuron-sdk-1189, words perturbed"),
    # TensorFlow 1.x's F record at a line's start (corpus tensorflow-1222; its words replaced)
    ("F /usr/local/lib/python2.7/dist-packages/tensorflow/include/tensorflow/core/framework/op_kernel.h:1087] Cudart turning: params_->device->RequiresRecordingAccessedTensors() == record_tensor_accesses_",
     FormKind.CRASH, None, "tensorflow-1222, words perturbed"),
]

NEAR_MISSES = [
    # a summary of no fatal error, a count
    "No fatal errors were found in 12 files",
    "Fatal errors: 0, warnings: 3",
    # MPICH words without the abort record's head
    "See the MPICH abort documentation (rank 0 in comm 0) for details",
    # a time stamp before a warning class, and before prose
    "2021-12-02T11:01:44.277+01:00 UserWarning: the default of use_reentrant will change",
    "2021-12-02T11:01:44.277+01:00 Epoch 3: loss 0.123",
    # pytest's summary of a test that passed, and of one without an exception line
    "PASSED tests/test_sft_trainer.py::TestSFTTrainer::test_train",
    "FAILED tests/test_sft_trainer.py::TestSFTTrainer::test_train - assert 3 == 4",
    # a class's repr that is no exception, and an exception class's repr without a value
    "model type: <class 'torch.nn.modules.linear.Linear'>, params 1024",
    "registered handler for <class 'ValueError'>",
    # a word that starts with F at a line's start
    "F score: 0.91",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES, cause_of_kinds=frozenset())

#: an exception's type and value state the status's cause as its class does
test_cause_of_error, test_error_without_cause = cause_tests(
    [("INFO:tensorflow:Error reported to Coordinator: <class 'tensorflow.python.framework.errors_impl.UnavailableError'>, {\"created\":\"@1487751897.191020037\",\"description\":\"EOF\"}",
      Label.COMM_ERROR)],
    ["INFO:tensorflow:Error reported to Coordinator: <class 'tensorflow.python.framework.errors_impl.InvalidArgumentError'>, flushes inf"],
)


# -- a compile whose last word is an error record -----------------------------------------------------

_START = ("2024-10-10 21:04:40.000101:  9694  INFO ||NEURON_CC_WRAPPER||: Call compiler with cmd: ['neuronx-cc', 'compile', "
          "'--target=trn1', '--framework=XLA', '/tmp/w/model.MODULE_1+d41d8cd9.hlo_module.pb', '--output', "
          "'/tmp/w/model.MODULE_1+d41d8cd9.neff', '--verbose=35']")


@pytest.mark.parametrize(("lines", "label", "action"), [
    # the Neuron wrapper's record of the failed command, its words replaced (corpus aws-neuron-sdk-1009): the
    # compile failed, whatever the words
    ([*PROGRESS, _START, "2024-10-10 21:04:46.000246:  9694  ERROR ||NEURON_CC_WRAPPER||: Assume autoscaler intended "
      "['neuronx-cc', 'compile', '--target=trn1']"], Label.COMPILE_ERROR, Action.STOP),
    # ... and as the wrapper words it
    ([*PROGRESS, _START, "2024-10-10 21:04:46.000246:  9694  ERROR ||NEURON_CC_WRAPPER||: Failed compilation with "
      "['neuronx-cc', 'compile', '--target=trn1']"], Label.COMPILE_ERROR, Action.STOP),
    # near misses: a warning record in a compile leaves it open; an error the rank went on from (steps after it)
    # is no failed compile
    ([*PROGRESS, _START, "2024-10-10 21:04:46.000246:  9694  WARNING ||NEURON_CC_WRAPPER||: Assume autoscaler intended"],
     Label.COMPILING, Action.WAIT),
    ([_START, "2024-10-10 21:04:46.000246:  9694  ERROR ||NEURON_CC_WRAPPER||: Assume autoscaler intended", *PROGRESS],
     Label.COMPILING, Action.WAIT),
])
def test_a_compile_whose_last_word_is_an_error_record_failed(lines: list[str], label: Label, action: Action) -> None:
    assert _verdict(lines) == (label, action)

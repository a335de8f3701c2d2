# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read whatever their words (issue 23's words perturbation): a log-level field where its logging scheme puts
it, an exception line behind any prefix, a glog/absl or TensorFlow record of any level that carries an exception,
MPICH's "Fatal error in <func>:" record, the Neuron runtime's padded record and its dump's Failure field; with the
near misses each rule must leave alone (a benign warning, the word in a path, ``E`` as a word, a healthy line of the
same program).

Each line is from the corpus (tests/data/real-logs, named by its excerpt), the same line with its free words
replaced as ``tests/fixtures/perturb.py`` replaces them (named "words"), or the format a project's source prints,
filled in (the source is named)."""

from __future__ import annotations

from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Label
from tests.unit.form_table import FormRow, cause_tests, table_tests

E, C = FormKind.ERROR, FormKind.CRASH

FORMS: list[FormRow] = [
    # MPICH's fatal error handler under its abort record (corpus onedal-3741, qmcpack-1158), and with its words changed
    ("Abort(1614735) on node 0 (rank 0 in comm 0): Fatal error in PMPI_Init: Unknown error class, error stack:", C, None, "corpus onedal-3741"),
    ("Abort(1614735) on node 0 (rank 0 in comm 0): Fatal error filling PMPI_Init: Unknown error constexpr, error stack:", C, None, "words of onedal-3741"),
    ("Abort(1094543) on node 0 (rank 0 in comm 0): Fatal error rllib PMPI_Init_thread: Approx MPI error, error stack:", C, None, "words of qmcpack-1158"),
    ("Fatal error in MPI_Allreduce: Other MPI error, error stack:", C, None, "MPICH errutil.c MPIR_Handle_fatal_error, no abort record"),
    # "<Component> Fatal Error ..." (corpus xla-47982; NVHPC's OpenACC runtime)
    ("LLVM Fatal Error interactive streaming cola implemented expansion favor: jit_iota", C, None, "words of xla-47982"),
    ("Accelerator Fatal Error: call to cuCtxCreate returned error 214: Other", C, None, "NVHPC OpenACC runtime"),
    # the Neuron runtime's record with its fields padded (two spaces after the tid), and its dump's Failure field
    ("2025-Jun-28 22:19:15.506590  8652:8728  ERROR   NRT:nrt_infodump                            Failure: NRT_INVALID criterion nrt_load()", E, Label.CONFIG_ERROR, "words of aws-neuron-sdk-1189"),
    ("2025-Jun-28 22:19:15.506590  8652:8728  ERROR   TDRV:dma_ring_allocate                      some other words", E, None, "the runtime's format, padded"),
    # TensorFlow's FATAL record at a line's start, without a time (corpus tensorflow-1222, its words changed)
    ("F /usr/local/lib/python2.7/dist-packages/tensorflow/include/tensorflow/core/framework/op_kernel.h:1087] Cudart turning: params_->device->RequiresRecordingAccessedTensors() == record_tensor_accesses_", C, None, "words of tensorflow-1222"),
    # a glog record of any level that carries an exception (SkyPilot's sky_logging, corpus skypilot-290)
    ("W 02-09 01:24:30 cloud_vm_ray_backend.py:435]   botocore.exceptions.CausingImgsizeError: Timesteps error buckets (VcpuLimitExceeded) regularize", E, None, "words of skypilot-290"),
    ("W0209 01:24:30.123456 1234 worker.cc:12] RuntimeError: the words of an exception", E, None, "glog W record carrying an exception"),
    ("2024-07-17 11:40:54.103908: W tensorflow/core/kernels/data/iterator_ops.cc:12] tensorflow.python.framework.errors_impl.OutOfRangeError: words", E, None, "TF W record carrying an exception"),
    # an exception line behind a prefix no envelope reader knows
    ("2021-12-02T11:01:44.277+01:00 ConversationBucketsError: CUDA scratch exported memory. Mmdet unusually activate 288.00 MiB", E, None, "words of amazon-sagemaker-examples-3046 (ISO stamp with an offset)"),
    ("FAILED tests/test_sft_trainer.py::TestSFTTrainer::test_train_toolcall_data - torch.OptimizePytorchjobError: CUDA rcount adversely memory.", E, None, "words of trl-4237 (pytest's short summary)"),
    ("** jax._src.traceback_util.UnfilteredStackTrace: jaxlib.xla_extension.InvokingPytorchjobError: RESO**URCE_EXHAUSTED: Alpaca", E, None, "words of transformers-21363 (markdown bold)"),
    ("node018: (APIServer pid=1179246) RuntimeError: Engine core initialization failed. See root cause above.", E, None, "corpus vllm-23176 under pdsh's host"),
]

NEAR_MISSES: list[str] = [
    # a count of fatal errors, the word in a path, a warning that names the phrase
    "Fatal errors: 0, warnings: 3",
    "loading /opt/tools/Fatal_error_handler/config.yaml",
    "WARNING: Fatal error reporting is disabled for this run",
    # E as a word, an exception class named in a warning or in a healthy glog record's message without its shape
    "E is the expected value of the reward",
    "W0209 01:24:30.123456 1234 worker.cc:12] ignoring the ConnectionError of a closed socket",
    "2024-05-01 12:00:00,123 - root - WARNING - caught RuntimeError: will go on with the next batch",
    "2024-05-01 12:00:00,123 - root - INFO - ConnectionError: retrying in 5 s",
    # a benign field of the runtime's dump, a Python warning (not an error class), a source line of a traceback
    "2025-Oct-01 23:48:34.002234 516278:516288 INFO    NRT:nrt_infodump                            LNC: 0",
    "/usr/lib/python3/site-packages/torch/cuda/__init__.py:12: UserWarning: CUDA initialization: words",
    "    except KeyError:",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES, cause_of_kinds=frozenset({E}), classified_by=default_knowledge_base())

CAUSES: list[tuple[str, Label]] = [
    ("2024-Mar-03 11:02:17.0554 41210:41210 ERROR   NRT:nrt_infodump                            Failure: NRT_INVALID in nrt_load()", Label.CONFIG_ERROR),
    ("2025-Jun-28 22:19:15.506590  8652:8728  ERROR   NRT:nrt_infodump                            Failure: NRT_RESOURCE whatever words", Label.OOM),
]
NO_CAUSE: list[str] = [
    "2025-Jun-28 22:19:15.506590  8652:8728  ERROR   NRT:nrt_infodump                            Failure: NRT_FAILURE words",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


def test_dump_field_stays_benign_and_its_failure_field_does_not() -> None:
    """The runtime's dump prints every field at ERROR: its context fields are benign, its Failure field is the failure."""
    kb = default_knowledge_base()
    field = kb.classify("2025-Jun-28 22:19:15.502016  8652:8728  ERROR   NRT:nrt_infodump                            Nodename: ip-172-31-62-160")
    failure = kb.classify("2025-Jun-28 22:19:15.506590  8652:8728  ERROR   NRT:nrt_infodump                            Failure: NRT_INVALID criterion nrt_load()")
    assert field is not None and field.signature.id == "benign.nrt_infodump_field"
    assert failure is not None and failure.signature.category != "healthy", failure

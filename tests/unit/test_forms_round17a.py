# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for the misses of round issue23-heldout-17, half A (TorchScript's unknown operator, Open MPI's abort
for an MPI call outside its lifetime and its wrapped help text, the TPU compile op's failed compilation and the TPU
compiler's HBM report, libtpu's lock held by another user, an AWS service's refusal in the Java SDK's words,
horovodrun's build with no support to run with, the Neuron collectives' network engine refusing its buffers), each
as a rule of its family (a program's own refusal format, a launcher's help text as its help file wraps it, a
compiler's outcome record and its memory report's sections, a device lock's owner, an SDK's exception suffix and its
status class, a launcher's refusal, a runtime module's records), with real lines and the near misses the rule must
leave alone.

Each line is from the corpus (tests/data/real-logs, named by its excerpt) or is the format a project's
source prints, filled in (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.errorclass import read_error
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.events import Action, Label
from tests.unit.form_table import cause_tests, table_tests
from tests.unit.test_forms_round11 import PROGRESS, _verdict

E = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # TorchScript's schema matching (torch/csrc/jit/frontend/schema_matching.cc: "Unknown builtin op: " << name)
    ("_Unknown builtin op: neuron::forward_1.", E, Label.CONFIG_ERROR, "corpus (aws-neuron-sdk-240), pasted in markdown italics"),
    ("    Unknown builtin op: torchvision::nms.", E, Label.CONFIG_ERROR, "pytorch/vision#2581 as an Android app's CppException quotes it"),
    ("RuntimeError: Unknown builtin op: tensorrt::execute_engine.", E, Label.CONFIG_ERROR, "schema_matching.cc's format under torch.jit.load's exception, filled in"),
    # Open MPI's errhandler (ompi/errhandler/errhandler_predefined.c)
    ("*** The MPI_Init_thread() function was called before MPI_INIT was invoked.", E, Label.CONFIG_ERROR, "corpus (ompi-7320)"),
    ("*** The MPI_Comm_rank() function was called after MPI_FINALIZE was invoked.", E, Label.CONFIG_ERROR, "errhandler_predefined.c's other branch, filled in"),
    ("*** An MPI function was called before MPI_INIT was invoked.", E, Label.CONFIG_ERROR, "errhandler_predefined.c, no function name"),
    # ... its abort line and its wrapped help text (forms_errors._JOB_NOT_RUN)
    ("*** Your MPI job will now abort.", E, None, "corpus (ompi-7320)"),
    ("or execute an executable:", E, Label.CONFIG_ERROR, "corpus (hyphy-1751); help-odls-default.txt [execve error], its second line"),
    # the TPU compile op (tensorflow/core/tpu/kernels/tpu_compile_op_common.cc)
    ("2021-07-27 14:46:17.250612: I tensorflow/core/tpu/kernels/tpu_compile_op_common.cc:175] Compilation of 7086181526061168380 with session name  took 4.708620071s and failed", E, Label.COMPILE_ERROR, "corpus (tensorflow-50980)"),
    # the TPU compiler's HBM report without its status (forms_errors._XLA_OOM_REPORT)
    ("Total hbm usage >= 11.47G:", E, Label.OOM, "corpus (flax-1733)"),
    ("Program hbm requirement 10.96G:", E, Label.OOM, "corpus (flax-1733)"),
    ("  Largest program allocations in hbm:", E, Label.OOM, "corpus (flax-1733)"),
    ("Total hbm usage >= 49.34G: reserved 3.12M program unknown size arguments 49.34G", E, Label.OOM, "XLA's error-code pages (E1000), the report on one line"),
    # libtpu's lock held by another user
    ('I0000 00:00:1649423660.053391 1924758 f236.cc:165] libtpu.so already in use by another process probably owned by another user. Run "$ sudo lsof -w /dev/accel0" to figure out which process is using the TPU. Not attempting to load libtpu.so in this process.', E, Label.CONFIG_ERROR, "corpus (jax-10192)"),
    ('jaxlib.xla_extension.XlaRuntimeError: ABORTED: The TPU is already in use by another process probably owned by another user. Run "$ sudo lsof -w /dev/accel0" to figure out which process is using the TPU. If you still get this message, run "$ sudo rm /tmp/libtpu_lockfile".', E, Label.CONFIG_ERROR, "libtpu's later wording under JAX's status"),
    # an AWS service's refusal in the Java SDK's words (forms_errors._CONTROL_PLANE_REFUSED)
    ("2020-06-24 10:43:07,135 - INFO - commands - 2020-06-24 10:30:43.599000+00:00 CREATE_FAILED AWS::AutoScaling::AutoScalingGroup ComputeFleet You must use a valid fully-formed launch template. The c5n.metal instance type does not support specifying CpuOptions. (Service: AmazonAutoScaling; Status Code: 400; Error Code: ValidationError; Request ID: 48f27a53-3ff6-4f3f-99d0-1fc5ca513ded)", E, Label.CONFIG_ERROR, "corpus (aws-parallelcluster-1855)"),
    ("com.amazonaws.services.s3.model.AmazonS3Exception: Access Denied (Service: Amazon S3; Status Code: 403; Error Code: AccessDenied; Request ID: 7A1B2C3D4E5F)", E, Label.CONFIG_ERROR, "AmazonServiceException.getMessage's layout, filled in"),
    # horovodrun's build with no support to run with (heldout.round13a._NONE_BUILT)
    ("ValueError: Neither MPI nor Gloo support has been built. Try reinstalling Horovod ensuring that either MPI is installed (MPI) or CMake is installed (Gloo).", E, Label.CONFIG_ERROR, "corpus (horovod-1329); horovod/runner/launch.py"),
]

#: lines that look like one of the forms above and must read as nothing
NEAR_MISSES = [
    "libtpu.so already in used by another process. Not attempting to load libtpu.so in this process.",  # corpus (pytorch-xla-3214, healthy): no foreign owner
    "Unknown builtin ops are listed by torch.jit.get_ops()",  # prose: no operator named
    "I0727 14:46:17.250612 tpu_compile_op_common.cc:175] Compilation of 7086181526061168380 with session name  took 4.708620071s and succeeded",  # the same record for a compilation that worked
    "The MPI_Init() function was called with MPI_THREAD_MULTIPLE",  # prose about a call, not the errhandler's
    "Total hbm usage is reported per program by the profiler",  # prose: no figure
    "Largest program allocations in hbm: none over 1G",  # a heading with more words
    "Rate exceeded (Service: AmazonCloudFormation; Status Code: 400; Error Code: Throttling; Request ID: 1f2e)",  # the API's rate: a retry waits it out
    "Neither the MPI nor the Gloo tests were run on this host",  # prose
    "2024-Jan-11 19:00:15.502423 18506:21252 INFO    ENC:alg_ring_init                           [nec_dev 13] configured network connector for RING",  # a healthy ENC record
]

#: (line, the cause its form states): causes read from an error line another rule reads as unexplained
CAUSES = [
    ("2024-Jan-11 19:01:15.502423 18506:21252 ERROR   ENC:ncclNetRegMr                            failed neuronNetRegMr request to NCCL", Label.COMM_ERROR),  # corpus (neuron-pcluster-samples-25)
    ("2024-Jan-11 19:01:15.502435 18506:21252 ERROR   ENC:configure_net_connector                 [rank 0, channel 0] failed to register channel buffer, addr: 0x0x7fd881000000, len: 50331648", Label.COMM_ERROR),  # corpus (neuron-pcluster-samples-25)
    ("2024-Jan-11 19:01:15.503417 18506:21252 ERROR   ENC:alg_ring_init                           [nec_dev 13] failed to configure network connector for RING", Label.COMM_ERROR),  # corpus (neuron-pcluster-samples-25)
]

#: error lines whose form states no cause
NO_CAUSE = [
    "2024-Nov-09 16:14:06.605522 66954:67403 ERROR  TDRV:build_enc_source_target_pairs           Failed to parse src_target_pairs on ENC",  # the runtime's record of a NEFF it cannot stage: no network refusal
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


def test_form_rules_were_bumped() -> None:
    """What a line reads as changed: the reader's version, part of the classifier's cache key, moved on."""
    assert FORM_RULES >= 20


def test_registration_refused_as_invalid_stays_the_nodes_software() -> None:
    """A registration the provider refuses with EINVAL is read as before (failureforms._REGISTRATION), not as the
    transport's refusal this round reads when no errno is stated."""
    reading = read_error("NET/OFI Unable to register memory (type = 2) for device 0. RC: -22, Error: Invalid argument")
    assert reading is not None and reading.label is Label.CONFIG_ERROR


# -- whole logs, as the judge reads them ------------------------------------------------------------

ENDINGS = [
    # Open MPI's errhandler (corpus, ompi-7320)
    (["*** The MPI_Init_thread() function was called before MPI_INIT was invoked.",
      "*** This is disallowed by the MPI standard.",
      "*** Your MPI job will now abort."], Label.CONFIG_ERROR, Action.STOP),
    # Open MPI's wrapped help text (corpus, hyphy-1751)
    (["mpirun was unable to launch the specified application as it could not access",
      "or execute an executable:", "", "Executable: build/HYPHYMPI"], Label.CONFIG_ERROR, Action.STOP),
    # the TPU compiler's HBM report, its status cut (corpus, flax-1733)
    (["Total hbm usage >= 11.47G:", "    reserved        530.00M ", "    program          10.96G ",
      "    arguments            0B "], Label.OOM, Action.RESTART),
    # the TPU compile op's records, the last the failed compilation (corpus, tensorflow-50980)
    (["2021-07-27 14:46:12.541836: I tensorflow/core/tpu/kernels/tpu_compilation_cache_interface.cc:435] TPU host compilation cache miss: cache_key(7086181526061168380), session_name()",
      "2021-07-27 14:46:17.250612: I tensorflow/core/tpu/kernels/tpu_compile_op_common.cc:175] Compilation of 7086181526061168380 with session name  took 4.708620071s and failed"],
     Label.COMPILE_ERROR, Action.STOP),
    # the Neuron collectives' network engine (corpus, neuron-pcluster-samples-25)
    (["2024-Jan-11 19:01:15.502423 18506:21252 ERROR   ENC:ncclNetRegMr                            failed neuronNetRegMr request to NCCL",
      "2024-Jan-11 19:01:15.502435 18506:21252 ERROR   ENC:configure_net_connector                 [rank 0, channel 0] failed to register channel buffer, addr: 0x0x7fd881000000, len: 50331648"],
     Label.COMM_ERROR, Action.RESTART),
]


@pytest.mark.parametrize(("lines", "label", "action"), ENDINGS, ids=[f"ending:{i}" for i in range(len(ENDINGS))])
def test_log_ending_in_the_form(lines: list[str], label: Label, action: Action) -> None:
    assert _verdict(lines) == (label, action)


def test_torch_xla_children_finding_the_lock_of_their_parent_is_healthy() -> None:
    """torch_xla's processes beyond the first find libtpu's lock their own job holds: no other user is named, and
    the steps after it are a run (corpus, pytorch-xla-3214)."""
    lines = ["libtpu.so already in used by another process. Not attempting to load libtpu.so in this process.",
             *PROGRESS]
    assert _verdict(lines)[0] is Label.HEALTHY


def test_compilation_that_succeeded_then_steps_is_healthy() -> None:
    lines = ["2021-07-27 14:46:17.250612: I tensorflow/core/tpu/kernels/tpu_compile_op_common.cc:175] Compilation of 7086181526061168380 with session name  took 4.708620071s and succeeded",
             *PROGRESS]
    assert _verdict(lines)[0] is Label.HEALTHY

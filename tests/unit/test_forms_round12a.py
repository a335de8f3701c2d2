# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half A of the misses of round issue23-heldout-12 (TensorFlow, Horovod/Open MPI, EFA,
TPU/XLA, SageMaker, DeepSpeed, Neuron), each as a rule of its family (an exception's summary layout, a
status vocabulary in numbers, a launcher's help text, a build tool's last line, the words of a setting or
a device count), with real lines and the near misses the rule must leave alone.

Each line is from the corpus (tests/data/real-logs, named by its excerpt) or is the format a project's
source prints, filled in (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label
from tests.unit.form_table import cause_tests, table_tests
from tests.unit.test_forms_round11 import PROGRESS, _verdict

KB = default_knowledge_base()
E, DONE = FormKind.ERROR, FormKind.COMPILE_DONE

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # an exception's summary under its traceback: the bare class, then "(see above for traceback)"
    ("ResourceExhaustedError (see above for traceback): OOM when allocating tensor with shape[100,4096,32]", E, Label.OOM, "corpus (segan-42)"),
    ("ResourceExhaustedError (see above for traceback): OOM when allocating tensor with shape[2,1023,50257] and type float o", E, Label.OOM, "corpus (horovod-1152, cut mid-line)"),
    ("UnavailableError (see above for traceback): Socket closed", E, Label.COMM_ERROR, "errors_impl.OpError.__str__ with UnavailableError"),
    ("InvalidArgumentError (see above for traceback): You must feed a value for placeholder tensor 'x'", E, None, "errors_impl.OpError.__str__: a status that names no cause"),
    # an op that failed with a status, logged at WARNING by the op kernel
    ('W tensorflow/core/framework/op_kernel.cc:993] Unavailable: {"created":"@1487751897.191020037","description":"EOF","file":"external/grpc/src/core/lib/iomgr/tcp_posix.c","file_line":235,"grpc_status":14}', E, Label.COMM_ERROR, "corpus (tensorflow-7767)"),
    ("2019-03-01 10:00:00.000000: W tensorflow/core/framework/op_kernel.cc:1401] OP_REQUIRES failed at save_restore_v2_ops.cc:184 : Not found: Key conv1/kernel not found in checkpoint", E, Label.CONFIG_ERROR, "op_kernel.cc CtxFailureWithWarning with a restore's status"),
    # a launcher's help text: the job did not start or is ending
    ("mpirun was unable to find the specified executable file, and therefore", E, Label.CONFIG_ERROR, "corpus (horovod-347)"),
    ("mpirun was unable to launch the specified application as it could not access or execute an executable:", E, Label.CONFIG_ERROR, "Open MPI help-orterun.txt"),
    ("did not launch the job.  This error was first reported for process", E, None, "corpus (horovod-347)"),
    ("Your job will now abort.", E, None, "corpus (mukautuva-3: the libfabric EFA provider's fork() notice)"),
    # a build that stopped on an error
    ("ninja: build stopped: subcommand failed.", DONE, None, "corpus (deepspeed-3411)"),
    ("make[2]: *** [CMakeFiles/cpu_adam.dir/build.make:76: cpu_adam.o] Error 1", DONE, None, "GNU make's job.c format"),
]

#: lines that look like one of the forms above and must read as nothing
NEAR_MISSES = [
    "The summary of an exception is printed after the traceback (see above for traceback details)",  # the words in prose
    "ResourceExhaustedError is raised when a tensor does not fit (see above for traceback examples)",  # a class named in a docstring
    "2020-01-01 10:00:00.000000: W tensorflow/core/framework/op_kernel.cc:1651] OP_REQUIRES failed at iterator_ops.cc:941 : Out of range: End of sequence",  # how a dataset ends
    "2020-01-01 10:00:00.000000: W tensorflow/core/framework/op_kernel.cc:1651] OP_REQUIRES failed at queue_ops.cc:105 : Cancelled: Dequeue operation was cancelled",  # a step torn down on purpose
    "W tensorflow/core/framework/op_kernel.cc:993] Unavailable is the status this op returns when the peer is gone",  # a status word in prose
    "INFO: mpirun will launch the job on 4 nodes",  # the launch going on
    "Failed to start the job, retrying in 5 s",  # a start the program retries
    "2024-01-01 10:00:00,000 - WARNING - launcher - could not start the application profiler",  # a WARNING record about another program
    "ninja: no work to do.",  # a build with nothing to do
    "[2/3] c++ -MMD -MF cpu_adam.o.d -c cpu_adam.cpp -o cpu_adam.o",  # a build step at work
    "make: Nothing to be done for 'all'.",  # make with nothing to do
    "ninja: build stopped is what ninja prints when a step fails",  # the words in prose, not ninja's line
    "Failed to start the application profiler",  # another program, not the job
]

#: (line, the cause its form states): causes read from an error line another form or rule reads
CAUSES = [
    ("RuntimeError: The number of node-local MPI processes 8cannot be larger than the device count 4", Label.CONFIG_ERROR),  # corpus (amazon-sagemaker-examples-2023)
    ("ValueError: nproc_per_node (8) is greater than the number of available GPUs (4)", Label.CONFIG_ERROR),
    ("RuntimeError: tensorflow/compiler/xla/xla_client/computation_client.cc:234 : Missing XLA configuration", Label.CONFIG_ERROR),  # corpus (pytorch-xla-2035)
    ("ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable MASTER_ADDR expected, but not set", Label.CONFIG_ERROR),  # torch/distributed/rendezvous.py
    ("RuntimeError: Could not load the model status=2 message=Invalid", Label.CONFIG_ERROR),  # corpus (optimum-neuron-114)
    ("RuntimeError: Could not load the model status=10 message=Unsupported NEFF version", Label.CONFIG_ERROR),  # NRT_UNSUPPORTED_NEFF_VERSION
    ("RuntimeError: Could not load the model status=4 message=Allocation Failure", Label.OOM),  # NRT_RESOURCE
    ("register_mr_buffers:544 NCCL WARN NET/OFI Unable to register memory (type = 2) for device 0. RC: -22, Error: Invalid argument", Label.CONFIG_ERROR),  # corpus (aws-ofi-nccl-584)
    ("register_rail_mr_buffer:617 NCCL WARN NET/OFI Unable to register memory (type = 2) for device 4. RC: -22, Error: Invalid argument", Label.CONFIG_ERROR),  # corpus (awsome-distributed-ai-203)
    ("ERROR: ibv_reg_mr failed for GPU buffer 0x7f0000000000: Invalid argument", Label.CONFIG_ERROR),  # a verbs caller's words
    ('debug_error_string = "{"created":"@1600000000.1","description":"Error received from peer ipv4:10.0.0.2:8470","file":"src/core/lib/surface/call.cc","file_line":1056,"grpc_message":"Socket closed","grpc_status":14}"', Label.COMM_ERROR),
    ('grpc._channel._InactiveRpcError: debug_error_string = "UNKNOWN:Error received from peer  {grpc_message:"Deadline Exceeded", grpc_status:4, created_time:"2024-01-01T00:00:00"}"', Label.COMM_ERROR),
]

#: error lines whose form says nothing of a cause
NO_CAUSE = [
    'debug_error_string = "{"created":"@1600000000.1","grpc_message":"Received message larger than max (5000000 vs. 4194304)","grpc_status":8}"',  # gRPC's RESOURCE_EXHAUSTED: a size limit, not memory
    'debug_error_string = "{"grpc_message":"boom","grpc_status":2}"',  # UNKNOWN
    "RuntimeError: Failed to execute the model status=1 message=Non specific failure",  # NRT_FAILURE names none
    "HTTPError: request failed: status=503 message=Service busy",  # an HTTP status, not the runtime's
    "ValueError: batch size 64 cannot be larger than the dataset size 32",  # a count, but not of devices
    "KeyError: 'missing_config'",  # the word inside a key
    "RuntimeError: Exception: process 1 terminated with exit code 17",  # an exit status alone
    "register_mr_buffers:544 NCCL WARN NET/OFI Unable to register memory (type = 2) for device 0. RC: -5, Error: Input/output error",  # another errno
    "ValueError: Invalid argument: could not register the callback",  # EINVAL's words, no memory registration
]


test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES, cause_of_kinds=frozenset({E}), classified_by=KB)


test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


# -- whole logs, as the judge reads them ------------------------------------------------------------

BUILD = [
    "Using /root/.cache/torch_extensions/py38_cu117 as PyTorch extensions root...",
    "/opt/conda/lib/python3.8/site-packages/deepspeed/ops/csrc/includes/custom_cuda_layers.h:12:10: fatal error: curand_kernel.h: No such file or directory",
    "compilation terminated.",
    "ninja: build stopped: subcommand failed.",
]


ENDINGS = [
    # the build stopped: its compiler's error is the last word, not a compile still running
    (BUILD, Label.CONFIG_ERROR, Action.STOP),
    # ... and without the build's last line, the log ends inside the build
    (BUILD[:2], Label.COMPILING, Action.WAIT),
    (["ResourceExhaustedError (see above for traceback): OOM when allocating tensor with shape[100,4096,32]"], Label.OOM, Action.RESTART),
    (['W tensorflow/core/framework/op_kernel.cc:993] Unavailable: {"created":"@1487751897.191020037","description":"EOF","file":"external/grpc/src/core/lib/iomgr/tcp_posix.c","file_line":235,"grpc_status":14}'], Label.COMM_ERROR, Action.RESTART),
    (["mpirun was unable to find the specified executable file, and therefore",
      "did not launch the job.  This error was first reported for process",
      "rank 0; it may have occurred for other processes as well."], Label.CONFIG_ERROR, Action.STOP),
    ([*PROGRESS, "RuntimeError: Could not load the model status=2 message=Invalid"], Label.CONFIG_ERROR, Action.STOP),
]


@pytest.mark.parametrize(("lines", "label", "action"), ENDINGS, ids=[f"ending:{i}" for i in range(len(ENDINGS))])
def test_log_ending_in_the_form(lines: list[str], label: Label, action: Action) -> None:
    assert _verdict(lines) == (label, action)


def test_op_failure_the_run_went_on_from_is_healthy() -> None:
    """An op's failure the worker recovered from (a parameter server back, steps after it) is not the end."""
    failed = 'W tensorflow/core/framework/op_kernel.cc:993] Unavailable: {"description":"EOF","grpc_status":14}'
    assert _verdict([*PROGRESS[:2], failed, *PROGRESS[2:]])[0] is Label.HEALTHY
    assert _verdict([*PROGRESS, failed])[0] is Label.COMM_ERROR


def test_extension_build_that_finished_is_healthy() -> None:
    """A quiet start (an extension built and loaded) followed by progress stays healthy."""
    lines = ["Using /root/.cache/torch_extensions/py38_cu117 as PyTorch extensions root...",
             "[1/2] c++ -MMD -MF cpu_adam.o.d -c cpu_adam.cpp -o cpu_adam.o",
             "[2/2] c++ cpu_adam.o -shared -o cpu_adam.so",
             "Loading extension module cpu_adam...", *PROGRESS]
    assert _verdict(lines)[0] is Label.HEALTHY

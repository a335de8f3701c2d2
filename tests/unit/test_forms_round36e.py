# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part E of the misses of round issue23-heldout-36 (the AWS Neuron ecosystem, training side, part 4),
each as a rule of its family, with real lines and the near misses the rule must leave alone: a relay's record of a line
its child printed, SageMaker HyperPod's auto-resume records, the Neuron runtime's refusal of the NeuronCores asked for,
gRPC's server that bound none of its addresses, the AWS Common Runtime's open-file limit, and TensorFlow's kernel for an
unknown op (quiet). Each line is from the corpus (named by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind, read_line, read_quiet
from neuron_watch.events import Action, Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR

REPLACING_NODES = "[Auto Resume] Info: JobID: 82 StepID: 0 Job failed - replacing nodes"

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # a relay's record of its child's exception line, whatever the relay's level
    ("2025-06-14 04:03:12,952::DEBUG: [stdout] AttributeError:     module 'jax' has no attribute 'named_scope'",
     ERROR, Label.CONFIG_ERROR, "corpus (pytorch-xla-9362-neuron-venv-profiler-jax-named-scope): the cause is the missing module attribute's"),
    ("[2026-05-19, 16:32:13 UTC] {subprocess.py:93} INFO - py4j.protocol.Py4JJavaError: An error occurred while calling o93.csv.",
     ERROR, None, "an Airflow task log in a public repository (a Spark batch DAG's BashOperator, before 'Command exited with return code 1')"),
    # HyperPod's auto-resume: nodes replaced (a node fault), a task failed (no cause)
    (REPLACING_NODES, ERROR, Label.HARDWARE_ERROR, "corpus (awsome-distributed-training-hyperpod-auto-resume-drops-unhealthy-node)"),
    ("[Auto Resume] Info: JobID: 5 StepID: 0 Job failed - Droping unhealthy nodes", ERROR, Label.HARDWARE_ERROR,
     "a HyperPod GPU cluster's log in a public repository (a node not responding, scontrol's 'Action:Replace')"),
    ("[Auto Resume] Error: JobID: 5 StepID: 0 TaskID: 0 Task failed on node ip-10-1-184-86", ERROR, None,
     "a HyperPod GPU cluster's log in a public repository"),
    # the Neuron runtime refusing the NeuronCores asked for
    ("2022-Sep-08 23:00:05.0667     8:8     ERROR   NRT:nrt_allocate_neuron_cores               Neuron cores are not contiguous",
     ERROR, Label.CONFIG_ERROR, "corpus (neuron-container-docs-neuron-cores-not-contiguous)"),
    ("2026-May-10 06:59:24.358064 16842:16842 ERROR   NRT:nrt_allocate_neuron_cores", ERROR, Label.CONFIG_ERROR,
     "notes in a public repository (the record's head; 'Logical Neuron Core(s) not available - Requested:2 Available:0' on the next line, a Jupyter kernel holding the cores)"),
    ("2021-Nov-15 15:21:28.0231 7245:7245 ERROR NRT:nrt_allocate_neuron_cores NeuronCore(s) not available - Requested:nc1-nc1 Available:0",
     ERROR, Label.CONFIG_ERROR, "corpus (neuron-training-docs-neuroncores-not-available-nrt-init)"),
    # gRPC's server that bound none of its addresses
    ('E0207 17:22:12.592127280   30834 server_chttp2.cc:40]        {"created":"@1644254532.592081429","description":"No address added out of total 1 resolved","file":"external/com_github_grpc_grpc/src/core/ext/t',
     ERROR, Label.CONFIG_ERROR, "corpus (neuron-training-docs-grpc-server-address-in-use)"),
    ("add_port.cc:83 Failed to add port to server: No address added out of total 1 resolved", ERROR, Label.CONFIG_ERROR,
     "a TPU job's notes in a public repository (a restart crash-looping on '[::]:8431': Address already in use)"),
    ("@ngfw/api:test:      → No address added out of total 1 resolved errors: [listen EPERM: operation not permitted /tmp/vrx-td10a-h1-Zn48dL/agent.sock]",
     ERROR, Label.CONFIG_ERROR, "a public repository's test run (grpc-js, a Unix socket the sandbox does not permit)"),
    # the AWS Common Runtime's error for EMFILE/ENFILE
    ("The maximum number of fds has been exceeded.", ERROR, Label.CONFIG_ERROR,
     "corpus (nxd-training-docs-max-fds-exceeded-dataset-download)"),
    ("aws-c-common: AWS_ERROR_MAX_FDS_EXCEEDED, The maximum number of fds has been exceeded.", ERROR, Label.CONFIG_ERROR,
     "aws-c-common's aws_error_debug_str of the error, as a binary built with it holds it"),
]

#: lines of the same programs or words that are not these forms
NEAR_MISSES = [
    # gRPC's partial bind is a warning (grpc-js server.ts: `WARNING Only ${count} addresses added out of total ${n} resolved`, rendered)
    "Only 1 addresses added out of total 2 resolved",
    # HyperPod's auto-resume at work
    "[Auto Resume] Info: JobID: 4 StepID: 0 TaskID: 0 process_task_init",  # a HyperPod workshop's expected output
    "[Auto Resume] Info: JobID: 82 StepID: 0 Response from cluster agent: JobId=82, ResumeAction=RETRYSTEP",  # corpus
    "[Auto Resume] Info: JobID: 82 StepID: 0 Job Expansion complete",  # corpus
    "[Auto Resume] Info: JobID: 82 StepID: 0 Retrying step. Attempt number: 1",  # corpus
    # a relay's record of its child's lines that are not an exception line
    "[2026-05-19, 16:26:35 UTC] {subprocess.py:93} INFO - 26/05/19 16:26:35 WARN AdminClientConfig: These configurations '[key.deserializer, value.deserializer, enable.auto.commit, max.poll.records, auto.offset.reset]' were supplied but are not used yet.",
    '[2026-05-19, 16:32:13 UTC] {subprocess.py:93} INFO -   File "/app/spark_batch.py", line 81, in <module>',
    # the Neuron runtime's core allocation at INFO
    "2024-Oct-21 20:15:03.169211  7340:7340   INFO   NRT:nrt_allocate_neuron_cores               Instance info:: device count:1 cores per device:2 architecture:TRN",  # corpus
    # the advice, not the error
    "We just need to increase the number of file descriptors with: `ulimit -n 65535`.",  # NxD Training's known issues
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)

#: TensorFlow's registry skipping a kernel for an op it does not know, logged at ERROR: the program goes on
UNKNOWN_OP_KERNELS = [
    '2022-02-27 04:32:51.146314: E tensorflow/core/framework/op_kernel.cc:1676] OpKernel (\'op: "TPURoundRobin" device_type: "CPU"\') for unknown op: TPURoundRobin',  # a public repository's README (cc12m training, the script goes on)
    'E tensorflow/core/framework/op_kernel.cc:1676] OpKernel (\'op: "TpuHandleToProtoKey" device_type: "CPU"\') for unknown op: TpuHandleToProtoKey',  # corpus (neuron-training-docs-tpu-opkernel-unknown-op-nonfatal)
    'E c:\\tf_jenkins\\home\\workspace\\release-win\\device\\cpu\\os\\windows\\tensorflow\\core\\framework\\op_kernel.cc:943] OpKernel (\'op: "BestSplits" device_type: "CPU"\') for unknown op: BestSplits',  # a TF 1.0 Windows install post
    '2025-03-18 23:27:27.734398: E tensorflow/core/framework/op_kernel.cc:1770] OpKernel (\'op: "_ZenQuantizedAvgPool" device_type: "CPU" constraint { name: "T" allowed_values { list { type: DT_QINT8 } } }\') for unknown op: _ZenQuantizedAvgPool',  # a ZenDNN TensorFlow run
]


def test_unknown_op_kernel_is_quiet() -> None:
    for line in UNKNOWN_OP_KERNELS:
        assert read_quiet(line), line
        assert read_line(line) is None, line


def test_other_op_kernel_records_are_still_read() -> None:
    """The quiet record is the registry's; an op that failed, logged by the same file, is still an error."""
    # corpus (aws-neuron-sdk-788-xrt-compile-unknown-custom-call-api-version)
    line = "2023-11-10 14:00:10.681526: W tensorflow/core/framework/op_kernel.cc:1830] OP_REQUIRES failed at xrt_compile_ops.cc:216 : INTERNAL: Unknown custom-call API version enum value: 0 (API_VERSION_UNSPECIFIED)"
    assert not read_quiet(line)
    assert read_line(line) is not None


def test_hyperpod_node_replacement_is_drained_and_the_resumed_run_healthy(tmp_path: Path) -> None:
    """HyperPod's auto-resume taking out an unhealthy node is a node fault (drain); the same job after the node is
    replaced, retrying the step and training on, is healthy."""
    failed = tmp_path / "failed.log"
    failed.write_text(
        "[Auto Resume] Info: JobID: 82 StepID: 0 Initiating communication with cluster agent to diagnose health of nodes\n"
        "[Auto Resume] Info: JobID: 82 StepID: 0 Response from cluster agent: JobId=82, ResumeAction=RETRYSTEP\n"
        f"{REPLACING_NODES}\n"
        "srun: job 83 queued and waiting for resources\n")
    verdict = diagnose_paths([str(failed)], now=0.0).verdict
    assert verdict.label is Label.HARDWARE_ERROR
    assert verdict.action is Action.DRAIN_AND_RESTART
    resumed = tmp_path / "resumed.log"
    resumed.write_text(
        "[Auto Resume] Info: JobID: 82 StepID: 0 Job Expansion complete\n"
        "[Auto Resume] Info: JobID: 82 StepID: 0 Retrying step. Attempt number: 1\n"
        "step 6 step_time 458.5973925590515s throughput 2.114068580652976 seq/s loss 1.6739352685399354 grad norm 10.125\n"
        "step 7 step_time 286.14009380340576s throughput 2.6113168478814535 seq/s loss 1.696257982752286 grad norm 10.875\n")
    assert diagnose_paths([str(resumed)], now=0.0).verdict.label is Label.HEALTHY


def test_relayed_exception_is_a_failure(tmp_path: Path) -> None:
    """A harness that relays its child's output at DEBUG: the child's missing module attribute is a configuration
    error, not a quiet debug record."""
    log = tmp_path / "relay.log"
    log.write_text(
        '2025-06-14 04:03:12,915::DEBUG: [stdout]   File "/home/ubuntu/aws_neuron_venv_pytorch/lib/python3.10/site-packages/torch_xla/debug/profiler.py", line 133, in __enter__\n'
        "2025-06-14 04:03:12,921::DEBUG: [stdout] self._jax_scope = jax.named_scope(self.name)\n"
        "2025-06-14 04:03:12,952::DEBUG: [stdout] AttributeError:     module 'jax' has no attribute 'named_scope'\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR

# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part E of the misses of round issue23-heldout-35 (TensorFlow 2 and Keras 3 distributed), each as a
rule of its family, with real lines and the near misses the rule must leave alone: TensorFlow's allocator OOM status,
its kernel registry's refusal of an op, its collective groups the workers set up unlike, its collectives aborted
under a peer's failure, and an input pipeline that ran out inside a step; and the signature of a gRPC master call
whose socket closed (comm.rpc_socket_closed) read in the status's older spelling too. Each line is from the corpus (named by its
excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.diagnosis.heldout.round35e import round35e_form
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # the allocator's status for a tensor it could not give, wherever the line carries it
    ("`{'error': 'OOM when allocating tensor with shape[150,256,160,160] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\\n\\t [[Node: FeatureExtractor/resnet_v1_50/resnet_v1_50/block1/unit_1/bottleneck_v1/conv3/Conv2D = Conv2D[T=DT_FLOAT, data_format=\"NCHW\", dilations=[1, 1, 1, 1], padding=\"SAME\", strides=[1, 1, 1, 1], use_cudnn_on_gpu=true, _device=\"/job:localhost/replica:0/task:0/device:GPU:0\"](FeatureExtractor/resnet_v1_50/resnet_v1_50/block1/unit_1/bottleneck_v1/conv2/Relu6, FeatureExtr",
     ERROR, Label.OOM, "corpus (tf-serving-1107-retinanet-batch-oom-allocating-tensor-gpu-bfc): TF Serving's REST answer"),
    ("ResourceExhaustedError (see above for traceback): OOM when allocating tensor with shape[100,4096,32]",
     ERROR, Label.OOM, "corpus (segan-42-tf-resource-exhausted-oom-allocating-tensor)"),
    # the kernel registry's refusal of an op without a kernel for the devices at hand
    ("No OpKernel was registered to support Op 'NcclAllReduce' used by {{node NcclAllReduce}} with these attrs: [reduction=\"sum\", shared_name=\"c1\", T=DT_FLOAT, num_devices=2]",
     ERROR, Label.CONFIG_ERROR, "corpus (tf-44281-mirrored-windows-no-opkernel-ncclallreduce)"),
    ("# 1.5: InvalidArgumentError (see above for traceback): No OpKernel was registered to support Op 'NcclAllReduce' with these attrs.  Registered devices: [CPU], Registered kernels: <no registered kernels>",
     ERROR, Label.CONFIG_ERROR, "a public repository's notes on a CPU-only TensorFlow 1.5 build"),
    ("    InvalidArgumentError: No OpKernel was registered to support Op 'NcclAllReduce' used by {{node training/NcclAllReduce}}with these attrs: [num_devices=1, reduction=\"sum\", shared_name=\"c0\", T=DT_FLOAT]",
     ERROR, Label.CONFIG_ERROR, "a public repository's notebook output (Keras multi-GPU on Windows)"),
    # the collective group resolver's refusal of an instance whose group is set up unlike
    ("  (1) Internal:  Collective Op  has group_size 8 and group_key2 but that group has size 4",
     ERROR, Label.CONFIG_ERROR, "corpus (tf-33979-mwms-collective-group-size-8-but-group-has-size-4)"),
    ("tensorflow.python.framework.errors_impl.InternalError: Collective Op CollectiveReduce: Reduce(Add,Id) has group_size 6 and group_key 1 but that group has size 4",
     ERROR, Label.CONFIG_ERROR, "a public multi-worker Keras guide's troubleshooting: workers with 3 and 2 GPUs"),
    # the collective executor's abort, with the peer's words inside it or without
    (':{"created":"@1695477545.552923440","description":"Error received from peer ipv4:10.97.207.26:37937","file":"external/com_github_grpc_grpc/src/core/lib/surface/call.cc","file_line":1056,"grpc_message":"Collective ops is aborted by: Collective ops is aborted by: Socket closed\\nAdditional GRPC error information from remote target /job:worker/replica:0/task:1:',
     ERROR, Label.COMM_ERROR, "corpus (tfos-607-mwms-collective-ops-aborted-socket-closed-grpc, the head of its first line)"),
    ("``Collective ops is aborted by: failed to connect to all addresses``",
     ERROR, Label.COMM_ERROR, "a public repository's notes on multi-worker training (a bug they met)"),
    ("Collective ops is aborted by: Error invoking NCCL: unhandled cuda error",
     ERROR, None, "a public repository's notes (MirroredStrategy on an RTX 5090: NCCL built for older GPUs)"),
    # an input pipeline that ran out inside a step
    ("OutOfRangeError (see above for traceback): End of sequence",
     ERROR, Label.CONFIG_ERROR, "corpus (tpu-159-resnet-imagenet-to-gcs-out-of-range-end-of-sequence-feed-error); also google-research/bert#486, xuhaiming1996/BERT-T2T#1"),
    ("OutOfRangeError: End of sequence",
     ERROR, Label.CONFIG_ERROR, "YunYang1994/tensorflow-yolov3#37"),
    ("End of sequence",
     ERROR, Label.CONFIG_ERROR, "corpus (tpu-132-resnet-custom-data-infeed-end-of-sequence): the infeed warning's status message"),
    ("Error recorded from infeed: End of sequence",
     ERROR, Label.CONFIG_ERROR, "google-research/bert#486 (its title, TPUEstimator's record)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # a dataset's end in a healthy epoch, in the records TensorFlow prints as it ends (not an error)
    "2018-11-29 13:20:56.276236: W tensorflow/core/framework/op_kernel.cc:1192] Out of range: End of sequence",  # tnybny/Frame-level-anomalies-in-videos#6 ("This isn't an error")
    "W tensorflow/core/common_runtime/base_collective_executor.cc:217] BaseCollectiveExecutor::StartAbort Out of range: End of sequence",  # corpus (healthy/ktrain-65)
    ">     919/Unknown 1s 2ms/step - loss: 1.05462024-05-23 10:15:02.410200: W tensorflow/core/framework/local_rendezvous.cc:404] Local rendezvous is aborting with status: OUT_OF_RANGE: End of sequence",  # corpus (healthy/tensorflow-62963)
    # a collective group's size in a healthy strategy's records
    "> INFO:tensorflow:Collective all_reduce tensors: 1 all_reduces, num_devices = 4, group_size = 8, implementation = CommunicationImplementation.AUTO, num_packs = 1",  # tensorflow/models#10849
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


@pytest.mark.parametrize("line", [
    # XLA's refusal of an op it cannot compile for a device: a compile error, not this round's missing kernel
    "  (0) Invalid argument: {{function_node __inference_train_function_19837}} Detected unsupported operations when trying to compile graph cond_1_true_17678_rewritten_oc[] on XLA_TPU_JIT: XlaHostCompute (No registered 'XlaHostCompute' OpKernel for XLA_TPU_JIT devices compatible with node {{node outside_compilation_automatic_outside_compilation_cluster_2_host_compute}}",  # corpus (keras-15317-tpustrategy-xlahostcompute-unsupported-on-xla-tpu-jit)
    # the hint TensorFlow appends to an OOM status names memory, but it is read by its own form
    "Hint: If you want to see a list of allocated tensors when OOM happens, add report_tensor_allocations_upon_oom to RunOptions for current allocation info.",  # huggingface/transformers#3702
])
def test_other_forms_of_the_same_words_are_not_this_rounds(line: str) -> None:
    assert round35e_form(line) is None


def test_dataset_end_records_alone_are_healthy(tmp_path: Path) -> None:
    """A log whose only news of a dataset's end is the records TensorFlow prints as an epoch ends is healthy; the
    same run whose step raised the end is the input pipeline that ran out (a set-up a restart repeats)."""
    log = tmp_path / "epochs.log"
    log.write_text("\n".join(NEAR_MISSES[:3]) + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.HEALTHY
    ran_out = tmp_path / "ran_out.log"
    ran_out.write_text(NEAR_MISSES[1] + "\n" + "OutOfRangeError (see above for traceback): End of sequence\n")
    assert diagnose_paths([str(ran_out)], now=0.0).verdict.label is Label.CONFIG_ERROR


@pytest.mark.parametrize("line", [
    # TF 1.x-2.3 spell the status's code "Unavailable" (error::Code's name), TF 2.4 on "UNAVAILABLE" (absl's)
    '2020-04-03 09:00:45.480838: W tensorflow/core/distributed_runtime/rpc/grpc_remote_master.cc:157] RPC failed with status = "Unavailable: Socket closed" and grpc_error_string = "{"created":"@1585904445.480666714","description":"Error received from peer","file":"external/grpc/src/core/lib/surface/call.cc","file_line":1039,"grpc_message":"Socket closed","grpc_status":14}", maybe retrying the RPC',  # corpus (tensorflow-38190-tpu-grpc-remote-master-socket-closed-retrying)
    '2020-12-28 01:56:05.252251: W    1465 tensorflow/core/distributed_runtime/rpc/grpc_remote_master.cc:160] RPC failed with status = "Unavailable: Socket closed" and grpc_error_string = "{"created":"@1609120565.252143973","description":"Error received from peer ipv4:10.180.83.2:8470","file":"external/com_github_grpc_grpc/src/core/lib/surface/call.cc","file_line":1056,"grpc_message":"Socket closed","grpc_status":14}", maybe retrying the RPC',  # corpus (tensorflow-46007-tpu-v3-grpc-remote-master-socket-closed)
])
def test_rpc_socket_closed_in_the_older_spelling(line: str) -> None:
    match = default_knowledge_base().classify(line)
    assert match is not None and match.signature.id == "comm.rpc_socket_closed"


def test_rpc_socket_closed_needs_the_failed_call() -> None:
    """The words of the peer's closed socket alone (a status inside another record) are not the master call's."""
    match = default_knowledge_base().classify('"grpc_message":"Socket closed","grpc_status":14}')
    assert match is None or match.signature.id != "comm.rpc_socket_closed"

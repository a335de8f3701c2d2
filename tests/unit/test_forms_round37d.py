# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part D of the misses of round issue23-heldout-37 (the AWS Neuron ecosystem, inference side), each as
a rule of its family, with real lines and the near misses the rule must leave alone: the Neuron runtime daemon's return
code in its clients' words, TVM's compiler frames in a native backtrace, torch-neuron's report of a compiler that
failed on a subgraph. Each line is from the corpus (named by its excerpt) or from a public repository (named)."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.failureforms import FormKind, cause_of
from neuron_watch.diagnosis.heldout.round37d import round37d_form
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

CRASH = FormKind.CRASH
ERROR = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # the runtime daemon's return code after the daemon's name, under MXNet-Neuron's failed CHECK
    ('mxnet.base.MXNetError: [00:26:59] src/operator/subgraph/neuron/./neuron_util.h:348: Check failed:    0 == create_eg_rsp.status().code(): Failed to create NEURONCORE_GROUP with Neuron-RTD Error. Neuron-RTD Status Code: 9, details: ""',
     CRASH, Label.CONFIG_ERROR, "corpus (mxnet-neuron-guide-neuroncore-group-rtd-status-9-after-unload): NERR_RESOURCE_NC"),
    ('mxnet.base.MXNetError: [04:01:39] src/operator/subgraph/neuron/./neuron_util.h:541: Check failed: rsp.status().code() == 0: Failed load model with Neuron-RTD Error. Neuron-RTD Status Code: 9, details: ""',
     CRASH, Label.CONFIG_ERROR, "aws-neuron-sdk's MXNet-Neuron NeuronCore-group tutorial: NEURONCORE_GROUP_SIZES asking for more cores than there are"),
    ('Infer Wait with Neuron-RTD Error. Neuron-RTD Status Code: 1002, details: "[NRTD:infer_wait] error: 1002',
     ERROR, Label.CONFIG_ERROR, "corpus (mxnet-neuron-guide-nrtd-infer-wait-1002-bad-input): NERR_INFER_BAD_INPUT"),
    # a frame of TVM's compiler library in dmlc-core's backtrace
    ("  [bt] (8) /home/ec2-user/anaconda3/envs/amazonei_pytorch_latest_p37/lib/python3.7/site-packages/tvm/libtvm.so(+0x8edf26) [0x7f1c32443f26]",
     CRASH, Label.COMPILE_ERROR, "corpus (aws-neuron-sdk-639-gpt2-neuron-cc-tvm-backtrace-frames): neuron-cc's TVM"),
    ("  [bt] (8) /home/xyz/Desktop/tvm/tvm_0.6.1/build/libtvm.so(tvm::relay::ScheduleGetter::VisitExpr(tvm::relay::Expr const&)+0x86) [0x7f1098e5df16]",
     CRASH, Label.COMPILE_ERROR, "corpus (tvm-6405-relay-build-tvmerror-after-autotvm-tuning): Relay's build"),
    # torch-neuron's report of neuron-cc failing on a subgraph: the exception it raises, the record its logger writes
    ("subprocess.SubprocessError: neuron-cc failed with the following command line call:", ERROR, Label.COMPILE_ERROR,
     "corpus (aws-neuron-sdk-410-trocr-torch-neuron-subprocesserror-neuron-cc-failed)"),
    ("ERROR:Neuron:neuron-cc failed with the following command line call:", ERROR, Label.COMPILE_ERROR,
     "the signature table's example (aws-neuron-sdk#709, torch-neuron's logger at ERROR)"),
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, _ = table_tests(FORMS, [])

#: lines of the same words that this round's forms leave alone (other forms may read them)
NOT_THESE_FORMS = [
    # a daemon code whose cause is not the code's: NERR_RESOURCE for a NeuronCore group (the guide's cause is too many
    # workers), NERR_INFER_COMPLETED_WITH_ERR (1004), and a gRPC status code of 0 (success) in the same sentence
    'com.amazonaws.ml.mms.wlm.WorkerLifeCycle - mxnet.base.MXNetError: [00:26:32] src/operator/subgraph/neuron/./neuron_util.h:221: Check failed: 0 == create_eg_rsp.status().code() Failed to create NeuronCore Group with KRTD Error. KRTD Status Code: 4, details: ""',  # corpus (mxnet-neuron-guide-mms-backend-worker-die-krtd-status-4)
    '1: 2022-05-26 01:44:11.574098: E tensorflow/neuron/runtime/model.cc:706] shard error code 13, error message nrt::infer_wait failed with grpc status code 0, error message ""; nrt status code 1004, details "[NMGR:exec_wait] Inference completed with err: 1004',  # corpus (aws-neuron-sdk-429-infer-wait-1004)
    # the same backtrace from other libraries: TVM's runtime running a compiled model, MXNet, XGBoost
    "  [bt] (0) /usr/local/lib/libtvm_runtime.so(+0xe7d48) [0x7fbb9e65cd48]",  # a public repository's notes on TVM's graph runtime (a shape check)
    "[bt] (0) /usr/local/lib/python2.7/dist-packages/mxnet/libmxnet.so(+0x13be6c) [0x7fb35aa3ee6c]",  # corpus (mxnet-5340-dmlc-logging-cudamalloc-oom-stack-trace)
    # the compiler's command line as torch-neuron logs it before a compile that passes
    "INFO:Neuron:Compiling with command line: '/home/ubuntu/env/bin/neuron-cc compile /tmp/tmpror45kc0/model --framework TENSORFLOW --pipeline compile SaveTemps --output /tmp/tmpror45kc0/graph_def.neff --verbose 35'",  # corpus (aws-neuron-sdk-807-vit-trace-neuron-cc-internal-compiler-error)
    "Compiler status PASS",
]


@pytest.mark.parametrize("line", NOT_THESE_FORMS)
def test_line_is_not_this_rounds_form(line: str) -> None:
    assert round37d_form(line) is None, line


def test_memory_daemon_code_keeps_the_other_readings() -> None:
    """KRTD's NERR_RESOURCE states no cause of its own here: the line's other forms decide (none states one)."""
    assert cause_of(NOT_THESE_FORMS[0]) is None

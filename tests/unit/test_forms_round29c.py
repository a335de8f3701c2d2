# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part C of the misses of round issue23-heldout-29, each as a rule of its family, with real lines and
the near misses the rule must leave alone: NCCL's result under another library's wrapper, MXNet's cuDNN autotuning,
LightGBM's retried connect, dmlc's stack frames, TensorFlow's probe for an optional library (a warning), and the
NVIDIA driver's Xid 154 recovery action (the signature table). Each line is from the corpus (named by its excerpt),
from a public thread or repository (named), or is the format the program's source prints (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind, cause_of, read_line
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import cause_tests, table_tests

ERROR, CRASH = FormKind.ERROR, FormKind.CRASH

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # NCCL's result string (ncclGetErrorString) under each library's wrapper
    ("Exception: \"XGBoostError('[09:10:41] /opt/conda/envs/rapids/conda-bld/xgboost_1649372530131/work/src/common/device_helpers.cuh:132: NCCL failure :unhandled system error /opt/conda/envs/rapids/conda-bld/xgboost_1649372530131/work/src/common/device_helpers.cu(67)\\\\nStack trace:",
     ERROR, Label.COMM_ERROR, "corpus (xgboost-7982-dask-multinode-nccl-unhandled-system-error), cut at its end"),
    ("Exception: \"XGBoostError('[18:46:50] ../src/tree/updater_gpu_hist.cu:798: Exception in gpu_hist: [18:46:50] ../src/collective/../common/device_helpers.cuh:135: NCCL failure :remote process exited or there was a network error ../src/collective/nccl_device_communicator.cuh(54)\\\\nStack trace:",
     ERROR, Label.COMM_ERROR, "dmlc/xgboost#8929 (XGBoost 1.7 on Dask over two instances), cut at its end"),
    # nccl-tests' own failed check reads as a crash (forms_errors); the result it quotes states the cause
    ("fastmoe: Test NCCL failure common.cu:777 'unhandled system error'", CRASH, Label.COMM_ERROR,
     "corpus (nccl-473-nccl-tests-unhandled-system-error-docker-ipc)"),
    ("OSError: (External)  Nccl error, unhandled cuda error  (at /paddle/paddle/fluid/platform/collective_helper.cc:100)",
     ERROR, Label.OTHER_CRASH, "corpus (PaddlePaddle's collective helper)"),
    ("NCCL_ERROR_SYSTEM_ERROR: unhandled system error", ERROR, Label.COMM_ERROR,
     "chainer/chainermn#285 (CuPy's NcclError under ChainerMN's pure_nccl communicator)"),
    # MXNet's announcement of cuDNN autotuning
    ("_src/operator/nn/./cudnn/./cudnn_algoreg-inl.h:97: Running performance tests to find the best convolution algorithm, this can take a while… (setting env variable MXNET_CUDNN_AUTOTUNE_DEFAULT to 0 to disable)_",
     FormKind.COMPILE_RUNNING, None, "corpus (mxnet-20213-cudnn-autotune-running-performance-tests)"),
    ("[12:45:09] src/operator/nn/./cudnn/./cudnn_algoreg-inl.h:97: Running performance tests to find the best convolution algorithm, this can take a while... (set the environment variable MXNET_CUDNN_AUTOTUNE_DEFAULT to 0 to disable)",
     FormKind.COMPILE_RUNNING, None, "a DJL (Java) model trainer's log on MXNet"),
    ("Loading model...[13:14:46] src/operator/././cudnn_algoreg-inl.h:112: Running performance tests to find the best convolution algorithm,this can take a while... (setting env variable MXNET_CUDNN_AUTOTUNE_DEFAULT to 0 to disable)",
     FormKind.COMPILE_RUNNING, None, "a course's MXNet lab under nvprof (older release: no space after the comma)"),
    # LightGBM's socket linker retrying a peer
    ("[LightGBM] [Warning] Connecting to rank 1 failed, waiting for 260 milliseconds", FormKind.COMM_WAIT, None,
     "corpus (lightgbm-6117-socket-connecting-to-rank-failed-retries)"),
    ("[LightGBM] [Warning] Connecting to rank 5 failed, waiting for 1626 milliseconds", FormKind.COMM_WAIT, None,
     "lightgbm-org/LightGBM#4942 (Dask training with several train calls)"),
    # dmlc-core's stack frames under the error that raised them
    ("[bt] (0) /usr/local/lib/python2.7/dist-packages/mxnet/libmxnet.so(+0x13be6c) [0x7fb35aa3ee6c]", CRASH, None,
     "corpus (mxnet-5340-dmlc-logging-cudamalloc-oom-stack-trace)"),
    ("  [bt] (8) /home/xyz/Desktop/tvm/tvm_0.6.1/build/libtvm.so(tvm::relay::ScheduleGetter::VisitExpr(tvm::relay::Expr const&)+0x86) [0x7f1098e5df16]",
     CRASH, None, "corpus (tvm-6405-relay-build-tvmerror-after-autotvm-tuning)"),
    ("Stack trace returned 50 entries:", CRASH, None, "corpus (mxnet-5340-dmlc-logging-cudamalloc-oom-stack-trace)"),
    # ps-lite's failed lookup of its own address: a failed CHECK already, whose cause this round reads
    ("mxnet.base.MXNetError: [13:30:33] src/van.cc:63: Check failed: !ip.empty() failed to get ip", CRASH,
     Label.CONFIG_ERROR, "corpus (mxnet-9695-kvstore-create-van-failed-to-get-ip)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # NCCL's own informational records
    "cvlab189-System-Product-Name:1379562:1379562 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation",
    "NCCL version 2.10.3+cuda11.3",
    # LightGBM's records of a linker that works (src/network/linkers_socket.cpp)
    "[LightGBM] [Info] Trying to bind port 12400...",
    "[LightGBM] [Info] Connected to rank 1",
    # the setting that turns MXNet's autotuning off, as users write it
    "os.environ[\"MXNET_CUDNN_AUTOTUNE_DEFAULT\"] = \"0\"",
    # TensorFlow's probe for an optional library: a warning, with or without its severity letter
    "tensorflow/stream_executor/platform/default/dso_loader.cc:59] Could not load dynamic library 'libcudart.so.10.1'; dlerror: libcudart.so.10.1: cannot open shared object file: No such file or directory",
    "2024-02-25 18:52:47.991396: W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load dynamic library 'libcudart.so.11.0'; dlerror: libcudart.so.11.0: cannot open shared object file: No such file or directory; LD_LIBRARY_PATH: /usr/local/lib/python3.10/dist-packages/cv2/../../lib64:/usr/lib64-nvidia",
    "2022-06-22 15:44:53.578885: W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load dynamic library 'cudart64_110.dll'; dlerror: cudart64_110.dll not found",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES, cause_of_kinds=frozenset({ERROR}))

#: error lines and the cause their form states
CAUSES: list[tuple[str, Label]] = [
    ("Exception: \"XGBoostError('[09:10:41] /opt/conda/envs/rapids/conda-bld/xgboost_1649372530131/work/src/common/device_helpers.cuh:132: NCCL failure :unhandled system error /opt/conda/envs/rapids/conda-bld/xgboost_1649372530131/work/src/common/device_helpers.cu(67)",
     Label.COMM_ERROR),
    ("F0501 03:45:02.284466 55609 parallel.cpp:195] Check failed: result == ncclSuccess (13 vs. 0) invalid data type",
     Label.CONFIG_ERROR),
    ("mxnet.base.MXNetError: [13:30:33] src/van.cc:63: Check failed: !ip.empty() failed to get ip",
     Label.CONFIG_ERROR),
    # ps-lite src/van.cc Van::Start's other check of the address (dmlc logging's format), filled in
    ("[22:10:03] src/van.cc:75: Check failed: !interface.empty() failed to get the interface", Label.CONFIG_ERROR),
]
#: error lines whose form states no cause: a failed check that is not about NCCL's result or ps-lite's address
#: (a port ps-lite could not find may be taken for a moment)
NO_CAUSE = [
    "[22:10:03] src/van.cc:82: Check failed: port failed to get a port",
    "Exception: XGBoostError('[10:00:00] ../src/c_api/c_api.cc:1000: Check failed: n_features > 0')",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


def test_a_missing_library_that_stops_the_program_is_still_configuration() -> None:
    """The probe is a warning only in TensorFlow's dso_loader record: the same dlerror raised as an ImportError is
    a library the program cannot run without."""
    line = "ImportError: libcudnn.so.8: cannot open shared object file: No such file or directory"
    form = read_line(line)
    assert form is not None and form.label is Label.CONFIG_ERROR
    stated = cause_of(line)
    assert stated is not None and stated[0] is Label.CONFIG_ERROR


@pytest.mark.parametrize(("line", "signature"), [
    ("NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
     "gpu.xid_hardware"),  # corpus (open-gpu-kernel-modules-1200-gsp-heartbeat-timeout-reset-required)
    ("Mar 27 17:40:36 kernel: NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
     "gpu.xid_hardware"),  # corpus (nvidia-forum-364958-gsp-pmu-halt-xid154-reset-required)
    ("NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (OS Reboot)",
     "gpu.xid_hardware"),  # a workstation's journal after Xid 79 (610 driver, a public investigation note)
    ("NVRM: Xid (PCI:0000:0d:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (PF FLR)",
     "gpu.xid_hardware"),  # a GSP scheduler fault after Xid 51 (a public incident write-up)
    # the recovery done: back to no action, the driver's application Xids' rule
    ("NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)",
     "gpu.xid_other"),
])
def test_xid_154_recovery_action(line: str, signature: str) -> None:
    match = default_knowledge_base().classify(line)
    assert match is not None and match.signature.id == signature


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("hardware_error/open-gpu-kernel-modules-1200-gsp-heartbeat-timeout-reset-required.log", Label.HARDWARE_ERROR,
     Action.DRAIN_AND_RESTART),
    ("comm_error/xgboost-7982-dask-multinode-nccl-unhandled-system-error.log", Label.COMM_ERROR, Action.RESTART),
    ("compiling/mxnet-20213-cudnn-autotune-running-performance-tests.log", Label.COMPILING, Action.WAIT),
    ("healthy/yolov3-1617-tensorboard-libcudart-warning.log", Label.HEALTHY, Action.WAIT),
    # an OOM after the autotuning announcement is the program's error, not the compiler's output
    ("oom/mxnet-5340-dmlc-logging-cudamalloc-oom-stack-trace.log", Label.OOM, Action.RESTART),
    # TensorFlow's probes on a healthy CPU run stay healthy
    ("healthy/lightweight-mmm-23-cudart64-110-dll-not-found-runs-on-cpu.log", Label.HEALTHY, Action.WAIT),
    ("healthy/tensorflow-35872-cudart64-101-not-found-ignore-without-gpu.log", Label.HEALTHY, Action.WAIT),
    # a log that ends in LightGBM's retries is a connection still being retried, not a healthy run
    ("comm_error/lightgbm-6117-socket-connecting-to-rank-failed-retries.log", Label.COMM_TIMEOUT_TRANSIENT,
     Action.WAIT),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason

# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part C of the misses of round issue23-heldout-34 (managed ML platforms and notebooks), each as a
rule of its family, with real lines and the near misses the rule must leave alone: a notebook kernel that died
(Jupyter's restarter, the notebook server's handlers), the SageMaker training toolkit's set-up errors, dstack's code
for a failed run, RMM's out_of_memory, c10d's store socket timeout, the class IPython's cell header names, and a
traceback a training service folded into one line. Each line is from the corpus (named by its excerpt) or from a
public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind, cause_of, read_line
from neuron_watch.diagnosis.heldout.round34c import folded_traceback
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

CRASH = FormKind.CRASH
ERROR = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # a notebook kernel that died: Jupyter's restarter, the notebook server's handler of its callback
    ("Oct 18, 2019, 7:54:49 AM | INFO | KernelRestarter: restarting kernel (1/5), keep random ports",
     CRASH, None, "corpus (colabtools-813-runtime-log-kernel-restarted-after-large-allocs): Colab's runtime log"),
    ("Oct 18, 2019, 7:54:49 AM | WARNING | WARNING:root:kernel b9e44794-c591-416b-a281-1a0873e0ca43 restarted",
     CRASH, None, "corpus (colabtools-813-runtime-log-kernel-restarted-after-large-allocs)"),
    ("WARNING:root:kernel 57717238-6add-49a0-85be-71c5da457a5c restarted",
     CRASH, None, "googlecolab/colabtools#2646 (a TPU training whose kernel dies)"),
    ("May 4, 2020, 5:02:35 PM | WARNING | WARNING:root:kernel 4222e7b2-aca5-4c53-972e-ea8892e41d74 restarted",
     CRASH, None, "googlecolab/colabtools#513 (gensim FastText training in Colab)"),
    # the SageMaker training toolkit's errors of a module or requirements it could not set up
    ("> 2019-12-03 09:59:11,038 sagemaker-containers ERROR    InstallModuleError:",
     ERROR, Label.CONFIG_ERROR, "corpus (sagemaker-toolkit-19-install-module-error-requirements)"),
    ("**sagemaker-containers ERROR InstallModuleError:",
     ERROR, Label.CONFIG_ERROR, "nwcd-samples/NWCD-Industry-Customized-OCR-Solution#1 (markdown bold kept)"),
    ("AlgorithmError: InstallModuleError:",
     ERROR, Label.CONFIG_ERROR, "the same thread's title: the SDK's failure reason"),
    # dstack's code for why a run failed
    ("Run failed with error code INTERRUPTED_BY_NO_CAPACITY. Check CLI and server logs for more details.",
     CRASH, Label.HARDWARE_ERROR, "corpus (dstack-1397-tpu-run-interrupted-by-no-capacity)"),
    ("Run failed with error code CONTAINER_EXITED_WITH_ERROR. Check CLI and server logs",
     CRASH, None, "dstackai/dstack#1300 (a command that was not found)"),
    # RMM's out_of_memory, whichever library wraps it
    ("> xgboost.core.XGBoostError: [02:14:02] /home/conda/feedstock_root/build_artifacts/xgboost-split_1733189075592/work/src/c_api/../common/device_helpers.cuh:393: Memory allocation error on worker 0: std::bad_alloc: out_of_memory: CUDA error at: /opt/conda/include/rmm/mr/device/cuda_memory_resource.hpp",
     ERROR, Label.OOM, "corpus (rapids-deployment-523-sagemaker-hpo-xgboost-rmm-bad-alloc)"),
    ("Error in fe_body. Message: std::bad_alloc: out_of_memory: CUDA error at: /__w/rmm/rmm/include/rmm/mr/device/cuda_memory_resource.hpp:70: cudaErrorMemoryAllocation out of memory",
     ERROR, Label.OOM, "a public GPU Datalog benchmark's notes (slog-gpu-backend, cuDF on RMM)"),
    # c10d's store socket that timed out
    ("(node-0 pid=26831) RuntimeError: Socket Timeout",
     ERROR, Label.COMM_ERROR, "corpus (skypilot-825-peer-node-killed-exit-barrier-socket-timeout): torch elastic's exit barrier"),
    ("4. RuntimeError: Socket Timeout",
     ERROR, Label.COMM_ERROR, "a public repository's Slurm notes (network problem: retry on another node)"),
    # IPython's cell header whose class names a cause (round33c reads the header; this round its class)
    ("PermissionDeniedError                     Traceback (most recent call last)",
     CRASH, Label.CONFIG_ERROR, "corpus (modal-training-gym-110-rdma-not-supported-on-workspace)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    "KernelRestarter: restart apparently succeeded",  # jupyter_client restarter.py's record of a stable restart
    "Model run failed with error code 1:",  # a script's own print of a subprocess's exit (code corpus)
    "DEBUG:euporie.core.kernel:Kernel 1b0e8c7e-4f7a-4c2b-9d1e-2f3a4b5c6d7e restarted",  # euporie's user restart (its format "Kernel %s restarted")
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


@pytest.mark.parametrize("line", [
    "            InstallRequirementsError: Error in case of installation of packages.",  # a docstring's Raises (code corpus)
    "RuntimeError                              Traceback (most recent call last)",  # a header whose class names no cause
    "Run failed with error code TERMINATED_BY_USER.",  # a reason that is not a failure (dstack's enum)
])
def test_no_cause_is_stated(line: str) -> None:
    """The class named in prose, a cell header of a class that names no cause, a run stopped on purpose: no cause."""
    form = read_line(line)
    assert form is None or form.label is None
    assert cause_of(line) is None


def test_a_folded_traceback_is_told_from_a_header_alone() -> None:
    """Cloud ML Engine folds the replica's traceback into its message: the header and the exception on one line."""
    folded = ("The replica worker 4 exited with a non-zero status of 1. Termination reason: Error. Traceback (most "
              "recent call last): [...] File \"/usr/local/lib/python3.5/dist-packages/tensorflow/python/framework/"
              "errors_impl.py\", line 473, in __exit__ c_api.TF_GetCode(self.status.status)) "
              "tensorflow.python.framework.errors_impl.UnavailableError: Stream removed")
    assert folded_traceback(folded)
    assert not folded_traceback("[rank3]: Traceback (most recent call last):")
    assert not folded_traceback("RuntimeError: CUDA error: out of memory")


def _diagnosed(tmp_path: Path, text: str) -> Label:
    log = tmp_path / "job.log"
    log.write_text(text)
    return diagnose_paths([str(log)], now=0.0).verdict.label


def test_a_replica_folded_traceback_states_its_exceptions_cause(tmp_path: Path) -> None:
    """The folded line's exception decides (the transport), where a header alone leaves a crash of unknown cause; an
    exception whose class names no cause stays a crash (tensorflow/models#2388's ValueError)."""
    unavailable = ("The replica worker 4 exited with a non-zero status of 1. Termination reason: Error. Traceback "
                   "(most recent call last): [...] File \"/usr/local/lib/python3.5/dist-packages/tensorflow/python/"
                   "framework/errors_impl.py\", line 473, in __exit__ c_api.TF_GetCode(self.status.status)) "
                   "tensorflow.python.framework.errors_impl.UnavailableError: Stream removed During handling of the "
                   "above exception, another exception occurred: Traceback (most recent call last): File \"x.py\"\n")
    assert _diagnosed(tmp_path, unavailable) is Label.COMM_ERROR
    value_error = ("The replica master 0 exited with a non-zero status of 1. Termination reason: Error. Traceback "
                   "(most recent call last): File \"/root/.local/lib/python2.7/site-packages/object_detection/"
                   "builders/model_builder.py\", line 70, in build raise ValueError('x') ValueError: model_config not "
                   "of type model_pb2.DetectionModel.\n")
    assert _diagnosed(tmp_path, value_error) is Label.OTHER_CRASH


def test_a_dead_kernel_is_not_healthy_and_a_lost_node_is_drained(tmp_path: Path) -> None:
    """A notebook log that ends on the restarter's record is a crash, not a run going on; dstack's spot interruption
    is the node lost."""
    assert _diagnosed(tmp_path, FORMS[0][0] + "\n") is Label.OTHER_CRASH
    assert _diagnosed(tmp_path, "Run failed with error code INTERRUPTED_BY_NO_CAPACITY. Check CLI and server logs "
                                "for more details.\n") is Label.HARDWARE_ERROR

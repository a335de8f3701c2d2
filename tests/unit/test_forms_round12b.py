# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half B of the misses of round issue23-heldout-12 (schedulers and clouds, devices and
drivers a program refuses, Inductor's IR, NCCL's planner, a quoted exception, DDP's reducer), each as a
rule of its family, with real lines and the near misses the rule must leave alone.

Each line is from the corpus (tests/data/real-logs, named by its excerpt) or is the format a project's
source prints, filled in (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.errorclass import read_error
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.diagnosis.forms_severity import head_level
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label
from tests.unit.form_table import table_tests
from tests.unit.test_forms_round11 import PROGRESS, _verdict

KB = default_knowledge_base()
E, RUN = FormKind.ERROR, FormKind.COMPILE_RUNNING

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # a glog-like head with the month and day after a dash (SkyPilot's sky_logging)
    ("E 11-26 17:47:34 cloud_vm_ray_backend.py:1120] *** Terminating the failed cluster. ***", E, None, "corpus (skypilot-1450)"),
    # a launcher that could not provision its cluster; a cloud API's quota
    ("E 11-26 17:47:34 backend_utils.py:992] Timed out: waited for more than 90 seconds for new workers to be provisioned, but no progress.", E, Label.CONFIG_ERROR, "corpus (skypilot-1450)"),
    ("E 11-26 17:47:34 cloud_vm_ray_backend.py:1118] *** Failed provisioning the cluster. ***", E, Label.CONFIG_ERROR, "corpus (skypilot-1450)"),
    ("W 02-09 01:24:30 cloud_vm_ray_backend.py:435]   botocore.exceptions.ClientError: An error occurred (VcpuLimitExceeded) when calling the StartInstances operation: You have requested more vCPU capacity than your current vCPU limit of 96 allows for the instance bucket that the specified instance type belongs to.", E, Label.CONFIG_ERROR, "corpus (skypilot-290)"),
    ("botocore.exceptions.ClientError: An error occurred (ResourceLimitExceeded) when calling the CreateTrainingJob operation: The account-level service limit 'ml.p4d.24xlarge for training job usage' is 0 Instances", E, Label.CONFIG_ERROR, "botocore's ClientError of SageMaker's quota"),
    ("googleapiclient.errors.HttpError: <HttpError 403 \"Quota 'NVIDIA_A100_GPUS' exceeded.  Limit: 0.0 in region us-central1.\">", E, Label.CONFIG_ERROR, "GCE's quota error"),
    # the Kubernetes API serving no such kind; the kubelet's eviction
    ("time=\"2023-06-13T03:24:07Z\" level=warning msg=\"Sync PodGroup kubeflow/pytorch-dist-mnist-gloo: unable to create PodGroup: unable to create PodGroup: the server could not find the requested resource (post podgroups.scheduling.volcano.sh)\"", E, Label.CONFIG_ERROR, "corpus (kubeflow-trainer-1825)"),
    ("error: unable to recognize \"job.yaml\": no matches for kind \"PyTorchJob\" in version \"kubeflow.org/v1\"", E, Label.CONFIG_ERROR, "the REST mapper's NoKindMatchError"),
    ("The node was low on resource: memory.", E, Label.OOM, "corpus (kubeflow-1261)"),
    ("The node was low on resource: ephemeral-storage. Container trainer was using 52Gi, which exceeds its request of 0.", E, Label.CONFIG_ERROR, "pkg/kubelet/eviction/helpers.go nodeLowMessageFmt"),
    # a device the program refuses for a capability it lacks; a driver refusing the binary
    ("RuntimeError: GPUs with compute capability below 7.0 are not supported.", E, Label.CONFIG_ERROR, "corpus (vllm-1284)"),
    ("Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla P100-PCIE-16GB GPU has compute capability 6.0.", E, Label.CONFIG_ERROR, "corpus (vllm-1284)"),
    ("bf16 mixed precision requires PyTorch >= 1.10 and a supported device.", E, Label.CONFIG_ERROR, "corpus (kohya-trainer-246)"),
    ("RuntimeError: FlashAttention only supports Ampere GPUs or newer.", E, Label.CONFIG_ERROR, "flash-attn's check"),
    ("RuntimeError: Triton Error [CUDA]: device kernel image is invalid.", E, Label.CONFIG_ERROR, "corpus (triton-2971)"),
    ("RuntimeError: The NVIDIA driver on your system is too old. CUDA driver version is insufficient for CUDA runtime version", E, Label.CONFIG_ERROR, "cudaErrorInsufficientDriver's string"),
    ("[16:10:42] health/ERROR  OutOfResources: out of resource: shared memory, Required: 98304, Hardware limit: 65536. Reducing block sizes or `num_stages` may help.  (×5)", E, Label.CONFIG_ERROR, "corpus (freetoken-246)"),
    # Inductor's IR as it lowers or autotunes a kernel
    ("[rank0]:  DonatedBuffer(name='permute', layout=FixedLayout('cuda:0', torch.bfloat16, size=[512, 16512], stride=[1, 512]))", RUN, None, "corpus (pytorch-158042)"),
]

#: lines that look like one of the forms above and must read as nothing
NEAR_MISSES = [
    "I 11-26 17:44:21 log_utils.py:45] Head node is up.",  # the same head at INFO
    "W 02-09 01:24:30 cloud_vm_ray_backend.py:433] Retrying in another zone.",  # at WARNING, no refusal
    "I 11-26 17:45:57 cloud_vm_ray_backend.py:1356] Successfully provisioned or found existing head VM. Waiting for workers.",  # provisioned, no failure
    "Failed to fetch the metrics of a node provisioned yesterday; skipping it",  # provisioned, and an unrelated failure
    "UserWarning: TF32 is not supported on this GPU, falling back to fp32",  # a warning that falls back
    "Flash attention is supported on this GPU: using it",  # a capability there, in prose
    "compute capability 8.0 detected",  # the capability stated, no refusal
    "layout = FixedLayout is the default for user tensors",  # the class named in prose
    "I1126 12:00:00.000000 1 ProcessGroupNCCL.cpp:1234] [PG 0 Rank 0] ProcessGroupNCCL initialization options: (size: 8)",  # a .cpp record at INFO
    "(loss at step 5: 2.31)",  # a parenthesised note, no source file
]

#: (line, the cause errorclass reads from an error line no rule explains)
READINGS = [
    (":41367:41367 [1] enqueue.cc:422 NCCL WARN Error : no algorithm/protocol available", Label.CONFIG_ERROR),  # corpus (nccl-653)
    ("(prepare_for_backward at /opt/conda/conda-bld/pytorch_1579022060824/work/torch/csrc/distributed/c10d/reducer.cpp:514)\"", Label.CONFIG_ERROR),  # corpus (lightning-6706), torch < 1.5
    ("Exception raised from mark_variable_ready at ../torch/csrc/distributed/c10d/reducer.cpp:703 (most recent call first):", Label.CONFIG_ERROR),  # c10's trailer, since torch 1.5
    ("\"RuntimeError: GPUs with compute capability below 7.0 are not supported.\"", Label.CONFIG_ERROR),  # quoted
]

#: error lines whose form must not read as configuration
NOT_CONFIG = [
    "node1:41367:41367 [1] enqueue.cc:1131 NCCL WARN Cuda failure 'out of memory'",  # a call the planner made that failed
    "Exception raised from run at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1521 (most recent call first):",  # another source
    "botocore.exceptions.ClientError: An error occurred (RequestLimitExceeded) when calling the DescribeInstances operation: Request limit exceeded.",  # throttled: a retry waits it out
]


test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_dashed_date_head_gives_its_level() -> None:
    """The head's letter is the record's level, so a warning in that layout stays a warning."""
    assert head_level("W 02-09 01:24:30 cloud_vm_ray_backend.py:433] Got error(s) in all zones of us-east-1:") == "W"
    assert head_level("E 11-26 17:47:34 backend_utils.py:992] Timed out") == "E"
    # vLLM's older head spells its level as a word before the same date: not a letter
    assert head_level("INFO 11-26 12:00:00 llm_engine.py:72] Initializing an LLM engine") == "INFO"


@pytest.mark.parametrize(("line", "label"), READINGS)
def test_error_form_reads_its_cause(line: str, label: Label) -> None:
    reading = read_error(line)
    assert reading is not None and reading.label is label, reading


@pytest.mark.parametrize("line", NOT_CONFIG)
def test_error_form_not_configuration(line: str) -> None:
    reading = read_error(line)
    assert reading is None or reading.label is not Label.CONFIG_ERROR, reading


def test_quoted_exception_line_is_an_error_and_prose_is_not() -> None:
    m = KB.classify("\"ValueError: the batch has no field named 'labels'\"")
    assert m is not None and m.signature.id == "host.unrecognised_error"
    # an exception class named inside quotes in prose (a docstring) is not its exception line
    assert KB.classify("\"ValueError is raised when the config names an unknown optimizer\"") is None


# -- whole logs, as the judge reads them ------------------------------------------------------------

ENDINGS = [
    (["Starting cluster sky-5c1e...", "W 02-09 01:24:30 cloud_vm_ray_backend.py:433] Got error(s) in all zones of us-east-1:",
      "W 02-09 01:24:30 cloud_vm_ray_backend.py:435]   botocore.exceptions.ClientError: An error occurred (VcpuLimitExceeded) when calling the StartInstances operation: You have requested more vCPU capacity than your current vCPU limit of 96 allows."],
     Label.CONFIG_ERROR, Action.STOP),
    (["The node was low on resource: memory.", "Killing container with id docker://notebook:Need to kill Pod"], Label.OOM, Action.RESTART),
    (["bf16 mixed precision requires PyTorch >= 1.10 and a supported device."], Label.CONFIG_ERROR, Action.STOP),
    (["[rank0]:), mat_b=StorageBox(",
      "[rank0]:  ComputedBuffer(name='buf0', layout=FlexibleLayout('cuda:0', torch.bfloat16, size=[16512, 256], stride=[256, 1]))"],
     Label.COMPILING, Action.WAIT),
]


@pytest.mark.parametrize(("lines", "label", "action"), ENDINGS, ids=[f"ending:{i}" for i in range(len(ENDINGS))])
def test_log_ending_in_the_form(lines: list[str], label: Label, action: Action) -> None:
    assert _verdict(lines) == (label, action)


def test_refusal_the_run_went_on_from_is_healthy() -> None:
    """A refusal read whatever its level (a launcher failing over to another region) is the cause only as the
    last word: a run that goes on after it is healthy."""
    refused = "E 11-26 17:47:34 cloud_vm_ray_backend.py:1118] *** Failed provisioning the cluster. ***"
    assert _verdict([refused, *PROGRESS])[0] is Label.HEALTHY
    assert _verdict([*PROGRESS, refused]) == (Label.CONFIG_ERROR, Action.STOP)

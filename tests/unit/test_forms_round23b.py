# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half B of the misses of round issue23-heldout-23 (c10d's failed NCCL check, an admission webhook's
refusal, Ray's runtime environment that could not be set up, a file a native program could not open, a loss as a
bracketed key, Inductor's autotuner dropping a candidate), as rules of their families, with real lines and the near
misses each rule must leave alone. Each line is from the corpus (named by its excerpt), from a public thread or page
(named), or is the format the program's source prints, filled in (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import cause_tests, table_tests

E, M, C = FormKind.ERROR, FormKind.METRIC, FormKind.COMPILE_RUNNING

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # c10d's NCCL check, whatever words the reason is in
    ("fail to new train...e= NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:272, unhanled system error", E, None,
     "corpus (pytorch-23363-nccl-unhandled-system-error-docker-isolation)"),
    ("RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:410, unhandled system error, NCCL version 2.4.8", E, None,
     "NVIDIA/nccl#286"),
    ("  what():  NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:181, unhandled cuda error, NCCL version 21.0.3", E, None,
     "facebookresearch/metaseq#90"),
    # an admission webhook's refusal
    ('E0221 02:33:18.782974       1 controller.go:266] error syncing tfjob: admission webhook "validatepod.volcano.sh" denied the request: failed to get PodGroup for pod <aios/train-task-27-evaluator-0>: podgroups.scheduling.volcano.sh "train-task-27" not found', E, Label.CONFIG_ERROR,
     "corpus (volcano-711-tfjob-webhook-podgroup-not-found)"),
    ('Error from server: error when creating "pod.yml": admission webhook "pod.nautilus.optiputer.net" denied the request: PODs without controllers are limited to 2 cores and 12 GB of RAM.', E, Label.CONFIG_ERROR,
     "the Nautilus (PRP) cluster's user guide"),
    ('104s        Warning   FailedCreate        replicaset/nginx-hostnetwork-644cdd6598   Error creating: admission webhook "pod-security-webhook.kubernetes.io" denied the request: pods "nginx-hostnetwork-644cdd6598-7rb5m" is forbidden: violates PodSecurity "baseline:v1.23": host namespaces (hostNetwork=true)', E, Label.CONFIG_ERROR,
     "a Kubernetes PodSecurity webhook's event, kubectl get events (pages corpus)"),
    # Ray's runtime environment
    ("Status message: runtime_env setup failed: Failed to set up runtime environment.", E, Label.CONFIG_ERROR,
     "corpus (ray-22472-job-submit-runtime-env-pip-setup-failed); the same line in a ray job whose container tool (podman) was missing"),
    ("ray.exceptions.RuntimeEnvSetupError: Failed to setup runtime environment.", E, Label.CONFIG_ERROR,
     "ray-project/ray#27962"),
    # a file a native program could not open
    ("error loading model: failed to open llama-2-7b-chat.ggmlv3.q5_1.bin: No such file or directory", E, Label.CONFIG_ERROR,
     "corpus (llama-cpp-2867-server-model-file-not-found)"),
    ("llama_model_load: error loading model: failed to open models/7B/ggml-model-f16.gguf: No such file or directory", E, Label.CONFIG_ERROR,
     "llama.cpp built with MSVC on Windows (issues corpus)"),
    ("error loading model: failed to open ./examples/redpajama/models/pythia/ggml-RedPajama-INCITE-Chat-3B-v1-f16.bin: No such file or directory", E, Label.CONFIG_ERROR,
     "a RedPajama example under ggml (issues corpus)"),
    # a loss as a bracketed key
    ("2023-01-25 00:21:34.569 | INFO     | trainers.base_trainer:train_epochs:256 - [R0] | E6 iter[ 14/ 15] | [Loss] nan | [exp] ./exp/0125/car/3dbf3ah_hvae_lion_B40 | [step]   104 | [url] none | [time] 0.4m (~5h) |[best] 0 -100.000x1e-2 ", M, Label.NUMERICAL_ERROR,
     "corpus (lion-9-loguru-loss-explodes-then-nan)"),
    ("[Epoch] : 500/1000 | [Loss] : nan | [MAE] : nan", M, Label.NUMERICAL_ERROR,
     'print(f"[Epoch] : {epoch}/{epochs} | [Loss] : {loss.item():.4f} | [MAE] : {mae:.4f}") of a regression tutorial (code corpus), a NaN loss filled in'),
    ("[Train Profile] | [Loss] inf | [Metrics] acc: 0.1000", M, Label.NUMERICAL_ERROR,
     "f'[{str(state)} Profile] | [Loss] {loss_value_str} | [Metrics] {metric_str}' (code corpus), an Inf loss filled in"),
    # Inductor's autotuner dropping a candidate
    ("[0/0] Runtime error during autotuning: ", C, None, "corpus (pytorch-159688-autotune-choice-out-of-resource-ignored)"),
    ("[0/0] Ignoring this choice.", C, None, "corpus (pytorch-159688-autotune-choice-out-of-resource-ignored)"),
    ("E0324 10:12:55.123000 4242 torch/_inductor/select_algorithm.py:1720] [0/0] CUDA compilation error during autotuning: ", C, None,
     'torch/_inductor/select_algorithm.py log.error("CUDA compilation error during autotuning: \\n%s. \\nIgnoring this choice.", ...)'),
    # accelerate's refusal of a mixed precision
    ("ValueError: fp16 mixed precision requires a GPU", E, Label.CONFIG_ERROR,
     "corpus (kohya-ss-719-accelerate-fp16-requires-gpu); the same line in bmaltais/kohya_ss#378"),
    ("ValueError: fp16 mixed precision requires PyTorch >= 1.6", E, Label.CONFIG_ERROR,
     'accelerate/accelerator.py raise ValueError(err.format(mode="fp16", requirement="PyTorch >= 1.6"))'),
    # SkyPilot's resources that cannot be had
    ("sky.exceptions.ResourcesUnavailableError: Catalog does not contain any instances satisfying the request:", E, Label.CONFIG_ERROR,
     "corpus (skypilot-3454-serve-catalog-no-instances)"),
    ("sky.exceptions.ResourcesUnavailableError: Failed to provision all possible launchable resources. Relax the task's resource requirements: 1x RunPod(cpus=32+, {'H100': 8}, disk_tier=best, disk_size=512, ports=['8081'])", E, Label.CONFIG_ERROR,
     "corpus (skypilot-5600-runpod-failed-to-provision-all-zones), another thread"),
]

#: lines that look like the forms and must read as nothing
NEAR_MISSES = [
    '      std::string err = "NCCL error in: " + std::string(__FILE__) + ":" +     \\',  # NCCLUtils.hpp's macro
    "# an NCCL error in: the first collective, so we retry",  # prose
    'deniedBy := fmt.Sprintf("admission webhook %q denied the request", webhookName)',  # statuserror.go
    "the request was denied by the scheduler's quota, will retry",  # other words
    'message=f"runtime_env setup failed: {e}",',  # job_manager.py's format string
    "elif isinstance(e, RuntimeEnvSetupError):",  # the class named in source
    "gguf_init_from_file: failed to open GGUF file '/home/user/models/x.gguf' (file is fine)",  # no ENOENT, no error head
    "opening tokenizer.json: No such file or directory, falling back to the slow tokenizer",  # no error head, no failed open
    "  [loss] NaN/Inf in model weights, skipping episode",  # a tag before words: the program skips and goes on
    "| [Tradeoff 1] | [Gain] | [Loss] | [Justification] |",  # a table cell
    "[WIN] hold the corner | [LOSS] strung out",  # a word, not a metric
    "Ignoring this choice of learning rate schedule",  # other words
    'err = "{mode} mixed precision requires {requirement}"',  # accelerator.py's format string
    "class ResourcesUnavailableError(Exception):",  # sky/exceptions.py
    "except sky.exceptions.ResourcesUnavailableError as e:",  # a caller's handler
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)

#: (line, the cause its form states): error lines
CAUSES = [
    ('Error from server: error when creating "pod.yml": admission webhook "pod.nautilus.optiputer.net" denied the request: PODs without controllers are limited to 2 cores and 12 GB of RAM.', Label.CONFIG_ERROR),
    ("ray.exceptions.RuntimeEnvSetupError: Failed to setup runtime environment.", Label.CONFIG_ERROR),
    ("llama_model_load: error loading model: failed to open models/7B/ggml-model-f16.gguf: No such file or directory", Label.CONFIG_ERROR),
]
NO_CAUSE = [
    "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2, some reason never seen",  # the form says it failed, not why
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("config_error/volcano-711-tfjob-webhook-podgroup-not-found.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/ray-22472-job-submit-runtime-env-pip-setup-failed.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/llama-cpp-2867-server-model-file-not-found.log", Label.CONFIG_ERROR, Action.STOP),
    ("numerical_error/lion-9-loguru-loss-explodes-then-nan.log", Label.NUMERICAL_ERROR, Action.STOP),
    ("config_error/kohya-ss-719-accelerate-fp16-requires-gpu.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/skypilot-3454-serve-catalog-no-instances.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/skypilot-5600-runpod-failed-to-provision-all-zones.log", Label.CONFIG_ERROR, Action.STOP),
    # the autotuner's dropped candidate is a compile at work, not an out-of-memory crash: the action is to wait
    ("healthy/pytorch-159688-autotune-choice-out-of-resource-ignored.log", Label.COMPILING, Action.WAIT),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason


def test_a_failed_nccl_check_is_not_a_healthy_run() -> None:
    """The check's reason in words no rule knows still reads as a failure, not as a healthy run."""
    verdict = diagnose_paths([str(CORPUS / "config_error/pytorch-23363-nccl-unhandled-system-error-docker-isolation.log")]).verdict
    assert verdict.label is not Label.HEALTHY and verdict.action is not Action.WAIT, verdict.reason

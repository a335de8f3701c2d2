# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part B of the misses of round issue23-heldout-31 (logs seen through a collector or a wrapper), each
as a rule of its family, with real lines and the near misses the rule must leave alone: the container engine
refusing a GPU container, a platform's OOMKill reason, ONNX Runtime's GPU provider not created, CPython's unexpected
keyword argument, Marian's checkpoint shape. Each line is from the corpus (named by its
excerpt) or from a public thread, README or notes (named)."""

from __future__ import annotations

from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.events import Label
from tests.unit.form_table import cause_tests, table_tests

ERROR = FormKind.ERROR
CRASH = FormKind.CRASH

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # moby's refusal of a GPU request (daemon/errors.go incompatibleDeviceRequest), under Compose and docker run
    ('ERROR: for generative_deep_learning_2nd_edition_app_1  Cannot start service app: could not select device driver "nvidia" with capabilities: [[gpu]]',
     ERROR, Label.CONFIG_ERROR, "corpus (gdl2-5-compose-could-not-select-device-driver-nvidia)"),
    ('docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
     ERROR, Label.CONFIG_ERROR, "bitruss' README (docker run --gpus all without the NVIDIA container toolkit)"),
    # moby's runtime lookup, before 23.0 and since
    ("> ERROR: for stylegan-nada_nada_1  Cannot create container for service nada: Unknown runtime specified nvidia",
     ERROR, Label.CONFIG_ERROR, "corpus (stylegan-nada-62-compose-unknown-runtime-nvidia)"),
    ("ERROR: for sirf  Cannot create container for service sirf: Unknown runtime specified nvidia",
     ERROR, Label.CONFIG_ERROR, "SIRF-SuperBuild's install notes (Ubuntu 20.04 on OpenStack)"),
    ("Error response from daemon: unknown or invalid runtime name: nvidia",
     ERROR, Label.CONFIG_ERROR, "a verl user's set-up notes (docker run --runtime=nvidia)"),
    # a platform's report of an OOM-killed container, a reason field under any markup
    ("> **Restart Reason**: OOMKill (memory exceeded limit, SIGKILL)  ",
     CRASH, Label.OOM, "corpus (drivor-35-k8s-oomkill-report-exit-137-ray-taskhung)"),
    ("- **Reason**: OOMKilled ✅", CRASH, Label.OOM, "an AIOps agent's diagnosis of a CrashLoopBackOff pod (memhog)"),
    ("lastState: terminated reason=OOMKilled, exitCode=137, finishedAt=2026-05-21T22:01:04Z", CRASH, Label.OOM,
     "a cluster checker's dump of a container's status"),
    # ONNX Runtime's GPU provider not created: fastembed's check, onnxruntime's own warning
    ("fastembed-gpu  | /usr/local/lib/python3.10/dist-packages/fastembed/common/onnx_model.py:100: RuntimeWarning: Attempt to set CUDAExecutionProvider failed. Current providers: ['CPUExecutionProvider'].If you are using CUDA 12.x, install onnxruntime-gpu via `pip install onnxruntime-gpu --extra-index-url https://aiinfra.pkgs.visualstudio.com/PublicPackages/_packaging/onnxruntime-cuda-12/pypi/simple/`",
     ERROR, Label.CONFIG_ERROR, "corpus (fastembed-server-1-compose-prefix-onnxruntime-cuda-provider)"),
    (" C:\\Users\\ksosuzda\\PycharmProjects\\MiniServer\\.venv\\Lib\\site-packages\\fastembed\\common\\onnx_model.py:89: RuntimeWarning: Attempt to set CUDAExecutionProvider failed. Current providers: ['CPUExecutionProvider'].If you are using CUDA 12.x, install onnxruntime-gpu via  pip install onnxruntime-gpu --extra-index-url https://aiinfra.pkgs.visualstudio.com/PublicPackages/_packaging/onnxruntime-cuda-12/pypi/simple/ ",
     ERROR, Label.CONFIG_ERROR, "a MiniServer run on Windows (fastembed on the CPU)"),
    ("  Failed to create CUDAExecutionProvider. Require cuDNN 9.* and CUDA 13.*",
     ERROR, Label.CONFIG_ERROR, "a benchmark's notes (onnxruntime-gpu built for CUDA 13 on a CUDA 12 machine)"),
    # CPython's keyword the callee does not have
    ("[task 2024-12-17T16:38:34.130Z] opustrainer.trainer.CurriculumLoaderError: could not initialize modifier 'Tags': PlaceholderTagModifier.__init__() got an unexpected keyword argument 'tag'",
     ERROR, Label.CONFIG_ERROR, "corpus (mozilla-translations-961-taskcluster-opustrainer-modifier-unexpected-kwarg)"),
    ("TypeError: dot() got an unexpected keyword argument 'trans_b'", ERROR, Label.CONFIG_ERROR,
     "corpus (llm-foundry-78-triton-dot-trans-b: Triton's API changed under llm-foundry)"),
    # Marian's loaded parameter whose shape differs from the configured model's
    ("[task 2023-11-14T00:01:33.671Z] [2023-11-14 00:01:33] Error: Requested shape shape=1000x512 size=512000 for existing parameter 'Wemb' does not match original shape shape=32000x1024 size=32768000",
     ERROR, Label.CONFIG_ERROR, "corpus (mozilla-translations-226-taskcluster-marian-param-shape-mismatch)"),
    ("[2022-04-16 00:48:41] Error: Requested shape shape=18364x512 size=9402368 for existing parameter 'encoder_Wemb' does not match original shape shape=18602x512 size=9524224",
     ERROR, Label.CONFIG_ERROR, "braille-nmt's notes (a shared-vocabulary multi-transformer with another vocabulary)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # the NVIDIA container toolkit's set-up, and kubectl's query for OOM events (no report of one)
    "sudo nvidia-ctk runtime configure --runtime=docker",
    "kubectl get events -n alerthub --field-selector reason=OOMKilled",
    "Reason: OOMKilled containers are restarted by the kubelet when restartPolicy allows",
    # ONNX Runtime's providers listed, the GPU's among them
    "['TensorrtExecutionProvider', 'CUDAExecutionProvider', 'CPUExecutionProvider']",
    # Marian reserving memory for a model whose shapes match
    "[2025-01-27 14:02:52] [memory] Reserving 398 MB, device gpu2",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES, cause_of_kinds=frozenset({ERROR}))

#: error lines and the cause their form states
CAUSES: list[tuple[str, Label]] = [
    ('docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
     Label.CONFIG_ERROR),
    ("TypeError: dot() got an unexpected keyword argument 'trans_b'", Label.CONFIG_ERROR),
]
#: error lines of these programs whose words state no cause (read by the table's and the exception readers' rules)
NO_CAUSE = [
    "[task 2025-06-09T01:25:36.065+00:00] taskcluster/scripts/pipeline/train-taskcluster.sh failed with exit code 75",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)

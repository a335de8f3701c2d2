# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part B of the misses of round issue23-heldout-29 (schedulers, launchers, cluster platforms), each as
a rule of its family, with real lines and the near misses the rule must leave alone: NVML that cannot start, the NVIDIA
container hook's refusal, a container runtime that cannot start the container, Kubernetes' scheduler that cannot place
a pod, a platform's record that a replica or container exited (Cloud ML/Vertex, the Kubeflow training operator,
Determined, YARN), and curl's failure line. Each line is from the corpus (named by its excerpt), from a public thread
(named), or is the format the program's source prints (the source is named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import cause_tests, table_tests

ERROR = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # NVML that cannot start: its callers' "Failed to initialize NVML: <nvmlErrorString>"
    ("2023-10-19T11:11:54.957723331+08:00 stderr F 2023/10/19 03:11:54 Failed to initialize NVML: could not load NVML library.",
     ERROR, Label.CONFIG_ERROR, "corpus (k8s-device-plugin-444-cri-log-nvml-not-loaded)"),
    ("Failed to initialize NVML: Driver/library version mismatch", ERROR, Label.CONFIG_ERROR,
     "nvidia-smi after a driver upgrade whose kernel module was not reloaded"),
    ("error: Failed to initialize NVML: GPU is lost", ERROR, Label.HARDWARE_ERROR,
     "Slurm gpu/nvml plugin _nvml_init with nvml.h's NVML_ERROR_GPU_IS_LOST string, filled in"),
    # the NVIDIA container hook: "nvidia-container-cli: <stage> error: <reason>"
    ("nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown", ERROR, Label.CONFIG_ERROR,
     "corpus (dstack-1080-server-log-nvidia-container-cli-driver-not-loaded)"),
    ("slurmstepd: error: pyxis:     nvidia-container-cli: mount error: file creation failed: /raid/enroot-data/user-9011/pyxis_64.0/run/nvidia-persistenced/socket: no such device or address",
     ERROR, Label.CONFIG_ERROR, "corpus (enroot-138-persistenced-socket-mount-error-hook)"),
    ("docker: Error response from daemon: OCI runtime create failed: container_linux.go:370: starting container process caused: process_linux.go:459: container init caused: Running hook #0:: error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: requirement error: unsatisfied condition: cuda>=11.0, please update your driver to a newer version, or use an earlier cuda container: unknown.",
     ERROR, Label.CONFIG_ERROR, "nvidia-docker#1442"),
    # a container runtime that cannot start the container
    ("      standard_init_linux.go:228: exec user process caused: no such file or", ERROR, Label.CONFIG_ERROR,
     "corpus (openpai-5720-exit-spec-platform-failure-exec-no-such-file)"),
    ("standard_init_linux.go:228: exec user process caused: no such file or directory", ERROR, Label.CONFIG_ERROR,
     "ryerkerk/aws-batch-python-tutorial#1 (an AWS Batch job's log stream)"),
    ('time="2023-06-14T15:15:59.600Z" level=info msg="Pod failed: StartError (exit code 128): failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: mkdir /src: not a directory: unknown" displayName=step-execute-script-shell',
     ERROR, Label.CONFIG_ERROR, "argo-workflows#11212"),
    ('Warning  Failed  113s   kubelet  Error: container create failed: time="2022-09-14T11:35:13Z" level=error msg="runc create failed: unable to start container process: container init was OOM-killed (memory limit too low?)"',
     ERROR, Label.OOM, "tests/unit/test_failure_forms.py's kubelet line (runc's init killed by the memory limit)"),
    # Kubernetes' scheduler: no node can take the pod
    ("  Warning  FailedScheduling  2s (x57 over 15m)  default-scheduler  0/6 nodes are available: 6 Insufficient nvidia.com/gpu.",
     ERROR, Label.CONFIG_ERROR, "corpus (kubeflow-794-tf-serving-gpu-pod-pending-insufficient-gpu)"),
    (" Warning FailedScheduling  40s (x2 over 40s)  default-scheduler  0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) were unschedulable.",
     ERROR, Label.CONFIG_ERROR, "k8s-device-plugin#119"),
    # the Kubeflow training operator's event: a replica failed
    ('       "message": "TFJob mnist-test-1375 has failed because 1 Chief replica(s) failed.",', ERROR, Label.OTHER_CRASH,
     "corpus (kubeflow-examples-492-tfjob-final-status-chief-replica-failed)"),
    ("PyTorchJob kubeflow/pytorch-dist-mnist has failed because 1 Worker replica(s) failed.", ERROR, Label.OTHER_CRASH,
     "training-operator pkg/controller.v1 status update (\"%s %s/%s has failed because %d %s replica(s) failed.\"), filled in"),
    # Cloud ML Engine's and Vertex AI's replica status
    (' $ errorMessage  : chr "The replica master 0 exited with a non-zero status of 1."', ERROR, Label.OTHER_CRASH,
     "corpus (cloudml-130-job-status-replica-master-exited-wheel-build)"),
    ("The replica workerpool0-0 exited with a non-zero status of 1. To find out more about why your job exited please check the logs: https://console.cloud.google.com/logs/viewer",
     ERROR, Label.OTHER_CRASH, "corpus (tf-models-10735-vertex-workerpool-tpu-name-missing), cut"),
    ("Google Cloud ML: The replica master 0 ran out-of-memory and exited with a non-zero status of 9(SIGKILL)", ERROR,
     Label.OOM, "tensorflow/models#5591"),
    # Determined's and YARN's container exit
    ('<info>    [2021-05-06, 11:26:48] pod failed with exit code: 1   id="pod-407621fe-2e52-43f3-a4d0-9058cf2630ed" pod="exp-4-trial-4-rank-0-37fda087-fb9f-4ece-ac40-3fd48dd20b05-credible-buck" system="master" type="pod"',
     ERROR, Label.OTHER_CRASH, "corpus (determined-2343-trial-no-kernel-image-pod-exit-1)"),
    ("[2024-02-27T21:35:35.628581Z]          || ERROR: Trial 139 (Experiment 138) was terminated: allocation failed: resources failed with non-zero exit code: container failed with non-zero exit code: 1 (exit code 1)",
     ERROR, Label.OTHER_CRASH, "determined#8915"),
    ("Exit code: 127", ERROR, Label.CONFIG_ERROR, "corpus (openpai-1350-launcher-exit-undefined-container-exit-127)"),
    ("[2018-09-13 01:24:37.489]Container exited with a non-zero exit code 127. Error file: prelaunch.err.", ERROR,
     Label.CONFIG_ERROR, "microsoft/pai#1350 (YARN's container-launch diagnostics)"),
    # curl's failure line: the set-up's codes and the network's
    ("curl: (35) error:1408F10B:SSL routines:ssl3_get_record:wrong version number", ERROR, Label.CONFIG_ERROR,
     "corpus (pyxis-112-enroot-import-local-registry-ssl-wrong-version)"),
    ("curl: (60) SSL certificate problem: self-signed certificate", ERROR, Label.CONFIG_ERROR,
     "a self-signed HTTPS server's client, as a sysadmin course prints it"),
    ("curl: (7) Failed to connect to raw.githubusercontent.com port 443: Connection refused", ERROR, Label.COMM_ERROR,
     "WasmEdge's installer behind a blocked network"),
    # srun that could not launch the step's tasks
    ("srun: error: Application launch failed: Unable to layout tasks on given cpus", ERROR, Label.CONFIG_ERROR,
     "corpus (snakemake-slurm-225-srun-unable-to-layout-tasks)"),
    ("srun: error: task 0 launch failed: Unspecified error", ERROR, Label.CONFIG_ERROR,
     "corpus (openpmix-3872-srun-pmix-task-launch-failed-unspecified)"),
    ("srun: error: Task launch for StepId=34.0 failed on node ubuntu4: Socket timed out on send/recv operation", ERROR,
     Label.CONFIG_ERROR, "corpus (batchtools-201-srun-task-launch-socket-timeout-munge)"),
    # c10d's client connecting to a port 0
    ("[default7]:[I715 22:47:11.296780083 socket.cpp:872] [c10d] No socket on (localhost, 0) is listening yet, will retry.",
     ERROR, Label.CONFIG_ERROR, "corpus (nemo-run-292-torchrun-k8s-no-socket-localhost-0-will-retry)"),
    ("[E socket.cpp:753] [c10d] The client socket has failed to connect to any network address of (master-0, 0).",
     ERROR, Label.CONFIG_ERROR, "torch/csrc/distributed/c10d/socket.cpp's report, filled in with a port 0"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # NVML that started (Slurm's gpu/nvml plugin debug2)
    "Successfully initialized NVML",
    # a scheduler that found room, a job that runs
    "Normal   Scheduled  12s   default-scheduler  Successfully assigned default/pytorch-dist-mnist-worker-0 to gpu-node-1",
    "PyTorchJob kubeflow/pytorch-dist-mnist is running.",
    "TFJob default/dist-mnist continues regardless 1 Worker replica(s) failed as enableDynamicWorker is set true.",
    # c10d's client retrying a real port (a server still starting)
    "[I socket.cpp:872] [c10d] No socket on (master-0, 29500) is listening yet, will retry.",
    "[W socket.cpp:697] [c10d] The client socket has failed to connect to [::ffff:0.104.99.143]:47389 (errno: 110 - Connection timed out).",
    # srun's notice of the step it aborts after a task ended (the task's own "Exited with exit code 1" is a
    # process's end, read by forms_exits: tests/unit/test_forms_exits.py)
    "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
    # a status 0 is a success
    "Exit code: 0",
    "[2021-05-06, 11:30:02] pod failed with exit code: 0",
    # curl codes that say no more than that something failed (a name not resolved, an HTTP status with -f)
    "curl: (6) Could not resolve host: pypi.org",
    "curl: (22) The requested URL returned error: 404",
    # a healthy stream's "Exit code" inside a sentence, read by Ray's worker-exit form, not this one
    "Worker exit detail: Worker exits unexpectedly by a signal. SystemExit is raised (sys.exit is called). Exit code: 1.",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)

#: error lines and the cause their form states
CAUSES: list[tuple[str, Label]] = [
    ("nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown", Label.CONFIG_ERROR),
    ("standard_init_linux.go:228: exec user process caused: no such file or directory", Label.CONFIG_ERROR),
    ("[2018-09-13 01:24:37.489]Container exited with a non-zero exit code 127. Error file: prelaunch.err.",
     Label.CONFIG_ERROR),
]
#: error lines whose form states no cause here
NO_CAUSE = [
    "ERROR: Trial 139 (Experiment 138) was terminated: allocation failed",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("config_error/k8s-device-plugin-444-cri-log-nvml-not-loaded.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/dstack-1080-server-log-nvidia-container-cli-driver-not-loaded.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/openpai-5720-exit-spec-platform-failure-exec-no-such-file.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/kubeflow-794-tf-serving-gpu-pod-pending-insufficient-gpu.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/openpai-1350-launcher-exit-undefined-container-exit-127.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/pyxis-112-enroot-import-local-registry-ssl-wrong-version.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/nemo-run-292-torchrun-k8s-no-socket-localhost-0-will-retry.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/openpmix-3872-srun-pmix-task-launch-failed-unspecified.log", Label.CONFIG_ERROR, Action.STOP),
    # srun's report in several records whose first states no cause: the next record of the run explains it
    ("config_error/snakemake-slurm-225-srun-unable-to-layout-tasks.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/batchtools-201-srun-task-launch-socket-timeout-munge.log", Label.CONFIG_ERROR, Action.STOP),
    ("other_crash/kubeflow-examples-492-tfjob-final-status-chief-replica-failed.log", Label.OTHER_CRASH, Action.RESTART),
    # a loss stated in a sentence on a progress row (the signature's " is ")
    ("numerical_error/bigdl-2494-distrioptimizer-loss-is-nan-24-node-cluster.log", Label.NUMERICAL_ERROR, Action.STOP),
    ("numerical_error/mar-69-loss-is-nan-stopping-training-autocast.log", Label.NUMERICAL_ERROR, Action.STOP),
    # slurmstepd's chdir fallback is a step that runs; a trial's MetricsUnavailable warning beside a complete run
    ("healthy/deepops-1179-single-node-nccl-test-chdir-errors-then-runs.log", Label.HEALTHY, Action.WAIT),
    ("healthy/katib-1082-trial-events-metrics-unavailable-job-log-complete.log", Label.HEALTHY, Action.WAIT),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason


#: srun's records of snakemake-executor-plugin-slurm#225 (corpus), the first stating no cause
_UNCAUSED = "srun: error: JobId=125452 failed to distribute tasks (bind_type:threads,mask_cpu,one_thread) - this should never happen"
_LAUNCH = "srun: error: Task launch for StepId=125452.4 failed on node [NODENAME]: Unable to layout tasks on given cpus"


@pytest.mark.parametrize(("lines", "label"), [
    # one report: the record on the next line with the same head states the cause
    ([_UNCAUSED, _LAUNCH], Label.CONFIG_ERROR),
    # not one report: another program's line between them ends the run, the first record decides alone
    ([_UNCAUSED, "Error in rule ont-amplicon_assembly.clustering_1:", _LAUNCH], Label.OTHER_CRASH),
])
def test_one_tools_report_in_several_records(tmp_path: Path, lines: list[str], label: Label) -> None:
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert diagnose_paths([str(log)]).verdict.label is label

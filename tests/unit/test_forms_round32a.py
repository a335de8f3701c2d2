# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part A of the misses of round issue23-heldout-32 (RL post-training frameworks: a trainer, rollout
engines and Ray in one log), each as a rule of its family, with real lines and the near misses the rule must leave
alone: Ray's remote error no caller retrieved, Ray's memory monitor's kill report, vLLM's NCCL library not loaded, an
error naming a path where what it needs is not found, Ray's dual exception class and a traceback cut inside a frame.
Each line is from the corpus (named by its excerpt) or from a public thread, script or test (named)."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.errorclass import read_error
from neuron_watch.diagnosis.exctaxonomy import in_traceback
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.events import Label
from tests.unit.form_table import cause_tests, table_tests

ERROR = FormKind.ERROR
CRASH = FormKind.CRASH

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # Ray's record of a remote call's error nobody retrieved: under a task's prefix, at ERROR, and before Ray 1.5
    ("(main_task pid=1748945) Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): ray::WorkerDict.actor_rollout_generate_sequences() (pid=1751030, ip=10.65.194.91, actor_id=d2209bc23ff048efb340dd9001000000, repr=<verl.single_controller.ray.base.WorkerDict object at 0x152530529600>)",
     ERROR, None, "corpus (verl-302-vllm-wake-up-ray-unhandled-error-cut-before-cumem-oom)"),
    ("2025-07-31 19:35:35,770\tERROR worker.py:423 -- Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): ray::RayWorkerWrapper.execute_method() (pid=13214, ip=7.242.101.23, actor_id=11573371cb1364127fd3f12c01000000, repr=<vllm.executor.ray_utils.RayWorkerWrapper object at 0xffcff00f55a0>)",
     ERROR, None, "a vLLM run on Ray's distributed executor (public thread)"),
    ("        2021-06-11 01:14:28,123 ERROR worker.py:77 -- Unhandled error (suppress with RAY_IGNORE_UNHANDLED_ERRORS=1): ray::PS.send_params() (pid=41878, ip=172.18.167.27)",
     ERROR, None, "a parameter-server example on Ray 1.x with cupy's NCCL (public thread)"),
    # Ray's memory monitor's report of the task or actor it killed, its tail without its head
    ("(ActorModelRayActor pid=8249) Refer to the documentation on how to address the out of memory issue: https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more memory on this node or reducing task parallelism by requesting more CPUs per task. Set max_restarts and max_task_retries to enable retry when the task crashes due to OOM. To adjust the kill threshold, set the environment variable `RAY_memory_usage_threshold` when starting Ray. To disable worker killing, set the environment variable `RAY_memory_monitor_refresh_ms` to zero.",
     CRASH, Label.OOM, "corpus (openrlhf-911-ray-job-status-memory-monitor-killed-reference-actor)"),
    ("Refer to the documentation on how to address the out of memory issue: https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more memory on this node or reducing task parallelism by requesting more CPUs per task. Set max_restarts and max_task_retries to enable retry when the task crashes due to OOM. To adjust the kill threshold, set the environment variable `RAY_memory_usage_threshold` when starting Ray. To disable worker killing, set the environment variable `RAY_memory_monitor_refresh_ms` to zero.",
     CRASH, Label.OOM, "an SDPO run on verl whose Hydra job ended on the kill (public thread)"),
    ("Refer to the documentation on how to address the out of memory issue: https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more memory on this node or reducing task parallelism by requesting more CPUs per task. Set max_retries to enable retry when the task crashes due to OOM. To adjust the kill threshold, set the environment variable `RAY_memory_usage_threshold` when starting Ray. To disable worker killing, set the environment variable `RAY_memory_monitor_refresh_ms` to zero.",
     CRASH, Label.OOM, "Ray.jl's test of a task's OOM error info (a task: max_retries)"),
    # vLLM's NCCL wrapper that could not load the library, from VLLM_NCCL_SO_PATH and from the library path
    ("(VllmWorker rank=3 pid=44710) ERROR 08-20 09:48:31 [pynccl_wrapper.py:229] Failed to load NCCL library from /root/work/nccl-2.21.5-1/build/lib/libnccl.so.2.21.5. It is expected if you are not running on NVIDIA/AMD GPUs.Otherwise, the nccl libr",
     ERROR, Label.CONFIG_ERROR, "corpus (trl-3925-vllm-serve-failed-to-load-nccl-from-vllm-nccl-so-path)"),
    ("ERROR 10-18 14:42:48 pynccl_wrapper.py:196] Failed to load NCCL library from libnccl.so.2 .It is expected if you are not running on NVIDIA/AMD GPUs.Otherwise, the nccl library might not exist, be corrupted or it does not support the current platform Linux-5.15.0-50-generic-x86_64-with-glibc2.31.If you already have the library, please set the environment variable VLLM_NCCL_SO_PATH",
     ERROR, Label.CONFIG_ERROR, "a vLLM user's first run after rebuilding the conda environment (public thread)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # vLLM finding and using its NCCL library
    "(VllmWorker rank=1 pid=44708) INFO 08-20 09:48:31 [utils.py:1045] Found nccl from environment variable VLLM_NCCL_SO_PATH=/root/work/nccl-2.21.5-1/build/lib/libnccl.so.2.21.5",
    "INFO 05-02 23:36:34 [pynccl.py:69] vLLM is using nccl==2.21.5",
    # a program's comment quoting Ray's suggestion, and the environment it sets to silence the monitor
    "# TODO: Set max_restarts and max_task_retries to enable retry when the task crashes due to OOM.",
    'os.environ["RAY_memory_monitor_refresh_ms"] = "0"  # prevents ray from killing the process when it runs out of memory',
    # the setting that silences Ray's unhandled-error records, set by a launcher
    "export RAY_IGNORE_UNHANDLED_ERRORS=1",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES, cause_of_kinds=frozenset({ERROR}))

#: error lines and the cause their form states
CAUSES: list[tuple[str, Label]] = [
    ("ERROR 10-18 14:42:48 pynccl_wrapper.py:196] Failed to load NCCL library from libnccl.so.2 .It is expected if you are not running on NVIDIA/AMD GPUs.",
     Label.CONFIG_ERROR),
    # what the program needs, not found at a file-system path: pytriton's python backend, a build script's CUDA
    ("RuntimeError: venv for python backend not found at /root/.cache/pytriton/python_backend_interpreter. Please run pytriton in python 3.8 envir",
     Label.CONFIG_ERROR),
    ("Error: CUDA_HOME not found at /usr/local/cuda. Please ensure CUDA is installed.", Label.CONFIG_ERROR),
]
#: error lines of these programs whose words state no cause (read by the table's and the exception readers' rules)
NO_CAUSE = [
    "(main_task pid=1748945) Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): ray::WorkerDict.actor_rollout_generate_sequences() (pid=1751030, ip=10.65.194.91)",
    # "not found" of a key or a name, no path
    "KeyError: 'model.layers.0.weight not found at index 3'",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


@pytest.mark.parametrize(("line", "label"), [
    # Ray's class of both RayTaskError and the cause's class reads as the cause's class
    ("ray.exceptions.RayTaskError(ImportError): ray::skyrl_entrypoint() (pid=166149, ip=10", Label.CONFIG_ERROR),
    ("ray.exceptions.RayTaskError(ModuleNotFoundError): ray::ActorModelRayActor.fit() (pid=59379, ip=0.0.0.0, actor_id=3a074f1fed2ae3f24c2e4c9c06000000, repr=<openrlhf.trainer.ray.ppo_actor.ActorModelRayActor object at 0x7fc97cf6e830>)",
     Label.CONFIG_ERROR),
])
def test_ray_dual_exception_reads_as_its_cause_class(line: str, label: Label) -> None:
    reading = read_error(line)
    assert reading is not None and reading.label is label, reading


@pytest.mark.parametrize("line", [
    # a cause class that states nothing, and Ray's own class
    "ray.exceptions.RayTaskError(ActorDiedError): ray::TaskRunner.run() (pid=106666, ip=144.214.210.20, actor_id=dbc11a20aca6cccf44a05b0301000000, repr=<main_ppo.TaskRunner object at 0x7ecd4488b6d0>)",
    "ray.exceptions.RayTaskError: ray::TaskRunner.run() (pid=834018, ip=10.10.34.5)",
])
def test_ray_dual_exception_of_no_known_cause_states_none(line: str) -> None:
    reading = read_error(line)
    assert reading is None or reading.label is not Label.CONFIG_ERROR, reading


@pytest.mark.parametrize("tail", [
    # trl#3128 and verl#302: the last frame cut inside its file's path, under the source line of the one before
    ["[rank0]:     self.model_executor.initialize_cache(num_gpu_blocks, num_cpu_blocks)",
     '[rank0]:   File "/opt/conda/lib/python3.11/site-packages/vllm/ex'],
    ["(main_task pid=1748945)     self.llm_engine.wake_up()",
     '(main_task pid=1748945)   File "miniconda/envs/verl/lib/python3.10/site-packages/vllm/engine/llm_eng'],
])
def test_a_log_cut_inside_a_frame_is_inside_a_traceback(tail: list[str]) -> None:
    assert in_traceback(tail) == tail[-1]


@pytest.mark.parametrize("tail", [
    # a message that quotes a file under a line that is not a traceback's source line
    ["INFO 04-09 01:52:46 [core.py:151] init engine (profile, create kv cache, warmup model) took 47.83 seconds",
     'Saving the config to File "/tmp/run'],
    # the source line alone, nothing cut after it
    ["[rank0]:     self.model_executor.initialize_cache(num_gpu_blocks, num_cpu_blocks)"],
])
def test_a_quoted_file_outside_a_traceback_is_not_a_cut_frame(tail: list[str]) -> None:
    assert in_traceback(tail) is None

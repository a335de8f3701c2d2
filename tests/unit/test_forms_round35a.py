# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part A of the misses of round issue23-heldout-35 (evaluation harnesses and offline batch inference),
each as a rule of its family, with real lines and the near misses the rule must leave alone: torch's device runtime
refused in a forked child, CPython's spawn from a module being imported, Ray's autoscaler on a request no node type can
hold, TensorRT-LLM's MPI world of other ranks than the engine's, and vLLM's Ray executor on a node without the device.
Each line is from the corpus (named by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR
CONFIG = Label.CONFIG_ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # torch's lazy initialisation of a device runtime, refused in a forked child
    ("(VllmWorkerProcess pid=1791035) RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method",
     ERROR, CONFIG, "corpus (vllm-6668-deepseek-v2-fork-reinit-cuda-workers)"),
    ("(VllmWorkerProcess pid=302) ERROR 01-19 03:55:24 multiproc_worker_utils.py:233] Exception in worker VllmWorkerProcess while processing method init_device: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method, Traceback (most recent call last):",
     ERROR, CONFIG, "pytorch/pytorch#145170 (vLLM 0.5.4's worker relaying it)"),
    ("RuntimeError: Cannot re-initialize XPU in forked subprocess. To use XPU with multiprocessing, you must use the 'spawn' start method",
     ERROR, CONFIG, "torch/xpu/__init__.py _lazy_init's error, rendered"),
    # CPython's spawn started while the main module is being imported
    ('  File "/usr/lib/python3.9/multiprocessing/spawn.py", line 134, in _check_not_importing_main',
     ERROR, CONFIG, "corpus (lmdeploy-1366-qwen72b-tp8-spawn-bootstrapping): the check's frame, the message cut"),
    ("        An attempt has been made to start a new process before the",
     ERROR, CONFIG, "CPython Lib/multiprocessing/spawn.py _check_not_importing_main's message, first line"),
    ("        current process has finished its bootstrapping phase.",
     ERROR, CONFIG, "CPython Lib/multiprocessing/spawn.py _check_not_importing_main's message, second line"),
    # Ray's autoscaler on a request no node type of the cluster can hold
    ("(autoscaler +44s) Error: No available node types can fulfill resource request {'GPU': 16.0, 'CPU': 1.0}. Add suitable node types to this cluster to resolve this issue.",
     ERROR, CONFIG, "corpus (ray-53192-raydata-map-batches-num-gpus-16-unfulfillable)"),
    ("ESC[33m(autoscaler +21m12s)ESC[0m Error: No available node types can fulfill resource request {'node:10.2.0.127': 0.001, 'GPU': 1.0}. Add suitable node types to this cluster to resolve this issue.",
     ERROR, CONFIG, "corpus (vllm-8908-tp16-four-nodes-autoscaler-no-node-types)"),
    ("(autoscaler) Error: No available node types can fulfill resource request {'GPU': 8.0, 'CPU': 8.0}",
     ERROR, CONFIG, "a public repository's notes on an RL run whose inference engines asked for 8 GPUs per node"),
    ("(autoscaler) No available node types can fulfill resource requests {'CPU': 1.0, 'cube_partition_worker': 1.0}*N",
     ERROR, CONFIG, "a public repository's runbook (Ray's v2 autoscaler wording, a custom resource no worker group declares)"),
    # TensorRT-LLM's world built from MPI with other ranks than the engine's parallelism
    ("RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: mpiSize == tp * pp (/opt/optimum-nvidia/third-party/tensorrt-llm/cpp/tensorrt_llm/runtime/worldConfig.cpp:89)",
     ERROR, CONFIG, "corpus (optimum-nvidia-68-llama-tp2-mpisize-assertion)"),
    ("RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: mpiSize == tp * pp (/home/jenkins/agent/workspace/LLM/release-0.8/L0_PostMerge/tensorrt_llm/cpp/tensorrt_llm/runtime/worldConfig.cpp:90)",
     ERROR, CONFIG, "Tlntin/Qwen-TensorRT-LLM#123 (four engines run by one process)"),
    # vLLM's Ray executor on a node Ray lists without the device
    ("[36m(run_inference_one_model pid=2816485)[0m ValueError: Current node has no GPU available. current_node_resource={'CPU': 96.0, 'node:__internal_head__': 1.0, 'node:26.0.174.186': 1.0, 'memory': 1824080048128.0, 'object_store_memory': 200000000000.0}. vLLM engine cannot start without GPU. Make sure you have at least 1 GPU available in a node ",
     ERROR, CONFIG, "corpus (lighteval-841-dp-tp-ray-current-node-has-no-gpu)"),
    ("(EngineCore_DP0 pid=14400) ValueError: Current node has no NPU available. current_node_resource={'memory': 2151287372800.0, 'object_store_memory'",
     ERROR, CONFIG, "a public repository's vLLM-on-Ascend notes (the message wrapped after the resources)"),
]

#: lines of the same words or programs that are not these forms
NEAR_MISSES = [
    # vLLM switching to spawn because CUDA was initialised: a notice, no failure
    "WARNING 04-14 19:51:24 [utils.py:2273] We must use the `spawn` multiprocessing start method. Overriding VLLM_WORKER_MULTIPROC_METHOD to 'spawn'. See https://docs.vllm.ai/en/latest/getting_started/troubleshooting.html#python-multiprocessing for more information. Reason: CUDA is initialized",  # vllm-project/vllm#16588
    "export VLLM_WORKER_MULTIPROC_METHOD=spawn",  # the usual advice, in a thread
    # the other frames of CPython's spawn, which any spawned child's traceback holds
    '  File "/usr/lib/python3.9/multiprocessing/spawn.py", line 154, in get_preparation_data',  # corpus (lmdeploy-1366-...)
    '  File "/home/zhulin1/miniconda3/envs/lmdeployv2/lib/python3.10/multiprocessing/spawn.py", line 116, in spawn_main',  # InternLM/lmdeploy#1029
    # the autoscaler at work: nodes being added, its tip
    "(autoscaler +7s) Adding 1 node(s) of type ray.worker.gpu.",
    "(autoscaler +1m5s) Tip: use `ray status` to view detailed cluster status. To disable these messages, set RAY_SCHEDULER_EVENTS=0.",
    # TensorRT-LLM's runtime telling its MPI world
    "[TensorRT-LLM][INFO] MPI size: 1, rank: 0",  # NVIDIA/TensorRT-LLM#1950
    # vLLM's Ray workers at start
    "(RayWorkerWrapper pid=104699) INFO 07-09 13:14:33 [pynccl.py:69] vLLM is using nccl==2.24.3",  # gpustack/gpustack#2415
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_autoscaler_repeating_an_infeasible_request_is_configuration(tmp_path: Path) -> None:
    """A Ray Data job whose actor asks for more GPUs than any node has waits for ever while the autoscaler repeats
    the request: a configuration to stop for, not a crash to restart."""
    log = tmp_path / "ray.log"
    log.write_text("(autoscaler +44s) Error: No available node types can fulfill resource request {'GPU': 16.0, 'CPU': 1.0}. Add suitable node types to this cluster to resolve this issue.\n"
                   "(autoscaler +1m19s) Error: No available node types can fulfill resource request {'CPU': 1.0, 'GPU': 16.0}. Add suitable node types to this cluster to resolve this issue.\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR


def test_vllm_switching_to_spawn_stays_healthy(tmp_path: Path) -> None:
    """vLLM's notice that it switches its workers to spawn because CUDA was initialised, in a start that goes on, is
    no failure: only the refusal in a forked child is."""
    log = tmp_path / "vllm.log"
    log.write_text(NEAR_MISSES[0] + "\n"
                   "INFO 04-14 19:51:36 [__init__.py:239] Automatically detected platform cuda.\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.HEALTHY

"""diagnosis/startup.py: a process that died setting itself up is configuration, not a crash to restart.

Lines are real: the corpus excerpts each case names, and the checks of the libraries that raise them, with
the function names of their sources (DeepSpeed's op_builder/builder.py ``installed_cuda_version`` called from
``deepspeed/git_version_info.py`` at import; vLLM's v1/core/kv_cache_utils.py ``_check_enough_kv_cache_memory``
under ``EngineCoreProc.__init__``; horovod/run/run.py's host check; peft's ``LoraModel.__init__``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.startup import (
    RaisedAt,
    illegal_instruction,
    import_chain,
    startup_cause,
    stopped_at_startup,
)
from neuron_watch.events import Action, Evidence, Label, RankKey, Verdict

CORPUS = Path(__file__).resolve().parents[1] / "data" / "real-logs"
SITE = "/usr/local/lib/python3.10/dist-packages"

#: deepspeed imported on a host without a CUDA toolkit (jingyaogong/minimind#48's frames, DeepSpeed's op builder)
DEEPSPEED_IMPORT = (("train.py", "<module>"), (f"{SITE}/deepspeed/__init__.py", "<module>"),
                    (f"{SITE}/deepspeed/ops/__init__.py", "<module>"),
                    (f"{SITE}/deepspeed/git_version_info.py", "<module>"),
                    (f"{SITE}/deepspeed/ops/op_builder/fp_quantizer.py", "is_compatible"),
                    (f"{SITE}/deepspeed/ops/op_builder/builder.py", "installed_cuda_version"))
MISSING_CUDA = "op_builder.builder.MissingCUDAException: CUDA_HOME does not exist, unable to compile CUDA op(s)"
#: vLLM's engine core sizing its KV cache at start (lemonade-sdk/vllm-rocm#5's frames)
VLLM_ENGINE = ((f"{SITE}/vllm/v1/engine/core.py", "run_engine_core"), (f"{SITE}/vllm/v1/engine/core.py", "__init__"),
               (f"{SITE}/vllm/v1/engine/core.py", "_initialize_kv_caches"),
               (f"{SITE}/vllm/v1/core/kv_cache_utils.py", "get_kv_cache_configs"),
               (f"{SITE}/vllm/v1/core/kv_cache_utils.py", "_check_enough_kv_cache_memory"))
NO_KV_MEMORY = ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
                "initializing the engine.")
#: horovodrun refusing its --hosts list (volcano-sh/volcano#1321)
HOROVODRUN = (("/usr/local/bin/horovodrun", "<module>"), (f"{SITE}/horovod/run/run.py", "run"))
BAD_HOSTS = "ValueError: Invalid host input, please make sure it has format as : worker-0:2,worker-1:2."
#: a training script's own step
TRAIN_STEP = (("train.py", "<module>"), ("train.py", "main"), ("train.py", "train_epoch"),
              (f"{SITE}/torch/nn/modules/module.py", "_call_impl"), ("model.py", "forward"))
#: a model loaded at start (transformers' from_pretrained moving weights to the device)
MODEL_LOAD = (("train.py", "<module>"), ("train.py", "main"),
              (f"{SITE}/transformers/modeling_utils.py", "from_pretrained"),
              (f"{SITE}/torch/nn/modules/module.py", "to"))
#: ``python -m torch.distributed.launch``: runpy runs launch.py as the program (pytorch/pytorch#29889)
RUN_AS_MAIN = (("/usr/lib/python3.8/runpy.py", "_run_module_as_main"), ("/usr/lib/python3.8/runpy.py", "_run_code"),
               (f"{SITE}/torch/distributed/launch.py", "<module>"), (f"{SITE}/torch/distributed/launch.py", "main"))


@pytest.mark.parametrize(("raised", "configuration"), [
    # the set-up: an import that raised, a refusal in the message, a program mistake in set-up code, a cut
    # traceback whose innermost named frame sets the program up, a class of the set-up's family
    (RaisedAt(DEEPSPEED_IMPORT, MISSING_CUDA, MISSING_CUDA), True),
    (RaisedAt(DEEPSPEED_IMPORT[:-1]), True),
    (RaisedAt(VLLM_ENGINE, NO_KV_MEMORY, NO_KV_MEMORY), True),
    (RaisedAt(VLLM_ENGINE), True),
    (RaisedAt(HOROVODRUN, BAD_HOSTS, BAD_HOSTS), True),
    (RaisedAt((("train.py", "<module>"), (f"{SITE}/peft/tuners/lora.py", "__init__")),
              "KeyError: 'model_type'", "KeyError: 'model_type'"), True),
    (RaisedAt(MODEL_LOAD, "ModuleNotFoundError: No module named 'flash_attn'",
              "ModuleNotFoundError: No module named 'flash_attn'"), True),
    # near misses: memory, a device fault, NCCL, a NaN at start; the work; the user's interrupt; a module run
    # as the program; a class that says nothing outside set-up code
    (RaisedAt(MODEL_LOAD, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
              "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"), False),
    (RaisedAt(MODEL_LOAD, "RuntimeError: CUDA error: uncorrectable ECC error encountered",
              "RuntimeError: CUDA error: uncorrectable ECC error encountered"), False),
    (RaisedAt((("train.py", "main"), (f"{SITE}/torch/distributed/distributed_c10d.py", "init_process_group")),
              "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error",
              "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error"),
     False),
    (RaisedAt(MODEL_LOAD, "FloatingPointError: Loss is nan, stopping training",
              "FloatingPointError: Loss is nan, stopping training"), False),
    (RaisedAt(TRAIN_STEP, "ValueError: Expected input batch_size (32) to match target batch_size (16).",
              "ValueError: Expected input batch_size (32) to match target batch_size (16)."), False),
    (RaisedAt(TRAIN_STEP), False),
    # cut in a rendezvous: a port in use or a master not up yet, only the exception line can tell
    (RaisedAt((("train.py", "main"), (f"{SITE}/torch/distributed/distributed_c10d.py", "init_process_group"),
               (f"{SITE}/torch/distributed/rendezvous.py", "_tcp_rendezvous_handler"))), False),
    (RaisedAt(VLLM_ENGINE, "KeyboardInterrupt", "KeyboardInterrupt"), False),
    (RaisedAt(RUN_AS_MAIN, "subprocess.CalledProcessError: Command '['python', '-u', 'main.py']' died with "
              "<Signals.SIGSEGV: 11>.", "subprocess.CalledProcessError: Command '['python', '-u', 'main.py']' died "
              "with <Signals.SIGSEGV: 11>."), False),
    (RaisedAt((("train.py", "<module>"), ("train.py", "main")), "ValueError: math domain error",
              "ValueError: math domain error"), False),
], ids=["import-chain", "import-chain-cut", "vllm-kv-refusal", "vllm-cut-in-init", "horovodrun-hosts",
        "keyerror-in-init", "module-not-found", "oom-at-load", "ecc-at-load", "nccl-at-init", "nan", "work-valueerror",
        "work-cut", "rendezvous-cut", "ctrl-c", "run-as-main", "no-role"])
def test_startup_cause(raised: RaisedAt, configuration: bool) -> None:
    assert (startup_cause(raised) is not None) is configuration


@pytest.mark.parametrize(("frames", "module"), [
    (DEEPSPEED_IMPORT, "git_version_info.py"),
    # the import machinery between the importer and the module that raised
    ((("train.py", "<module>"), ("<frozen importlib._bootstrap>", "_find_and_load"),
      ("<frozen importlib._bootstrap>", "_call_with_frames_removed"), (f"{SITE}/torch/__init__.py", "<module>")),
     "__init__.py"),
    (RUN_AS_MAIN, None),
    ((("train.py", "<module>"), ("train.py", "main")), None),
    # a module whose body runs the work (a script imported by another, training at import)
    ((("run.py", "<module>"), ("train.py", "<module>"), ("train.py", "train")), None),
])
def test_import_chain(frames: tuple[tuple[str, str], ...], module: str | None) -> None:
    assert import_chain(frames) == module


@pytest.mark.parametrize(("text", "sigill"), [
    ("Illegal instruction (core dumped)", True),
    ("mpirun noticed that process rank 0 with PID 0 on node n1 exited on signal 4 (Illegal instruction).", True),
    ("Fatal Python error: Illegal instruction", True),
    ("    exitcode  : -4 (pid: 2046259)", True),
    ("Process finished with exit code 132 (interrupted by signal 4: SIGILL)", True),
    # near misses: another fault's words, another signal's status
    ("RuntimeError: CUDA error: an illegal memory access was encountered", False),
    ("Segmentation fault (core dumped)", False),
    ("    exitcode  : -9 (pid: 178)", False),
])
def test_illegal_instruction(text: str, sigill: bool) -> None:
    assert (illegal_instruction(text) is not None) is sigill


def _crash(text: str, step: int | None = None) -> Verdict:
    return Verdict(Label.OTHER_CRASH, Action.RESTART, step=step, evidence=(Evidence(RankKey("", 0), text, ""),))


def test_only_a_crash_before_any_progress_is_read() -> None:
    raised = [(RaisedAt(HOROVODRUN, BAD_HOSTS, BAD_HOSTS), None)]
    found = stopped_at_startup(_crash("Traceback (most recent call last):"), False, raised)
    assert found is not None and found.label is Label.CONFIG_ERROR and found.action is Action.STOP
    assert stopped_at_startup(_crash("Traceback (most recent call last):"), True, raised) is None
    assert stopped_at_startup(_crash("Traceback (most recent call last):", step=120), False, raised) is None
    assert stopped_at_startup(_crash("Illegal instruction (core dumped)"), True, []) is None
    sigill = stopped_at_startup(_crash("Illegal instruction (core dumped)"), False, [])
    assert sigill is not None and sigill.action is Action.STOP


def _write(tmp_path: Path, lines: list[str]) -> str:
    path = tmp_path / "job.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def _traceback(frames: tuple[tuple[str, str], ...], exception: str) -> list[str]:
    return ["Traceback (most recent call last):",
            *[f'  File "{file}", line {10 + i}, in {func}' for i, (file, func) in enumerate(frames)], exception]


def test_diagnose_reads_the_traceback_under_a_wrappers_record(tmp_path: Path) -> None:
    """The verdict rests on vLLM's own record of the failure; the traceback under it says why."""
    lines = ["INFO 01-13 01:00:12 [core.py:93] Initializing a V1 LLM engine (v0.11.0) with config: model='Qwen3-8B'",
             "ERROR 01-13 01:00:20 [core.py:708] EngineCore failed to start.",
             *_traceback(VLLM_ENGINE, NO_KV_MEMORY)]
    verdict = diagnose_paths([_write(tmp_path, lines)]).verdict
    assert (verdict.label, verdict.action) == (Label.CONFIG_ERROR, Action.STOP)


def test_a_traceback_the_run_went_on_from_is_not_read(tmp_path: Path) -> None:
    """An import that raised, printed with a WARNING long before the crash (the program went on without the
    package), does not make a segfault a configuration error."""
    lines = ["WARNING:root:Could not load the fused kernels, falling back to the reference implementation",
             *_traceback((("train.py", "<module>"), (f"{SITE}/apex/__init__.py", "<module>")), "KeyError: 'sm_90'"),
             *[f"INFO:root:building layer {i}" for i in range(60)],
             "Segmentation fault (core dumped)"]
    verdict = diagnose_paths([_write(tmp_path, lines)]).verdict
    assert (verdict.label, verdict.action) == (Label.OTHER_CRASH, Action.RESTART)


def test_after_progress_a_setup_traceback_is_a_crash(tmp_path: Path) -> None:
    lines = ["{'loss': 2.3412, 'learning_rate': 5e-05, 'epoch': 0.01}", *_traceback(VLLM_ENGINE[:2], "")[:-1]]
    verdict = diagnose_paths([_write(tmp_path, lines)]).verdict
    assert verdict.action is not Action.STOP


@pytest.mark.parametrize(("excerpt", "label"), [
    # set-up failures the verdict's own line did not show (issue 23's "configuration restarted")
    ("config_error/minimind-48-deepspeed-launcher-cuda-home-missing", Label.CONFIG_ERROR),
    ("config_error/longlora-68-peft-target-modules-not-found", Label.CONFIG_ERROR),
    ("config_error/mesh-transformer-jax-43-ray-actor-typeerror-jax-version", Label.CONFIG_ERROR),
    ("config_error/vllm-rocm-5-lemonade-prefix-kv-cache-max-seq-len", Label.CONFIG_ERROR),
    ("config_error/volcano-1321-horovodrun-invalid-host-input-format", Label.CONFIG_ERROR),
    ("config_error/hashingdeeplearning-13-illegal-instruction-invalid-opcode", Label.CONFIG_ERROR),
    # near misses: a launcher run as the program (python -m), a library's own SIGILL after it started
    ("other_crash/pytorch-29889-launch-died-sigsegv", Label.OTHER_CRASH),
    ("other_crash/deit-28-nccl-cuda-failure-device-side-assert-launch-sigabrt", Label.OTHER_CRASH),
    ("other_crash/horovod-319-osx-mpi-init-thread-illegal-instruction", Label.OTHER_CRASH),
])
def test_corpus(excerpt: str, label: Label) -> None:
    verdict = diagnose_paths([str(CORPUS / f"{excerpt}.log")]).verdict
    assert verdict.label is label

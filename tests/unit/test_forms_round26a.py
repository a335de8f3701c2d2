# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half A of the misses of round issue23-heldout-26, each as a rule of its family, with real lines and
the near misses the rule must leave alone: argparse's refusal of a choice without the argument's usual name, a client
that cannot reach the local daemon it needs at its unix socket, a C++/CUDA extension's JIT build that failed, Slurm's
accounting killing a job over its memory limit, and OneFlow's graph compiler at work. Each line is from the corpus
(named by its excerpt), from a public thread (named), or is the format the program's source prints (the source is
named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label, LogLine, RankKey
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import table_tests

ERROR, CRASH, COMPILING = FormKind.ERROR, FormKind.CRASH, FormKind.COMPILE_RUNNING

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # argparse's refusal of a choice: bare (a sub-command without a name) or named by its braced choices
    ("optimum-cli export: error: invalid choice: 'neuron' (choose from 'onnx', 'tflite')", ERROR, Label.CONFIG_ERROR,
     "corpus (optimum-neuron-532-optimum-cli-export-invalid-choice-neuron)"),
    ("optimum-cli export: error: argument {onnx,tflite}: invalid choice: 'neuron' (choose from 'onnx', 'tflite')",
     ERROR, Label.CONFIG_ERROR, "huggingface/optimum-neuron#623 (optimum-neuron installed from source)"),
    ("prog: error: argument command: invalid choice: 'lst', maybe you meant 'list'? (choose from 'list', 'show')",
     ERROR, Label.CONFIG_ERROR, "CPython 3.14 Lib/argparse.py _check_value's suggestion, filled in"),
    # a client that cannot reach the daemon it needs at its unix socket
    ("2021-11-08 22:21:25,025 [WARN ] W-9003-sent_neuron_b6_1.0-stderr MODEL_LOG - [E neuron_runtime.cpp:683] **The Neuron Runtime GRPC server at address unix:/run/neuron.sock is unavailable. Is neuron-rtd running? Is socket /run/neuron.sock writable?**",
     ERROR, Label.CONFIG_ERROR, "corpus (aws-neuron-sdk-361-torchserve-neuron-rtd-socket-unavailable-cpu-fallback)"),
    ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?", ERROR,
     Label.CONFIG_ERROR, "docker/cli's connection error, as a forum post pastes it after 'docker images'"),
    ("ERROR: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?", ERROR,
     Label.CONFIG_ERROR, "a Codespaces session's 'docker build' (systemd not running in the container)"),
    # torch.utils.cpp_extension's JIT build that failed
    ("[rank1]: subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.", ERROR,
     Label.CONFIG_ERROR, "corpus (deepspeed-6892-zero3-fused-adam-ninja-build-failed)"),
    ("[rank0]: subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.", ERROR,
     Label.CONFIG_ERROR, "THUDM/SwissArmyTransformer#184 (fused_ema_adam under DeepSpeed)"),
    ("RuntimeError: Error building extension 'fused_adam'", ERROR, Label.CONFIG_ERROR,
     "databrickslabs/dolly#156 (DeepSpeed's FusedAdam built at start-up)"),
    ("subprocess.CalledProcessError: Command '['ninja', '-v', '-j', '8']' returned non-zero exit status 1.", ERROR,
     Label.CONFIG_ERROR, "torch/utils/cpp_extension.py _run_ninja_build's command with MAX_JOBS=8, filled in"),
    ("RuntimeError: Ninja is required to load C++ extensions", ERROR, Label.CONFIG_ERROR,
     "torch/utils/cpp_extension.py verify_ninja_availability; a TokenHSI run's notes (IsaacGym's gymtorch built at import)"),
    # Slurm's accounting killing a job over its memory limit
    ("slurmstepd: error: Job 7518 exceeded memory limit (626359956 > 512000000), being killed", CRASH, Label.OOM,
     "corpus (coqui-stt-2238-slurmstepd-job-exceeded-memory-limit-killed)"),
    ("slurmstepd: error: StepId=4410912.0 exceeded memory limit (12986592 > 12582912), being killed", CRASH,
     Label.OOM, "Slurm src/plugins/jobacct_gather/common/common_jag.c: '%ps exceeded memory limit (%PRIu64 > %PRIu64), being killed', filled in"),
    # OneFlow's graph compiler at work
    ("I20221009 21:05:48.461360 2343139 job_build_and_infer_ctx.cpp:942] GraphToRun_0 start compiling with pass pass_cnt_26-SplitSparseSoftmaxCrossEntropyOpPass",
     COMPILING, None, "corpus (oneflow-9198-nn-graph-compile-passes-large-module)"),
    ('I20230425 00:48:47.266355 20443 cost_util.h:98] [count log]{"loc":"[GraphCompile]Graph_0 OptimizationLogicalGraph","mem_rss":"11621.000000 MB","time_cost":"433 seconds"}',
     COMPILING, None, "corpus (oneflow-10180-graphcompile-log-still-compiling)"),
    # oneCCL's error records (the level states no cause; round 24's reader names the provider ones')
    ("2024:01:15-03:36:29:(1980058) |CCL_ERROR| global.cpp:150 getenv_local_coord: condition global_data::env().ze_ipc_exchange == ccl::ze::ipc_exchange_mode::sockets failed",
     ERROR, None, "corpus (accelerate-2340-oneccl-local-idx-ze-ipc-exchange-sockets)"),
    ("2023:11:28-16:35:45:(35980) |CCL_ERROR| base_thread.cpp:36 start: error while creating worker thread #0 pthread_create returns 22",
     ERROR, None, "corpus (torch-ccl-54-ccl-error-pthread-create-worker)"),
    ("2025:03:13-10:36:27:(  636) |CCL_ERROR| ze_fd_manager.cpp:214 fill_device_fds: condition fds[dev_idx] > 0 failed",
     ERROR, None, "vllm-project/vllm#14612 (the XPU V1 engine in a container without the devices' fds)"),
]

#: lines that look like the forms and must read as nothing
NEAR_MISSES = [
    # argparse's words in prose and in a help text
    "Note: an invalid choice here falls back to the default value",
    "  --optimizer {adam,sgd}  optimizer to use (choose from adam, sgd)",
    # the question without a socket, a socket without the question
    "Is the docker daemon running? If not, start it with: sudo systemctl start docker",
    'time="2024-01-01T00:00:00Z" level=info msg="serving..." address=/run/containerd/containerd.sock',
    # ninja asked for its version (torch checks it is installed), not a build
    "Command '['ninja', '--version']' returned non-zero exit status 1.",
    "# Ninja is required to build the C++ extensions: pip install ninja",
    # another program's memory limit in the same words (a worker pool's recycling, a process manager's restart)
    "Worker exceeded memory limit (512 MB > 256 MB). Shutting down.",
    "Process api exceeded memory limit (900 MB > 512 MB)",
    # a pass OneFlow finished: only the starts say a compile is at work
    "I20221009 21:05:34.688697 2343139 job_build_and_infer_ctx.cpp:956] GraphToRun_0 finish compiling with pass pass_cnt_23-FuseAddToOutputPass1",
    # oneCCL's warnings on a run that goes on (corpus: accelerate-2340's first lines; accelerate#3664's log)
    "2024:01:15-03:36:29:(1980058) |CCL_WARN| did not find MPI-launcher specific variables, switch to ATL/OFI, to force enable ATL/MPI set CCL_ATL_TRANSPORT=mpi",
    "2025:07:27-12:04:20:(555537) |CCL_INFO| process launcher: hydra, local_proc_idx: -1, local_proc_count: -1",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("config_error/optimum-neuron-532-optimum-cli-export-invalid-choice-neuron.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/aws-neuron-sdk-361-torchserve-neuron-rtd-socket-unavailable-cpu-fallback.log", Label.CONFIG_ERROR,
     Action.STOP),
    ("config_error/deepspeed-6892-zero3-fused-adam-ninja-build-failed.log", Label.CONFIG_ERROR, Action.STOP),
    ("oom/coqui-stt-2238-slurmstepd-job-exceeded-memory-limit-killed.log", Label.OOM, Action.RESTART),
    ("compiling/oneflow-9198-nn-graph-compile-passes-large-module.log", Label.COMPILING, Action.WAIT),
    ("compiling/oneflow-10180-graphcompile-log-still-compiling.log", Label.COMPILING, Action.WAIT),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason



def test_a_failed_extension_build_is_its_own_ranks_configuration() -> None:
    """Rank 0's ninja exit states its own cause; rank 1's refusal, which it went on from, is not borrowed."""
    t0 = 1000.0
    judge = Judge(default_knowledge_base(), JudgeSettings(), t0)
    judge.observe_lines([
        LogLine(RankKey("n0", 1), "nvcc fatal   : Unsupported gpu architecture 'compute_89'", t0, t0, "rank-1.log", 1),
        LogLine(RankKey("n0", 1), "step 1 loss 2.0 step_time 0.5s", t0 + 1, t0 + 1, "rank-1.log", 2),
        LogLine(RankKey("n0", 0), "subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.",
                t0 + 2, t0 + 2, "rank-0.log", 1),
    ])
    v = judge.verdict(1010.0, final=True)
    assert v.culprit == RankKey("n0", 0)
    assert v.label is Label.CONFIG_ERROR and v.action is Action.STOP


def test_a_log_ending_in_oneccl_error_record_is_not_healthy(tmp_path: Path) -> None:
    """accelerate-2340 cut after oneCCL's records, before the traceback: its error record is the failure."""
    lines = (CORPUS / "config_error/accelerate-2340-oneccl-local-idx-ze-ipc-exchange-sockets.log").read_text().splitlines()
    log = tmp_path / "console.log"
    log.write_text("\n".join(lines[:4]) + "\n")
    assert diagnose_paths([str(log)]).verdict.label is not Label.HEALTHY

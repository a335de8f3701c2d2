# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for the misses of round issue23-heldout-11, each as a rule of its family (a status
vocabulary, a tool's severity column, a layout of a metric, an allocator's words, a job status), with
real lines and the near misses the rule must leave alone.

Each line is from the corpus (tests/data/real-logs, named by its excerpt) or is the format a project's
source prints, filled in (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.failureforms import FormKind, cause_of
from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label, LogLine, RankKey
from tests.unit.form_table import table_tests

KB = default_knowledge_base()
E, M, RUN = FormKind.ERROR, FormKind.METRIC, FormKind.COMPILE_RUNNING

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # an absl/gRPC status as the record's own status, at the line's start or chained after a colon
    ("DEADLINE_EXCEEDED: Deadline Exceeded", E, Label.COMM_ERROR, "corpus (jax-35905)"),
    ("Failed to get TPU metadata (tpu-env) from instance metadata for variable CHIPS_PER_HOST_BOUNDS: INTERNAL: Failed to fetch URL after 30 tries (http status: 404); curl status: No error", E, None, "corpus (jax-11668)"),
    ("UNAVAILABLE: failed to connect to all addresses", E, Label.COMM_ERROR, "absl::Status::ToString of a gRPC channel's status"),
    # a version mismatch in the checks' own words
    ("NVIDIA B200 with CUDA capability sm_100 is not compatible with the current PyTorch installation. The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.", E, Label.CONFIG_ERROR, "corpus (kvcached-111)"),
    ("RuntimeError: module compiled against API version 0xf but this version of numpy is 0xe", E, Label.CONFIG_ERROR, "corpus (optimum-neuron-353)"),
    # argparse's usage error, under a server's prefix at the level it logs a worker's stderr
    ("2021-09-03 14:26:44,745 [WARN ] W-9000-mymodel1_1.0-stderr MODEL_LOG - model_service_worker.py: error: unrecognized arguments: --sock-type unix --sock-name /tmp/.ts.sock.9000", E, Label.CONFIG_ERROR, "corpus (torchserve-1234)"),
    # the shell's command not found (bash, bash -c, dash)
    ("somenonexit: command not found", E, Label.CONFIG_ERROR, "corpus (skypilot-1047)"),
    ("bash: line 1: torchrun: command not found", E, Label.CONFIG_ERROR, "bash's format"),
    ("/bin/sh: 1: neuron-top: not found", E, Label.CONFIG_ERROR, "dash's format"),
    # a tool's own severity, padded to its column (the CUDA toolchain)
    ("ptxas-blackwell fatal   : Value 'sm_110a' is not defined for option 'gpu-name'                 ", E, Label.COMPILE_ERROR, "corpus (pytorch-170117)"),
    ("ptxas error   : Entry function 'kernel' uses too much shared data (0x10000 bytes, 0xc000 max)", E, Label.COMPILE_ERROR, "ptxas's format"),
    # memory an allocator could not get, with the size; a node nearly out of it
    ("Failed to allocate memory for requested buffer of size 268435456 |", E, Label.OOM, "corpus (triton-5661)"),
    ("Unable to allocate 2.00 GiB for an array with shape (16384, 16384) and data type float64", E, Label.OOM, "numpy's _ArrayMemoryError message"),
    ("Memory usage on this node: 7.4/7.5 GiB: ***LOW MEMORY*** less than 10% of the memory on this node is available for use. This can cause unexpected crashes. Consider reducing the memory used by your application or reducing the Ray object store size by setting `object_store_memory`", E, Label.OOM, "corpus (ray-15226)"),
    # a launcher's or a scheduler's status
    ("I 01-09 21:42:25 spot_utils.py:327] Logs finished for job 2 (status: FAILED_NO_RESOURCE).", E, Label.CONFIG_ERROR, "corpus (skypilot-1578)"),
    ("I 01-09 21:42:25 spot_utils.py:327] Logs finished for job 2 (status: FAILED).", E, None, "sky/skylet/job_lib.py JobStatus.FAILED"),
    ("ORTE was unable to reliably start one or more daemons.", E, Label.CONFIG_ERROR, "corpus (torchpack-24)"),
    # NaN as the value of a loss in a list or an array
    ("2022-12-08 17:57:32,672-INFO: Total iter: 10, epoch: 0, batch: 10, loss: [nan]", M, Label.NUMERICAL_ERROR, "corpus (paddleslim-1582)"),
    ("epoch 3 loss: array([nan], dtype=float32)", M, Label.NUMERICAL_ERROR, "numpy's repr of a one-element array"),
    # the accelerator JAX was set up for did not come up; it runs on the CPU
    ("W0406 19:31:14.948704 125696970082304 xla_bridge.py:971] A Google TPU may be present on this machine, but either a TPU-enabled jaxlib or libtpu is not installed. Falling back to cpu.", E, Label.CONFIG_ERROR, "corpus (recml-9)"),
    # TensorRT's builder choosing tactics: an engine build at work
    ("[11/27/2024-23:00:09] [TRT] [V] Disabling unused tactic source:", RUN, None, "corpus (tensorrt-llm-2508)"),
]

#: lines that look like one of the forms above and must read as nothing
NEAR_MISSES = [
    "grpc::StatusCode::INTERNAL is mapped to HTTP 500 by the gateway",  # INTERNAL as a symbol's name
    "The server returns UNAVAILABLE: clients retry with backoff",  # a status word in prose
    "W0406 19:31:14.948704 1 client.cc:12] RPC failed: UNAVAILABLE: retrying in 2s",  # a WARNING record, retried
    "OUT_OF_RANGE: End of sequence",  # how an input pipeline ends
    "The current PyTorch installation supports sm_90; this GPU is compatible",  # the words in prose
    "ptxas info    : Used 32 registers, 384 bytes cmem[0]",  # the tool's INFO column
    "Command not found? See the FAQ for installing the CLI",  # not the shell's layout
    "2021-09-03 14:26:44,745 [INFO ] W-9000-mymodel1_1.0-stdout MODEL_LOG - error: none, arguments parsed",  # argparse's words without its messages
    "I 01-09 21:50:00 spot_utils.py:327] Logs finished for job 3 (status: SUCCEEDED).",  # a job that succeeded
    "loss: [0.6931]",  # a finite loss in a list
    "loss_fn: [nanmean]",  # "nan" inside a word in a list
    "[11/27/2024-23:00:09] [TRT] [V] Loaded engine size: 120 MiB",  # a VERBOSE record of the runtime, no tactic
    "Memory usage on this node: 3.1/16.0 GiB",  # Ray's status with memory to spare
    "No accelerator requested. Falling back to cpu.",  # a CPU run by choice
]

#: (line, the cause its form states): causes read from a line another form or rule reads
CAUSES = [
    ("sky.exceptions.CommandError: Command /bin/bash -i /tmp/sky_setup_jsyb5vgm 2>&1 failed with return code 127.", Label.CONFIG_ERROR),  # corpus (skypilot-1047)
    ("E1107 07:34:03.823179 7 model_repository_manager.cc:1265] failed to poll model 'pipe': model not found in any model repository.", Label.CONFIG_ERROR),  # corpus (triton-model-analyzer-786)
    ("| dolly_v1_6b_onnx | 1       | UNAVAILABLE: Internal: onnx runtime error 6: Exception during initialization: Failed to allocate memory for requested buffer of size 268435456 |", Label.OOM),  # corpus (triton-5661), joined
    ("| dolly_v1_6b_onnx | 1       | UNAVAILABLE: Internal: onnx runtime error 6: Exception during initialization: /workspace/onnxruntime/onnxruntime/core/framework/bfc_arena.cc:368 void* onnxruntime::BFCArena::AllocateRawInternal(size_t, bool, onnxruntime::Stream*, bool, onnxruntime::WaitNotificationFn) ", Label.OOM),  # corpus (triton-5661): thrown by the arena's allocate
]

NO_CAUSE = [
    "RuntimeError: worker exited with code 1270",  # 127 inside another number
    "subprocess.CalledProcessError: Command 'make' returned non-zero exit status 2.",
    "E0101 00:00:00.000000 1 x.cc:1] failed to allocate memory for the cache, out of retries",  # no size: a pool or a quota
    "frame #3: c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::free(c10::cuda::CUDACachingAllocator::Native::Block*) + 0x2a",  # an allocator's function, not its allocate
]

#: (line, the table rule that reads it, a line alike that the rule must not read)
RULES = [
    ("[INTERNAL_ERROR] [NCC_IXCG856] MATCH_REPLACE8 Instruction expects at least 8 input elements per partition",
     "neuron.compile.error_code",
     "2023-08-25 21:52:23.000451: INFO ||NCC_WRAPPER||: Compile cache path: /var/tmp/neuron-compile-cache"),  # corpus (aws-neuron-sdk-1303)
    ("Compilation status: Total modules: 2, Passed: 0, Failed: 2",
     "neuron.compile.error_code",
     "Compilation status: Total modules: 2, Passed: 2, Failed: 0"),  # corpus (aws-neuron-sdk-1362)
    ("2025-01-06 11:49:42.255433: F hilo/hlo_passes/VerifySupportedHloOps.cc:160] ERROR: Unsupported operator: erf",
     "neuron.compile.hlo_frontend",
     "2025-01-06 11:49:40.100000: I hilo/hlo_passes/VerifySupportedHloOps.cc:80] verifying 312 operators"),  # corpus (aws-neuron-sdk-1081)
    ("ERROR:Neuron:neuron-cc failed with the following command line call:",
     "neuron.compile.failed_status",
     "INFO:Neuron:Compiling function _NeuronGraph$26 with neuron-cc"),  # corpus (aws-neuron-sdk-709)
    ("2022-10-26 09:09:43.592309478 [E:onnxruntime:, sequential_executor.cc:368 Execute] Non-zero status code returned while running FusedConv node. Status Message: CUDA failure 2: out of memory ; GPU=0 ; hostname=e14ca68f-learner-0 ; expr=cudaMalloc((void**)&p, size);",
     "gpu.cuda_oom",
     "CUDA failure 700: an illegal memory access was encountered ; GPU=0 ; hostname=h ; expr=cudaStreamSynchronize(stream);"),  # corpus (triton-5014)
    ("Nrt::BuildGlobalComm failed on NeuronCores 0-1(2):  nrt_status=1, message=\"Non specific failure\".",
     "neuron.nrt.failure_generic",
     "Nrt::BuildGlobalComm on NeuronCores 0-1(2):  nrt_status=0"),  # corpus (ray-65071)
    ("[rank1]:[E616 13:41:10.909476913 ProcessGroupNCCL.cpp:565] [Rank 1] Watchdog caught collective operatMERS_CACHE` is deprecated and will be removed in v5 of Transformion timeout: WorkNCCL(SeqNum=2109, OpType=_ALLGATHER_BASE, NumelIn=262711296, NumelOut=525422592, Timeout(ms)=1800000) ran for 1800007 milliseconds before timing out.",
     "gpu.nccl.watchdog_timeout",
     "[rank1]:[I616 13:41:10.909476913 ProcessGroupNCCL.cpp:565] [Rank 1] WorkNCCL(SeqNum=2109, OpType=_ALLGATHER_BASE, Timeout(ms)=1800000) ran for 12 milliseconds"),  # corpus (pytorch-143536): another process's text inside the sentence
    ("xla_bridge.py:841] Unable to initialize backend 'tpu': INTERNAL: Failed to open libtpu.so: libtpu.so: cannot open shared object file: No such file or directory",
     "jax.backend_probe",
     "RuntimeError: Unable to initialize backend 'cuda': FAILED_PRECONDITION: No visible GPU devices."),  # corpus (alphafold3-656)
]


test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


@pytest.mark.parametrize(("line", "label"), CAUSES)
def test_cause_of_form(line: str, label: Label) -> None:
    stated = cause_of(line)
    assert stated is not None and stated[0] is label


@pytest.mark.parametrize("line", NO_CAUSE)
def test_form_without_cause(line: str) -> None:
    stated = cause_of(line)
    assert stated is None or stated[0] not in (Label.CONFIG_ERROR, Label.OOM)


@pytest.mark.parametrize(("line", "rule", "near_miss"), RULES)
def test_table_rule_and_its_near_miss(line: str, rule: str, near_miss: str) -> None:
    m = KB.classify(line)
    assert m is not None and m.signature.id == rule
    miss = KB.classify(near_miss)
    assert miss is None or miss.signature.id != rule


# -- whole logs, as the judge reads them ------------------------------------------------------------

PROGRESS = [f"step {s} loss 2.{s:03d} step_time 0.5s" for s in range(1, 6)]


def _verdict(lines: list[str], t0: float = 1000.0) -> tuple[Label, Action]:
    judge = Judge(KB, JudgeSettings(), t0)
    judge.observe_lines([LogLine(RankKey("n0", 0), text, t0 + i, t0 + i, "rank-0.log", i + 1)
                         for i, text in enumerate(lines)])
    v = judge.verdict(t0 + len(lines) + 10, final=True)
    return v.label, v.action


ENDINGS = [
    (["DEADLINE_EXCEEDED: Deadline Exceeded", "RPC: /tensorflow.CoordinationService/RegisterTask"], Label.COMM_ERROR, Action.RESTART),
    ([*PROGRESS, "ptxas-blackwell fatal   : Value 'sm_110a' is not defined for option 'gpu-name'"], Label.COMPILE_ERROR, Action.STOP),
    ([*PROGRESS, "NVIDIA B200 with CUDA capability sm_100 is not compatible with the current PyTorch installation."], Label.CONFIG_ERROR, Action.STOP),
    ([*PROGRESS, "2022-12-08 17:57:32,672-INFO: Total iter: 10, epoch: 0, batch: 10, loss: [nan]"], Label.NUMERICAL_ERROR, Action.STOP),
    (["[11/27/2024-23:00:09] [TRT] [V] Tactic: 0x0000000000000003 Time: 0.0412", "[11/27/2024-23:00:09] [TRT] [V] Disabling unused tactic source:"], Label.COMPILING, Action.WAIT),
]


@pytest.mark.parametrize(("lines", "label", "action"), ENDINGS, ids=[f"ending:{i}" for i in range(len(ENDINGS))])
def test_log_ending_in_the_form(lines: list[str], label: Label, action: Action) -> None:
    assert _verdict(lines) == (label, action)


def test_low_memory_status_the_run_went_on_from_is_healthy() -> None:
    """Ray's low-memory status is a warning while steps go on after it; only as the last word is it the cause."""
    low = "Memory usage on this node: 7.4/7.5 GiB: ***LOW MEMORY*** less than 10% of the memory on this node is available for use."
    assert _verdict([*PROGRESS[:2], low, *PROGRESS[2:]])[0] is Label.HEALTHY
    assert _verdict([*PROGRESS, low])[0] is Label.OOM

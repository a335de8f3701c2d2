"""diagnosis/firstfailure.py: a program-mistake exception before any progress is configuration.

Lines are real (the corpus excerpts, and the threads each case names); torchrun's rank prefixes
(``[rank0]:`` from its ``--local-ranks-filter``/``tee``, ``[default0]:`` from ``--tee``/``--redirects``)
are put before each line of a real traceback the way torchrun writes them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.exctaxonomy import exception_message, setup_refusal
from neuron_watch.diagnosis.firstfailure import mistake_before_progress
from neuron_watch.events import Action, Evidence, Label, RankKey, Verdict

CORPUS = Path(__file__).resolve().parents[1] / "data" / "real-logs"

#: the lines of huggingface/accelerate#2240 (one pasted line) and NVIDIA-BioNeMo/bionemo-recipes#784
#: (the frames of a model build)
ONE_LINE = "ValueError: The port number of the rendezvous endpoint 'None:None' must be an integer between 0 and 65536."
BUILD_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/workspace/bionemo/train.py", line 88, in <module>',
    '  File "/usr/local/lib/python3.12/dist-packages/megatron/core/transformer/transformer_block.py", line 271, '
    "in __init__",
    '  File "/usr/local/lib/python3.12/dist-packages/megatron/core/transformer/transformer_block.py", line 201, '
    "in _get_block_submodules",
    '  File "/usr/local/lib/python3.12/dist-packages/megatron/core/transformer/transformer_block.py", line 110, '
    "in get_num_layers_to_build",
    "AssertionError: num_layers should be divisible by pipeline_model_parallel_size",
]


def _write(tmp_path: Path, lines: list[str]) -> str:
    path = tmp_path / "job.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(("lines", "label"), [
    ([ONE_LINE], Label.CONFIG_ERROR),
    (BUILD_TRACEBACK, Label.CONFIG_ERROR),
    ([f"[rank0]:{t}" for t in BUILD_TRACEBACK], Label.CONFIG_ERROR),
    ([f"[default0]:{t}" for t in BUILD_TRACEBACK], Label.CONFIG_ERROR),
    # near misses: progress before it; a class that says nothing of a value refused
    (["{'loss': 2.3412, 'learning_rate': 5e-05, 'epoch': 0.01}", ONE_LINE], Label.OTHER_CRASH),
    (["RuntimeError: CUDA error: an illegal memory access was encountered"], Label.OTHER_CRASH),
], ids=["one-line", "build-frames", "rank-prefix", "default-prefix", "after-progress", "runtime-error"])
def test_a_program_mistake_before_progress_is_configuration(tmp_path: Path, lines: list[str], label: Label) -> None:
    verdict = diagnose_paths([_write(tmp_path, lines)]).verdict
    assert verdict.label is label
    assert verdict.action is (Action.STOP if label is Label.CONFIG_ERROR else Action.RESTART)


@pytest.mark.parametrize(("excerpt", "label"), [
    # the frames run through the work (evaluate, forward): the program's own crash
    ("other_crash/deepdeblur-49-keyerror-10-at-test", Label.OTHER_CRASH),
    ("other_crash/fairmot-242-keyerror-replica-0", Label.OTHER_CRASH),
    # a whole traceback of the script's own <module> and helpers: the program's own bug
    ("other_crash/deepspeed-618-nameerror", Label.OTHER_CRASH),
    ("other_crash/instructlab-217-user-valueerror", Label.OTHER_CRASH),
    # a configuration file launched as the script
    ("config_error/accelerate-77-config-json-run-as-script", Label.CONFIG_ERROR),
    # one pasted line
    ("config_error/accelerate-2240-rendezvous-endpoint-none-none-same-network", Label.CONFIG_ERROR),
    # the innermost frames of a traceback cut above them, under interleaved rank prefixes
    ("config_error/bionemo-recipes-784-esm2-num-layers-not-divisible-by-pp", Label.CONFIG_ERROR),
])
def test_the_frames_decide_where_they_were_read(excerpt: str, label: Label) -> None:
    verdict = diagnose_paths([str(CORPUS / f"{excerpt}.log")]).verdict
    assert verdict.label is label


def _crash(text: str, step: int | None = None) -> Verdict:
    key = RankKey("", 0)
    return Verdict(Label.OTHER_CRASH, Action.RESTART, ranks=(key,), culprit=key,
                   evidence=(Evidence(key, text, "host.unrecognised_error"),), step=step)


def test_the_rule_itself() -> None:
    key = RankKey("", 0)
    text = "KeyError: 'RANK'"
    assert mistake_before_progress(_crash(text), progressed=False) is not None
    assert mistake_before_progress(_crash(text), progressed=True) is None
    assert mistake_before_progress(_crash(text, step=3), progressed=False) is None
    work = {key: (text, [("train.py", "<module>"), ("train.py", "train_step")], True)}
    assert mistake_before_progress(_crash(text), False, work) is None
    setup = {key: (text, [("train.py", "<module>"), ("train.py", "setup_distributed")], True)}
    found = mistake_before_progress(_crash(text), False, setup)
    assert found is not None and "setup_distributed" in found.reason
    other = dict(setup)
    assert mistake_before_progress(_crash("KeyError: 'WORLD_SIZE'"), False, other) is not None  # frames of another line
    hang = Verdict(Label.COLLECTIVE_HANG, Action.RESTART, evidence=(Evidence(key, text, ""),))
    assert mistake_before_progress(hang, False) is None


#: (a failure's line, whether it states a set-up the program refuses): real lines of the corpus and of the
#: signature table's examples, and near misses (a crash of the program's own, an advice in a record that is
#: no exception, a status in prose, NCCL's other results)
REFUSALS: list[tuple[str, bool]] = [
    # NCCL's failed CUDA call, in each framework's words (Paddle, c10's terminate, PyTorch, NCCL's name, nccl-tests)
    ("OSError: (External)  Nccl error, unhandled cuda error  (at /paddle/paddle/fluid/platform/collective_helper.cc"
     ":100)", True),
    ("  what():  NCCL Error 1: unhandled cuda error", True),
    ("torch.distributed.DistBackendError: NCCL error in: .../NCCLUtils.hpp:317, unhandled cuda error", True),
    ("ncclUnhandledCudaError: Call to CUDA function failed.", True),
    ("gpu5: Test NCCL failure common.cu:343 'unhandled cuda error'", True),
    # an exception whose message says what to change
    ("RuntimeError: Collective ops must be configured at program startup", True),
    ("RuntimeError: Lightning can’t create new processes if CUDA is already initialized. Did you manually call "
     "torch.cuda.* functions, have moved the model to the device, or allocated memory on the GPU any other way? "
     "Please remove any such calls, or change the selected strategy. You will have to restart the Python kernel.",
     True),
    ("RuntimeError: Using hostfile at /home/552/dz9214/hostfile but host=gadi-gpu-v100-0011 was not reachable via "
     "ssh. If you are running with a single node please remove /home/552/dz9214/hostfile or setup passwordless ssh.",
     True),
    ("OSError: glm-4-9b is not a local folder and is not a valid model identifier listed on "
     "'https://huggingface.co/models' If this is a private repository, make sure to pass a token having permission "
     "to this repo either by logging in with `huggingface-cli login` or by passing `token=<your_token>`", True),
    # the grammar of a refusal, whatever the words around it (exctaxonomy._REFUSAL_GRAMMAR): a support the device
    # lacks (corpus vllm-1284), a build without one (farl-10), what was expected against what was found
    # (pytorch-xla-2483), a requirement not met (instructerc-16, an AssertionError), more than the machine has
    # (amazon-sagemaker-examples-2023), versions that disagree (deepspeed-1077), a configuration that cannot be
    # loaded (awsome-distributed-ai-363), a device that is not there (hrnet-171), a thing not found where it was
    # named (baichuan-sft-lora-1)
    ("RuntimeError: GPUs with compute capability below 7.0 are not supported.", True),
    ("RuntimeError: Distributed package doesn't have NCCL built in", True),
    ("RuntimeError: The number of devices must be either 1 or 8, got 2 instead", True),
    ("AssertionError: Micro batch size per gpu: 0 has to be greater than 0", True),
    ("RuntimeError: The number of node-local MPI processes 8cannot be larger than the device count 4", True),
    ("Exception: Installed CUDA version 11.0 does not match the version torch was compiled with 10.1, unable to "
     "compile cuda/cpp extensions without a matching cuda version.", True),
    ("OSErrorOSError: OSError: : Can't load the configuration of '/fsx/ubuntu/awsome-distributed-training/3.test_cases/"
     "22.SMHP-trainium-llama3/8B_config_llama3'.", True),
    ("RuntimeError: cuda runtime error (10) : invalid device ordinal at /pytorch/torch/csrc/cuda/Module.cpp:33", True),
    ("RuntimeError: Target modules [] not found in the base model.", True),
    # ... and the formats of programs' own checks, filled in: torch.distributed's backend check
    # (distributed_c10d.py "Expected backend ... got"), c10d's rendezvous ("requires ... but"), an ABI check
    ("RuntimeError: Tensors must be CUDA and dense", True),
    ("RuntimeError: torch_xla requires torch 2.1 but found torch 2.0.1", True),
    ("ImportWarningError: The ABI of this extension is not compatible with the installed torch", True),
    # ... in an error record of a runtime or a library (a level of error in its head, or NCCL's WARN): NCCL's
    # argument check (corpus nccl-963), Triton's model repository (triton-model-analyzer-786)
    ("9306dc444753:248281:248306 [1] misc/argcheck.cc:39 NCCL WARN Recv : invalid root 0 (root should be in the 0..0 "
     "range)", True),
    ("E1107 07:34:03.823179 7 model_repository_manager.cc:1265] failed to poll model 'pipe': model not found in any "
     "model repository.", True),
    # near misses in records: a failed check of the program's own invariant (lmdeploy-4453), a record at a level
    # that is no error, NCCL's WARN of a connection it retries
    ("[TM][FATAL] kernels/apply_token_bitmask_inplace_cuda.cu(212): Check failed: logits_shape.first ==bitmask_shape"
     ".first logits and bitmask must have the same batch size.", False),
    ("I1107 07:34:03.823179 7 server.cc:123] the model config must be one of the formats listed; using the default",
     False),
    ("node1:12:40 [0] misc/socket.cc:484 NCCL WARN Net : Connect to 10.0.0.2<45213> failed : Connection refused; the "
     "address must be reachable", False),
    # near misses of the grammar: the words of a fault that passes (a peer that reset, a download that could not
    # connect: transformers' offline message), a generic CUDA error, a refusal outside an exception (a warning
    # the program goes on from, a record), a numerical check
    ("RuntimeError: Connection reset by peer; expected 4 bytes but got 0", False),
    ("OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the cached files "
     "and it looks like bert-base-uncased is not the path to a directory containing a file named config.json.", False),
    ("RuntimeError: CUDA error: invalid argument", False),
    ("RuntimeError: NCCL communicator was aborted on rank 3. Original reason for failure was: [Rank 3] Watchdog "
     "caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 1800000 milliseconds", False),
    ("/usr/lib/python3/dist-packages/torch/cuda/__init__.py:83: UserWarning: flash attention is not supported on "
     "this device, falling back to the math kernel", False),
    ("INFO: fused kernels are not supported on this device, using the reference implementation", False),
    ("RuntimeError: loss should be finite, got nan", False),
    # near misses: the program's own crash; a bug to report; NCCL's other results; advice outside an exception
    ("RuntimeError: CUDA error: an illegal memory access was encountered", False),
    ("ResourceExhaustedError: {{function_node _inferencedistributedfunction153395}} Compilation failure: Ran out of "
     "memory in memory space vmem. It should not be possible to run out of vmem - please file a bug against XLA.",
     False),
    ("gpu5:35917:35994 [0] transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0, "
     "vendor err 129", False),
    ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:219, unhandled "
     "system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.14.3", False),
    ("ng30903:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'", False),
    ("[1668693503.473099] [ampere:1188443:0]          ib_log.c:246  UCX  ERROR mlx5_0: ibv_create_cq() failed: "
     "Cannot allocate memory. Please set max locked memory (ulimit -l) to 'unlimited' (current: 64 kbytes)", False),
    ("ERROR ||NEURON_CC_WRAPPER||: Got a cached failed neff at /var/tmp/neuron-compile-cache/model.neff. Will skip "
     "compilation, please set --retry_failed_compilation for recompilation.", False),
    ("INFO: make sure the dataset is downloaded before training; the run must be configured in train.yaml", False),
]


@pytest.mark.parametrize(("line", "refused"), REFUSALS, ids=[f"{i}" for i in range(len(REFUSALS))])
def test_setup_refusal_reads_the_message(line: str, refused: bool) -> None:
    assert (setup_refusal(line) is not None) is refused
    before = mistake_before_progress(_crash(line), progressed=False)
    assert (before is not None and before.label is Label.CONFIG_ERROR) is refused
    # after progress the same line is the run's crash, whatever it says
    assert mistake_before_progress(_crash(line), progressed=True) is None
    assert mistake_before_progress(_crash(line, step=12), progressed=False) is None


@pytest.mark.parametrize(("excerpt", "label"), [
    # before any progress: NCCL's failed CUDA call (Paddle's, c10's terminate), an exception that says what to change
    ("config_error/paddledetection-4139-nccl-unhandled-cuda-error-libnccl", Label.CONFIG_ERROR),
    ("config_error/yolov7-pytorch-63-terminate-nccl-error-1-core-dumped-zh", Label.CONFIG_ERROR),
    ("config_error/lightning-18728-cuda-initialized-before-trainer-fork", Label.CONFIG_ERROR),
    ("config_error/tensorflow-34568-collective-ops-configured-at-startup", Label.CONFIG_ERROR),
    # near misses: the same NCCL result beside a cause of its own (an IB completion error, CUDA out of memory)
    ("comm_error/nccl-tests-24-ib-completion-error-12", Label.COMM_ERROR),
    ("oom/vllm-18446-qwen3-235b-v1-nccl-cuda-out-of-memory", Label.OOM),
])
def test_a_refused_setup_before_progress_in_the_corpus(excerpt: str, label: Label) -> None:
    verdict = diagnose_paths([str(CORPUS / f"{excerpt}.log")]).verdict
    assert verdict.label is label


def test_an_unhandled_cuda_error_after_progress_stays_a_crash(tmp_path: Path) -> None:
    lines = ["{'loss': 2.3412, 'learning_rate': 5e-05, 'epoch': 0.01}",
             "OSError: (External)  Nccl error, unhandled cuda error  (at /paddle/paddle/fluid/platform/"
             "collective_helper.cc:100)"]
    verdict = diagnose_paths([_write(tmp_path, lines)]).verdict
    assert verdict.label is Label.OTHER_CRASH and verdict.action is Action.RESTART


#: ray-project/ray#39128 as pasted from a box-drawn (rich) traceback: the message wrapped at the box's width
BOXED = [
    "           torch_xla._XLAC._xla_step_marker(                                                     │",
    "RuntimeError: INVALID_ARGUMENT: Cannot assign a device for operation XRTCompile_16: {{node XRTCompile_16}} "
    "was explicitly│",
    " assigned to /job:localservice/replica:0/task:0/device:TPU:1 but available devices are [ /job:localservice/"
    "replica:0/task│",
    " /job:localservice/replica:0/task:0/device:XLA_CPU:0 ]. Make sure the device specification refers to a valid "
    "device.     │",
    "         [[XRTCompile_16]]",
]


@pytest.mark.parametrize(("lines", "refused"), [
    (BOXED, True),
    # near misses: the words after the message's end (a blank line, a record of its own, a new traceback)
    ([*BOXED[:3], "", BOXED[3]], False),
    ([*BOXED[:3], "2023-09-01 10:00:00,000 INFO worker.py:12 -- Make sure the device specification is valid"],
     False),
    ([*BOXED[:3], "Traceback (most recent call last):", BOXED[3]], False),
    ([*BOXED[:3], "ValueError: make sure the device is valid"], False),
], ids=["boxed", "after-blank", "after-a-record", "after-a-traceback", "after-an-exception"])
def test_the_message_goes_on_over_its_lines(lines: list[str], refused: bool) -> None:
    message = exception_message(lines, 1)
    assert message.startswith(lines[1])
    assert (setup_refusal(message) is not None) is refused
    found = mistake_before_progress(_crash(lines[1]), False, None, message)
    assert (found is not None) is refused
    assert mistake_before_progress(_crash(lines[1]), False) is None  # the first line alone says nothing of it


def test_a_boxed_message_in_the_corpus() -> None:
    path = CORPUS / "config_error" / "ray-39128-trn1-two-workers-one-neuron-core-xrtcompile.log"
    verdict = diagnose_paths([str(path)]).verdict
    assert verdict.label is Label.CONFIG_ERROR and verdict.action is Action.STOP

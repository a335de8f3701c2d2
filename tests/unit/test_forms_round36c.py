# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part C of the misses of round issue23-heldout-36 (launchers and job wrappers), each as a rule of its
family, with real lines and the near misses the rule must leave alone: OpenSSH's unresolved host name, GNU tar's fatal
stop, glibc's assertion report from a set-up function, and Lightning's process group that a log ends on before its
ranks joined. Each line is from the corpus (named by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind, cause_of
from neuron_watch.events import Action, Label, Verdict
from tests.unit.form_table import table_tests

CRASH = FormKind.CRASH
ERROR = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # OpenSSH's client that could not resolve a host's name, as the launchers that start ranks over ssh print it
    ("ssh: Could not resolve hostname mpi-feea39f9-worker-1: Name or service not known", ERROR, Label.CONFIG_ERROR,
     "corpus (mpi-operator-327-horovodrun-in-launcher-ssh-could-not-resolve-workers)"),
    ("ssh: Could not resolve hostname localhost:3: Name or service not known", ERROR, Label.CONFIG_ERROR,
     "corpus (torchpack-24-dist-run-ssh-hostname-localhost-slots): a host:slots pair taken as a name"),
    ("ssh: Could not resolve hostname horovod-volcano-sothisai-w1-0: Temporary failure in name resolution", ERROR,
     Label.CONFIG_ERROR, "corpus (volcano-2745-horovod-ssh-cannot-resolve-worker-orte)"),
    # GNU tar's fatal stop, behind a wrapper's table layout, and from the child that runs the decompressor
    ("  | 2023-05-03T13:58:24.323-07:00 | tar: Error is not recoverable: exiting now", CRASH, None,
     "corpus (metaflow-1389-batch-entrypoint-setup-failed-cloudwatch-table): CloudWatch's table rows"),
    ("tar (child): Error is not recoverable: exiting now", CRASH, None,
     "a gcc 10.1 build's notes in a public repository (contrib/download_prerequisites without lbzip2)"),
    ("tar: Error is not recoverable: exiting now", CRASH, None,
     "a public repository's GitLab backup-restore notes (the backup archive not readable: Permission denied)"),
    # glibc's assertion report from a function that sets the program up
    ("train_gpt2cu: llmc/dataloader.h:186: void dataloader_init(DataLoader*, const char*, size_t, size_t, int, int, int): Assertion `shard_ntok >= (int64_t) (num_processes * B * T + 1)' failed.",
     CRASH, Label.CONFIG_ERROR, "corpus (llmc-727-mpirun-8gpu-dataloader-shard-too-small-assert-abort): C++'s pretty function name"),
    ("neuron-rtd: /opt/workspace/KaenaRuntime/tdrv/tdrv.c:622: tpb_eng_init: Assertion `0' failed.", CRASH,
     Label.CONFIG_ERROR, "corpus (aws-neuron-sdk-795-inf1-tf-serving-image-on-inf2-nrtd-abort): C's bare name"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # ssh's healthy records, and another tool's failed resolution (not ssh's launch of a rank)
    "Warning: Permanently added 'worker-1,10.0.0.2' (ECDSA) to the list of known hosts.",  # OpenSSH's first connection
    "debug1: Connecting to mpi-feea39f9-worker-1 [10.244.1.5] port 22.",  # ssh -v
    # tar's warning that goes on, and the command that runs it
    "tar: Removing leading `/' from member names",  # GNU tar creating an archive of absolute paths
    "tar -xzf /opt/ml/code/sourcedir.tar.gz -C /opt/ml/code",
    # assertions that are not a set-up function's: the program's own main, a query, a CUDA kernel's per-thread report
    "python3: /src/foo.cc:42: int main(): Assertion `n > 0' failed.",  # the signature table's own example
    "python3: /opt/workspace/KaenaRuntime/tdrv/tdrv_arch_type.c:96: tdrv_get_number_devices_on_instance: Assertion `device_count != 0' failed.",  # corpus (aws-neuron-sdk-1071-inf1-tdrv-architecture-not-found-assertion)
    "../aten/src/ATen/native/cuda/NLLLoss2d.cu:103: nll_loss2d_forward_kernel: block: [5,0,0], thread: [996,0,0] Assertion `t >= 0 && t < n_classes` failed.",  # the signature table's CUDA example
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


#: Lightning 1.x's records of four ranks of eight joining, and nothing after them (corpus:
#: lightning-8707-sbatch-without-srun-second-node-ranks-never-join)
DDP_HALF_JOINED = [
    "GPU available: True, used: True",
    "TPU available: False, using: 0 TPU cores",
    "IPU available: False, using: 0 IPUs",
    "initializing ddp: GLOBAL_RANK: 1, MEMBER: 2/8",
    "initializing ddp: GLOBAL_RANK: 2, MEMBER: 3/8",
    "initializing ddp: GLOBAL_RANK: 0, MEMBER: 1/8",
    "initializing ddp: GLOBAL_RANK: 3, MEMBER: 4/8",
]
#: Fabric 2.x's records under absl's, a user's print between them (corpus: lightning-17228-fabric-slurm-reordered-
#: nodelist-init-hangs)
FABRIC_PART_JOINED = [
    "I0411 01:28:10.345465 140656298329920 github_fabric.py:15] 3: compute-permanent-node-[583,752,801,869]",
    "INFO: Initializing distributed: GLOBAL_RANK: 6, MEMBER: 7/32",
    "I0411 01:28:10.345892 140656298329920 distributed.py:244] Initializing distributed: GLOBAL_RANK: 6, MEMBER: 7/32",
    "INFO: Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/32",
    "I0411 01:28:10.348047 140492815607616 distributed.py:244] Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/32",
]


def _verdict(tmp_path: Path, lines: list[str]) -> Verdict:
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    return diagnose_paths([str(log)], now=0.0).verdict


@pytest.mark.parametrize("lines", [DDP_HALF_JOINED, FABRIC_PART_JOINED], ids=["lightning-1.x", "fabric-2.x"])
def test_group_its_ranks_never_joined_is_configuration(tmp_path: Path, lines: list[str]) -> None:
    """A log that ends on the records of several ranks joining, fewer than the world size, with nothing after them:
    the launch started fewer processes than its world (configuration, stop), not a healthy start."""
    verdict = _verdict(tmp_path, lines)
    assert verdict.label is Label.CONFIG_ERROR and verdict.action is Action.STOP
    assert "GLOBAL_RANK" in verdict.evidence[0].text


@pytest.mark.parametrize("tail", [
    # rank 0's record that the group is whole (Lightning 1.x: corpus lightning-9641-stuck-after-all-ddp-processes-
    # registered prints it for two of two)
    ["distributed_backend=nccl", "All DDP processes registered. Starting ddp with 8 processes"],
    # the run goes on after the records: Lightning's model summary and an epoch's progress
    ["", "  | Name  | Type   | Params", "0 | layer | Linear | 66    ",
     "Epoch 0:  50%|█████     | 32/64 [00:01<00:01, 31.52it/s, loss=0.98, v_num=0]"],
], ids=["group-whole", "progress-after"])
def test_group_whole_or_going_on_is_not_configuration(tmp_path: Path, tail: list[str]) -> None:
    """The same records followed by the group's completion, or by the run's progress, are no group left waiting."""
    assert _verdict(tmp_path, DDP_HALF_JOINED + tail).label is not Label.CONFIG_ERROR


def test_one_ranks_own_log_says_nothing_of_the_others(tmp_path: Path) -> None:
    """A single member's record (rank 0's own log, cut after it) is not read: it says nothing of the other ranks."""
    lines = ["GPU available: True, used: True", "initializing ddp: GLOBAL_RANK: 0, MEMBER: 1/8"]
    assert _verdict(tmp_path, lines).label is Label.HEALTHY


@pytest.mark.parametrize(("line", "label", "source"), [
    ("RuntimeError: Socket Timeout`", Label.COMM_ERROR,
     "corpus (accelerate-2229-exit-barrier-socket-timeout-nccl-no-route-to-host): the elastic agent's exit barrier"),
    ("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5.`",
     Label.CONFIG_ERROR, "corpus (openchat-120-vllm-bfloat16-t4-backquoted)"),
])
def test_cause_read_through_the_paste_closing_a_code_span(line: str, label: Label, source: str) -> None:
    """A line that closes a markdown code span the paste opened above it ("`Traceback ..." ... "...`") states the cause
    its message states: the backquote glued to its end is the paste's."""
    stated = cause_of(line)
    assert stated is not None and stated[0] is label, source
    assert stated == cause_of(line[:-1]), source


def test_backquote_not_closing_a_span_is_left_alone() -> None:
    """A backquote apart from the message (after a space) closes no span glued to it: the line is read as it is."""
    assert cause_of("RuntimeError: Socket Timeout `") is None

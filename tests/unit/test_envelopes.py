# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Envelopes around pasted log lines (neuron_watch.diagnosis.envelopes): each form read from real
lines of it, and the near misses that must stay what they are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import Source, diagnose_paths, read_lines
from neuron_watch.diagnosis.envelopes import DETECT_LINES, UNDECIDED, EnvelopeReader, detect
from neuron_watch.diagnosis.logtext import LineSplitter, logical_lines, split_rank_prefix
from neuron_watch.events import Label
from neuron_watch.node.tail import HOLD_UNDECIDED, RankStreams

TRACEBACK = [
    "[rank1]: Traceback (most recent call last):",
    '[rank1]:   File "/workspace/train.py", line 88, in <module>',
    "[rank1]:     loss.backward()",
    "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.15 GiB of which 1.02 GiB is free.",
]


def _docker(text: str, t: str = "2024-05-01T12:00:00.123456789Z", stream: str = "stderr") -> str:
    return json.dumps({"log": text, "stream": stream, "time": t}, separators=(",", ":"))


def _read(lines: list[str], final: bool = True) -> list[tuple[int, str, str | None, str | None]]:
    return EnvelopeReader().read(list(enumerate(lines)), final)


#: (envelope, the wrapped lines as their writer writes them, the inner texts, the first stamp, the first who)
#: a relayed program's healthy lines, as many as the envelope's decision reads (DETECT_LINES): no logging call's
#: form among them, so the line after them is what shows the relay
PLAIN = [f"step {n} loss 2.{40 - n}" for n in range(1, 8)]


def _relayed(last: list[str]) -> list[str]:
    """PLAIN and ``last`` relayed through the logging cookbook's format, as a wrapper logs its child's stdout."""
    return [f"2025-03-14 09:00:00,{i:03d} - collector - INFO - {t}" for i, t in enumerate([*PLAIN, *last])]


CASES = [
    ("docker json-file", [_docker(t + "\n") for t in TRACEBACK], TRACEBACK, "2024-05-01T12:00:00.123456789Z", None),
    # the kubelet's own test of parseCRILog: "2016-10-06T00:17:09.669794202Z stdout F log content 1"
    ("cri", ["2016-10-06T00:17:09.669794202Z stdout F log content 1", "2016-10-06T00:17:09.669794203Z stderr F log content 2"],
     ["log content 1", "log content 2"], "2016-10-06T00:17:09.669794202Z", None),
    ("kubectl --prefix", [f"[pod/llama-train-worker-0/pytorch] {t}" for t in TRACEBACK], TRACEBACK, None,
     "pod/llama-train-worker-0/pytorch"),
    ("kubectl --timestamps", [f"2024-05-01T12:00:0{i}.12345678{i}Z {t}" for i, t in enumerate(TRACEBACK)], TRACEBACK,
     "2024-05-01T12:00:00.123456780Z", None),
    # six fraction digits and a Z: Rust tracing-subscriber's default time (TGI's launcher and router), Cloud
    # Logging's export, a collector's isoformat() + "Z"; before a line whose own form starts it (a gRPC status)
    ("iso microseconds Z", ["2025-03-14T09:00:00.000000Z DEADLINE_EXCEEDED: Deadline Exceeded",
                            "2025-03-14T09:00:00.001000Z RPC: /tensorflow.CoordinationService/RegisterTask"],
     ["DEADLINE_EXCEEDED: Deadline Exceeded", "RPC: /tensorflow.CoordinationService/RegisterTask"],
     "2025-03-14T09:00:00.000000Z", None),
    ("github actions", ["2024-01-01T00:00:00.0000000Z ##[group]Run python train.py", "2024-01-01T00:00:01.0000000Z error: Cannot find name 'fetch'"],
     ["##[group]Run python train.py", "error: Cannot find name 'fetch'"], "2024-01-01T00:00:00.0000000Z", None),
    # SageMaker local mode is docker compose (aws/sagemaker-training-toolkit#37)
    ("compose v1", ["algo-1-8gd7b_1  | 2019-10-22 09:06:21,345 sagemaker-containers INFO     Imported framework sagemaker_pytorch_container.training",
                    "algo-1-8gd7b_1  | 2019-10-22 09:06:21,349 sagemaker-containers INFO     No GPUs detected (normal if no gpus installed)"],
     ["2019-10-22 09:06:21,345 sagemaker-containers INFO     Imported framework sagemaker_pytorch_container.training",
      "2019-10-22 09:06:21,349 sagemaker-containers INFO     No GPUs detected (normal if no gpus installed)"], None, "algo-1-8gd7b_1"),
    ("compose v2", [f"trainer-1  | {t}" for t in TRACEBACK], TRACEBACK, None, "trainer-1"),
    ("journald", [f"Nov 27 12:00:0{i} ip-10-0-1-12 python[4121]: {t}" for i, t in enumerate(TRACEBACK)], TRACEBACK, None,
     "ip-10-0-1-12 python[4121]"),
    ("ts", [f"Nov 27 12:00:0{i} {t}" for i, t in enumerate(TRACEBACK)], TRACEBACK, None, None),
    ("cloudwatch export", [f"2024-05-01T12:00:00.12{i}Z\t{t}" for i, t in enumerate(TRACEBACK)], TRACEBACK, "2024-05-01T12:00:00.120Z", None),
    ("fluent-bit", [json.dumps({"date": 1714564800.5, "log": t + "\n", "stream": "stderr", "time": "2024-05-01T12:00:00.5Z",
                                "kubernetes": {"pod_name": "train-0", "container_name": "pytorch"}}) for t in TRACEBACK],
     TRACEBACK, "2024-05-01T12:00:00.5Z", "train-0/pytorch"),
    ("zap", ['{"level":"info","ts":1714564800.123,"caller":"launcher/main.go:88","msg":"starting workers","count":8}',
             '{"level":"error","ts":1714564801.5,"caller":"launcher/main.go:120","msg":"worker exited","error":"exit status 137"}'],
     ["starting workers", "ERROR worker exited", "exit status 137"], "2024-05-01T12:00:00.123000Z", None),
    # stern's default output on a terminal: "{{color .PodColor .PodName}} {{color .ContainerColor .ContainerName}} {{.Message}}"
    ("stern", [f"\x1b[96mllama-train-worker-0\x1b[0m \x1b[36mpytorch\x1b[0m {t}" for t in TRACEBACK], TRACEBACK, None,
     "llama-train-worker-0/pytorch"),
    # ... written to a file: a pod name Kubernetes generated (a Deployment's ReplicaSet's)
    ("stern plain", [f"trainer-6d9f7c8b5-x2x9z pytorch {t}" for t in TRACEBACK], TRACEBACK, None, "trainer-6d9f7c8b5-x2x9z/pytorch"),
    # aws logs tail --format detailed (the default): the time as isoformat(timespec='microseconds'), the stream
    ("aws logs tail", [f"2024-01-01T00:00:0{i}.123000+00:00 llama-train/algo-1-1714564800 {t}" for i, t in enumerate(TRACEBACK)],
     TRACEBACK, "2024-01-01T00:00:00.123000+00:00", "llama-train/algo-1-1714564800"),
    # ... on a terminal (colorama: the time green, the stream cyan)
    ("aws logs tail coloured", [f"\x1b[32m2024-01-01T00:00:0{i}.123000+00:00\x1b[0m \x1b[36malgo-1-1714564800\x1b[0m {t}"
                                for i, t in enumerate(TRACEBACK)], TRACEBACK, "2024-01-01T00:00:00.123000+00:00", "algo-1-1714564800"),
    ("kubectl --prefix --timestamps", [f"[pod/train-worker-0/pytorch] 2024-05-01T12:00:0{i}.12345678{i}Z {t}" for i, t in enumerate(TRACEBACK)],
     TRACEBACK, "2024-05-01T12:00:00.123456780Z", "pod/train-worker-0/pytorch"),
    # docker compose logs on a terminal: the padded name and " |" in the service's colour
    ("compose coloured", [f"\x1b[36mtrainer-1  |\x1b[0m {t}" for t in TRACEBACK], TRACEBACK, None, "trainer-1"),
    # a screen hardcopy of an 80-column terminal: rows padded to the width, the long line wrapped
    ("screen 80 columns", [t[i:i + 80].ljust(80) for t in TRACEBACK for i in range(0, len(t), 80)], TRACEBACK, None, None),
    # Airflow's task log relaying a BashOperator's child line by line (SubprocessHook: "{subprocess.py:93} INFO - ")
    ("airflow relay", [f"[2024-05-01, 12:00:0{i} UTC] {{subprocess.py:93}} INFO - {t}" for i, t in enumerate(TRACEBACK)],
     TRACEBACK, "2024-05-01, 12:00:00 UTC", "subprocess.py"),
    ("airflow 1.x relay", [f"[2021-03-02 10:11:1{i},123] {{bash_operator.py:157}} INFO - {t}" for i, t in enumerate(TRACEBACK)],
     TRACEBACK, "2021-03-02 10:11:10,123", "bash_operator.py"),
    # a wrapper logging its child's stdout with the logging cookbook's format: a frame's indent is no logging call's
    ("logger relay", [f"2024-05-01 12:00:0{i},000 - runner - INFO - {t}" for i, t in
                      enumerate(["step 1 loss 2.31", "", *(t.removeprefix("[rank1]: ") for t in TRACEBACK)])],
     ["step 1 loss 2.31", "", *(t.removeprefix("[rank1]: ") for t in TRACEBACK)], "2024-05-01 12:00:00,000", "runner"),
    ("one relayed exception", ["2024-05-01 12:00:00,000 - runner - INFO - ValueError: The port number of the rendezvous endpoint 'None:None' must be an integer"],
     ["ValueError: The port number of the rendezvous endpoint 'None:None' must be an integer"], "2024-05-01 12:00:00,000", "runner"),
    # ... another program's line heads, which no logging call writes: srun's error (dragon-61), gdb's frames
    # (pytorch-95944), Ray's worker and raylet prefixes with their colour escape lost in a paste (openrlhf-1139)
    ("logger relay of srun", _relayed(["srun: error: Unable to create step for job 17627941: Requested node configuration is not available"]),
     [*PLAIN, "srun: error: Unable to create step for job 17627941: Requested node configuration is not available"],
     "2025-03-14 09:00:00,000", "collector"),
    ("logger relay of gdb", _relayed(["#14 0x000014cdd8a6cf36 in cudaMemcpyAsync () from /usr/local/cuda/lib64/libcudart.so.11.0"]),
     [*PLAIN, "#14 0x000014cdd8a6cf36 in cudaMemcpyAsync () from /usr/local/cuda/lib64/libcudart.so.11.0"],
     "2025-03-14 09:00:00,000", "collector"),
    ("logger relay of ray", _relayed(["[33m(raylet) A worker died or was killed while executing a task by an unexpected system error."]),
     [*PLAIN, "[33m(raylet) A worker died or was killed while executing a task by an unexpected system error."],
     "2025-03-14 09:00:00,000", "collector"),
    ("logger relay of a ray worker", _relayed(["(Worker pid=6625) ERROR 04-15 07:27:42 [multiproc_executor.py:871] RuntimeError: Unable"]),
     [*PLAIN, "(Worker pid=6625) ERROR 04-15 07:27:42 [multiproc_executor.py:871] RuntimeError: Unable"],
     "2025-03-14 09:00:00,000", "collector"),
    ("python-json-logger", ['{"asctime": "2024-05-01 12:00:00,123", "levelname": "INFO", "name": "train", "message": "step 10 loss 2.31"}',
                            '{"asctime": "2024-05-01 12:00:01,456", "levelname": "ERROR", "name": "train", "message": "Training failed", "exc_info": "Traceback (most recent call last):\\n  File \\"train.py\\", line 3, in <module>\\nRuntimeError: NCCL error"}'],
     ["step 10 loss 2.31", "ERROR Training failed", "Traceback (most recent call last):", '  File "train.py", line 3, in <module>', "RuntimeError: NCCL error"],
     "2024-05-01 12:00:00,123", None),
]


@pytest.mark.parametrize(("name", "wrapped", "inner", "stamp", "who"), CASES, ids=[c[0] for c in CASES])
def test_each_envelope_is_opened_from_its_real_lines(name: str, wrapped: list[str], inner: list[str],
                                                       stamp: str | None, who: str | None) -> None:
    opened = _read(wrapped)
    assert [text for _, text, _, _ in opened] == inner
    assert opened[0][2] == stamp
    assert opened[0][3] == who


def test_json_file_pieces_of_a_long_line_are_joined() -> None:
    # Docker's copier cuts a line longer than its 16 KiB buffer: every piece but the last has no "\n"
    long = "[rank0]: RuntimeError: " + "x" * 40
    pieces = [_docker(long[:20]), _docker(long[20:50]), _docker(long[50:] + "\n"), _docker("next\n")]
    opened = _read(pieces)
    assert [(k, text) for k, text, _, _ in opened] == [(0, long), (3, "next")]


def test_cri_partial_records_are_joined_across_reads() -> None:
    reader = EnvelopeReader()
    first = reader.read([(1, "2024-05-01T12:00:00.000000001Z stdout F starting"),
                         (2, "2024-05-01T12:00:00.000000002Z stderr P [rank3]: torch.distributed.DistBackendError: NCCL error in: ")])
    assert first == []  # two lines do not decide the envelope: held (see the reads a few at a time below)
    rest = reader.read([(3, "2024-05-01T12:00:00.000000003Z stderr F ProcessGroupNCCL.cpp:1970, unhandled system error")], final=True)
    assert rest == [(1, "starting", "2024-05-01T12:00:00.000000001Z", None), (2, "[rank3]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error",
                     "2024-05-01T12:00:00.000000002Z", None)]


def test_a_piece_left_open_at_the_end_is_kept() -> None:
    assert [t for _, t, _, _ in _read(["2024-05-01T12:00:00.000000001Z stdout F a", "2024-05-01T12:00:00.000000002Z stdout P cut her"])] == ["a", "cut her"]


def test_a_header_above_the_records_passes_unchanged() -> None:
    lines = ["Attaching to trainer-1", *(f"trainer-1  | step {i} loss 2.{i}" for i in range(8))]
    opened = _read(lines)
    assert opened[0][1] == "Attaching to trainer-1"
    assert [t for _, t, _, _ in opened[1:]] == [f"step {i} loss 2.{i}" for i in range(8)]


#: logs that carry no envelope: every line must come out exactly as it went in
NEAR_MISSES = [
    # a program's own metrics, as Hugging Face's Trainer prints them, and as JSON (with NaN, which
    # Python's json reads)
    ("HF metrics dicts", ["{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.5}",
                          "{'loss': 2.3012, 'grad_norm': 1.07, 'learning_rate': 1e-05, 'epoch': 0.51}"]),
    ("JSON metrics", ['{"loss": NaN, "step": 10, "lr": 0.0001}', '{"loss": 2.1, "step": 11, "lr": 0.0001}']),
    # JSON with a message-like key but nothing a logger adds beside it
    ("JSON that is not a record", ['{"msg": "hello", "n": 1}', '{"msg": "world", "n": 2}']),
    ("JSON event with a time", ['{"event": "epoch_end", "time": 12.5, "loss": 2.1}', '{"event": "epoch_end", "time": 13.5, "loss": 2.0}']),
    # a logger's own time at the start of a healthy line stays (space-separated, comma, milliseconds)
    ("python logging", ["2024-04-12 07:13:06,123 - INFO - training_utils - Loading batch 1203 from shard 7",
                        "2024-04-12 07:13:07,123 - INFO - training_utils - step 1203 loss 2.0417"]),
    ("ISO milliseconds", ["2024-05-01T12:00:00.123Z INFO step 10 loss 2.31", "2024-05-01T12:00:01.123Z INFO step 11 loss 2.30"]),
    ("a table", ["epoch | loss | acc", "1 | 2.31 | 0.51", "2 | 2.10 | 0.55"]),
    # a program's own records in the cookbook's format: its messages are logging calls' (no frame, no blank,
    # no exception): the level stays on them
    ("cookbook logger", [f"2024-05-01 12:00:0{i},000 - train - INFO - step {i} loss 2.3{i}" for i in range(8)]
     + ["2024-05-01 12:00:09,000 - train - INFO -   indented after the decision"]),
    ("one record", ["2024-05-01 12:00:00,000 - train - INFO - ValueError counts are reset each epoch"]),
    # a program's own records that mention an error or a pid in prose, not at the message's head
    ("cookbook logger mentions", [f"2024-05-01 12:00:0{i},000 - train - INFO - {t}" for i, t in enumerate(
        ["eval error: 0.12 at step 10", "worker (pid=6625) joined", "step 11 loss 2.30 #1 of 8", "step 12 loss 2.29",
         "step 13 loss 2.28", "step 14 loss 2.27", "step 15 loss 2.26", "step 16 loss 2.25", "step 17 loss 2.24"])]),

    # ... several loggers: a program's, never one relay
    ("several loggers", ["2024-05-01 12:00:00,000 - train - INFO - Traceback (most recent call last):",
                         "2024-05-01 12:00:01,000 - data - INFO - step 1 loss 2.31"]),
    # Airflow's own records between the relayed ones name another file: a relay is one logger
    ("airflow own records", ["[2024-05-01, 12:00:00 UTC] {taskinstance.py:1234} INFO - Starting attempt 1 of 1",
                             "[2024-05-01, 12:00:01 UTC] {subprocess.py:93} INFO - Traceback (most recent call last):"]),
    ("srun --label", ["0: step 10 loss 2.31", "1: step 10 loss 2.33"]),
    # a logger's own coloured time and level (loguru, rich): not stern's two coloured names
    ("loguru colours", ["\x1b[32m2024-05-01 12:00:00.123\x1b[0m | \x1b[1mINFO    \x1b[0m | train:main:42 - step 10 loss 2.31",
                        "\x1b[32m2024-05-01 12:00:01.123\x1b[0m | \x1b[1mINFO    \x1b[0m | train:main:42 - step 11 loss 2.30"]),
    ("coloured words", ["\x1b[1mepoch\x1b[0m 1 step 10 loss 2.31", "\x1b[1mepoch\x1b[0m 1 step 11 loss 2.30"]),
    # two plain words that are not a generated pod name and a container
    ("two words", ["loading checkpoint shards: 100%", "loading checkpoint shards: 100%", "training started now"]),
    # a logger's isoformat time with its offset, then a level or a rank prefix: no stream name
    ("isoformat logger", ["2024-05-01T12:00:00.123456+00:00 INFO step 10 loss 2.31", "2024-05-01T12:00:01.123456+00:00 [rank0]: step 11"]),
    # lines that share a length (a fixed-width metrics table) without a row ending in padding
    ("fixed width", [f"| step {i:04d} | loss {2.0 + i / 100:.4f} | lr 1.00e-04 | grad_norm 0.8813 | tput 123.4 |" for i in range(8)]),
    # sacct's default columns: every row ends in the one space after its last column, which is no padding (a
    # research-computing center's example of a job that ran out of memory)
    ("sacct", ["       JobID    JobName  Partition    Account  AllocCPUS      State ExitCode ",
               "------------ ---------- ---------- ---------- ---------- ---------- -------- ",
               "3764934        mem_test       test   rc_admin          1 OUT_OF_ME+    0:125 ",
               "3764934.bat+      batch              rc_admin          1 OUT_OF_ME+    0:125 ",
               "3764934.ext+     extern              rc_admin          1  COMPLETED      0:0 "]),
]


@pytest.mark.parametrize(("name", "lines"), NEAR_MISSES, ids=[c[0] for c in NEAR_MISSES])
def test_a_log_without_an_envelope_is_left_as_it_is(name: str, lines: list[str]) -> None:
    assert detect(lines, complete=True) is None
    assert [t for _, t, _, _ in _read(lines)] == lines


def test_one_ambiguous_line_decides_nothing() -> None:
    # a single line that starts with a machine stamp may be the program's own: not enough to strip it
    assert detect(["2024-01-01T00:00:01.0000000Z hello"], complete=True) is None
    # while more lines may come nothing is decided that they could change (UNDECIDED): not a weak form,
    # nor a strong one (seven plain lines after it would make the log plain)
    assert detect(["2024-01-01T00:00:01.0000000Z hello"], complete=False) is UNDECIDED
    assert detect([_docker("hello\n")], complete=False) is UNDECIDED
    assert detect([_docker("hello\n")], complete=True) is not None


def test_plain_first_lines_decide_a_log_plain_before_eight() -> None:
    # three plain lines: no envelope can be on 6 of the first 8 lines any more
    plain = ["import torch", "step 1 loss 2.3", "step 2 loss 2.2"]
    assert detect(plain[:2], complete=False) is UNDECIDED
    assert detect(plain, complete=False) is None
    # a header and two records: the records may still be the log's envelope
    assert detect(["Attaching to trainer-1", "trainer-1  | a", "trainer-1  | b"], complete=False) is UNDECIDED


#: (what the first lines are, the lines): heads whose decision the first lines alone cannot make
HEADS = [
    ("records only", [_docker(t + "\n") for t in TRACEBACK]),
    ("records after a warning", ["/opt/venv/lib/python3.10/site-packages/torch/distributed/launch.py:208: FutureWarning: The module torch.distributed.launch is deprecated",
                                 *(_docker(t + "\n") for t in TRACEBACK)]),
    ("records then plain", [_docker("starting\n"), *(f"step {i} loss 2.{i}" for i in range(8))]),
    ("weak prefix", [f"2024-05-01T12:00:0{i}.12345678{i}Z {t}" for i, t in enumerate(TRACEBACK)]),
    ("compose with a header", ["Attaching to trainer-1", *(f"trainer-1  | step {i} loss 2.{i}" for i in range(9))]),
    ("cri pieces", ["2024-05-01T12:00:00.000000001Z stdout F starting",
                    "2024-05-01T12:00:00.000000002Z stderr P [rank3]: torch.distributed.DistBackendError: NCCL error in: ",
                    "2024-05-01T12:00:00.000000003Z stderr F ProcessGroupNCCL.cpp:1970, unhandled system error",
                    *(f"2024-05-01T12:00:01.00000000{i}Z stdout F step {i}" for i in range(8))]),
    ("plain", [f"step {i} loss 2.{i}" for i in range(12)]),
    ("blank lines between", ["", _docker("a\n"), "", "", _docker("b\n"), "", _docker("c\n")]),
]


@pytest.mark.parametrize(("name", "lines"), HEADS, ids=[h[0] for h in HEADS])
def test_lines_read_a_few_at_a_time_are_read_as_the_whole_log(name: str, lines: list[str]) -> None:
    whole = _read(lines)
    for size in (1, 2, 3, 5):
        reader = EnvelopeReader[int]()
        got: list[tuple[int, str, str | None, str | None]] = []
        numbered = list(enumerate(lines))
        for at in range(0, len(numbered), size):
            got += reader.read(numbered[at:at + size])
        got += reader.read([], final=True)
        assert got == whole, size


@pytest.mark.parametrize(("name", "lines"), HEADS, ids=[h[0] for h in HEADS])
def test_a_stream_that_ends_after_its_first_lines_is_read_as_its_short_log(name: str, lines: list[str]) -> None:
    # a rank that prints three lines and dies: what it printed is released as diagnose reads those three lines
    for n in (1, 3, 4):
        reader = EnvelopeReader[int]()
        got = reader.read(list(enumerate(lines[:n])))
        got += reader.release()
        assert reader.holding == 0
        assert got == _read(lines[:n]), n


def test_a_line_no_envelope_opens_is_not_held() -> None:
    reader = EnvelopeReader[int]()
    assert reader.read([(0, "Attaching to trainer-1")]) == [(0, "Attaching to trainer-1", None, None)]
    assert reader.read([(1, "trainer-1  | step 1")]) == []  # may be the log's envelope: held
    assert reader.holding == 1
    assert reader.read([(2, "step 2 loss 2.2")]) == []  # behind a held line: held too, in order
    assert reader.holding == 2
    # released, the decision stays open: the lines after are read as the first eight decide
    assert [t for _, t, _, _ in reader.release()] == ["trainer-1  | step 1", "step 2 loss 2.2"]
    assert reader.envelope is None and not reader.plain
    rest = reader.read([(i, f"trainer-1  | step {i}") for i in range(3, 9)])
    assert [t for _, t, _, _ in rest] == [f"step {i}" for i in range(3, 9)]


def test_a_plain_log_is_decided_once_and_then_passes_for_nothing() -> None:
    reader = EnvelopeReader()
    lines = [f"step {i} loss 2.{i}" for i in range(DETECT_LINES)]
    assert [t for _, t, _, _ in reader.read(list(enumerate(lines)))] == lines
    assert reader.plain
    assert reader.read([(9, '{"log":"not read now\\n","stream":"stdout","time":"2024-05-01T12:00:00Z"}')])[0][1].startswith("{")


def test_sagemaker_mpi_tag_names_the_rank() -> None:
    # SageMaker's mpirun: "[1,mpirank:3,algo-1]<stderr>:INFO:root:Reducer buckets have been rebuilt in this iteration."
    assert split_rank_prefix("[1,mpirank:3,algo-1]<stderr>:INFO:root:Reducer buckets have been rebuilt in this iteration.") == (
        3, "INFO:root:Reducer buckets have been rebuilt in this iteration.")
    # two ranks' lines glued by mpirun's output buffering are split, as Open MPI's plain tags are
    assert logical_lines("[1,mpirank:0,algo-1]<stdout>:Train Epoch: 10 loss 0.12[1,mpirank:1,algo-2]<stdout>:Train Epoch: 10 loss 0.24") == [
        "[1,mpirank:0,algo-1]<stdout>:Train Epoch: 10 loss 0.12", "[1,mpirank:1,algo-2]<stdout>:Train Epoch: 10 loss 0.24"]


@pytest.mark.parametrize("envelope", ["docker", "cri", "kubectl", "airflow"])
def test_diagnose_reads_a_wrapped_failure_as_the_bare_one(tmp_path: Path, envelope: str) -> None:
    lines = ["2024-05-01 12:00:00,001 - INFO - step 1 loss 2.31", "2024-05-01 12:00:01,001 - INFO - step 2 loss 2.30", *TRACEBACK]
    wrap = {
        "docker": lambda i, t: _docker(t + "\n", f"2024-05-01T12:00:0{i}.000000000Z"),
        "cri": lambda i, t: f"2024-05-01T12:00:0{i}.000000000Z stderr F {t}",
        "kubectl": lambda i, t: f"[pod/train-worker-0/pytorch] {t}",
        "airflow": lambda i, t: f"[2024-05-01, 12:00:0{i} UTC] {{subprocess.py:93}} INFO - {t}",
    }[envelope]
    bare, wrapped = tmp_path / "bare.log", tmp_path / "wrapped.log"
    bare.write_text("\n".join(lines) + "\n")
    wrapped.write_text("\n".join(wrap(i, t) for i, t in enumerate(lines)) + "\n")
    expected = diagnose_paths([str(bare)]).verdict
    assert expected.label is Label.OOM
    got = diagnose_paths([str(wrapped)]).verdict
    assert (got.label, got.action) == (expected.label, expected.action)


def test_the_live_tail_reads_a_rank_s_json_records_as_diagnose_does(tmp_path: Path) -> None:
    # a rank that logs through python-json-logger: the judge gets the messages, the rank log keeps the records
    root = tmp_path / "torchrun"
    d = root / "job_abc" / "attempt_0" / "0"
    d.mkdir(parents=True)
    records = [
        '{"asctime": "2024-05-01 12:00:00,123", "levelname": "INFO", "name": "train", "message": "step 10 loss 2.31"}',
        '{"asctime": "2024-05-01 12:00:01,456", "levelname": "ERROR", "name": "train", "message": "Training failed", "exc_info": "Traceback (most recent call last):\\nRuntimeError: NCCL error"}',
    ]
    (d / "stdout.log").write_text("\n".join(records) + "\n")
    (d / "stderr.log").write_text("")
    streams = RankStreams("n0", str(tmp_path / "gen"))
    (tmp_path / "gen").mkdir()
    streams.set_log_root(str(root))
    streams.rank_offset = 0
    lines = streams.poll(1.0, 1.0, final=True)
    assert [ln.text for ln in lines] == ["step 10 loss 2.31", "ERROR Training failed", "Traceback (most recent call last):",
                                         "RuntimeError: NCCL error"]
    assert (tmp_path / "gen" / "rank-0.log").read_text() == "\n".join(records) + "\n"
    streams.close()


def _rank_dir(tmp_path: Path) -> tuple[RankStreams, Path]:
    d = tmp_path / "torchrun" / "job_abc" / "attempt_0" / "0"
    d.mkdir(parents=True)
    (d / "stderr.log").write_text("")
    (tmp_path / "gen").mkdir()
    streams = RankStreams("n0", str(tmp_path / "gen"))
    streams.set_log_root(str(tmp_path / "torchrun"))
    streams.rank_offset = 0
    return streams, d / "stdout.log"


def _offline(path: Path) -> list[str]:
    """The texts `neuron-watch diagnose` judges in a rank log (its reader, whole file)."""
    src = Source(str(path), str(path), 0)
    with open(path, "rb") as f:
        return [ln.text for ln in read_lines(src, f, LineSplitter())]


#: a rank that logs through a JSON logger after a library's warning went out plain, then fails
WARNED_RECORDS = [
    "/opt/venv/lib/python3.10/site-packages/torch/cuda/__init__.py:61: FutureWarning: The pynvml package is deprecated.",
    '{"asctime": "2024-05-01 12:00:00,123", "levelname": "INFO", "name": "train", "message": "loading /etc/train/config.yaml"}',
    '{"asctime": "2024-05-01 12:00:01,456", "levelname": "ERROR", "name": "train", "message": "Training failed", "exc_info": "Traceback (most recent call last):\\n  File \\"train.py\\", line 3, in <module>\\nModuleNotFoundError: No module named \'torch_neuronx\'"}',
    '{"asctime": "2024-05-01 12:00:01,457", "levelname": "INFO", "name": "train", "message": "exiting with 1"}',
]


def test_a_rank_that_prints_its_first_lines_and_dies_is_read_live_as_diagnose_reads_its_log(tmp_path: Path) -> None:
    streams, out = _rank_dir(tmp_path)
    live: list[str] = []
    with open(out, "w") as f:
        for i, record in enumerate(WARNED_RECORDS):  # one line a poll, as a rank prints them
            f.write(record + "\n")
            f.flush()
            live += [ln.text for ln in streams.poll(1.0 + i * 0.1, 1.0, final=False)]
    assert live == [WARNED_RECORDS[0]]  # the plain warning at once, the records held for the decision
    live += [ln.text for ln in streams.poll(1.5, 1.5, to_eof=True)]  # the rank ended: its files read to the end
    streams.close()
    assert live == _offline(tmp_path / "gen" / "rank-0.log")
    assert "ModuleNotFoundError: No module named 'torch_neuronx'" in live


def test_a_rank_quiet_after_its_first_lines_has_them_judged_within_the_hold(tmp_path: Path) -> None:
    streams, out = _rank_dir(tmp_path)
    out.write_text("\n".join(WARNED_RECORDS) + "\n")
    first = [ln.text for ln in streams.poll(10.0, 10.0)]
    assert first == [WARNED_RECORDS[0]]
    assert streams.poll(10.0 + HOLD_UNDECIDED / 2, 10.0) == []  # held, the rank compiling
    released = [ln.text for ln in streams.poll(10.0 + HOLD_UNDECIDED, 11.0)]
    assert released[:2] == ["loading /etc/train/config.yaml", "ERROR Training failed"]
    streams.close()


def test_a_plain_rank_s_lines_are_never_held(tmp_path: Path) -> None:
    streams, out = _rank_dir(tmp_path)
    with open(out, "w") as f:
        for i in range(12):
            f.write(f"step {i} loss 2.{i}\n")
            f.flush()
            assert [ln.text for ln in streams.poll(float(i), float(i))] == [f"step {i} loss 2.{i}"]
    streams.close()

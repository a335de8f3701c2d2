"""The error block: how a failure's lines are grouped, which line decides its cause, and the judge
reading it before "cause not recognised". Real lines from the corpus (tests/data/real-logs, named by
excerpt) and the printers' own layouts; near misses keep the answer of the line alone."""

# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
from __future__ import annotations

from collections.abc import Sequence

import pytest

from neuron_watch.diagnosis.errorblock import Role, block_at, blocks, cause_from, decide
from neuron_watch.diagnosis.errorclass import read_error
from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Evidence, Label, LogLine, RankKey, Verdict

KB = default_knowledge_base()


def readers(text: str) -> Label | None:
    """The structure readers of errorclass, as the judge asks them of a line no rule names a cause for."""
    reading = read_error(text)
    return None if reading is None else reading.label


# oom/bigdl-1570-spark-executor-java-heap-space-wide-and-deep: log4j's record, then its throwable
SPARK = [
    "2019-08-19 02:42:12 INFO  Executor:54 - Running task 0.0 in stage 149.0 (TID 59)",
    "2019-08-19 02:42:12 ERROR Executor:91 - Exception in task 0.0 in stage 149.0 (TID 59)",
    "java.lang.OutOfMemoryError: Java heap space",
    "\tat java.util.Arrays.copyOf(Arrays.java:3236)",
    "\tat java.io.ByteArrayOutputStream.grow(ByteArrayOutputStream.java:118)",
    "2019-08-19 02:42:12 INFO  Executor:54 - Executor is trying to kill task 1.0 in stage 149.0 (TID 60)",
]
# comm_error/caffe2-360-gloo-enforce-connection-refused-mpirun: libstdc++'s verbose terminate handler
TERMINATE = [
    "terminate called after throwing an instance of 'gloo::EnforceNotMet'",
    "  what():  [enforce fail at /home/sayantan/gloo_GIT/gloo/gloo/transport/tcp/pair.cc:498] optval == 0. 111 vs 0. SO_ERROR: Connection refused",
    "*** Aborted at 1521230530 (unix time) try \"date -d @1521230530\" if you are using GNU date ***",
    "--------------------------------------------------------------------------",
    "mpirun noticed that process rank 1 with PID 29013 on node 172.17.27.12 exited on signal 6 (Aborted).",
]
# comm_error/pytorch-69197-rdzv-tcpstore-connect-timeout: a Python chain, the root printed first
CHAIN = [
    "Traceback (most recent call last):",
    '  File "/home/ubuntu/miniconda3/envs/py39/lib/python3.9/site-packages/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py", line 155, in _create_tcp_store',
    "    store = TCPStore(",
    "RuntimeError: connect() timed out. Original timeout was 60000 ms.",
    "",
    "The above exception was the direct cause of the following exception:",
    "",
    "Traceback (most recent call last):",
    '  File "/home/ubuntu/miniconda3/envs/py39/lib/python3.9/site-packages/torch/distributed/run.py", line 719, in main',
    "    run(args)",
    "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for details.",
]
# other_crash/kubeflow-trainer-1223-tf-operator-nil-pointer-cleanupjob: a goroutine dump under a glog record
GO = [
    'E0122 19:05:34.207808       1 runtime.go:78] Observed a panic: "invalid memory address or nil pointer dereference" (runtime error: invalid memory address or nil pointer dereference)',
    "goroutine 212 [running]:",
    "k8s.io/apimachinery/pkg/util/runtime.logPanic(0x1546400, 0x24bd090)",
    "  /go/pkg/mod/k8s.io/apimachinery@v0.16.10-beta.0/pkg/util/runtime/runtime.go:74 +0xa3",
    "panic(0x1546400, 0x24bd090)",
    "  /usr/local/go/src/runtime/panic.go:679 +0x1b2",
    "created by k8s.io/client-go/tools/cache.(*processorListener).run",
    "I0122 19:05:35.000000       1 controller.go:90] Starting workers",
]
# hardware_error/paddle-10239-glog-check-failed-cuda-ecc-uncorrectable: glog's FATAL and its stack trace
GLOG = [
    "F0426 17:52:54.043815 30811 hl_cuda_device.cc:565] Check failed: cudaSuccess == cudaStat (0 vs. 39) Cuda Error: uncorrectable ECC error encountered",
    "*** Check failure stack trace: ***",
    "    @     0x7f423a77f66d  google::LogMessage::Fail()",
    "    @     0x7f423a783140  google::LogMessage::SendToLog()",
]
# Rust since 1.73 (library/std/src/panicking.rs default_hook): the location, then the message
RUST = [
    "thread 'main' panicked at src/main.rs:14:10:",
    'called `Result::unwrap()` on an `Err` value: Os { code: 98, kind: AddrInUse, message: "Address already in use" }',
    "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
]
# grpc's _InactiveRpcError repr (src/python/grpcio/grpc/_channel.py) under a RuntimeError's traceback
GRPC = [
    "Traceback (most recent call last):",
    '  File "train.py", line 12, in <module>',
    "    stub.Push(request)",
    "grpc._channel._InactiveRpcError: <_InactiveRpcError of RPC that terminated with:",
    "\tstatus = StatusCode.RESOURCE_EXHAUSTED",
    '\tdetails = "Received message larger than max (8388613 vs. 4194304)"',
    '\tdebug_error_string = "{"created":"@1600000000.0","grpc_status":8}"',
    ">",
]


@pytest.mark.parametrize(("name", "lines", "span", "decided", "label"), [
    ("log4j's header carries the throwable", SPARK, (1, 4), 2, Label.OOM),
    ("C++ terminate and its what()", TERMINATE, (0, 2), 1, Label.COMM_ERROR),
    ("glog's FATAL and its stack trace", GLOG, (0, 3), 0, Label.HARDWARE_ERROR),
    ("Rust's message under its location", RUST, (0, 2), 1, Label.CONFIG_ERROR),
    # (the repr's closing ">" reads as a quoting mark: the block ends at the line before)
    ("an RPC's status under its exception", GRPC, (0, 6), 4, Label.OOM),
])
def test_a_block_groups_its_layout_and_its_most_specific_line_decides(
        name: str, lines: list[str], span: tuple[int, int], decided: int, label: Label) -> None:
    found = blocks(lines)
    block = next(b for b in found if b.start == span[0])
    assert (block.start, block.end) == span, name
    decision = decide(block, lines, explain_with_table)
    assert decision is not None and (decision.index, decision.label) == (decided, label), name


def explain_with_table(text: str) -> Label | None:
    """A rule of the table that names a cause, else the readers (as Judge._line_cause)."""
    m = KB.classify(text)
    if m is not None and m.signature.effect.value == "fatal" and not m.signature.generic and not m.signature.id.startswith("form."):
        return m.signature.category
    return readers(text)


def test_the_goroutine_dump_stays_in_the_glog_record_and_its_frames_never_decide() -> None:
    block = blocks(GO)[0]
    assert (block.start, block.end) == (0, 6)
    assert [bl.role for bl in block.lines[1:]] == [Role.FRAME] * 6
    # the next record (I) is not part of it
    assert all(bl.index != 7 for bl in block.lines)


def test_the_chain_s_root_is_deeper_than_its_wrapper() -> None:
    block = blocks(CHAIN)[0]
    depth = {bl.index: bl.depth for bl in block.lines}
    assert (block.start, block.end) == (0, 10)
    assert depth[3] > depth[10]  # the root is printed first
    assert {bl.index for bl in block.lines if bl.role is Role.SEPARATOR} == {4, 5, 6}


def table(**said: Label) -> dict[str, Label]:
    return said


@pytest.mark.parametrize(("case", "says", "decided"), [
    # the root beats a wrapper that states nothing
    ("root over a generic wrapper", {"RuntimeError: connect() timed out": Label.COMM_ERROR}, 3),
    # a specific wrapper over a generic cause keeps the wrapper
    ("specific wrapper over a generic root", {"torch.distributed.elastic.rendezvous.api.RendezvousConnectionError": Label.CONFIG_ERROR}, 10),
    # both state a cause: the root
    ("both specific", {"RuntimeError: connect() timed out": Label.COMM_ERROR,
                       "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError": Label.CONFIG_ERROR}, 3),
    # a line that states only a crash yields to one that states a cause, wherever it is
    ("a cause beats a crash", {"RuntimeError: connect() timed out": Label.OTHER_CRASH,
                               "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError": Label.COMM_ERROR}, 10),
    ("nothing stated", {}, None),
])
def test_which_line_of_a_chain_decides(case: str, says: dict[str, Label], decided: int | None) -> None:
    def explain(text: str) -> Label | None:
        return next((label for start, label in says.items() if text.startswith(start)), None)

    decision = decide(blocks(CHAIN)[0], CHAIN, explain)
    assert (decision.index if decision is not None else None) == decided, case


def test_frames_are_never_asked() -> None:
    asked: list[str] = []

    def explain(text: str) -> Label | None:
        asked.append(text)
        return None

    decide(blocks(CHAIN)[0], CHAIN, explain)
    assert asked == [CHAIN[0], CHAIN[3], CHAIN[7], CHAIN[10]]


def test_launcher_prefixes_and_quoting_are_read_under() -> None:
    prefixed = [f"[rank6]: {line}" if line else "[rank6]:" for line in CHAIN[:4]] + [f"> {SPARK[1]}", f"> {SPARK[2]}"]
    found = blocks(prefixed)
    assert [(b.start, b.end) for b in found] == [(0, 3), (4, 5)]


# -- near misses --------------------------------------------------------------------------------------

# a traceback the program caught and went on from (logging.exception in a retry loop), then its progress
RECOVERED = [
    "2024-05-02 10:01:12,001 ERROR retry.py:40 - upload failed, retrying",
    "Traceback (most recent call last):",
    '  File "upload.py", line 10, in push',
    "    client.put(obj)",
    "ConnectionResetError: [Errno 104] Connection reset by peer",
    "2024-05-02 10:01:14,230 INFO trainer.py:88 - step 120 loss 2.31",
    "2024-05-02 10:01:20,552 ERROR trainer.py:90 - Rank[2] failed.",
]


def test_a_recovered_traceback_is_its_own_block_and_not_the_later_failure_s() -> None:
    found = blocks(RECOVERED)
    assert [(b.start, b.end) for b in found] == [(0, 4), (6, 6)]
    # the later failure's header states nothing, and nothing after it: no cause, not the recovered one's
    assert cause_from(RECOVERED, 6, readers) is None
    assert cause_from(RECOVERED, 0, readers) is not None


@pytest.mark.parametrize("line", [
    # a warning that quotes an exception's name
    "2024-05-02 10:01:12,001 WARNING trainer.py:40 - caught RuntimeError: CUDA out of memory, skipping batch",
    "[W python_anomaly_mode.cpp:104] Warning: Error detected in SoftmaxBackward0. Traceback of forward call that caused the error:",
    "I0122 19:05:35.000000       1 controller.go:90] Observed error: none",
    "  File \"train.py\", line 3, in <module>",
    "Epoch 3: loss=0.231 errors=0",
])
def test_lines_that_open_no_block(line: str) -> None:
    assert blocks([line]) == []


def test_a_header_with_nothing_under_it_decides_by_its_own_words_or_not_at_all() -> None:
    lines = ["2023-07-07T17:55:43.805488Z ERROR text_generation_launcher: Webserver Crashed",
             "2023-07-07T17:55:43.805514Z  INFO text_generation_launcher: Shutting down shards"]
    block = block_at(lines, 0)
    assert block is not None and (block.start, block.end) == (0, 0)
    assert decide(block, lines, readers) is None


def test_two_blocks_the_later_one_states_the_failure() -> None:
    header = "2024-10-21 10:42:00,218 - lmdeploy - ERROR - model_agent.py:489 - Rank[2] failed."
    lines = [header, "", *TERMINATE]
    decision = cause_from(lines, 0, readers)
    assert decision is not None and (decision.index, decision.label) == (3, Label.COMM_ERROR)
    # a line of other output between them: the process went on, the later block is not this record's
    went_on = [header, "2024-10-21 10:42:00,219 - lmdeploy - INFO - model_agent.py:490 - shutting down", *TERMINATE]
    assert cause_from(went_on, 0, readers) is None
    # ... and a line in no block, after none, has none
    assert cause_from(["2024-10-21 10:41:59,000 - lmdeploy - INFO - step 3", *TERMINATE], 0, readers) is None


def test_a_line_right_after_a_block_reports_that_block_s_process() -> None:
    lines = [*TERMINATE[:2], "Aborted (core dumped)"]
    block = block_at(lines, 2)
    assert block is not None and block.start == 0
    assert block_at([*TERMINATE[:2], "step 3 done", "Aborted (core dumped)"], 3) is None


def test_a_deep_recursion_keeps_the_block_s_head_and_tail() -> None:
    frames = ['  File "model.py", line 9, in f', "    return f(x)"] * 1000
    lines = ["Traceback (most recent call last):", *frames, "RecursionError: maximum recursion depth exceeded"]
    block = blocks(lines)[0]
    assert len(block.lines) <= 400
    assert block.lines[0].index == 0 and block.lines[-1].index == len(lines) - 1


# -- the judge reads the block before "cause not recognised" -------------------------------------------------

def judged(lines: Sequence[str], context: bool = True) -> Verdict:
    """The final verdict of one stream, with the stream's lines as the judge's context (as ``diagnose``)."""
    j = Judge(KB, JudgeSettings(), start=0.0)
    records = [LogLine(RankKey("", 0), text, float(i), float(i), "excerpt.log", i + 1) for i, text in enumerate(lines)]

    def around(ev: Evidence) -> tuple[list[LogLine], int] | None:
        return next(((records, i) for i, r in enumerate(records) if r.lineno == ev.lineno), None)

    if context:
        j.context = around
    j.observe_lines(records)
    return j.verdict(float(len(lines)), final=True)


def test_the_judge_reads_an_rpc_s_status_under_its_exception() -> None:
    lines = ["2024-05-02 10:01:12,001 INFO trainer.py:40 - step 12", *GRPC]
    alone = judged(lines, context=False)
    v = judged(lines)
    assert alone.label is Label.OTHER_CRASH  # the exception line alone: cause not recognised
    assert v.label is Label.OOM
    assert "most specific line" in v.reason and v.evidence[0].text == GRPC[4]


def test_the_judge_keeps_a_line_that_states_its_own_cause() -> None:
    v = judged(SPARK[1:5])
    assert v.label is Label.OOM
    lone = judged([GLOG[0]])
    assert judged(GLOG).label is lone.label


def test_a_context_chain_reads_like_a_cause_chain() -> None:
    # CPython's _context_message: the exception raised while handling the first one is printed after it
    context = [*CHAIN[:5], "During handling of the above exception, another exception occurred:", *CHAIN[6:]]
    block = blocks(context)[0]
    depth = {bl.index: bl.depth for bl in block.lines}
    assert (block.start, block.end) == (0, 10)
    assert depth[3] > depth[10]


def test_glog_error_records_continue_a_block_and_an_info_record_ends_it() -> None:
    lines = ["E0213 12:41:17.931882   59040 rendezvous.cc:98] This thread has been waiting for `rendezvous` for 10 seconds",
             "E0213 12:41:17.931900   59040 rendezvous.cc:99] Expected 8 threads to join the rendezvous, but not all of them arrived on time.",
             "I0213 12:41:18.000000   59040 client.cc:10] retrying"]
    found = blocks(lines)
    assert [(b.start, b.end) for b in found] == [(0, 1)]
    assert [bl.role for bl in found[0].lines] == [Role.MESSAGE, Role.MESSAGE]


def test_the_judge_does_not_read_a_block_printed_after_progress() -> None:
    # a crash (a fatal signal right after a record that states nothing), then the rank's progress, then
    # a block that states a cause: that later block is not what the crash died of
    crash = ["2024-05-02 10:01:12,001 ERROR worker.py:40 - worker 3 lost", "Segmentation fault (core dumped)"]
    progress = "{'loss': 0.4312, 'learning_rate': 4.9e-05, 'epoch': 0.02}"
    assert judged([*crash, *GRPC]).label is Label.OOM  # nothing between: the next block says it
    v = judged([*crash, progress, *GRPC])
    assert v.label is Label.OTHER_CRASH and v.evidence[0].text == crash[1]


@pytest.mark.parametrize(("line", "message", "label"), [
    # Throwable.printStackTrace's cause: the class words say memory once "Caused by: " is read past
    ("Caused by: org.apache.spark.memory.SparkOutOfMemoryError: Unable to acquire 65536 bytes of memory, got 0",
     "org.apache.spark.memory.SparkOutOfMemoryError: Unable to acquire 65536 bytes of memory, got 0", Label.OOM),
    # ThreadGroup.uncaughtException's lead-in
    ('Exception in thread "main" java.io.FileNotFoundException: /data/train.csv',
     "java.io.FileNotFoundException: /data/train.csv", Label.CONFIG_ERROR),
    # libstdc++'s what() under a launcher's tag
    ("[rank0]:   what():  std::bad_alloc", "std::bad_alloc", None),
    # a line with no lead-in is its own message
    ("RuntimeError: step failed", "RuntimeError: step failed", None),
])
def test_a_line_is_read_past_its_layout_s_lead_in(line: str, message: str, label: Label | None) -> None:
    from neuron_watch.diagnosis.errorblock import message_of

    assert message_of(line) == message
    lines = ["2024-05-02 10:01:12,001 ERROR Executor:91 - Exception in task 0.0 in stage 1.0 (TID 1)", line]
    block = block_at(lines, 1)
    assert block is not None
    decision = decide(block, lines, readers)
    assert (decision.label if decision is not None else None) is label
    if decision is not None:
        assert decision.read == message


def test_the_judge_reads_a_java_cause_past_its_lead_in() -> None:
    lines = ["2019-08-19 02:42:12 INFO  Executor:54 - Running task 0.0 in stage 149.0 (TID 59)",
             "2019-08-19 02:42:12 ERROR Executor:91 - Exception in task 0.0 in stage 149.0 (TID 59)",
             "org.apache.spark.SparkException: Task failed while writing rows.",
             "\tat org.apache.spark.sql.execution.datasources.FileFormatWriter$.executeTask(FileFormatWriter.scala:257)",
             "Caused by: org.apache.spark.memory.SparkOutOfMemoryError: Unable to acquire 65536 bytes of memory, got 0",
             "\tat org.apache.spark.memory.MemoryConsumer.throwOom(MemoryConsumer.java:157)"]
    assert judged(lines, context=False).label is Label.OTHER_CRASH
    v = judged(lines)
    assert v.label is Label.OOM and v.evidence[0].text == lines[4]

"""The error block in the live path: a node sends the lines around a rank's failure with its batch, the
wire carries them, and the coordinator's judge reads the cause from them as offline ``diagnose`` reads it
from the rank's log. The whole path without sockets: a node's :class:`LineBatches` (batches cut at every
size, so that a block straddles batches), the body encoded and decoded, the judge fed as the coordinator's
ingest feeds it. Real lines from the corpus (tests/data/real-logs, named by excerpt)."""

# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
from __future__ import annotations

from collections.abc import Sequence

import pytest

from neuron_watch.commands.diagnose import diagnose_lines
from neuron_watch.diagnosis.blockcontext import RANK_LINES, BlockLines
from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Evidence, Label, LogLine, RankKey, Verdict
from neuron_watch.node.error_context import BODY_CHARS, LOOK_BACK, RUN_LINES, ErrorContext
from neuron_watch.node.line_batches import LineBatches
from neuron_watch.node.link_settings import LinkCounters
from neuron_watch.wire.protocol import Kind, block_lines, decode_body, encode_body, line_records

from .test_errorblock import GRPC

KB = default_knowledge_base()
NODE = "trn-a"
SOURCE = "rank-0.log"
STEP = "step 3 loss 2.3412"

# grpc's _InactiveRpcError (src/python/grpcio/grpc/_channel.py) under a Python traceback: the status line
# under the exception states the cause, nothing a signature matches does
# oom/bigdl-1570-spark-executor-java-heap-space-wide-and-deep style: a Java wrapper over its cause
JAVA = [
    "2019-08-19 02:42:12 ERROR Executor:91 - Exception in task 0.0 in stage 149.0 (TID 59)",
    "org.apache.spark.SparkException: Task failed while writing rows.",
    "\tat org.apache.spark.sql.execution.datasources.FileFormatWriter$.executeTask(FileFormatWriter.scala:257)",
    "Caused by: org.apache.spark.memory.SparkOutOfMemoryError: Unable to acquire 65536 bytes of memory, got 0",
    "\tat org.apache.spark.memory.MemoryConsumer.throwOom(MemoryConsumer.java:157)",
]

# CPython's chain (Lib/traceback.py): a bad value refused while the program sets itself up, re-raised by a
# wrapper whose own exception says nothing of the cause; its frames say where it was raised
SETUP = [
    "Traceback (most recent call last):",
    '  File "/job/train.py", line 9, in load_config',
    '    raise ValueError(f"unknown optimizer {name!r}: expected one of sgd, adam")',
    "ValueError: unknown optimizer 'adamw2': expected one of sgd, adam",
    "",
    "The above exception was the direct cause of the following exception:",
    "",
    "Traceback (most recent call last):",
    '  File "/job/train.py", line 20, in <module>',
    "    main()",
    '  File "/job/train.py", line 15, in main',
    '    raise RuntimeError("could not set up the run") from e',
    "RuntimeError: could not set up the run",
]


def records(texts: Sequence[str], rank: int = 0) -> list[LogLine]:
    return [LogLine(RankKey(NODE, rank), t, float(i), 1000.0 + i, f"rank-{rank}.log", i + 1) for i, t in enumerate(texts)]


def live(texts: Sequence[str], batch: int, ranks: int = 1) -> tuple[Verdict, LinkCounters]:
    """The coordinator's verdict on ``texts`` printed by each of ``ranks`` ranks, sent in batches of ``batch``
    lines by a node's LineBatches, each body across the wire's encoding, fed as job/ingest.py feeds it."""
    counters = LinkCounters()
    batches = LineBatches(batch, counters, KB)
    judge = Judge(KB, JudgeSettings(), 0.0)
    lines = sorted((ln for r in range(ranks) for ln in records(texts, r)), key=lambda ln: (ln.mono, ln.key.rank))
    now = 0.0
    for ln in lines:
        now = ln.mono
        if batches.add(ln):
            for body in batches.take(now, 1000.0 + now):
                _ingest(judge, body, now)
    for body in batches.take(now, 1000.0 + now):
        _ingest(judge, body, now)
    return judge.verdict(float(len(texts)), final=True), counters


def _ingest(judge: Judge, sent: object, now: float) -> None:
    body = decode_body(Kind.LINES, encode_body(sent))  # type: ignore[arg-type]
    assert body == sent
    keys = [RankKey(NODE, r.rank) for r in body.ranks]  # type: ignore[union-attr]
    judge.observe_blocks(block_lines(body, keys, now, 1000.0 + now))  # type: ignore[arg-type]
    got = line_records(body, keys, now, 1000.0 + now)  # type: ignore[arg-type]
    judge.observe_batch(got.ranks, got.matches, got.progress)


def offline(texts: Sequence[str]) -> Verdict:
    return diagnose_lines(records(texts))[0]


@pytest.mark.parametrize(("name", "texts", "label"), [
    ("an RPC's status under its exception", [STEP, *GRPC], Label.OOM),
    ("a Java cause under its wrapper", [STEP, *JAVA], Label.OOM),
    ("a bad value refused in set-up, re-raised by a wrapper", SETUP, Label.CONFIG_ERROR),
])
def test_the_live_judge_reads_the_block_a_node_sends_as_diagnose_reads_the_log(name: str, texts: list[str],
                                                                               label: Label) -> None:
    without = Judge(KB, JudgeSettings(), 0.0)
    without.observe_lines(records(texts))  # the matched lines alone, as the live judge saw them before
    assert without.verdict(float(len(texts)), final=True).label is Label.OTHER_CRASH, name
    want = offline(texts)
    assert want.label is label, (name, want.reason)
    for batch in range(1, len(texts) + 1):  # every cut of the stream into batches
        got, counters = live(texts, batch)
        assert (got.label, got.action) == (want.label, want.action), (name, batch, got.reason)
        assert got.evidence[0].text == want.evidence[0].text, (name, batch)
        assert counters.block_lines_left_out == 0


def test_a_body_without_blocks_keeps_its_layout_and_one_with_them_round_trips() -> None:
    import msgpack

    counters = LinkCounters()
    batches = LineBatches(100, counters, KB)
    for ln in records([STEP, "step 4 loss 2.1"]):
        batches.add(ln)
    (quiet,) = batches.take(2.0, 1002.0)
    assert quiet.blocks == () and len(msgpack.unpackb(encode_body(quiet))) == 5
    for ln in records([STEP, *GRPC]):
        batches.add(ln)
    (failing,) = batches.take(9.0, 1009.0)
    assert len(msgpack.unpackb(encode_body(failing))) == 6
    assert decode_body(Kind.LINES, encode_body(failing)) == failing
    (block,) = failing.blocks
    assert block.text.split("\n") == GRPC and block.linenos == tuple(range(2, 2 + len(GRPC)))


def test_a_long_block_keeps_its_head_and_tail_and_counts_what_it_left_out() -> None:
    frames = [f'  File "model.py", line {i}, in layer_{i}\n    x = f(x)'.split("\n") for i in range(RUN_LINES)]
    texts = [STEP, "Traceback (most recent call last):", *[t for f in frames for t in f],
             "ValueError: unknown optimizer 'adamw2'"]
    ctx = ErrorContext()
    lines = records(texts)
    matches = [ln._replace(signature=m.signature.id) for ln in lines if (m := KB.classify(ln.text)) is not None]
    (run,) = ctx.runs(KB, lines, matches)
    assert len(run) == RUN_LINES and run[-1].text == texts[-1]
    assert run[0].text == "Traceback (most recent call last):"
    assert ctx.left_out == len(texts) - 1 - RUN_LINES


def test_a_body_carries_a_bounded_share_of_runs_and_counts_the_rest() -> None:
    big = "x" * (BODY_CHARS // 2)
    texts = [f"RuntimeError: {big}"]
    ctx = ErrorContext()
    lines = [ln for r in range(4) for ln in records(texts, r)]
    matches = [ln._replace(signature=KB.classify(ln.text).signature.id) for ln in lines]  # type: ignore[union-attr]
    runs = ctx.runs(KB, lines, matches)
    assert len(runs) == 1 and ctx.left_out == 3


def test_the_block_is_looked_for_in_the_batch_before() -> None:
    ctx = ErrorContext()
    texts = [STEP, *GRPC]
    first, second = records(texts)[:4], records(texts)[4:]
    assert ctx.runs(KB, first, []) == []  # (no failure matched in it: nothing sent)
    failing = [ln._replace(signature="host.unrecognised_error") for ln in second[:1]]
    (run,) = ctx.runs(KB, second, failing)
    assert [ln.text for ln in run] == GRPC and len(GRPC) - len(second) <= LOOK_BACK


def test_the_judge_keeps_runs_joined_and_bounded() -> None:
    store = BlockLines()
    lines = records([f"line {i}" for i in range(RANK_LINES + 30)])
    store.add(lines[:5])
    store.add(lines[3:8])  # overlaps: joined, nothing twice
    assert [len(r) for r in store.runs[lines[0].key]] == [8]
    store.add(lines[20:])  # a gap: a run of its own; the oldest is forgotten to stay in bounds
    assert sum(map(len, store.runs[lines[0].key])) <= RANK_LINES and store.forgotten > 0
    ev = Evidence(lines[-1].key, lines[-1].text, "", SOURCE, lines[-1].lineno)
    found = store.around(ev)
    assert found is not None and found[0][found[1]] == lines[-1]
    assert store.around(Evidence(lines[0].key, "not sent", "", SOURCE, 1)) is None


def test_a_run_ends_with_its_report_not_with_the_batch() -> None:
    ctx = ErrorContext()
    lines = records([STEP, *GRPC, "step 4 loss 2.0", "step 5 loss 1.9"])
    failing = [ln._replace(signature="python.traceback") for ln in lines[1:2]]
    (run,) = ctx.runs(KB, lines, failing)
    assert [ln.text for ln in run] == GRPC and ctx.open == {}


def test_a_bad_value_refused_in_the_work_keeps_its_crash_live_and_offline() -> None:
    work = [t.replace("in load_config", "in forward") for t in SETUP]
    assert offline(work).label is Label.OTHER_CRASH
    for batch in (1, 4, len(work)):
        got, _counters = live(work, batch)
        assert (got.label, got.action) == (Label.OTHER_CRASH, offline(work).action), (batch, got.reason)


def test_the_judge_forgets_the_ranks_that_sent_runs_longest_ago_to_stay_under_the_job_s_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from neuron_watch.diagnosis import blockcontext

    monkeypatch.setattr(blockcontext, "JOB_LINES", 10)
    store = BlockLines()
    ranks = [records([f"rank {r} line {i}" for i in range(5)], rank=r) for r in range(3)]
    for run in ranks:
        store.add(run)
    assert list(store.runs) == [ranks[1][0].key, ranks[2][0].key]
    assert store.lines == 10 and store.forgotten == 5


# config_error/ray-39128-trn1-two-workers-one-neuron-core-xrtcompile: rich's box-drawn traceback wraps the
# exception's message at the box's edge; what it asks of the set-up ("Make sure ...") is on its last line
BOXED = [
    "           torch_xla._XLAC._xla_step_marker(                                                                                    │",
    "RuntimeError: INVALID_ARGUMENT: Cannot assign a device for operation XRTCompile_16: {{node XRTCompile_16}} was explicitly│",
    " assigned to /job:localservice/replica:0/task:0/device:TPU:1 but available devices are [ /job:localservice/replica:0/task│",
    ":0/device:CPU:0, /job:localservice/replica:0/task:0/device:TPU:0, /job:localservice/replica:0/task:0/device:TPU_SYSTEM:0,│",
    " /job:localservice/replica:0/task:0/device:XLA_CPU:0 ]. Make sure the device specification refers to a valid device.     │",
]


def test_the_run_of_an_exception_holds_its_whole_wrapped_message() -> None:
    context = ErrorContext()
    lines = records(BOXED)
    failing = [ln for ln in lines if ln.text.startswith("RuntimeError")]
    (run,) = context.runs(KB, lines, [ln._replace(signature="host.unrecognised_error") for ln in failing])
    assert run[-1].text == BOXED[-1], [ln.text[:40] for ln in run]  # the message's last line goes with it
    assert context.left_out == 0

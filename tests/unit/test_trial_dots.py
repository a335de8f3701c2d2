"""A progress dot is a compile's heartbeat only beside a compile that cannot be noise.

A keep-alive thread printing ``.`` every few seconds, or binary output that decodes to a lone
``.`` line, once kept a hung job ``compiling`` for the whole compile budget. The dots count beside
a compile the compiler wrapper's command line, the compiler's own line or a compiler process opened
(neuronx-cc's real sequence: "Call compiler with cmd: neuronx-cc compile ...",
dots, "Compiler status PASS").
"""

from __future__ import annotations

from neuron_watch.diagnosis.classify import compact_matches
from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import CompilerSample, Label, LogLine, RankKey, RankSpan

NODE = "n1"
KB = default_knowledge_base()
CALL = ("2024-04-12 07:13:06.000297:  271334  INFO ||NEURON_CC_WRAPPER||: Call compiler with cmd: neuronx-cc "
        "compile --target=trn1 --framework=XLA /tmp/u/neuroncc_compile_workdir/5/model.MODULE_1+d.hlo_module.pb "
        "--output /tmp/u/neuroncc_compile_workdir/5/model.MODULE_1+d.neff --verbose=35")


def line(rank: int, text: str, t: float) -> LogLine:
    return LogLine(RankKey(NODE, rank), text, t, 1_700_000_000 + t)


def judge(timeout: float = 15.0) -> Judge:
    return Judge(KB, JudgeSettings(hang_timeout=timeout, compile_timeout=7200.0), start=0.0)


def two_ranks_at_step_8(j: Judge) -> None:
    for r in (0, 1):
        j.observe_line(line(r, "step 8 loss 0.5", 10.0))


def test_a_keep_alive_dot_does_not_hide_a_hang() -> None:
    j = judge()
    two_ranks_at_step_8(j)
    for t in range(11, 100):  # rank 0's thread prints a dot every second; rank 1 is hung
        j.observe_line(line(0, ".", float(t)))
    v = j.verdict(100.0)
    assert v.label is Label.COLLECTIVE_HANG, v
    assert j.ranks[RankKey(NODE, 0)].state_name(100.0, j.settings) != "compiling"


def test_binary_output_is_output_not_compiling() -> None:
    j = judge()
    two_ranks_at_step_8(j)
    for t, text in ((11.0, "\ufffd\x07\ufffdZ\ufffd"), (12.0, "."), (13.0, "\x00\ufffd.\ufffd")):
        j.observe_line(line(1, text, t))
    assert j.verdict(14.0).label is Label.HEALTHY
    assert j.ranks[RankKey(NODE, 1)].state_name(14.0, j.settings) != "compiling"
    assert j.verdict(40.0).label is Label.COLLECTIVE_HANG


def test_dots_beside_the_wrappers_compile_keep_it_compiling_past_the_budget_of_its_line() -> None:
    j = Judge(KB, JudgeSettings(hang_timeout=15.0, compile_timeout=60.0), start=0.0)
    two_ranks_at_step_8(j)
    j.observe_line(line(0, CALL, 11.0))
    for t in range(31, 200, 20):  # neuronx-cc's dot every 20 s, past the 60 s budget of the open line
        j.observe_line(line(0, ".", float(t)))
    assert j.verdict(200.0).label is Label.COMPILING
    j.observe_line(line(0, "Compiler status PASS", 201.0))
    j.observe_line(line(0, ".", 202.0))  # a dot after the compile ended opens nothing
    assert j.verdict(230.0).label is Label.COLLECTIVE_HANG


def test_dots_beside_a_compiler_process_count() -> None:
    j = judge()
    two_ranks_at_step_8(j)
    key = RankKey(NODE, 0)
    j.observe_compilers([CompilerSample(key, 4242, 1.0, 11.0)], 11.0)
    j.observe_line(line(0, ".", 12.0))
    assert j.ranks[key].last_compile_beat == 12.0
    j.observe_compilers([], 13.0)  # the compiler ended: the dots after it are noise again
    j.observe_line(line(0, ".", 14.0))
    assert j.ranks[key].last_compile_beat == 12.0


def test_a_batch_compacted_keeps_the_compiler_line_the_dots_beat_for() -> None:
    texts = ["step 8 loss 0.5", "2023-12-12T17:28:24Z Running birverifier", ".", ".", "."]
    lines = [line(0, t, 10.0 + i) for i, t in enumerate(texts)]
    one_by_one = judge()
    one_by_one.observe_lines(lines)
    matches = [(ln, m) for ln, m in ((ln, KB.classify(ln.text)) for ln in lines) if m is not None]
    kept = compact_matches([(ln.key, m) for ln, m in matches])
    assert 1 in kept  # the compiler's line, though a compile beat follows it
    batched = judge()
    batched.observe_batch([RankSpan(RankKey(NODE, 0), 10.0, 14.0, ".")],
                          [matches[i][0]._replace(signature=matches[i][1].signature.id, step=matches[i][1].step,
                                                  loss=matches[i][1].loss)
                           for i in kept])
    for j in (one_by_one, batched):
        assert j.ranks[RankKey(NODE, 0)].last_compile_beat == 14.0
        assert j.verdict(15.0).label is Label.COMPILING


def test_dots_after_more_passes_than_starts_beat_for_compiles_begun_before_the_log_was_read() -> None:
    """Parallel graph compiles (aws-neuron-sdk#819, a log cut at its top): starts and PASS lines of
    several graphs interleave, and the dots after the last PASS beat for a graph still compiling."""
    j = judge()
    two_ranks_at_step_8(j)
    j.observe_line(line(0, CALL, 11.0))
    for t in (12.0, 13.0):
        j.observe_line(line(0, "Compiler status PASS", t))  # two ends for one start seen
    for t in range(20, 100, 10):
        j.observe_line(line(0, ".", float(t)))
    assert j.verdict(100.0).label is Label.COMPILING
    j.observe_line(line(0, "step 9 loss 0.4", 101.0))  # progress: the rank's dots are output again
    for t in range(110, 300, 10):
        j.observe_line(line(0, ".", float(t)))
    assert j.ranks[RankKey(NODE, 0)].last_compile_beat == 90.0  # none of these dots was a beat
    assert j.verdict(300.0).label is Label.COLLECTIVE_HANG  # past the last beat's window

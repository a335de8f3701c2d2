"""torch.compile recompiles: compile evidence (not a hang), and a recompile storm is a finding.
Real lines of torch 2.13 (TORCH_LOGS=recompiles) from tests/process/ranks/ddp_compile.py runs; fake
clock (``now`` is an argument)."""

from __future__ import annotations

from neuron_watch.events import CompilerSample, Label, LogLine, RankKey
from neuron_watch.judge import RECOMPILE_STORM, Judge, JudgeSettings
from neuron_watch.kb import default_knowledge_base

KB = default_knowledge_base()
N = "node-a"
RECOMPILING = ("[rank1]:V1123 20:06:40.110000 8461 torch/_dynamo/guards.py:5396] [0/1] [__recompiles] Recompiling "
               "function forward in /home/user/train.py:41")
REASON = ("[rank1]:V1123 20:06:40.110000 8461 torch/_dynamo/guards.py:5396] [0/1] [__recompiles]     - 0/0: tensor "
          "'args[0]' size mismatch at index 0. expected 8, actual 12")
LIMIT = ("[rank1]:W1123 20:31:02.551000 8461 torch/_dynamo/convert_frame.py:1995] [0/8] torch._dynamo hit "
         "config.recompile_limit (8)")


def ln(rank: int, text: str, t: float) -> LogLine:
    return LogLine(RankKey(N, rank), text, t, 1_800_000_000.0 + t, f"rank-{rank}.log", int(t))


def stepped(steps: int = 5) -> Judge:
    j = Judge(KB, JudgeSettings(hang_timeout=10.0), start=0.0)
    for n in range(1, steps + 1):
        for r in range(2):
            j.observe_line(ln(r, f"step {n} loss 1.5", float(n)))
    return j


def test_a_rank_that_recompiles_while_its_compiler_works_is_compiling_not_hung() -> None:
    j = stepped()
    j.observe_line(ln(1, RECOMPILING, 5.5))
    j.observe_line(ln(1, REASON, 5.5))
    for t in range(10, 200, 5):  # g++ under rank 1, its CPU time still growing (the process sampler)
        j.observe_compilers([CompilerSample(RankKey(N, 1), 4242, float(t), float(t))], float(t))
        v = j.verdict(float(t))
        assert v.label is Label.COMPILING and v.culprit == RankKey(N, 1), (t, v.reason)
    j.observe_compilers([], 200.0)  # the compile ended
    assert j.verdict(205.0).label is Label.HEALTHY  # the clock restarts at the compile's end
    assert j.verdict(211.0).label is Label.COLLECTIVE_HANG


def test_the_recompile_line_alone_is_compile_evidence_for_a_while_then_not() -> None:
    j = stepped()
    j.observe_line(ln(1, RECOMPILING, 5.5))
    assert j.verdict(60.0).label is Label.COMPILING  # processes not observed (offline): the line
    assert j.verdict(5.5 + 121.0).label is Label.COLLECTIVE_HANG


def test_one_recompile_is_not_a_storm_many_are() -> None:
    j = stepped()
    j.observe_line(ln(1, RECOMPILING, 5.5))
    assert j.recompile_storms() == []
    for i in range(RECOMPILE_STORM - 1):
        j.observe_line(ln(1, RECOMPILING, 6.0 + i))
    ((key, count, line),) = j.recompile_storms()
    assert (key, count) == (RankKey(N, 1), RECOMPILE_STORM) and "Recompiling function forward" in line.text


def test_dynamos_own_recompile_limit_is_a_storm_by_itself() -> None:
    j = stepped()
    j.observe_line(ln(1, LIMIT, 5.5))  # the user set their own TORCH_LOGS: no per-recompile lines
    ((key, count, line),) = j.recompile_storms()
    assert key == RankKey(N, 1) and count == 1 and "recompile_limit (8)" in line.text

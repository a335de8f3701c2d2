"""torch.compile recompiles: compile evidence (not a hang), and a recompile storm is a finding.
Real lines of torch 2.13 (TORCH_LOGS=recompiles) from tests/process/ranks/ddp_compile.py runs; fake
clock (``now`` is an argument)."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.judge import IN_PROCESS_COMPILE_STALL, RECOMPILE_STORM, Judge, JudgeSettings, xla_duration
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import CompilerSample, Label, LogLine, RankKey, WorkerSample

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


def test_the_step_line_read_with_the_announcement_from_the_other_stream_does_not_end_the_recompile() -> None:
    """stdout and stderr are tailed apart: rank 1's "step 6" (stdout) written just before dynamo's
    announcement (stderr) is read in the same poll, after it. The recompile goes on until a later
    step of that rank (or two steps on)."""
    j = stepped()
    j.observe_line(ln(1, RECOMPILING, 6.0))
    j.observe_line(ln(1, "step 6 loss 1.5", 6.0))  # the same poll
    j.observe_line(ln(0, "step 6 loss 1.5", 6.0))
    v = j.verdict(30.0)
    assert v.label is Label.COMPILING and v.culprit == RankKey(N, 1), v.reason
    j.observe_line(ln(1, "step 7 loss 1.5", 40.0))  # its compile is over: a step read later
    j.observe_line(ln(0, "step 7 loss 1.5", 40.0))
    assert j.verdict(41.0).label is Label.HEALTHY


def test_a_recompile_is_ended_by_the_ranks_next_step_read_after_it() -> None:
    j = stepped()
    j.observe_line(ln(1, RECOMPILING, 5.5))
    assert j.verdict(8.0).label is Label.COMPILING
    j.observe_line(ln(1, "step 6 loss 1.5", 9.0))
    assert j.verdict(9.5).label is Label.HEALTHY


def test_the_recompile_line_alone_is_compile_evidence_for_a_while_then_not() -> None:
    j = stepped()
    j.observe_line(ln(1, RECOMPILING, 5.5))
    assert j.verdict(60.0).label is Label.COMPILING  # processes not observed (offline): the line
    assert j.verdict(5.5 + 121.0).label is Label.COLLECTIVE_HANG


def working(j: Judge, t: float, cpu: float, stopped: bool = False) -> None:
    """Process readings at ``t``: rank 0 idle in the all-reduce, rank 1's process tree at ``cpu``."""
    j.observe_workers([WorkerSample(RankKey(N, 0), 3.0, False, t), WorkerSample(RankKey(N, 1), cpu, stopped, t)], t)


def test_a_recompile_between_its_compiler_runs_is_compiling_while_the_ranks_tree_computes() -> None:
    """Inductor runs g++ for one kernel, then lowers the next graph in Python (seconds to minutes on
    a loaded machine) before the next g++: the end of one compiler is not the end of the recompile
    while the rank's process tree keeps using the CPU (seen on CI: a false hang 4 s after g++ ended)."""
    j = stepped()
    j.observe_line(ln(1, RECOMPILING, 5.5))
    for t in range(6, 20):
        working(j, float(t), float(t))
        j.observe_compilers([CompilerSample(RankKey(N, 1), 4242, float(t), float(t))], float(t))
    j.observe_compilers([], 20.0)  # g++ ended
    for t in range(20, 61):  # the rank itself goes on lowering the backward graph
        working(j, float(t), float(t))
        v = j.verdict(float(t))
        assert v.label is Label.COMPILING and v.culprit == RankKey(N, 1), (t, v.reason)
    for t in range(61, 90):  # its tree stops using the CPU: the compile is over, or stuck
        working(j, float(t), 60.0)
    assert j.verdict(60.0 + IN_PROCESS_COMPILE_STALL - 1).label is Label.COMPILING
    v = j.verdict(60.0 + IN_PROCESS_COMPILE_STALL + 1)  # the clock ran from its last CPU growth
    assert v.label is Label.COLLECTIVE_HANG, v.reason


def test_a_stopped_rank_is_not_compiling_even_with_its_compiler_alive() -> None:
    """SIGSTOP mid-compile: its g++ blocks on the pipe to the stopped rank (no CPU growth, but the
    compiler window is minutes). A stopped rank compiles nothing: the hang comes one hang timeout
    after its last work, not after the compiler's CPU-stall window."""
    j = stepped()
    j.observe_line(ln(1, RECOMPILING, 5.5))
    for t in range(6, 12):
        working(j, float(t), float(t))
        j.observe_compilers([CompilerSample(RankKey(N, 1), 4242, float(t), float(t))], float(t))
    assert j.verdict(12.0).label is Label.COMPILING
    for t in range(12, 25):
        working(j, float(t), 11.0, stopped=True)
        j.observe_compilers([CompilerSample(RankKey(N, 1), 4242, 11.0, float(t))], float(t))
    v = j.verdict(22.0)
    assert v.label is Label.COLLECTIVE_HANG and RankKey(N, 1) in v.ranks, v.reason
    working(j, 25.0, 12.0)  # SIGCONT: it computes again, its recompile is still open
    assert j.verdict(25.0).label is Label.COMPILING


def pool_compiling(j: Judge, t: float, stopped: bool) -> None:
    """A node's reading at ``t`` as the coordinator takes it (compilers, then the rank processes): under
    rank 1, inductor's compile workers run one g++ after another (a new pid every 3 s), so its tree's
    CPU grows at every reading; rank 1 itself waits for them (``stopped``: SIGSTOPped)."""
    j.observe_compilers([CompilerSample(RankKey(N, 1), 5000 + int(t) // 3, t % 3, t)], t)
    working(j, t, t, stopped)


def test_a_rank_stopped_while_its_compile_workers_go_on_compiling_is_a_hang_with_that_rank_the_culprit() -> None:
    """SIGSTOP of the rank mid-recompile stops the rank alone: inductor's compile workers (processes of
    their own under it) go on compiling the kernels it gave them, so its tree's CPU keeps growing and
    compilers keep ending. That is no work of the job (the stopped rank will not read their results):
    the hang comes one hang timeout after the stop, with the stopped rank the culprit, and stays
    (seen under load: the full suite's run waited 600 s for a hang verdict that never came)."""
    j = stepped()
    j.observe_line(ln(1, RECOMPILING, 5.5))
    for t in range(6, 12):
        pool_compiling(j, float(t), stopped=False)
    assert j.verdict(11.0).label is Label.COMPILING
    stop = 12.0
    for t in range(12, 120):
        pool_compiling(j, float(t), stopped=True)
        v = j.verdict(float(t))
        assert v.label is not Label.COMPILING, (t, v.reason)  # a stopped rank compiles nothing
        if t - stop > 10.0:  # the hang timeout (the first stopped reading is the rank's last sign of work)
            assert v.label is Label.COLLECTIVE_HANG, (t, v.reason)
            assert v.culprit == RankKey(N, 1) and v.culprit_source == "process_state", (t, v.reason)
            assert "node-a/rank1 is stopped (state T) for" in v.reason, v.reason
    pool_compiling(j, 120.0, stopped=False)  # SIGCONT: it computes again, its recompile still open
    assert j.verdict(120.0).label is Label.COMPILING


def test_a_rank_waiting_while_its_compile_workers_compile_is_compiling_however_long() -> None:
    """The same readings with the rank waiting for its compile workers (state S, not stopped): a
    legitimate compile, never a hang."""
    j = stepped()
    j.observe_line(ln(1, RECOMPILING, 5.5))
    for t in range(6, 400):
        pool_compiling(j, float(t), stopped=False)
        v = j.verdict(float(t))
        assert v.label is Label.COMPILING and v.culprit == RankKey(N, 1), (t, v.reason)


def test_a_recompile_is_closed_by_the_jobs_next_step_not_by_the_step_under_way() -> None:
    """Only rank 0 prints steps. Both finish step 5's all-reduce; rank 1 starts step 6 and
    announces its recompile a moment before rank 0's "step 5" line arrives: that line does not close
    the recompile; "step 6" does (it needed rank 1's gradients, so the compile was over)."""
    j = Judge(KB, JudgeSettings(hang_timeout=10.0), start=0.0)
    for n in range(1, 5):
        j.observe_line(ln(0, f"step {n} loss 1.5", float(n)))
    j.observe_line(ln(1, RECOMPILING, 5.1))
    j.observe_line(ln(0, "step 5 loss 1.5", 5.2))  # the step under way, printed late
    working(j, 30.0, 30.0)
    assert j.verdict(30.0).label is Label.COMPILING
    j.observe_line(ln(0, "step 6 loss 1.5", 40.0))
    working(j, 41.0, 41.0)  # rank 1 trains on (CPU grows): that is not a compile any more
    assert j.verdict(45.0).label is Label.HEALTHY
    for t in range(46, 60):
        working(j, float(t), float(t))
    assert j.verdict(55.0).label is Label.COLLECTIVE_HANG  # 15 s without a step: its CPU proves nothing


def test_each_recompile_is_noted_with_its_failed_guard_until_it_is_a_storm() -> None:
    j = stepped()
    j.observe_line(ln(1, RECOMPILING, 5.5))
    j.observe_line(ln(1, REASON, 5.5))
    j.observe_line(ln(1, REASON.replace("0/0", "0/1"), 5.5))  # a second guard: the first one is said
    (note,) = j.recompile_notes
    assert note.announced.key == RankKey(N, 1) and "Recompiling function forward" in note.announced.text
    assert note.reason == "tensor 'args[0]' size mismatch at index 0. expected 8, actual 12"
    for i in range(RECOMPILE_STORM + 3):
        j.observe_line(ln(1, RECOMPILING, 6.0 + i))
    assert len(j.recompile_notes) == RECOMPILE_STORM - 1  # then a storm, said once (recompile_storms)


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


# neuronx-cc through torch-neuronx's wrapper: a graph compiled, then its PASS line
CC_START = ("2024-04-12 07:13:06.000297:  271334  INFO ||NEURON_CC_WRAPPER||: Call compiler with cmd: neuronx-cc "
            "compile --target=trn1 --framework=XLA /tmp/u/w/model.MODULE_{n}+d41d8cd9.hlo_module.pb --output "
            "/tmp/u/w/model.neff --verbose=35")
CC_PASS = "Compiler status PASS"


def test_neuron_graphs_compiled_step_after_step_are_a_storm_the_warm_ups_are_not() -> None:
    j = Judge(KB, JudgeSettings(hang_timeout=10.0), start=0.0)
    for n in range(8):  # warm-up: eight graphs before the first step
        j.observe_line(ln(0, CC_START.format(n=n), 1.0 + n))
        j.observe_line(ln(0, CC_PASS, 1.5 + n))
    j.observe_line(ln(0, "step 1 loss 2.5", 10.0))
    assert j.recompile_storms() == []
    for n in range(RECOMPILE_STORM):  # then a new graph on every step: a shape that keeps changing
        j.observe_line(ln(0, CC_START.format(n=100 + n), 11.0 + n))
        j.observe_line(ln(0, CC_PASS, 11.5 + n))
        j.observe_line(ln(0, f"step {n + 2} loss 2.5", 11.9 + n))
    ((key, count, line),) = j.recompile_storms()
    assert key == RankKey(N, 0) and count == RECOMPILE_STORM and "MODULE_104" in line.text
    assert j.verdict(17.0).label is Label.HEALTHY  # slow, not hung


def test_torch_xla_compilation_analysis_is_a_compile_from_cause_to_post_analysis() -> None:
    """PT_XLA_DEBUG_LEVEL=1 (torch_xla/csrc/debug_util.cpp): the analysis before a compile opens it,
    the post-compilation analysis closes it; the hang clock restarts there."""
    j = stepped()
    for text in ("", "Compilation Analysis: " + "=" * 80, "Compilation Analysis: Compilation Cause",
                 "Compilation Analysis:   mark_step in parallel loader at step end",
                 "Compilation Analysis: Graph Info: ",
                 "Compilation Analysis:   Graph Hash: 34e57f4718105340ccc7ef14b17c8910"):
        j.observe_line(ln(0, text, 6.0))
    assert j.verdict(100.0).label is Label.COMPILING
    j.observe_line(ln(0, "Post Compilation Analysis: Graph input size: 1.509470 GB", 100.0))
    j.observe_line(ln(0, "Post Compilation Analysis: Compiled program size: 0.002369 GB", 100.0))
    assert j.verdict(105.0).label is Label.HEALTHY
    assert j.verdict(111.0).label is Label.COLLECTIVE_HANG


# torch_xla.debug.metrics.metrics_report() as a torch-xla 2.8 run printed it (a public test's copy)
XLA_REPORT = """Metric: DeviceLockWait
  TotalSamples: 42
  Accumulator: 074.840us
  ValueRate: 318.111us / second
  Percentiles: 1%=000.140us; 5%=000.140us; 50%=001.840us
Metric: CompileTime
  TotalSamples: 14
  Accumulator: 01m41s970ms754.699us
  ValueRate: 01s008ms052.059us / second
  Rate: 0.344467 / second
Metric: ExecuteTime
  TotalSamples: 4
  Accumulator: 132ms617.599us
Counter: UncachedCompile
  Value: 1"""


def test_torch_xlas_compile_time_metric_is_the_ranks_own_account_of_its_compiles() -> None:
    j = stepped()
    for i, text in enumerate(XLA_REPORT.splitlines()):
        j.observe_line(ln(0, text, 6.0 + i / 100))
    assert j.compile_reports == [(RankKey(N, 0), 14, pytest.approx(101.970754699))]
    assert j.ranks[RankKey(N, 0)].reported_compile == (14, pytest.approx(101.970754699))


@pytest.mark.parametrize(("text", "seconds"), [("06m09s401ms746.001us", 369.401746001), ("074.840us", 74.84e-6),
                                                ("01h00m00s", 3600.0), ("41s970ms754.699us", 41.970754699),
                                                ("12 apples", None), ("", None), ("5s / second", None)])
def test_xla_durations(text: str, seconds: float | None) -> None:
    assert xla_duration(text) == (None if seconds is None else pytest.approx(seconds))

"""The judge's hang rule, on a fake clock: a hang is declared after the hang timeout and not before,
and a compiling rank keeps the job out of 'hang' however long the others wait."""

from __future__ import annotations

from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import CompilerSample, Label, LogLine, RankKey

NODE = "n1"


def line(rank: int, text: str, t: float) -> LogLine:
    return LogLine(RankKey(NODE, rank), text, t, 1_700_000_000 + t)


def judge(timeout: float = 60.0) -> Judge:
    return Judge(default_knowledge_base(), JudgeSettings(hang_timeout=timeout), start=0.0)


def test_hang_after_timeout_and_not_before() -> None:
    j = judge(60.0)
    for r in range(4):
        j.observe_line(line(r, "step 10 loss 0.25 step_time 0.1s", 100.0))
    assert j.verdict(159.9).label is Label.HEALTHY
    assert j.verdict(160.0).label is Label.HEALTHY  # exactly the timeout is not yet more than it
    v = j.verdict(160.1)
    assert v.label is Label.COLLECTIVE_HANG and v.step == 10


def test_progress_resets_the_clock() -> None:
    j = judge(60.0)
    j.observe_line(line(0, "step 1 loss 1.0", 0.0))
    j.observe_line(line(0, "step 2 loss 0.9", 50.0))
    assert j.verdict(100.0).label is Label.HEALTHY
    assert j.verdict(110.5).label is Label.COLLECTIVE_HANG


def test_rx_timeouts_while_a_rank_compiles_are_not_a_hang() -> None:
    j = judge(60.0)
    for r in range(4):
        j.observe_line(line(r, "step 3 loss 0.5", 10.0))
    j.observe_line(
        line(
            0,
            "2024-04-12 07:13:06.000297:  271334  INFO ||NEURON_CC_WRAPPER||: Call compiler with cmd: "
            "neuronx-cc compile --target=trn1 --framework=XLA /tmp/w/model.MODULE_1+d41d8cd9.hlo_module.pb",
            11.0,
        )
    )
    for t in range(130, 400, 120):
        for r in (1, 2, 3):
            j.observe_line(
                line(
                    r,
                    "2023-Aug-01 16:14:43.0241 332066:332494 [29] include/socket.h:579 CCOM WARN "
                    "Timeout waiting for RX (waited 120 sec) - retrying",
                    float(t),
                )
            )
    v = j.verdict(400.0)  # 3x the hang timeout later
    assert v.label is Label.COMPILING and v.culprit == RankKey(NODE, 0)
    j.observe_line(line(0, "Compiler status PASS", 401.0))
    assert j.verdict(402.0).action.value == "wait"
    assert j.verdict(462.0).label is Label.COLLECTIVE_HANG  # compile over, nobody progressed for the timeout


def test_dots_of_a_finished_compile_do_not_keep_it_compiling() -> None:
    j = judge(60.0)
    j.observe_line(line(0, "step 1 loss 1.0", 0.0))
    j.observe_line(line(0, "2023-12-12T17:28:24Z Running birverifier", 9.0))  # the compiler's own line
    j.observe_line(line(0, "....", 10.0))
    assert j.verdict(11.0).label is Label.COMPILING
    j.observe_line(line(0, "Compiler status PASS", 12.0))
    assert j.verdict(13.0).label is not Label.COMPILING


def test_compiler_process_with_growing_cpu_is_compile_evidence() -> None:
    j = judge(60.0)
    j.observe_line(line(2, "step 5 loss 0.5", 0.0))
    key = RankKey(NODE, 2)
    for t, cpu in ((30.0, 10.0), (90.0, 70.0), (150.0, 130.0)):
        j.observe_compilers([CompilerSample(key, 4242, cpu, t)], t)
    assert j.verdict(150.0).label is Label.COMPILING
    for t in (200.0, 600.0):  # CPU time stopped growing: a stuck compiler is no excuse
        j.observe_compilers([CompilerSample(key, 4242, 130.0, t)], t)
    assert j.verdict(600.0).label is Label.COLLECTIVE_HANG

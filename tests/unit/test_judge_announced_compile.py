"""A compile a rank announced in its own words (``RankState.phase_running``: a TensorRT engine build, an
XLA module) waits on evidence, not on the clock, where the rank's processes are seen.

The rank builds in its own process (no compiler process to sample): live, the node's process readings
give its process tree's CPU, which a build burns and a hung rank does not. So the announcement counts
while the tree keeps growing (for as long as the build takes, far past the hang timeout), and a rank
that announced a build and then hung is judged at the hang timeout after its tree's last growth, with
that rank the culprit. Without process readings (offline ``diagnose`` of a log) a log that ends inside a
build ends compiling, as before. Real lines: turbo-ocr's build (tests/data/real-logs/compiling/
turboocr-17-building-trt-engines-hours.log) and XLA's slow-compile alarm (google-deepmind/tapnet#53).
Fake clock: ``now`` is an argument; readings come every second.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from neuron_watch.diagnosis.judge import IN_PROCESS_COMPILE_STALL, Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Label, LogLine, RankKey, WorkerSample

KB = default_knowledge_base()
N = "node-a"
HANG = 60.0  # longer than IN_PROCESS_COMPILE_STALL: the hang comes from the clock, not the window
BUDGET = JudgeSettings.compile_timeout
LAST_STEP = 5.0
ANNOUNCED = 5.5
BUILDING = {
    "tensorrt": "2026-06-17T04:35:53.083607Z Building TRT engine: models/det.onnx -> "
                "/home/ocr/.cache/turbo-ocr/det_9506347950415945255.trt (DET_MAX_SIDE=960)",
    "xla": "[Compiling module jit_apply_fn] Very slow compile? If you want to file a bug, run with envvar "
           "XLA_FLAGS=--xla_dump_to=/tmp/foo and attach the results.",
}
BUILT = "2026-06-17T05:05:50.433526Z Built: /home/ocr/.cache/turbo-ocr/det_9506347950415945255.trt (4.59903 MB)"
BUILDER, PEER = RankKey(N, 1), RankKey(N, 0)


def ln(key: RankKey, text: str, t: float) -> LogLine:
    return LogLine(key, text, t, 1_800_000_000.0 + t, f"rank-{key.rank}.log", int(t))


def announced(form: str = "tensorrt") -> Judge:
    """Two ranks step to step 5; then rank 1 announces a build in its own process (rank 0 waits
    for it in the next collective, silent: gloo prints nothing while it waits)."""
    j = Judge(KB, JudgeSettings(hang_timeout=HANG), start=0.0)
    for n in range(1, int(LAST_STEP) + 1):
        for key in (PEER, BUILDER):
            j.observe_line(ln(key, f"step {n} loss 1.5", float(n)))
    j.observe_line(ln(BUILDER, BUILDING[form], ANNOUNCED))
    return j


def live(form: str = "tensorrt") -> Judge:
    """:func:`announced`, with the node's process readings until the last step (one at its time)."""
    j = announced(form)
    read(j, LAST_STEP, builder_cpu=LAST_STEP)
    return j


def read(j: Judge, t: float, builder_cpu: float, stopped: bool = False) -> None:
    """The node's process reading at ``t``: rank 0 idle in the collective, rank 1's tree at ``builder_cpu``."""
    j.observe_workers([WorkerSample(PEER, 3.0, False, t), WorkerSample(BUILDER, builder_cpu, stopped, t)], t)


@dataclass(frozen=True)
class Case:
    form: str
    grows_until: float  # rank 1's tree CPU grows every second until then, then stays flat


CASES = {
    # a build of ten hang timeouts, its CPU growing all along; and one that hangs at once
    "tensorrt-building-long": Case("tensorrt", ANNOUNCED + 10 * HANG),
    "tensorrt-hung-at-once": Case("tensorrt", ANNOUNCED),
    "xla-building-long": Case("xla", ANNOUNCED + 10 * HANG),
    "xla-hung-after-a-while": Case("xla", ANNOUNCED + 2 * HANG),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_an_announced_compile_lasts_as_long_as_the_ranks_tree_uses_the_cpu(case: Case) -> None:
    j = live(case.form)
    last_growth = t = LAST_STEP  # (its tree's CPU seconds are the time it last grew: any growing count would do)
    while t < case.grows_until + HANG + 5:
        t += 1.0
        if t <= case.grows_until:
            last_growth = t
        read(j, t, builder_cpu=last_growth)
        v = j.verdict(t)
        if t - last_growth <= IN_PROCESS_COMPILE_STALL:
            assert v.label is Label.COMPILING and v.culprit == BUILDER, (t, v.reason)
        elif t - last_growth <= HANG:
            # the build is over or stuck: the clock runs from the tree's last growth, as from a compile's end
            assert v.label is Label.HEALTHY, (t, v.reason)
        else:
            assert v.label is Label.COLLECTIVE_HANG and v.culprit == BUILDER, (t, v.reason)
            assert v.reason.startswith(f"no rank progressed and none compiled for {t - last_growth:.0f}s"), v.reason
            return
    pytest.fail("no hang once the tree stopped growing")


@pytest.mark.parametrize("form", BUILDING)
def test_without_process_readings_an_announced_compile_lasts_the_compile_budget(form: str) -> None:
    """Offline (a log, no readings): the log ends inside the build, so the verdict is compiling."""
    j = announced(form)
    for t in (ANNOUNCED + HANG + 1, ANNOUNCED + 10 * HANG, ANNOUNCED + BUDGET):
        v = j.verdict(t)
        assert v.label is Label.COMPILING and v.culprit == BUILDER, (t, v.reason)
    assert j.verdict(ANNOUNCED + BUDGET + 1).label is Label.COLLECTIVE_HANG


def test_a_stopped_rank_that_announced_a_build_is_a_hang_at_the_hang_timeout() -> None:
    """SIGSTOP (a debugger, a frozen container) during the build: its tree stops growing, and a stopped
    rank is never compiling; the hang comes one hang timeout after its tree last grew."""
    j = live()
    for t in range(6, 20):
        read(j, float(t), builder_cpu=float(t))
    for t in range(20, 81):
        read(j, float(t), builder_cpu=19.0, stopped=True)
        v = j.verdict(float(t))
        assert v.label is (Label.HEALTHY if t - 19.0 <= HANG else Label.COLLECTIVE_HANG), (t, v.reason)
    assert BUILDER in j.verdict(80.0).ranks


def test_the_ranks_step_after_the_announcement_closes_it_and_its_cpu_proves_nothing_after() -> None:
    j = live()
    for t in range(6, 40):
        read(j, float(t), builder_cpu=float(t))
    assert j.verdict(39.0).label is Label.COMPILING
    j.observe_line(ln(BUILDER, BUILT, 40.0))  # (the build's end, then the step it blocked)
    j.observe_line(ln(PEER, "step 6 loss 1.5", 40.5))
    j.observe_line(ln(BUILDER, "step 6 loss 1.5", 40.5))
    for t in range(41, 120):  # rank 1 computes on, but prints no step: its CPU is no compile any more
        read(j, float(t), builder_cpu=float(t))
        v = j.verdict(float(t))
        assert v.label is (Label.HEALTHY if t - 40.5 <= HANG else Label.COLLECTIVE_HANG), (t, v.reason)


def test_a_build_that_resumes_using_the_cpu_is_compiling_again() -> None:
    """A build that paused (a file read, a lock) past the window is compiling again once its tree grows,
    until the hang timeout after its last growth would have come."""
    j = live()
    for t in range(6, 20):
        read(j, float(t), builder_cpu=float(t))
    for t in range(20, 20 + int(IN_PROCESS_COMPILE_STALL) + 5):
        read(j, float(t), builder_cpu=19.0)
    assert j.verdict(20.0 + IN_PROCESS_COMPILE_STALL + 4).label is Label.HEALTHY
    read(j, 60.0, builder_cpu=25.0)  # it computes again
    v = j.verdict(60.0)
    assert v.label is Label.COMPILING and v.culprit == BUILDER, v.reason


def test_order_not_time_closes_an_announcement_read_in_the_same_poll_as_a_step_or_a_builds_end() -> None:
    """Live, a node reads what a rank printed since its last poll at once, all at one time: the step a
    rank printed just before announcing a build, or the end of one build and the announcement of the
    next (turbo-ocr builds its engines one after another), come at the same time as the announcement.
    Only what comes after the announcement closes it."""
    j = Judge(KB, JudgeSettings(hang_timeout=HANG), start=0.0)
    for n in range(1, int(LAST_STEP)):
        for key in (PEER, BUILDER):
            j.observe_line(ln(key, f"step {n} loss 1.5", float(n)))
    j.observe_line(ln(PEER, f"step {LAST_STEP:g} loss 1.5", LAST_STEP))
    j.observe_line(ln(BUILDER, f"step {LAST_STEP:g} loss 1.5", LAST_STEP))  # one poll: the step,
    j.observe_line(ln(BUILDER, BUILDING["tensorrt"], LAST_STEP))  # then the announcement
    read(j, LAST_STEP, builder_cpu=LAST_STEP)
    for t in range(6, 100):
        read(j, float(t), builder_cpu=float(t))
    v = j.verdict(99.0)
    assert v.label is Label.COMPILING and v.culprit == BUILDER, v.reason
    j.observe_line(ln(BUILDER, BUILT, 100.0))  # one poll: that build's end, the next one's announcement
    j.observe_line(ln(BUILDER, BUILDING["tensorrt"].replace("det", "rec"), 100.0))
    for t in range(100, 200):
        read(j, float(t), builder_cpu=float(t))
    v = j.verdict(199.0)
    assert v.label is Label.COMPILING and v.culprit == BUILDER, v.reason
    j.observe_line(ln(BUILDER, BUILT.replace("det", "rec"), 200.0))  # one poll: its end, then the step
    j.observe_line(ln(BUILDER, f"step {LAST_STEP + 1:g} loss 1.5", 200.0))
    assert j.verdict(200.0).label is Label.HEALTHY


def test_a_hung_ranks_occasional_tick_is_not_a_compiles_pace() -> None:
    """A rank that waits forever still wakes now and then (a library's watchdog thread, the worker server
    the probe asks): measured on the toy's stuck rank, one clock tick (10 ms) every 2 s or so. That is no
    compile: the hang comes at the hang timeout after the announcement, as with a tree that never grows."""
    j = live()
    cpu = LAST_STEP
    for t in range(6, 120):
        if t % 2 == 0:
            cpu += 0.01
        read(j, float(t), builder_cpu=cpu)
        v = j.verdict(float(t))
        if t - ANNOUNCED <= IN_PROCESS_COMPILE_STALL:
            assert v.label is Label.COMPILING, (t, v.reason)
        elif t - LAST_STEP <= HANG:
            assert v.label is Label.HEALTHY, (t, v.reason)
        else:
            assert v.label is Label.COLLECTIVE_HANG and v.culprit == BUILDER, (t, v.reason)
            return
    pytest.fail("the ticks kept it compiling")


@pytest.mark.parametrize("form", BUILDING)
def test_offline_the_ranks_step_after_the_announcement_ends_the_compile(form: str) -> None:
    """Without process readings, the rank's own step after its announcement closes the compile: the
    announcement was the newest compile beat, so the beat's window does not keep it compiling
    (MXNet's autotuning announced, then its Speedometer's rows: a SageMaker job that trains on)."""
    j = announced(form)
    j.observe_line(ln(PEER, "step 6 loss 1.5", ANNOUNCED + 20))
    j.observe_line(ln(BUILDER, "step 6 loss 1.5", ANNOUNCED + 20))
    v = j.verdict(ANNOUNCED + 21)
    assert v.label is Label.HEALTHY, v.reason
    j.observe_line(ln(BUILDER, BUILDING[form], ANNOUNCED + 30))  # a second build announced: compiling again
    assert j.verdict(ANNOUNCED + 31).label is Label.COMPILING

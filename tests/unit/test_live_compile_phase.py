"""A compile the program announces in its own words and runs in its own process, live (judge.py
``RankState.phase_running``).

turboocr-17 (tests/data/real-logs/compiling/turboocr-17-building-trt-engines-hours) builds its TensorRT
engines in the server's process: "Building TRT engine: ..." then nothing for 30 to 44 minutes, then
"Built: ...". No compiler process is there to sample; the announcement is the evidence. Replayed through the
live path (tests/fixtures/live_replay.py), the build is waited for up to the compile budget, and a silence
after it ended, or past that budget, is still a hang.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.config import WatchConfig
from neuron_watch.diagnosis.classify import KnowledgeBase
from neuron_watch.diagnosis.judge import JudgeSettings
from neuron_watch.events import Action, CompilerSample, Label, LogLine, RankKey
from neuron_watch.runtime import knowledge_base
from tests.fixtures.live_replay import NODE, RANK, SOURCE, End, LiveJob, live_lines, replay

EXCERPT = Path(__file__).resolve().parents[1] / "data" / "real-logs" / "compiling" / \
    "turboocr-17-building-trt-engines-hours.log"
COMPILE_BUDGET = JudgeSettings.compile_timeout
STARTUP = JudgeSettings.startup_timeout


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return knowledge_base(WatchConfig())


def _job(kb: KnowledgeBase, lines: int) -> tuple[LiveJob, float]:
    """The live job after the excerpt's first ``lines`` lines, and the time of the last of them."""
    read = live_lines(EXCERPT.read_text(encoding="utf-8"))[:lines]
    job = LiveJob(kb, read[0].mono)
    for line in read:
        job.feed(line)
        assert job.tick(line.mono) is None
    return job, read[-1].mono


def test_the_whole_excerpt_is_a_build_waited_for_live(kb: KnowledgeBase) -> None:
    outcome = replay(EXCERPT.read_text(encoding="utf-8"), kb, End.GOES_ON)
    assert (outcome.verdict.label, outcome.action) == (Label.COMPILING, Action.WAIT), outcome.verdict.reason


def test_a_build_silent_past_the_startup_timeout_is_not_a_hang(kb: KnowledgeBase) -> None:
    job, built_from = _job(kb, 1)  # "Building TRT engine: models/det.onnx ..."
    assert STARTUP < 1797 + 60  # the real build took 1,797 s: past the startup timeout
    for t in (built_from + STARTUP + 60, built_from + 1797):
        assert job.tick(t) is None, job.outcome
        assert job.judge.verdict(t).label is Label.COMPILING


def test_a_build_silent_past_the_compile_budget_is_a_hang(kb: KnowledgeBase) -> None:
    job, built_from = _job(kb, 1)
    outcome = job.tick(built_from + COMPILE_BUDGET + STARTUP + 1)
    assert outcome is not None and outcome.action is Action.RESTART
    assert outcome.verdict.label is Label.COLLECTIVE_HANG, outcome.verdict.reason


def test_a_silence_after_the_build_ended_is_a_hang_at_the_startup_timeout(kb: KnowledgeBase) -> None:
    job, built = _job(kb, 2)  # ... then "Built: ...det...trt"
    assert job.tick(built + STARTUP / 2) is None
    outcome = job.tick(built + STARTUP + 60)
    assert outcome is not None and outcome.verdict.label is Label.COLLECTIVE_HANG, job.judge.verdict(built)


def test_a_compiler_process_seen_after_the_announcement_bounds_it_by_its_cpu(kb: KnowledgeBase) -> None:
    # compiling/aws-neuron-sdk-892-neuronx-cc-passes-running-legalize: neuronx-cc's pass log, a compile in a
    # process of its own; once the node saw that process, the compile lasts as long as its CPU moves
    job = LiveJob(kb, 0.0)
    key = RankKey(NODE, RANK)
    job.feed(LogLine(key, "2024-05-22T17:01:38Z SpillPSum finished after 0.005 seconds", 1.0, 1.0, SOURCE, 1))
    assert job.tick(2.0) is None and job.judge.verdict(2.0).label is Label.COMPILING
    for t in (3.0, STARTUP / 2, STARTUP + 50):  # alive, its CPU stuck at 10 s: a compiler that hangs
        job.judge.observe_compilers([CompilerSample(key, 4242, 10.0, t)], t)
    outcome = job.tick(STARTUP + 60)
    assert outcome is not None and outcome.verdict.label is Label.COLLECTIVE_HANG, outcome.verdict.reason

"""The live path reads a crash as offline ``diagnose`` does (diagnosis/crashreading.py), on real lines.

Each excerpt of the real-log corpus (tests/data/real-logs/) is replayed as one rank's output through the
node's batches and error blocks, the coordinator's judge as the composition root makes it, and recovery
(tests/fixtures/live_replay.py); the rank then exits with 1, as the process did.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.config import WatchConfig
from neuron_watch.diagnosis.classify import KnowledgeBase
from neuron_watch.diagnosis.crashreading import CrashReader
from neuron_watch.diagnosis.errorclass import CONFIG_ADVICE
from neuron_watch.events import Action, Evidence, Label, LogLine, RankKey, Verdict
from neuron_watch.runtime import knowledge_base
from tests.fixtures.live_replay import End, advice_said, replay

CORPUS = Path(__file__).resolve().parents[1] / "data" / "real-logs"


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return knowledge_base(WatchConfig())


def _text(name: str) -> str:
    return (CORPUS / f"{name}.log").read_text(encoding="utf-8", errors="replace")


#: configuration errors the live path restarted before it read crashes as diagnose does: a program-mistake
#: exception before any progress, its frames cut off (bionemo, pytorch-xla) or under a set-up function
#: (tgi), and messages that state the set-up they refuse (tensorflow, lightning)
STOPPED = [
    "config_error/bionemo-recipes-784-esm2-num-layers-not-divisible-by-pp",
    "config_error/pytorch-xla-2483-xmp-spawn-nprocs-2-must-be-1-or-8",
    "config_error/tgi-425-shard-assert-each-process-one-gpu",
    "config_error/tensorflow-34568-collective-ops-configured-at-startup",
    "config_error/lightning-18728-cuda-initialized-before-trainer-fork",
    # the refusal is worded on the last line of a message wrapped in a box: the node sends it with the error
    "config_error/ray-39128-trn1-two-workers-one-neuron-core-xrtcompile",
]


@pytest.mark.parametrize("name", STOPPED)
def test_a_configuration_error_is_stopped_live_with_its_advice(kb: KnowledgeBase, name: str) -> None:
    outcome = replay(_text(name), kb, End.EXIT)
    assert outcome.verdict.label is Label.CONFIG_ERROR, outcome.verdict.reason
    assert outcome.action is Action.STOP, outcome.reason
    assert "not fixed by a restart" in outcome.reason
    assert CONFIG_ADVICE in advice_said(outcome)  # what the console prints with the verdict
    assert diagnose_paths([str(CORPUS / f"{name}.log")], kb=kb).verdict.action is Action.STOP  # the same offline


#: program mistakes raised in the work (a test pass, a loss), or after progress: a bug of the program,
#: restarted live as offline
RESTARTED = [
    "other_crash/deepdeblur-49-keyerror-10-at-test",
    "other_crash/fairmot-242-keyerror-replica-0",
    "other_crash/instructlab-217-user-valueerror",
]


@pytest.mark.parametrize("name", RESTARTED)
def test_a_mistake_raised_in_the_work_is_restarted_live(kb: KnowledgeBase, name: str) -> None:
    outcome = replay(_text(name), kb, End.EXIT)
    assert outcome.verdict.label is Label.OTHER_CRASH, outcome.verdict.reason
    assert outcome.action is Action.RESTART


def test_a_healthy_run_with_an_error_word_stays_healthy_live(kb: KnowledgeBase) -> None:
    # Keras prints FutureWarnings naming TypeError-like words while it trains: it goes on, and live it waits
    outcome = replay(_text("healthy/pixellib-29-keras-futurewarnings"), kb, End.GOES_ON)
    assert outcome.action is Action.WAIT
    assert outcome.verdict.label is Label.HEALTHY


def test_the_reader_leaves_what_is_no_crash_alone() -> None:
    key = RankKey("n", 0)
    line = LogLine(key, "ValueError: bad value", 1.0, 1.0, "rank-0.log", 3)
    asked: list[Evidence] = []

    def around(ev: Evidence) -> tuple[list[LogLine], int]:
        asked.append(ev)
        return [line], 0

    reader = CrashReader(around)
    ev = Evidence(key, line.text, "host.unrecognised_error", line.source, line.lineno, line.mono)
    hang = Verdict(Label.COLLECTIVE_HANG, Action.RESTART, ranks=(key,), culprit=key, evidence=(ev,))
    assert reader.read(hang, False) is hang
    assert not asked  # no crash: the lines are not even looked up
    crash = Verdict(Label.OTHER_CRASH, Action.RESTART, ranks=(key,), culprit=key, evidence=(ev,))
    assert reader.read(crash, False).label is Label.CONFIG_ERROR  # before any progress: set-up
    assert reader.read(crash, True).label is Label.OTHER_CRASH  # after progress: the program's own bug


def test_a_launcher_report_is_read_with_the_child_exception_the_node_sent_before_it() -> None:
    # config_error/pickscore-2-accelerate-deepspeed-config-valueerror: accelerate's child refuses its config,
    # then torchrun's agent reports the child's exit; the verdict rests on the report, live as offline
    texts = _text("config_error/pickscore-2-accelerate-deepspeed-config-valueerror").splitlines()
    key = RankKey("n", 0)
    lines = [LogLine(key, t, float(i), float(i), "rank-0.log", i + 1) for i, t in enumerate(texts)]
    report = lines[-1]
    assert "failed (exitcode: 1) local_rank: 0" in report.text
    ev = Evidence(key, report.text, "torch.elastic.child_failed", report.source, report.lineno, report.mono)
    crash = Verdict(Label.OTHER_CRASH, Action.RESTART, ranks=(key,), culprit=key, evidence=(ev,))
    read = CrashReader(lambda e: (lines, len(lines) - 1) if e == ev else None).read(crash, False)
    assert (read.label, read.action) == (Label.CONFIG_ERROR, Action.STOP), read.reason
    assert "the launcher reported the child's exit" in read.reason
    assert read.evidence[0].text.startswith("ValueError: When using `deepspeed_config_file`")

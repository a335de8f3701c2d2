"""A bare fatal signal or abort takes its cause from the error line the rank printed just before it, in the
live judge (a node's classified batch) and offline alike. Real lines from the corpus
(tests/data/real-logs, named by excerpt); near misses keep the crash."""

# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
from __future__ import annotations

from collections.abc import Sequence

import pytest

from neuron_watch.diagnosis.classify import classify_batch
from neuron_watch.diagnosis.judge import CAUSE_BEFORE_LINES, Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label, LogLine, RankKey, RankSpan, Verdict

KB = default_knowledge_base()
KEY = RankKey("trn-a", 0)

# config_error/tensorflow-19347-cudnn-runtime-older-than-compiled-segfault
CUDNN = ("Loaded runtime CuDNN library: 7.1.1 but source was compiled with: 7.2.1.  CuDNN library major and minor version needs to match or have higher minor version in case of CuDNN 7.0 or later version. If using a binary install, upgrade your CuDNN library.  If building from sources, make sure the library loaded at runtime is compatible with the version specified during compile configuration.")
SEGV = "Segmentation fault"
# comm_error/byteps-138-glog-check-failed-nccl-unhandled-system-error
BYTEPS = ["[2019-10-29 01:02:51.983028: F byteps/common/nccl_manager.cc:120] Check failed: r == ncclSuccess NCCL error: unhandled system error",
          "Aborted"]
STEP = "step 12 loss 2.3412"


def records(texts: Sequence[str]) -> list[LogLine]:
    return [LogLine(KEY, t, float(i), 1000.0 + i, "rank-0.log", i + 1) for i, t in enumerate(texts)]


def offline(texts: Sequence[str]) -> Verdict:
    judge = Judge(KB, JudgeSettings(), 0.0)
    judge.observe_lines(records(texts))
    return judge.verdict(float(len(texts)), final=True)


def live(texts: Sequence[str]) -> Verdict:
    """The coordinator's judge fed the batch a node classified (only the matched lines cross)."""
    judge = Judge(KB, JudgeSettings(), 0.0)
    lines = records(texts)
    found = classify_batch(KB, lines)
    judge.observe_batch([RankSpan(KEY, lines[0].mono, lines[-1].mono, lines[-1].text)], found.matches, found.progress)
    return judge.verdict(float(len(texts)), final=True)


@pytest.mark.parametrize("judged", [offline, live])
@pytest.mark.parametrize(("texts", "label", "action", "cause"), [
    ([STEP, CUDNN, SEGV], Label.CONFIG_ERROR, Action.STOP, CUDNN),
    (BYTEPS, Label.COMM_ERROR, Action.RESTART, BYTEPS[0]),
])
def test_a_bare_signal_takes_the_cause_of_the_line_before_it(judged: object, texts: list[str], label: Label,
                                                              action: Action, cause: str) -> None:
    assert callable(judged)
    v = judged(texts)
    assert (v.label, v.action) == (label, action), v.reason
    assert v.evidence[0].text == cause and v.culprit == KEY


@pytest.mark.parametrize("judged", [offline, live])
@pytest.mark.parametrize(("name", "texts"), [
    ("the rank went on after the error", [CUDNN, STEP, SEGV]),
    ("the error is too far back in the stream", [CUDNN, *[f"batch {i} ok" for i in range(CAUSE_BEFORE_LINES + 1)], SEGV]),
    ("SIGKILL comes from outside the process", [CUDNN, "Killed"]),
])
def test_a_signal_keeps_its_crash_without_a_cause_right_before_it(judged: object, name: str, texts: list[str]) -> None:
    assert callable(judged)
    v = judged(texts)
    assert v.label is not Label.CONFIG_ERROR, (name, v.reason)
    assert v.evidence and v.evidence[0].text != CUDNN, name


OTHER = RankKey("trn-a", 1)


def _batch(judge: Judge, said: Sequence[tuple[RankKey, str]], t: float) -> None:
    """One batch as a node classifies and sends it (matches compacted, plain-progress ranks as rows)."""
    lines = [LogLine(key, text, t + i / 100, 1000.0 + t + i / 100, f"rank-{key.rank}.log", int(t) * 100 + i)
             for i, (key, text) in enumerate(said)]
    spans: dict[RankKey, RankSpan] = {}
    for ln in lines:
        first = spans[ln.key].first if ln.key in spans else ln.mono
        spans[ln.key] = RankSpan(ln.key, first, ln.mono, ln.text)
    found = classify_batch(KB, lines)
    judge.observe_batch(list(spans.values()), found.matches, found.progress)


#: rank 0's step 6 after its error line, each way a progress line reaches the judge: a match that raises
#: the job's step (``_advance``), a match of a step the job has (``_observe_matches``' steady step: rank 0 printed another
#: line too), a progress row (``_progress_rows``: rank 0 printed only that step, rank 1 showed it first)
PATHS = {
    "advance": [(KEY, "step 6 loss 2.1")],
    "steady step": [(OTHER, "step 6 loss 2.1"), (KEY, "step 6 loss 2.1"), (KEY, "tokens/s 4810")],
    "progress row": [(OTHER, "step 6 loss 2.1"), (KEY, "step 6 loss 2.1")],
}


@pytest.mark.parametrize("path", PATHS)
def test_progress_withdraws_the_error_lines_before_it_on_every_path(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rank went on after an error line that states a cause: whichever way its progress line comes,
    that line is withdrawn (``RankState.errors``), so a bare fatal signal later is not read as its cause."""
    judge = Judge(KB, JudgeSettings(), 0.0)
    for step in range(1, 6):
        _batch(judge, [(KEY, f"step {step} loss 2.{step}"), (OTHER, f"step {step} loss 2.{step}")], float(step))
    _batch(judge, [(KEY, CUDNN)], 5.5)
    assert [e.text for e in judge.ranks[KEY].errors] == [CUDNN]
    advanced: list[RankKey] = []
    advance = judge._advance
    monkeypatch.setattr(judge, "_advance", lambda st, *a: (advanced.append(st.key), advance(st, *a)))
    _batch(judge, PATHS[path], 6.0)
    assert (KEY in advanced) is (path == "advance")  # the path taken is the one named
    st = judge.ranks[KEY]
    assert (st.errors, st.unexplained, st.step, st.last_progress) == ((), None, 6, 6.0 + (path != "advance") / 100)
    _batch(judge, [(KEY, SEGV)], 7.0)
    v = judge.verdict(8.0, final=True)
    assert v.label is not Label.CONFIG_ERROR and all(e.text != CUDNN for e in v.evidence), v.reason

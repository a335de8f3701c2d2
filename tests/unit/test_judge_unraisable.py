"""An exception Python ignored ("Exception ignored in: ...", sys.unraisablehook's default report) is not
the rank's failure: the traceback header and the exception line after it are the ignored exception's.

Real lines: Lightning-AI/pytorch-lightning#4404 (tqdm's __del__ at the end of training, glued to the
bar it was closing) and the DataLoader iterator's __del__ at shutdown. Near misses: the same traceback
without the announcement (a crash), and a real crash after an ignored one.
"""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.classify import UNRAISABLE_SIGNATURE, compact_matches
from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label, LogLine, RankKey

KB = default_knowledge_base()
STEPS = [f"step {s} loss 2.{s:03d} step_time 0.5s" for s in range(1, 4)]
IGNORED = [
    "Epoch 1: 100%|##########| 1875/1875 [00:09<00:00, 100.37it/s, loss=0.336, v_num=24, train_loss=2.33, "
    "train_acc=0.143Exception ignored in: <function tqdm.__del__ at 0x7fd9c4374f80>",
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.8/dist-packages/tqdm/std.py", line 1124, in __del__',
    "    self.close()",
    "AttributeError: 'tqdm' object has no attribute 'disable'",
]
LOADER = [
    "Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f2b4c1b7ee0>",
    "Traceback (most recent call last):",
    '  File "/opt/conda/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1479, in __del__',
    "    self._shutdown_workers()",
    "AssertionError: can only test a child process",
]
CRASH = [
    "Traceback (most recent call last):",
    '  File "train.py", line 88, in <module>',
    "    main()",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
]


def _final(lines: list[str]) -> tuple[Label, Action]:
    judge = Judge(KB, JudgeSettings(), 1000.0)
    judge.observe_lines([LogLine(RankKey("n0", 0), t, 1000.0 + i, 1000.0 + i, "rank-0.log", i + 1)
                         for i, t in enumerate(lines)])
    v = judge.verdict(1000.0 + len(lines), final=True)
    return v.label, v.action


@pytest.mark.parametrize(("lines", "verdict"), [
    ([*STEPS, *IGNORED], (Label.HEALTHY, Action.WAIT)),
    ([*STEPS, *LOADER], (Label.HEALTHY, Action.WAIT)),
    ([*STEPS, *IGNORED[:2]], (Label.HEALTHY, Action.WAIT)),  # cut after the header
    ([*STEPS, *IGNORED[1:]], (Label.OTHER_CRASH, Action.RESTART)),  # not announced: a crash
    ([*STEPS, *LOADER, *CRASH], (Label.OTHER_CRASH, Action.RESTART)),  # a crash after an ignored one
    # announced without its traceback, and a crash's traceback long after (lines are 1 s apart here)
    ([*STEPS, LOADER[0], *STEPS, *STEPS, *CRASH], (Label.OTHER_CRASH, Action.RESTART)),
])
def test_an_ignored_exception_is_not_the_ranks_failure(lines: list[str], verdict: tuple[Label, Action]) -> None:
    assert _final(lines) == verdict


def test_compact_matches_keeps_the_announcement() -> None:
    """The batch path (a node's matches to the coordinator) keeps it: the judge needs it in order."""
    matches = [(0, m) for t in [*STEPS, *LOADER] if (m := KB.classify(t)) is not None]
    kept = [matches[i][1].signature.id for i in compact_matches(matches)]
    assert UNRAISABLE_SIGNATURE in kept

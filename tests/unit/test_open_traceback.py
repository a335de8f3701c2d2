"""A log that ends inside a Python traceback, cut before its exception line, is not healthy.

Real lines: facebookresearch/SlowFast#337 (the excerpt ends in the frames of TCPStore's rendezvous),
and near misses: the same frames followed by training progress (an exception logged and survived), a
warning that names its file the way ``warnings`` prints it, not as a frame.
"""

from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_lines
from neuron_watch.diagnosis.exctaxonomy import in_traceback
from neuron_watch.events import Action, Label, LogLine, RankKey

FRAMES = [
    '  File "/home/alfasly/anaconda3/envs/pyt/lib/python3.7/site-packages/torch/distributed/distributed_c10d.py", '
    'line 423, in init_process_group',
    "    store, rank, world_size = next(rendezvous_iterator)",
    '  File "/home/alfasly/anaconda3/envs/pyt/lib/python3.7/site-packages/torch/distributed/rendezvous.py", '
    'line 133, in _tcp_rendezvous_handler',
    "    store = TCPStore(result.hostname, result.port, world_size, start_daemon, timeout)",
]
STEPS = [f"step {s} loss 6.9{s} step_time 0.5s" for s in (10, 20)]
WARN = ("/opt/conda/lib/python3.8/site-packages/torch/nn/parallel/distributed.py:1010: UserWarning: find_unused_"
        "parameters=True was specified in DDP constructor, but did not find any unused parameters")


def _verdict(lines: list[str]) -> tuple[Label, Action]:
    v, _ = diagnose_lines(LogLine(RankKey("n0", 0), t, 1000.0 + i, 1000.0 + i, "rank-0.log", i + 1)
                          for i, t in enumerate(lines))
    return v.label, v.action


@pytest.mark.parametrize(("lines", "verdict"), [
    (FRAMES, (Label.OTHER_CRASH, Action.RESTART)),
    ([*STEPS, *FRAMES[:3]], (Label.OTHER_CRASH, Action.RESTART)),
    ([*FRAMES, *STEPS], (Label.HEALTHY, Action.WAIT)),
    ([*STEPS, WARN], (Label.HEALTHY, Action.WAIT)),
])
def test_log_ending_inside_a_traceback(lines: list[str], verdict: tuple[Label, Action]) -> None:
    assert _verdict(lines) == verdict


def test_another_ranks_progress_after_the_frames_keeps_the_job_healthy() -> None:
    """A rank that printed a stack and went quiet while another went on is not judged a crash."""
    lines = [LogLine(RankKey("n0", 0), t, 1000.0 + i, 1000.0 + i, "rank-0.log", i + 1) for i, t in enumerate(FRAMES)]
    lines += [LogLine(RankKey("n0", 1), t, 1010.0 + i, 1010.0 + i, "rank-1.log", i + 1) for i, t in enumerate(STEPS)]
    v, _ = diagnose_lines(lines)
    assert (v.label, v.action) == (Label.HEALTHY, Action.WAIT)


def test_in_traceback_reads_the_last_two_lines_only() -> None:
    assert in_traceback(FRAMES[-2:]) == FRAMES[-2]
    assert in_traceback(["[rank6]:   File \"train.py\", line 12, in main", "[rank6]:     run()"]) is not None
    assert in_traceback([FRAMES[0], "next line", "another"][-2:]) is None
    assert in_traceback([WARN]) is None
    assert in_traceback([]) is None

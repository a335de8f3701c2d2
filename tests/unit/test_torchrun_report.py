"""torchrun's final failure report: once it is complete, torchrun only exits (the agent judges then)."""

from __future__ import annotations

from neuron_watch.launchers.torchrun import TorchrunLauncher

# torchrun 2.13's output after rank 1 of 4 exited with 3 (examples/toy/train.py --crash-at), verbatim.
REPORT = """\
E1121 16:48:20.010000 27255 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 3) local_rank: 1 (pid: 27262) of binary: /venv/bin/python3
Traceback (most recent call last):
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
/work/examples/toy/train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-21_16:48:20
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 27261)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 27261
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-21_16:48:19
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : 3 (pid: 27262) 
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================"""  # noqa: E501, W291


def test_the_report_ends_at_the_rule_after_the_root_cause_and_not_before() -> None:
    launcher = TorchrunLauncher(["train.py"], marker="unused")
    lines = REPORT.splitlines()
    ends = [i for i, line in enumerate(lines) if launcher.reports_end(line)]
    assert ends == [len(lines) - 1]  # the rules above the root cause do not end it


def test_a_rank_echoing_the_report_through_tee_does_not_end_it() -> None:
    launcher = TorchrunLauncher(["train.py"], marker="unused")
    assert not any(launcher.reports_end(f"[default0]:{line}") for line in REPORT.splitlines())

# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part D of the misses of round issue23-heldout-36 (never kill a healthy job, part 4), each as a rule
of its family, with real lines and the near misses the rule must leave alone: gRPC's notice that it skipped its fork
handlers, and a log whose first stamp is glued to a progress bar's redraw. Each line is from the corpus (named by its
excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

import calendar
import os
from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import _clock_hints, diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, read_line, read_quiet
from neuron_watch.events import Label

CORPUS = Path(__file__).resolve().parents[1] / "data" / "real-logs"

#: gRPC's notice that it skipped its fork handlers, at ERROR (gpr's head) and at INFO (absl's): quiet
FORK_NOTICES = [
    "E0518 11:58:19.406614241  152858 fork_posix.cc:76]           Other threads are currently calling into gRPC, skipping fork() handlers",  # corpus (ray-24917-rllib-grpc-fork-posix-e-records-spam)
    "\x1b[2m\x1b[33m(raylet)\x1b[0m E0602 08:50:37.031979683     140 fork_posix.cc:76]           Other threads are currently calling into gRPC, skipping fork() handlers",  # a public repository's test fixture of a Ray workflow's log
    "E0317 14:06:38.344884000 140704629352640 fork_posix.cc:76]             Other threads are currently calling into gRPC, skipping fork() handlers",  # Milvus's documentation, the output of a notebook cell
    "I0000 00:00:1739520189.216623 3264411 fork_posix.cc:75] Other threads are currently calling into gRPC, skipping fork() handlers",  # a public repository's saved notebook output (absl's head, INFO)
]


def _diagnosed(path: Path) -> Label:
    return diagnose_paths([str(path)], now=0.0).verdict.label


@pytest.mark.parametrize("line", FORK_NOTICES)
def test_grpc_fork_notice_is_quiet(line: str) -> None:
    """gRPC logs the skipped fork handlers at ERROR in older releases; the fork goes on: no failure."""
    assert read_quiet(line)
    assert read_line(line) is None


@pytest.mark.parametrize("line", [
    # gRPC's other records at ERROR, and the same words outside fork_posix.cc's record, are not the notice
    "1: 2022-05-26 01:44:11.574098: E tensorflow/neuron/runtime/model.cc:706] shard error code 13, error message nrt::infer_wait failed with grpc status code 0, error message \"\"; nrt status code 1004, details \"[NMGR:exec_wait] Inference completed with err: 1004",  # corpus (a Neuron runtime's gRPC status)
    "# `Other threads are currently calling into gRPC, skipping fork() handlers`",  # a public repository's comment quoting it
])
def test_near_fork_notice_is_not_quiet(line: str) -> None:
    assert not read_quiet(line)


def test_fork_notices_alone_are_healthy(tmp_path: Path) -> None:
    """A log of the notices (a run that goes on) is healthy, not a crash to restart; an E record of another file
    after them is still read."""
    assert _diagnosed(CORPUS / "healthy" / "ray-24917-rllib-grpc-fork-posix-e-records-spam.log") is Label.HEALTHY
    log = tmp_path / "fork.log"
    log.write_text(FORK_NOTICES[2] + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.HEALTHY
    other = tmp_path / "other.log"
    other.write_text(FORK_NOTICES[0] + "\nE0518 11:58:25.018785989  152858 chttp2_transport.cc:1103] Received a GOAWAY with error code ENHANCE_YOUR_CALM and debug data equal to \"too_many_pings\"\n")
    assert diagnose_paths([str(other)], now=0.0).verdict.label is not Label.HEALTHY


#: a first stamp glued to a progress bar's unterminated redraw: the glog record is a line of its own
GLUED_FIRST_STAMPS = [
    "~$ cd Zonos\nZonos$ uv run sample.py\nGenerating:   0%|                                      | 0/2588 [00:00<?, ?it/s]W0301 14:50:21.667000 3157 .venv/lib/python3.12/site-packages/torch/_inductor/utils.py:1137] [2/0] Not enough SMs to use max_autotune_gemm mode\nGenerating:   4%|█                           | 101/2588 [00:32<13:30,  3.07it/s]\n",  # corpus (zonos-168-inductor-not-enough-sms-then-generating-progress)
    "Epoch 1/6\n  0% 0/695 [00:00<?, ?it/s]W0429 14:43:58.576000 2088 torch/_inductor/utils.py:1731] [0/0_1] Not enough SMs to use max_autotune_gemm mode\n100% 695/695 [06:47<00:00,  1.71it/s]\n",  # a public repository's notes of a training run's result
]

#: a day long after both stamps (the year of a glog stamp is the file's: 2025)
_LATER = calendar.timegm((2025, 11, 29, 12, 0, 0))


@pytest.mark.parametrize("text", GLUED_FIRST_STAMPS)
def test_first_stamp_glued_to_a_bar_dates_the_log(tmp_path: Path, text: str) -> None:
    """The untimed head is dated by the glued stamp, not by the file's modification time months later: the bar after
    it is progress, not a rank silent for months."""
    log = tmp_path / "run.log"
    log.write_text(text)
    os.utime(log, (_LATER, _LATER))
    year, start = _clock_hints(text.encode(), float(_LATER))
    assert year == 2025
    assert start is not None and start < _LATER - 86400
    assert diagnose_paths([str(log)], now=float(_LATER)).verdict.label is Label.HEALTHY


def test_a_stamp_at_a_line_start_dates_the_log_as_before() -> None:
    text = "W0429 14:43:58.576000 2088 torch/_inductor/utils.py:1731] [0/0_1] Not enough SMs to use max_autotune_gemm mode\n"
    year, start = _clock_hints(text.encode(), float(_LATER))
    assert (year, start) == (2025, calendar.timegm((2025, 4, 29, 14, 43, 58)) + 0.576 - 0.5)


def test_form_rules_bumped() -> None:
    assert FORM_RULES >= 59

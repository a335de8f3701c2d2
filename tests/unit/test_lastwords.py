"""The log's last words (``diagnosis/lastwords.py``): an error a log ends on, in the layout the log's own
healthy records show, is never read as healthy; a layout it has not shown, a quiet level, an error the
process went on from, and words that only look like levels stay healthy."""

# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_lines
from neuron_watch.diagnosis.lastwords import LAST_WORDS_SIGNATURE, LastWords, failing_exception, level_places
from neuron_watch.events import Action, Label, LogLine, RankKey

#: healthy records of layouts the readers of conventions do not list, each from where it is printed:
#: NeMo's formatter (nemo/utils/formatters/base.py, as in the corpus's nemo-13140), a Python logging format
#: "%(levelname)s:%(asctime)s.%(msecs)03d:%(pathname)s:%(lineno)d: %(message)s" and one with the level padded in
#: brackets "%(asctime)s [%(levelname)8s] %(message)s (%(filename)s:%(lineno)s)" (public projects' configs),
#: log4j's PatternLayout "%d{yyyy-MM-dd HH:mm:ss,SSS}-[TS] %p %t %c - %m%n" and "%-5p [%t]: %m%n" (its
#: documentation's examples), and a glog-like copy with the date "%m-%d" (SkyPilot's sky_logging)
LAYOUTS = {
    "nemo": ("[NeMo I 2025-04-21 20:55:{s:02d} nemo_logging:393] step {s} reduced train loss 2.31",
             "[NeMo W 2025-04-21 20:55:{s:02d} nemo_logging:349] Loss scale is low, skipping",
             "[NeMo E 2025-04-21 20:56:03 nemo_logging:405] Checkpoint writer lost its worker; giving up"),
    "py-colon": ("INFO:2023-10-06_13:14:{s:02d}.424:/srv/train.py:88: epoch 1 step {s}",
                 "WARNING:2023-10-06_13:14:{s:02d}.424:/srv/train.py:90: slow data loader",
                 "ERROR:2023-10-06_13:15:01.002:/srv/train.py:120: the data service refused the job"),
    "py-padded": ("2024-06-11 00:23:{s:02d},254 [    INFO] step {s} done (train.py:637)",
                  "2024-06-11 00:23:{s:02d},254 [ WARNING] slow step (train.py:640)",
                  "2024-06-11 00:24:01,296 [   ERROR] worker pool died (train.py:668)"),
    "log4j-ts": ("2012-06-06 10:45:{s:02d},000-[TS] INFO thread30 TrainLoop - step {s}",
                 "2012-06-06 10:45:{s:02d},000-[TS] WARN thread30 TrainLoop - slow step",
                 "2012-06-06 10:46:00,000-[TS] FATAL thread30 TrainLoop - shard store unreachable"),
    "log4j-short": ("INFO  [main]: step {s} committed",
                    "WARN  [main]: step {s} slow",
                    "ERROR [main]: could not commit the offsets"),
    # spdlog's default pattern "[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] %v" (include/spdlog/pattern_formatter-inl.h:
    # the level's short name in small letters)
    "spdlog": ("[2014-10-31 23:46:{s:02d}.678] [trainer] [info] step {s}",
               "[2014-10-31 23:46:{s:02d}.678] [trainer] [warning] slow step",
               "[2014-10-31 23:47:10.001] [trainer] [error] lost the parameter server"),
    "glog-like": ("I 11-26 17:48:{s:02d} cloud_vm_ray_backend.py:1249] Launching node {s}",
                  "W 11-26 17:48:{s:02d} cloud_vm_ray_backend.py:433] Got error(s) in one zone",
                  "E 11-26 17:52:19 backend_utils.py:992] Timed out: waited for more than 90 seconds for new workers"),
}


def _final(texts: list[str]) -> dict[object, tuple[int, str]]:
    words: LastWords[int] = LastWords()
    for i, text in enumerate(texts):
        words.observe("stream", text, i)
    return words.final_errors()


def _healthy(layout: str, n: int = 4) -> list[str]:
    return [LAYOUTS[layout][0].format(s=s) for s in range(n)]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_an_error_in_the_logs_own_level_column_is_its_last_word(layout: str) -> None:
    error = LAYOUTS[layout][2]
    found = _final([*_healthy(layout), error, "  (the error's message goes on here)"])
    assert list(found.values()) == [(4, "a record of error level in the log's own level column")]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_quiet_record_after_the_error_means_the_process_went_on(layout: str) -> None:
    healthy, warning, error = LAYOUTS[layout]
    assert _final([*_healthy(layout), error, healthy.format(s=9)]) == {}
    # a warning ends the log: a quiet level, no failure
    assert _final([*_healthy(layout), warning.format(s=9)]) == {}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_layout_the_log_has_not_shown_is_not_trusted(layout: str) -> None:
    """Fewer than three healthy records: the place of the level is not known, the error line is not read
    (the readers of conventions still read the ones they know)."""
    assert _final([*_healthy(layout, 2), LAYOUTS[layout][2]]) == {}


@pytest.mark.parametrize("text, place", [
    # the level's place: its index among the fields and the shapes of the fields before it
    ("2022-07-05 13:49:18,605 - mmcv - INFO - Reducer buckets have been rebuilt in this iteration.",
     (8, ("9-9-9", "9", "9", "9", "9", "-", "a", "-"))),
    ("INFO  [main]: step 3 committed", (0, ())),
    # a level of one letter carries the kind of the field after it: glog-like "I 11-26" and prose "I think" differ
    ("I 11-26 17:48:00 cloud_vm_ray_backend.py:1249] Launching", (0, ("9",))),
    ("I think the run is fine", (0, ("a",))),
])
def test_the_place_of_a_level(text: str, place: tuple[int, tuple[str, ...]]) -> None:
    assert level_places(text)[0][0] == place


@pytest.mark.parametrize("tail", [
    # words that look like levels and are not, at the end of a healthy log
    "E = mc^2 is what the toy model fits",
    "I think it is still training, error=0 errors: 0",
    "Evaluation done: error=0, errors: 0, nan_count=0, path=/data/nanotron/ckpt",
    "UserWarning: TypedStorage is deprecated",
    "distributed_backend=nccl",
])
def test_near_misses_after_healthy_records_stay_healthy(tail: str) -> None:
    assert _final([*_healthy("py-padded"), *_healthy("glog-like"), tail]) == {}


def test_a_level_word_in_a_message_is_not_a_level() -> None:
    """"ERROR" quoted in a record's message is at a place no healthy record put its level."""
    quoted = "2024-06-11 00:23:09,254 [    INFO] retried after an upstream ERROR: ok (train.py:637)"
    assert _final([*_healthy("py-padded"), quoted]) == {}


@pytest.mark.parametrize("text, name", [
    ("urllib3.exceptions.MaxRetryError: HTTPConnectionPool(host='localhost', port=8097): Max retries exceeded with url: /env/main", "urllib3.exceptions.MaxRetryError"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "RuntimeError"),
    ("java.net.ConnectException: Connection refused", "java.net.ConnectException"),
    ("UserWarning: TypedStorage is deprecated", None),
    ("torch.distributed.elastic.multiprocessing: starting workers", None),
])
def test_an_exception_line_names_a_failing_class(text: str, name: str | None) -> None:
    assert failing_exception(text) == name


def test_the_earliest_error_of_the_final_run_is_kept() -> None:
    """A cause is printed before its echoes: of the errors the stream ends on, the first."""
    layout = LAYOUTS["log4j-short"]
    found = _final([*_healthy("log4j-short"), layout[2], "ERROR [main]: shutting down after the error above"])
    assert found["stream"][0] == 4


def test_an_error_far_above_the_end_is_not_the_last_word() -> None:
    """More lines than an error's message and traceback after it: the log did not end on it."""
    layout = LAYOUTS["nemo"]
    assert _final([*_healthy("nemo"), layout[2], *[f"  plain output {i}" for i in range(20)]]) == {}


def _lines(texts: list[str]) -> list[LogLine]:
    key = RankKey("", -1)
    return [LogLine(key, text, 100.0 + i, 1.7e9 + i, "console.log", i + 1) for i, text in enumerate(texts)]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_diagnose_reads_a_log_that_ends_on_its_own_error_as_a_failure(layout: str) -> None:
    """Whichever reader names it (a convention's, or the log's own column when no convention does)."""
    healthy, _, error = LAYOUTS[layout]
    texts = [healthy.format(s=s) for s in range(5)]
    assert diagnose_lines(_lines(texts))[0].label is Label.HEALTHY
    verdict, _ = diagnose_lines(_lines([*texts, error]))
    assert (verdict.label, verdict.action) == (Label.OTHER_CRASH, Action.RESTART), verdict
    assert verdict.evidence[0].lineno == 6


# spdlog's small-letter levels are a convention since round issue23-heldout-30 part B (heldout.round30b): its error
# record is read by that form, no longer only by the log's own column
@pytest.mark.parametrize("layout", ["nemo"])
def test_layouts_no_convention_lists_are_read_by_their_own_column(layout: str) -> None:
    healthy, _, error = LAYOUTS[layout]
    verdict, _ = diagnose_lines(_lines([*[healthy.format(s=s) for s in range(5)], error]))
    assert verdict.evidence[0].signature == LAST_WORDS_SIGNATURE, verdict


def test_diagnose_takes_the_cause_the_error_states() -> None:
    """The cause comes from the error's form (errorclass): Rust's "(os error 111)", a refused connection, is
    comm_error; an error that states none is a crash to restart."""
    texts = [LAYOUTS["nemo"][0].format(s=s) for s in range(5)]
    refused = "[NeMo E 2025-04-21 20:56:03 nemo_logging:405] rendezvous store unreachable (os error 111)"
    verdict, _ = diagnose_lines(_lines([*texts, refused]))
    assert (verdict.label, verdict.evidence[0].signature) == (Label.COMM_ERROR, LAST_WORDS_SIGNATURE), verdict

"""Another process's progress inside a failure's error block (``diagnosis/interleaved.py``) and the second
reading it leads to (``diagnosis/offline_reading.py``): in one unnamed stream, a step printed between two
lines of one traceback is another process's, and its kind of progress after the traceback does not withdraw
the failure. Real lines: the Ray/Neuron traceback of the corpus's ``other_crash/aws-neuron-sdk-779-nrt-load-
status-1`` and NeMo's iteration lines of ``healthy/nemo-10128-training-epoch-iterations``."""

# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_lines, diagnose_paths
from neuron_watch.diagnosis.interleaved import MAX_BOX_LINES, InterleavedProgress
from neuron_watch.events import Action, Label, LogLine, RankKey

TRACEBACK = [
    "ray.exceptions.RayTaskError(RuntimeError): ray::_RayTrainWorker__execute.get_next() (pid=12769, ip=10.1.161.26, actor_id=5712cc6b027323366a2b484b06000000, repr=<ray.train._internal.worker_group.RayTrainWorker object at 0x7f0294243a00>)",
    '  File "/tmp/ray/session_2023-10-27_11-59-10_730715_155/runtime_resources/py_modules_files/_ray_pkg_af0222669bc6e932/ray/train/_internal/utils.py", line 118, in discard_return_wrapper',
    "    train_func(*args, **kwargs)",
    '  File "release/train_tests/trainium/test_trainium.py", line 52, in train_func',
    '    print(f"Loss after step {step}: {loss.cpu()}")',
    "RuntimeError: INTERNAL: From /job:c_localservice/replica:0/task:0:",
    "2 root error(s) found.",
    '  (0) INTERNAL: Nrt::Load failed on NeuronCores 0-0(2): nrt_load status=1, error message="Non specific failure".',
]
#: NeMo's progress (another program's: what a neighbour in one stream prints)
STEPS = [
    f"Training epoch 0, iteration {i}/9 | lr: 0.0006 | consumed_samples: {32 * (i + 1)} | global_batch_size: 32 | global_step: {i} | reduced_train_loss: {11.0 - i:.3f}"
    for i in range(6)
]
#: HF Trainer's progress (a convention of its own)
HF_STEP = "{'loss': 0.9678, 'grad_norm': 0.3437, 'learning_rate': 2.3e-06, 'epoch': 0.81}"


def _lines(texts: list[str], rank: int = -1) -> list[LogLine]:
    key = RankKey("", rank)
    return [LogLine(key, text, 100.0 + i, 1.7e9 + i, "console.log", i + 1) for i, text in enumerate(texts)]


def _found(texts: list[str], progress: set[int]) -> dict[RankKey, tuple[int, int, frozenset[str]]]:
    """What the detector finds when the lines at ``progress`` are NeMo's iteration lines."""
    detector = InterleavedProgress()
    for i, line in enumerate(_lines(texts)):
        detector.observe(i, line, "progress.nemo" if i in progress else None)
    return {k: (f.at, f.line.lineno, f.conventions) for k, f in detector.found.items()}


def test_progress_between_two_lines_of_one_traceback_is_another_process() -> None:
    texts = [STEPS[0], TRACEBACK[0], TRACEBACK[1], STEPS[1], *TRACEBACK[2:], STEPS[2]]
    assert _found(texts, {0, 3, 10}) == {RankKey("", -1): (1, 4, frozenset({"progress.nemo"}))}


def test_progress_after_the_block_or_before_it_is_not_inside_it() -> None:
    # the traceback whole, the steps around it: nothing says two processes wrote them
    assert _found([STEPS[0], *TRACEBACK, STEPS[1], "INFO saving checkpoint", STEPS[2]], {0, 9, 11}) == {}
    # a step after the exception line, then a line that opens a block of its own: two blocks, nothing inside one
    assert _found([*TRACEBACK[:6], STEPS[0], TRACEBACK[0]], {6}) == {}


def test_a_blank_line_inside_the_block_keeps_it_open() -> None:
    texts = [TRACEBACK[0], STEPS[0], "", *TRACEBACK[1:]]
    assert _found(texts, {1}) == {RankKey("", -1): (0, 2, frozenset({"progress.nemo"}))}


def _diagnose(tmp_path: Path, texts: list[str]) -> tuple[Label, Action, str]:
    log = tmp_path / "console.log"
    log.write_text("\n".join(texts) + "\n", encoding="utf-8")
    v = diagnose_paths([str(log)]).verdict
    return v.label, v.action, v.reason


def test_a_traceback_interleaved_with_another_programs_steps_is_the_failure(tmp_path: Path) -> None:
    texts = [STEPS[0], TRACEBACK[0], TRACEBACK[1], STEPS[1], TRACEBACK[2], TRACEBACK[3], STEPS[2], *TRACEBACK[4:],
             *STEPS[3:]]
    label, action, reason = _diagnose(tmp_path, texts)
    assert action is Action.RESTART and label is not Label.HEALTHY, reason
    assert "inside the error block of line 2 (line 4)" in reason


def test_the_same_lines_unmixed_stay_healthy(tmp_path: Path) -> None:
    """The rule needs the block cut by the progress: a failure whose lines are whole, then steps, is a
    failure the process went on from, as before (a caught and printed exception)."""
    assert _diagnose(tmp_path, [STEPS[0], *TRACEBACK, *STEPS[1:]])[:2] == (Label.HEALTHY, Action.WAIT)


def test_progress_of_another_convention_still_withdraws_it(tmp_path: Path) -> None:
    """Only the convention seen inside the block is another process's: the failing process's own kind of
    progress after its error says it went on."""
    texts = [STEPS[0], TRACEBACK[0], STEPS[1], *TRACEBACK[1:], STEPS[2], HF_STEP, HF_STEP]
    assert _diagnose(tmp_path, texts)[:2] == (Label.HEALTHY, Action.WAIT)


def test_a_named_rank_stream_is_read_once() -> None:
    """A rank's own stream holds its subprocesses' lines (live, each rank has its own stream): as the live
    judge reads it, the rank's steps after the block withdraw the error."""
    texts = [STEPS[0], TRACEBACK[0], STEPS[1], *TRACEBACK[1:], *STEPS[2:]]
    for rank, expected in ((3, Action.WAIT), (-1, Action.RESTART)):
        verdict, count = diagnose_lines(_lines(texts, rank))
        assert count == len(texts) and verdict.action is expected, (rank, verdict)


def test_a_plain_line_is_read_only_inside_an_open_block() -> None:
    """The lines no signature matched (a traceback's frames) are read only while a block is open in their
    stream: the traceback's header, which the table reads, opens it; a plain line before it is passed over."""
    lines = _lines([STEPS[0], "loading shards", TRACEBACK[0], STEPS[1], *TRACEBACK[1:]])
    detector = InterleavedProgress()
    detector.observe(0, lines[0], "progress.nemo")
    detector.observe_plain(1, lines[1])
    assert not detector.open
    detector.observe(2, lines[2], None)  # the exception line: a form the reader matched
    assert detector.open == {RankKey("", -1)}
    detector.observe(3, lines[3], "progress.nemo")
    for i in range(4, len(lines)):
        detector.observe_plain(i, lines[i])  # frames and source lines: no signature matches them
    assert [(f.at, f.line.lineno) for f in detector.found.values()] == [(2, 4)]


#: Open MPI's help message as config_error/deepmimic-85 pasted it (opal/util/show_help.c: one write)
RULE = "-" * 74
HELP = [RULE, 'The value of the MCA parameter "plm_rsh_agent" was set to a path', "that could not be found:", "",
        "  plm_rsh_agent: ssh : rsh", "", "Please either unset the parameter, or check that the path is correct", RULE]


def _found_plain(texts: list[str], progress: set[int]) -> list[tuple[int, int]]:
    """As :func:`_found`, the lines no signature matches (the rules, the message's prose) fed as plain lines."""
    detector = InterleavedProgress()
    for i, line in enumerate(_lines(texts)):
        if i in progress:
            detector.observe(i, line, "progress.hf_trainer")
        elif line.text.startswith(("-", " ")) or not line.text:
            detector.observe_plain(i, line)
        else:
            detector.observe(i, line, None)
    return [(f.at, f.line.lineno) for f in detector.found.values()]


def test_progress_between_the_rules_of_an_open_mpi_help_message_is_another_process() -> None:
    texts = [HF_STEP, *HELP[:3], HF_STEP, *HELP[3:], HF_STEP]
    assert _found_plain(texts, {0, 4, 10}) == [(1, 5)]
    # outside the message, before and after it: nothing
    assert _found_plain([HF_STEP, *HELP, HF_STEP], {0, 9}) == []
    # a closing rule right before the next message's opening one opens that one
    assert _found_plain([*HELP, RULE, "It looks like orte_init failed for some reason", HF_STEP, RULE], {10}) == [(8, 11)]


def test_a_rule_with_no_other_near_it_is_no_message() -> None:
    """A lone rule (a table's, a message cut by the paste) is closed by nothing within MAX_BOX_LINES lines: the
    steps after it are not inside a message, whatever rule comes far later."""
    prose = [f"line {i} of a report" for i in range(MAX_BOX_LINES + 1)]
    texts = [RULE, HF_STEP, *prose, RULE]
    assert _found_plain(texts, {1}) == []


def test_an_open_mpi_error_interleaved_with_another_programs_steps_is_the_failure(tmp_path: Path) -> None:
    texts = [HF_STEP, *HELP[:5], HF_STEP, *HELP[5:], HF_STEP, HF_STEP]
    label, action, reason = _diagnose(tmp_path, texts)
    assert (label, action) == (Label.CONFIG_ERROR, Action.STOP), reason
    assert "inside the error block of line 2 (line 7)" in reason
    # the same message whole, then the steps: the steps withdraw it, as before
    assert _diagnose(tmp_path, [HF_STEP, *HELP, HF_STEP, HF_STEP])[:2] == (Label.HEALTHY, Action.WAIT)

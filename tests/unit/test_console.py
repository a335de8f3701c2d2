"""The operator's console: one ``[neuron-watch]`` line per decision, formatted in one place
(neuron_watch.outputs.console), and a command line that hands everything after the launcher word on untouched."""

from __future__ import annotations

import io
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_watch.cli import parse_command_line
from neuron_watch.config import OPTIONS, WatchConfig, load_config
from neuron_watch.errors import UsageError
from neuron_watch.launchers.torchrun import TorchrunLauncher
from neuron_watch.outputs.console import ConsoleSink, attach_console, hang_timeout_source
from neuron_watch.outputs.eventlog import EventLog

NW = [sys.executable, "-m", "neuron_watch.cli"]

# The events of a real hang-and-restart run (examples/toy/demo.sh), abridged to their fields.
HANG_RUN = [
    {"event": "job_started", "generation": 0, "job_id": "nw-1", "node": "n1", "nodes": 1,
     "command": ["/v/bin/torchrun", "--log-dir", "/r/gen-0/torchrun/n1", "--redirects", "3", "--nproc_per_node", "3",
                 "train.py"], "checkpoint": None, "config": {"run_dir": "/r", "max_restarts": 3}},
    {"event": "recovery_phase", "generation": 0, "phase": "running", "previous": "starting"},
    {"event": "command", "generation": 0, "command": "capture_evidence", "nodes": ["n1"], "incident": "incident-1",
     "reason": "no rank progressed"},
    {"event": "verdict", "generation": 0, "label": "collective_hang", "action": "restart",
     "culprit": {"node": "n1", "rank": 2}, "reason": "no rank progressed and none compiled for 10s"},
    {"event": "incident", "generation": 0, "incident": 1, "artifacts": "/r/incidents/incident-1",
     "capture_seconds": 0.31, "missing_items": 0, "nodes_without_evidence": []},
    {"event": "stopped", "generation": 0, "node": "n1", "rung": "sigterm", "seconds": 0.7, "survivors": [],
     "answered": True},
    {"event": "restart", "generation": 1, "checkpoint": "/c/step_10", "restarts": 1},
    {"event": "job_finished", "generation": 1, "exit_code": 0, "restarts": 1, "state": "finished", "incidents": 1,
     "reason": "every node finished", "last_step": 30, "goodput": {"effective_ratio": 0.61, "wall_seconds": 70.2}},
]


def lines_of(events: list[dict[str, object]], level: str = "info") -> list[str]:
    out = io.StringIO()
    sink = ConsoleSink(level, hang_timeout="10s (--hang-timeout)", stream=out)
    for e in events:
        sink.emit(e)
    return out.getvalue().splitlines()


def test_every_decision_of_a_hang_and_restart_is_one_line_in_order() -> None:
    lines = lines_of(HANG_RUN)
    assert all(ln.startswith("[neuron-watch] ") for ln in lines)
    assert lines == [
        "[neuron-watch] start: job nw-1 on n1 (1 node); watching torchrun --nproc_per_node 3 train.py; "
        "hang timeout 10s (--hang-timeout), run dir /r",
        "[neuron-watch] failure seen: capturing evidence (incident-1) on 1 node(s) before anything is stopped",
        "[neuron-watch] verdict: collective_hang, culprit n1/rank2 (no rank progressed and none compiled for 10s)"
        " -> restart",
        "[neuron-watch] evidence captured: incident 1 in 0.3s -> /r/incidents/incident-1",
        "[neuron-watch] job stopped on n1 (sigterm, 0.7s)",
        "[neuron-watch] restarting as generation 1 from /c/step_10; restart 1 of 3, 2 left",
        "[neuron-watch] job finished: exit code 0, 1 restart(s), 1 incident(s), last step 30 (every node finished);"
        " goodput 61% of 70s spent training",
    ]


def test_levels_warning_keeps_failures_and_the_end_debug_adds_every_event() -> None:
    warning = lines_of(HANG_RUN, "warning")
    assert [ln.split(":")[0] for ln in warning] == ["[neuron-watch] verdict", "[neuron-watch] job finished"]
    debug = lines_of(HANG_RUN, "debug")
    assert len(debug) == len(HANG_RUN)
    assert any("recovery_phase" in ln and "phase=running" in ln for ln in debug)


def test_a_give_up_says_why_and_the_exit_code() -> None:
    (line,) = lines_of([{"event": "gave_up", "generation": 3, "reason": "max restarts (3) used up",
                         "label": "collective_hang", "exit_code": 5}])
    assert line == "[neuron-watch] giving up: max restarts (3) used up (label collective_hang, exit code 5)"


def test_compile_wait_is_a_line_when_it_begins_and_when_it_ends() -> None:
    lines = lines_of([
        {"event": "verdict", "generation": 0, "label": "compiling", "action": "wait",
         "culprit": {"node": "n1", "rank": 0}, "reason": "1 rank(s) compiling; the others may wait for them"},
        {"event": "verdict", "generation": 0, "label": "healthy", "action": "wait", "culprit": None, "reason": ""},
    ])
    assert lines[0].startswith("[neuron-watch] verdict: compiling, culprit n1/rank0 (1 rank(s) compiling")
    assert lines[1] == "[neuron-watch] verdict: healthy (ranks make progress)"


def test_each_recompile_is_one_line_with_the_guard_that_failed() -> None:
    (line,) = lines_of([{"event": "recompile", "generation": 0, "node": "n1", "rank": 1, "function": "inner",
                         "where": "/v/lib/python3.11/site-packages/torch/_dynamo/external_utils.py:67",
                         "reason": "tensor 'args[0]' size mismatch at index 0. expected 8, actual 12"}])
    assert line == ("[neuron-watch] recompile: n1/rank1 recompiles inner (external_utils.py:67): tensor 'args[0]' "
                    "size mismatch at index 0. expected 8, actual 12; the other ranks wait for it (torch.compile)")


def test_an_unknown_event_kind_still_prints_one_sensible_line() -> None:
    (line,) = lines_of([{"event": "blind", "generation": 0, "time": "x", "node": "n1",
                         "why": "no rank files\nyet " + "x" * 1000}])
    assert line.startswith("[neuron-watch] blind (generation 0): node=n1, why=no rank files yet")
    assert "\n" not in line and len(line) < 500


def test_a_broken_console_never_stops_the_event_log(tmp_path: Path) -> None:
    events = EventLog(str(tmp_path / "events.jsonl"))
    closed = io.StringIO()
    closed.close()
    attach_console(events, WatchConfig(), env={}, stream=closed)
    events.emit("job_finished", 0, exit_code=0)
    assert events.sink_failures == 0
    assert json.loads((tmp_path / "events.jsonl").read_text())["event"] == "job_finished"


@pytest.mark.parametrize(
    ("cli", "env", "says"),
    [
        ({"hang_timeout": "10"}, {}, "10s (--hang-timeout)"),
        ({}, {"NEURON_WATCH_HANG_TIMEOUT": "2m"}, "120s (NEURON_WATCH_HANG_TIMEOUT)"),
        ({}, {}, "calibrated (900s until 8 steps"),
    ],
)
def test_the_hang_timeout_says_where_it_comes_from(cli: dict[str, str], env: dict[str, str], says: str) -> None:
    assert hang_timeout_source(load_config(cli, env), env).startswith(says)


def test_log_level_has_a_flag_and_two_variables() -> None:
    assert load_config({}, {}).log_level == "info"
    assert load_config({}, {"NEURON_WATCH_LOG": "debug"}).log_level == "debug"
    assert load_config({"log_level": "warning"}, {"NEURON_WATCH_LOG": "debug"}).log_level == "warning"
    with pytest.raises(Exception, match="NEURON_WATCH_LOG"):
        load_config({}, {"NEURON_WATCH_LOG": "loud"})


# -- drop-in means drop-in ---------------------------------------------------------------------


def _prefixes() -> list[str]:
    out = set()
    for opt in OPTIONS:
        for n in range(3, len(opt.flag) + 1):  # "--c" ... "--compile-timeout"
            out.add(opt.flag[:n])
    return sorted(out)


@pytest.mark.parametrize("value", [None, "1"])
def test_every_prefix_of_our_options_after_torchrun_reaches_torchrun_unchanged(value: str | None) -> None:
    launched = []
    for prefix in [*_prefixes(), "-h", "--help", "--version", "--", "--dry-run=1", "--c=1"]:
        user = ["--nproc_per_node", "2", "train.py", prefix, *([value] if value else []), "--lr", "1e-3"]
        args = parse_command_line(["--hang-timeout", "10", "torchrun", *user])
        assert args.command == "torchrun" and args.launcher_args == user, prefix
        assert load_config(vars(args), {}).hang_timeout == 10.0
        argv = TorchrunLauncher(list(args.launcher_args), "m").command("/g", "")
        launched.append(argv)
        assert argv[-len(user):] == user, prefix


def test_srun_arguments_are_not_ours_either() -> None:
    user = ["-N", "2", "--c", "1", "--quiet", "./run.sh", "--max-restarts", "9"]
    args = parse_command_line(["--quiet", "srun", *user])
    assert args.launcher_args == user
    assert load_config(vars(args), {}).quiet and load_config(vars(args), {}).max_restarts == 3


@pytest.mark.parametrize("argv", [["--hang", "10", "torchrun", "x.py"], ["--quie", "torchrun", "x.py"]])
def test_our_own_options_are_never_abbreviated(argv: list[str]) -> None:
    with pytest.raises(UsageError, match="unrecognized"):
        parse_command_line(argv)


def test_dry_run_prints_the_training_arguments_byte_for_byte(tmp_path: Path) -> None:
    # ("--run" is left out: torchrun's own parser refuses it, ambiguous among ITS options, as plain torchrun does)
    user = ["--nproc_per_node", "1", "train.py", "--c", "1", "--p", "--pr", "x y", "--ch", "--q=ü"]
    r = subprocess.run([*NW, "--dry-run", "--no-neuron-env", "--run-dir", str(tmp_path), "torchrun", *user],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    command = r.stdout.split("command:\n", 1)[1].strip()
    assert shlex.split(command)[-len(user):] == user


def test_status_line_is_one_line_redrawn_and_cleared_before_other_output() -> None:
    from neuron_watch.outputs.console import StatusLine, status_line_for

    out = io.StringIO()
    line = StatusLine(out)
    doc = {"generation": 1, "state": "running", "label": "healthy", "updated_unix": 100.0,
           "ranks": [{"last_step": 10, "last_line_age": 0.5}, {"last_step": 9, "last_line_age": 12.0}]}
    line.update(doc)
    line.update({**doc, "updated_unix": 104.0, "ranks": [{"last_step": 30, "last_line_age": 0.1},
                                                         {"last_step": 29, "last_line_age": 16.0}]})
    assert line.text == "[neuron-watch] gen 1 | step 30 | 5.0 steps/s | running (healthy) | silent 1/2 ranks"
    ConsoleSink(stream=out, status_line=line).write("verdict: x")
    text = out.getvalue()
    assert "\n" not in text.rsplit("\r\x1b[K", 2)[0]  # the status line itself never adds a line
    assert text.endswith("\r\x1b[K[neuron-watch] verdict: x\n")  # cleared before a decision line
    assert status_line_for(WatchConfig(progress=True), io.StringIO()) is None  # not a terminal: off
    assert status_line_for(WatchConfig(), sys.stderr) is None  # not asked for: off


def test_a_warning_event_is_its_message_on_one_line_at_debug() -> None:
    # (at info the coordinator's own log line says it: never twice)
    assert lines_of([{"event": "warning", "generation": 0, "message": "m"}], "info") == []
    (line,) = lines_of([{"event": "warning", "generation": 0, "kind": "no_progress_recognised",
                         "message": "no progress line recognised for 300s\n(use --progress-regex)"}], "debug")
    assert line == "[neuron-watch] warning: no progress line recognised for 300s (use --progress-regex)"


# -- a rank's escape sequences are shown, never obeyed ---------------------------------------
HOSTILE = [
    "\r\x1b[2K[neuron-watch] verdict: healthy",  # erase the [rankN] prefix, pass for our line
    "\x1b[1G[neuron-watch] job finished",  # cursor to column 1
    "\x1b]0;owned\x07",  # OSC: the terminal's title
    "\x1b[2J\x1b[H",  # clear the screen
    "\x9b2J",  # C1 CSI
    "\u202e[neuron-watch]",  # right-to-left override
    "\x1b[8mhidden\x1b[0m\x08\x7f",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_rank_echo_shows_controls_and_never_passes_for_our_line(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    from neuron_watch.outputs.console import console_echo

    console_echo(f"[rank1] {text}\n[rank0] step 3 loss 1.0")
    out = capsys.readouterr().out
    lines = out.split("\n")
    assert lines == [lines[0], "[rank0] step 3 loss 1.0", ""]
    assert lines[0].startswith("[rank1] ")
    assert lines[0].isprintable(), repr(lines[0])  # no ESC, CR, BEL, C1 or bidi character left


def test_visible_names_each_control() -> None:
    from neuron_watch.diagnosis.logtext import visible

    assert visible("\r\x1b[2K[neuron-watch] x") == "^M^[[2K[neuron-watch] x"
    assert visible("\x1b]0;t\x07") == "^[]0;t^G"
    assert visible("\x1b[32mgreen\x1b[0m\tok") == "green\tok"  # colour dropped, tab kept
    assert visible("\x9b\u202e\x7f") == "<U+009B><U+202E>^?"
    assert visible("step 3 loss 1.0 ✓ 日本") == "step 3 loss 1.0 ✓ 日本"


def test_a_rank_line_quoted_in_our_line_is_shown_not_obeyed() -> None:
    buf = io.StringIO()
    sink = ConsoleSink(stream=buf)
    sink.emit({"event": "verdict", "generation": 0, "label": "other_crash", "action": "stop",
               "reason": "rank 1: \x1b[2J\x1b]0;x\x07boom"})
    line = buf.getvalue()
    assert line.startswith("[neuron-watch] verdict: other_crash") and line.endswith("\n")
    assert line[:-1].isprintable() and "^[[2J^[]0;x^Gboom" in line


def test_a_verdict_that_stops_the_job_says_what_to_do_on_its_line() -> None:
    advice = "A mistake in the job's setup: fix the command line, then start again."
    stop = {"event": "verdict", "label": "config_error", "action": "stop", "reason": "a refused set-up",
            "advice": advice}
    restart = {**stop, "label": "other_crash", "action": "restart", "advice": "Read the rank's log."}
    lines = lines_of([stop, restart])
    assert lines[0] == ("[neuron-watch] verdict: config_error (a refused set-up) -> stop, no restart; "
                        f"what to do: {advice}")
    assert lines[1] == "[neuron-watch] verdict: other_crash (a refused set-up) -> restart"  # restarted: no advice


def test_a_requeue_that_failed_is_a_warning_line_with_what_to_do() -> None:
    lines = lines_of([{"event": "requeue_update_failed", "generation": 1,
                       "error": "`scontrol update jobid=42 ExcNodeList=n2` exited 1: refused; "
                                "the requeued job may run on n2 again"},
                      {"event": "requeue_failed", "generation": 1, "error": "`scontrol requeue 42` exited 1: refused"}],
                     level="warning")
    assert lines == ["[neuron-watch] requeue update failed: `scontrol update jobid=42 ExcNodeList=n2` exited 1: "
                     "refused; the requeued job may run on n2 again",
                     "[neuron-watch] requeue failed: `scontrol requeue 42` exited 1: refused"]

"""What the operator sees: one ``[neuron-watch]`` line per decision on stderr, as it happens.

Operators read the job's console (a terminal, Slurm's ``slurm-<job>.out``, a CloudWatch stream),
not ``events.jsonl``. :class:`ConsoleSink` is an event sink (:class:`neuron_watch.outputs.eventlog.EventLog`)
attached once wherever a coordinator is built (:func:`attach_console`): every event kind is
formatted here, in one place, so the console and the event stream never tell different stories.

Levels (``--log-level``, ``NEURON_WATCH_LOG``): ``warning`` prints failures, the give-up and the
end; ``info`` (the default) every decision: start, verdicts that change the state, evidence,
stop, restart, give-up, finish; ``debug`` every event. ``--quiet`` silences the echo of rank
output, never these lines. An event kind this module does not know (added by a newer part of
neuron-watch) still prints, generically, at ``info``.
"""

from __future__ import annotations

import collections
import logging
import os
import sys
from collections.abc import Callable, Mapping
from typing import IO, Any

from neuron_watch.config import WatchConfig
from neuron_watch.diagnosis.logtext import visible

PREFIX = "[neuron-watch]"
LEVELS = {"warning": 30, "info": 20, "debug": 10}
WARNING, INFO, DEBUG = LEVELS["warning"], LEVELS["info"], LEVELS["debug"]

#: Events that say how the coordinator got somewhere (the README's second list): debug only.
_DEBUG_KINDS = frozenset({
    "node_joined", "node_rejoined", "node_hello", "node_status", "recovery_phase", "rank_exit", "progress",
    "coordinator_started", "coordinator_stopped", "srun_step_ended", "compile_report",
})
_ACTIONS = {"wait": "waiting", "restart": "restart", "drain_and_restart": "drain the node and restart",
            "stop": "stop, no restart"}
#: Where a generic line stops (a console line must stay a line).
MAX_LINE = 400


def hang_timeout_source(config: WatchConfig, env: Mapping[str, str]) -> str:
    """The hang timeout in force and where it comes from, e.g. ``10s (--hang-timeout)``."""
    if config.hang_timeout is None:
        from neuron_watch.diagnosis.judge import HangCalibration

        c = HangCalibration()
        return (f"calibrated ({c.default:.0f}s until {c.warmup_steps + c.min_samples} steps, then "
                f"{c.factor:g} x the longest step within [{c.floor:.0f}s, {c.ceiling:.0f}s]; "
                f"no --hang-timeout)")
    origin = config.origins.get("hang_timeout", "--hang-timeout")
    return f"{config.hang_timeout:g}s ({origin})"


def _s(value: Any) -> str:
    try:
        return f"{float(value):.1f}s"
    except (TypeError, ValueError):
        return "?s"


#: missing items named on the console line of an incident (the rest are counted; all are in the
#: bundle's manifest.json, with why)
MISSING_NAMED = 8


def _missing_names(missing: Any) -> str:
    """``: stacks/rank-1.txt, neuron-ls.json (2 nodes), ... (why: manifest.json)`` from an incident's
    ``missing`` (item -> nodes lacking it); "" when the event does not say."""
    if not isinstance(missing, dict) or not missing:
        return ""
    nodes = max(int(n) for n in missing.values())
    names = [f"{item}" + (f" ({n} nodes)" if nodes > 1 else "") for item, n in list(missing.items())[:MISSING_NAMED]]
    more = f", {len(missing) - MISSING_NAMED} more" if len(missing) > MISSING_NAMED else ""
    return f": {', '.join(names)}{more} (why: manifest.json)"


def _culprit(c: Any) -> str:
    if isinstance(c, dict) and "node" in c:
        rank = c.get("rank")
        return f"{c['node']}/rank{rank if isinstance(rank, int) and rank >= 0 else '?'}"
    return ""


def _command_text(argv: list[Any]) -> str:
    """The watched command as the user wrote it: the launcher's name, our own additions left out."""
    words = [str(a) for a in argv]
    if len(words) >= 3 and words[1:3] == ["-m", "torch.distributed.run"]:
        words = ["torchrun", *words[3:]]
    elif words:
        words[0] = os.path.basename(words[0])
    if words[1:2] == ["--log-dir"] and words[3:5] == ["--redirects", "3"]:  # TorchrunLauncher.our_args
        words = [words[0], *words[5:]]
    return _one_line(" ".join(words), 300)


def _one_line(text: Any, limit: int = MAX_LINE) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


class ConsoleSink:
    """Formats the job's events as ``[neuron-watch] ...`` lines on a stream (stderr by default).

    Args:
        level: ``warning``, ``info`` or ``debug`` (see the module doc).
        hang_timeout: what :func:`hang_timeout_source` says, for the start line.
        max_restarts: the restart budget, for the restart line ("N left").
        stream: where lines go (looked up at each write when None: stderr).
    """

    def __init__(self, level: str = "info", *, hang_timeout: str = "", max_restarts: int | None = None,
                 stream: IO[str] | None = None, status_line: StatusLine | None = None) -> None:
        self.threshold = LEVELS.get(level, INFO)
        self.status_line = status_line
        self.hang_timeout = hang_timeout
        self.max_restarts = max_restarts
        self._stream = stream
        self._capturing_reason = ""
        self._formatters: dict[str, Callable[[dict[str, Any]], tuple[int, str] | None]] = {
            "job_started": self._job_started, "verdict": self._verdict, "incident": self._incident,
            "stopped": self._stopped, "upload": self._upload, "restart": self._restart, "gave_up": self._gave_up,
            "job_finished": self._job_finished, "command": self._command, "node_unobserved": self._unobserved,
            "node_observed": self._observed, "agent_dropped": self._dropped, "srun_step": self._srun_step,
            "drain": self._drain, "restart_plan": self._restart_plan, "requeue": self._requeue,
            "requeue_failed": self._requeue_failed, "requeue_update_failed": self._requeue_failed,
            "left_to_hyperpod": self._hyperpod, "warning": self._warning, "job_refused": self._job_refused,
            "lines_truncated": self._truncated, "recompile": self._recompile,
            "coordinator_behind": self._behind, "coordinator_caught_up": self._caught_up,
        }

    # -- the sink contract ----------------------------------------------------------------------

    def emit(self, event: dict[str, Any]) -> None:
        line = self.format(event)
        if line is not None:
            self.write(line)

    def close(self, timeout: float = 5.0) -> None:
        """Nothing to release (the stream is not ours)."""

    def write(self, text: str) -> None:
        stream = self._stream or sys.stderr
        if self.status_line is not None:
            self.status_line.clear()
        try:
            # a rank's text quoted in a reason (a fatal line) may carry escapes: shown, not obeyed
            stream.write(f"{PREFIX} {visible(text)}\n")
            stream.flush()
        except ValueError:  # a closed stream object must not stop the job
            pass
        except OSError:  # nor a closed console: EPIPE (`| head`), EIO (the terminal was closed)
            console_gone(stream)

    # -- formatting -----------------------------------------------------------------------------

    def format(self, event: dict[str, Any]) -> str | None:
        """The console line of one event (without the prefix), or None when its level is below ours."""
        kind = str(event.get("event", "?"))
        fmt = self._formatters.get(kind)
        out = fmt(event) if fmt is not None else (DEBUG if kind in _DEBUG_KINDS else INFO, self._generic(event))
        if out is None or out[0] < self.threshold:
            return None
        return out[1]

    @staticmethod
    def _generic(e: dict[str, Any]) -> str:
        fields = ", ".join(f"{k}={_one_line(v, 80)}" for k, v in e.items() if k not in ("time", "event",
                                                                                          "generation"))
        return _one_line(f"{e.get('event')} (generation {e.get('generation')}): {fields}")

    def _job_started(self, e: dict[str, Any]) -> tuple[int, str]:
        cmd = e.get("command") or []
        what = _command_text(cmd) if isinstance(cmd, list) else str(cmd)
        nodes = e.get("nodes") or 1
        raw = e.get("config")
        config: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if self.max_restarts is None and isinstance(config.get("max_restarts"), int):
            self.max_restarts = config["max_restarts"]
        where = f", run dir {config['run_dir']}" if config.get("run_dir") else ""
        ckpt = f", from checkpoint {e['checkpoint']}" if e.get("checkpoint") else ""
        hang = f"; hang timeout {self.hang_timeout}" if self.hang_timeout else ""
        return INFO, _one_line(
            f"start: job {e.get('job_id')} on {e.get('node')} ({nodes} node{'s' if nodes != 1 else ''}){ckpt}; "
            f"watching {what}{hang}{where}", 1000)

    def _verdict(self, e: dict[str, Any]) -> tuple[int, str]:
        label, action = e.get("label", "?"), str(e.get("action", "wait"))
        culprit = _culprit(e.get("culprit"))
        head = f"verdict: {label}" + (f", culprit {culprit}" if culprit else "")
        tail = "" if action == "wait" else f" -> {_ACTIONS.get(action, action)}"
        reason = _one_line(e.get("reason", "")) or ("ranks make progress" if label == "healthy" else "no reason given")
        level = INFO if action == "wait" else WARNING
        advice = _one_line(e.get("advice", "")) if action == "stop" else ""
        # a job that is not restarted waits on its user: the verdict says what to change
        return level, f"{head} ({reason}){tail}" + (f"; what to do: {advice}" if advice else "")

    def _command(self, e: dict[str, Any]) -> tuple[int, str] | None:
        if e.get("command") == "capture_evidence":
            return INFO, (f"failure seen: capturing evidence ({e.get('incident', 'incident')}) on "
                          f"{len(e.get('nodes') or [])} node(s) before anything is stopped")
        return DEBUG, self._generic(e)

    def _incident(self, e: dict[str, Any]) -> tuple[int, str]:
        arts = e.get("artifacts")
        where = arts if isinstance(arts, str) else ", ".join(f"{n}: {p}" for n, p in sorted((arts or {}).items()))
        missing = int(e.get("missing_items") or 0)
        without = e.get("nodes_without_evidence") or []
        extra = (f", {missing} item(s) missing{_missing_names(e.get('missing'))}" if missing else "") + (
            f", no evidence from {', '.join(without)}" if without else "")
        return INFO, (f"evidence captured: incident {e.get('incident')} in {_s(e.get('capture_seconds'))}"
                      f"{extra} -> {where or '(nowhere: capture failed)'}")

    def _stopped(self, e: dict[str, Any]) -> tuple[int, str]:
        survivors = e.get("survivors") or []
        answered = "" if e.get("answered", True) else ", the node did not answer"
        surv = f", {len(survivors)} process(es) survived: {survivors}" if survivors else ""
        # a node that did not answer reports no rung and no time: say what is known only
        how = ", ".join(x for x in (e.get("rung") or "", _s(e.get("seconds")) if e.get("seconds") is not None else "")
                        if x)
        return INFO, f"job stopped on {e.get('node')}{f' ({how})' if how else ''}{surv}{answered}"

    def _upload(self, e: dict[str, Any]) -> tuple[int, str]:
        if e.get("ok"):
            retry = " (retried at exit)" if e.get("retry_at_exit") else ""
            return INFO, (f"evidence uploaded from {e.get('node')}{retry}: {e.get('uri', '')} "
                          f"({e.get('files', '?')} files)")
        return WARNING, _one_line(f"evidence upload from {e.get('node')} failed: "
                                  f"{e.get('error') or e.get('failed')} (kept in the run dir; retried at exit)")

    def _restart(self, e: dict[str, Any]) -> tuple[int, str]:
        restarts = e.get("restarts")
        budget = ""
        if isinstance(restarts, int) and self.max_restarts is not None:
            budget = f"; restart {restarts} of {self.max_restarts}, {max(0, self.max_restarts - restarts)} left"
        ckpt = e.get("checkpoint")
        over = e.get("passed_over")
        # the newest save on disk not resumed from: say why (a save torn by the crash), not leave it a puzzle
        skipped = f" (newer, incomplete: {'; '.join(map(str, over))})" if isinstance(over, list) and over else ""
        return INFO, _one_line(f"restarting as generation {e.get('generation')} "
                               f"{'from ' + str(ckpt) if ckpt else 'from scratch (no complete checkpoint)'}"
                               f"{skipped}{budget}")

    def _gave_up(self, e: dict[str, Any]) -> tuple[int, str]:
        code = f", exit code {e['exit_code']}" if e.get("exit_code") is not None else ""
        return WARNING, _one_line(f"giving up: {e.get('reason')} (label {e.get('label')}{code})")

    def _job_finished(self, e: dict[str, Any]) -> tuple[int, str]:
        raw = e.get("goodput")
        g: dict[str, Any] = raw if isinstance(raw, dict) else {}
        ratio, wall = g.get("effective_ratio"), g.get("wall_seconds")
        good = ""
        if isinstance(ratio, (int, float)) and isinstance(wall, (int, float)):
            good = f"; goodput {ratio:.0%} of {wall:.0f}s spent training"
        step = f", last step {e['last_step']}" if e.get("last_step") is not None else ""
        return WARNING, (f"job {e.get('state')}: exit code {e.get('exit_code')}, {e.get('restarts')} restart(s), "
                         f"{e.get('incidents')} incident(s){step} ({_one_line(e.get('reason', ''), 120)}){good}")

    def _unobserved(self, e: dict[str, Any]) -> tuple[int, str]:
        return WARNING, f"node {e.get('node')} silent for {_s(e.get('silent_for'))}: unobserved (not healthy)"

    def _behind(self, e: dict[str, Any]) -> tuple[int, str]:
        return WARNING, (f"the coordinator is {_s(e.get('behind'))} behind the nodes' messages (verdicts come "
                         f"that much later); shed so far: {e.get('tail_lines_shed')} line(s) not kept in the ranks' "
                         f"tails, {e.get('status_writes_shed')} status.json write(s), {e.get('duplicates')} resent "
                         "copies dropped")

    def _caught_up(self, e: dict[str, Any]) -> tuple[int, str]:
        return INFO, f"the coordinator caught up with the nodes' messages after {_s(e.get('behind_for'))}"

    def _observed(self, e: dict[str, Any]) -> tuple[int, str]:
        return INFO, f"node {e.get('node')} heard again"

    def _dropped(self, e: dict[str, Any]) -> tuple[int, str]:
        return WARNING, (f"node {e.get('node')} lost {e.get('lines')} line(s) / {e.get('messages')} message(s) "
                         "(a flood skipped unread, or more than it could buffer; the ranks' own files have them)")

    def _srun_step(self, e: dict[str, Any]) -> tuple[int, str]:
        excl = e.get("exclude") or []
        return INFO, (f"generation {e.get('generation')}: srun step started (pid {e.get('pid')})"
                      + (f" without {', '.join(excl)}" if excl else ""))

    def _drain(self, e: dict[str, Any]) -> tuple[int, str]:
        done = "drained" if e.get("drained") else "not drained"
        return WARNING, _one_line(f"node {e.get('node')} {done}: {e.get('reason') or e.get('message') or ''}")

    def _restart_plan(self, e: dict[str, Any]) -> tuple[int, str]:
        return INFO, _one_line(f"restart plan: {e.get('how')} ({e.get('reason')})")

    def _requeue(self, e: dict[str, Any]) -> tuple[int, str]:
        return WARNING, _one_line(f"requeueing the Slurm job without {', '.join(e.get('exclude') or [])} "
                                  f"({e.get('reason')})")

    def _requeue_failed(self, e: dict[str, Any]) -> tuple[int, str]:
        return WARNING, _one_line(f"{e.get('event', '').replace('_', ' ')}: {e.get('error')}")

    def _warning(self, e: dict[str, Any]) -> tuple[int, str]:
        # The coordinator also logs its warnings (one "[neuron-watch] ..." line on stderr already):
        # the event's line is for --log-level debug only, so the console never says it twice.
        return DEBUG, _one_line(f"warning: {e.get('message') or e.get('kind')}")

    def _recompile(self, e: dict[str, Any]) -> tuple[int, str]:
        where = str(e.get("where") or "")
        where = f" ({where.rsplit('/', 1)[-1]})" if where else ""
        why = e.get("reason") or "reason not printed"
        return INFO, _one_line(f"recompile: {e.get('node')}/rank{e.get('rank')} recompiles "
                               f"{e.get('function') or 'a graph'}{where}: {why}; the other ranks wait for it "
                               "(torch.compile)")

    def _job_refused(self, e: dict[str, Any]) -> tuple[int, str]:
        return WARNING, _one_line(f"refused node {e.get('node')} of job {e.get('other_job')}: this coordinator "
                                  f"runs job {e.get('job')} ({e.get('reason')})")

    def _truncated(self, e: dict[str, Any]) -> tuple[int, str]:
        return WARNING, (f"node {e.get('node')} cut {e.get('lines')} line(s) longer than {e.get('limit_bytes')} "
                         "bytes (marked in the text; the rank logs keep them whole)")

    def _hyperpod(self, e: dict[str, Any]) -> tuple[int, str]:
        return WARNING, _one_line(f"restart left to HyperPod auto-resume ({e.get('reason')})")


def console_gone(stream: IO[str]) -> None:
    """A write to our stdout/stderr failed (EIO: the terminal was closed; EPIPE: its reader left).

    From now on that descriptor is /dev/null, so no later write fails: ours, the logging module's,
    or Python's own flush at exit (which would turn the exit code into 120). The run dir keeps
    everything the console would have shown. A hang-up of the terminal also sends SIGHUP, which
    ends the job the usual way; only the console is lost.
    """
    try:
        fd = stream.fileno()
    except (OSError, ValueError):
        return  # not a real descriptor (a test's StringIO)
    if fd not in (1, 2):
        return
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except OSError:
        pass


def console_echo(text: str) -> None:
    """Print rank lines on our stdout (the user's console), their control characters made visible
    (:func:`neuron_watch.diagnosis.logtext.visible`: a rank's escape sequences are shown, never obeyed)."""
    shown = "\n".join(visible(line) for line in text.split("\n")) if not text.isprintable() else text
    try:
        sys.stdout.write(shown + "\n")
        sys.stdout.flush()
    except OSError:  # `neuron-watch ... | head` (EPIPE) or a closed terminal (EIO) must not kill the job
        console_gone(sys.stdout)


def attach_console(events: Any, config: WatchConfig, env: Mapping[str, str] | None = None,
                   stream: IO[str] | None = None, status_line: StatusLine | None = None) -> ConsoleSink:
    """Attach the one console sink to a job's event log (call once per coordinator)."""
    sink = ConsoleSink(config.log_level, hang_timeout=hang_timeout_source(config, os.environ if env is None else env),
                       max_restarts=config.max_restarts, stream=stream, status_line=status_line)
    events.sinks.append(sink)
    return sink


class StatusLine:
    """``--progress``: one status line redrawn in place at the bottom of a terminal.

    Fed the coordinator's status document once a second (:meth:`update`). Anything else printed on
    the terminal (rank output, decision lines) first clears it (:meth:`clear`, :meth:`echo`); the
    next update draws it again, so a flood of rank output costs one clear per line, never a redraw.
    """

    #: a rank with no output for this long counts as silent
    SILENT_AFTER = 10.0
    #: steps/s is measured over this many seconds
    RATE_WINDOW = 10.0

    def __init__(self, stream: IO[str] | None = None) -> None:
        self._stream = stream
        self.text = ""
        self.shown = False
        self._samples: collections.deque[tuple[float, int, int]] = collections.deque()

    @property
    def stream(self) -> IO[str]:
        return self._stream or sys.stderr

    def _put(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except ValueError:
            pass
        except OSError:
            console_gone(self.stream)

    def clear(self) -> None:
        if self.shown:
            self._put("\r\x1b[K")
            self.shown = False

    def echo(self, text: str) -> None:
        """Print a rank line on stdout without tearing the status line (the agent's echo)."""
        self.clear()
        console_echo(text)

    def update(self, doc: Mapping[str, Any]) -> None:
        self.text = self.render(doc)
        self._put("\r\x1b[K" + self.text)
        self.shown = True

    def render(self, doc: Mapping[str, Any]) -> str:
        """``[neuron-watch] gen 1 | step 23 | 4.2 steps/s | running (healthy) | silent 0/8 ranks``, and
        ``| stopped 1`` while a rank's process is stopped by a signal (state ``T``: it holds the others)."""
        ranks = [r for r in doc.get("ranks") or [] if isinstance(r, dict)]
        steps = [r["last_step"] for r in ranks if isinstance(r.get("last_step"), int)]
        step = max(steps) if steps else None
        gen = doc.get("generation")
        t = doc.get("updated_unix")
        rate = "? steps/s"
        if isinstance(t, (int, float)) and step is not None and isinstance(gen, int):
            while self._samples and (self._samples[0][1] != gen or t - self._samples[0][0] > self.RATE_WINDOW):
                self._samples.popleft()
            self._samples.append((float(t), gen, step))
            t0, _g, s0 = self._samples[0]
            if t > t0:
                rate = f"{(step - s0) / (t - t0):.1f} steps/s"
        silent = sum(1 for r in ranks if isinstance(r.get("last_line_age"), (int, float))
                     and r["last_line_age"] > self.SILENT_AFTER)
        by_state = doc.get("ranks_by_state")  # a big job's document lists its outliers only, and counts them all
        stopped = (by_state.get("stopped", 0) if isinstance(by_state, dict)
                   else sum(1 for r in ranks if r.get("state") == "stopped"))
        label = doc.get("label") or "-"
        return (f"{PREFIX} gen {gen} | step {'-' if step is None else step} | {rate} | {doc.get('state')} "
                f"({label}) | silent {silent}/{doc.get('ranks_total') or len(ranks)} ranks"
                + (f" | stopped {stopped}" if stopped else ""))


def status_line_for(config: WatchConfig, stream: IO[str] | None = None) -> StatusLine | None:
    """The ``--progress`` line when asked for and stderr is a terminal (never in a log file), else None."""
    target = stream or sys.stderr
    try:
        tty = target.isatty()
    except ValueError:
        tty = False
    if not (config.progress and tty):
        return None
    line = StatusLine(stream)
    _TERMINAL.append(line)  # one terminal per process: say() clears it too
    # ... and so does every log record (the agent's own notes, a warning), whoever logs it
    for handler in logging.getLogger().handlers:
        handler.addFilter(_ClearFirst(line))
    return line


class _ClearFirst(logging.Filter):
    """Clears the status line before a log record reaches the terminal (never drops the record)."""

    def __init__(self, line: StatusLine) -> None:
        super().__init__()
        self.line = line

    def filter(self, record: logging.LogRecord) -> bool:
        self.line.clear()
        return True


#: The --progress line of this process, if any (a terminal is one per process, like stderr itself).
_TERMINAL: list[StatusLine] = []


def say(text: str, stream: IO[str] | None = None) -> None:
    """One ``[neuron-watch]`` line from a part that has no event stream (an agent on a node)."""
    ConsoleSink(stream=stream, status_line=_TERMINAL[-1] if _TERMINAL else None).write(text)

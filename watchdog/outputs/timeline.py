"""``<run-dir>/timeline.json``: the run in the Chrome trace event format (Perfetto, chrome://tracing).

Tracks: process "job" (thread "events": one span per generation, instant markers for verdicts,
incidents and restarts) and process "ranks" (one thread per rank: compile spans, step spans,
communication-wait spans, fatal lines, and a hang span from the rank's last sign of progress to
the incident that ended it).

:func:`build_trace` is pure (events and log lines in, trace dict out). :func:`build_from_run_dir`
and :func:`write_timeline` are the thin readers/writers around it.

Rank log lines are placed by their own leading timestamp when they have one (ISO 8601, the
compiler's ``2024-09-23 00:08:59.000814:`` and the runtime's ``2023-Aug-01 16:14:43.0241``; read
as UTC); a line without one takes the time of the line before it (or the generation's start).
"""

from __future__ import annotations

import bisect
import calendar
import collections
import datetime as _dt
import itertools
import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuron_watch.diagnosis.classify import Effect, KnowledgeBase
from neuron_watch.diagnosis.logread import ReadNote, iter_lines, read_time_index

log = logging.getLogger(__name__)

JOB_PID = 1
RANKS_PID = 2
#: A communication-wait span closes when the next wait line is further away than this.
COMM_WAIT_GAP_S = 300.0

_MONTHS = {m: i for i, m in enumerate(calendar.month_abbr) if m}
_TS = re.compile(
    r"^\s*\[?(?P<y>\d{4})-(?P<mo>\d{2}|[A-Z][a-z]{2})-(?P<d>\d{2})[T ](?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})"
    r"(?:[.,](?P<f>\d{1,9}))?(?P<z>Z|[+-]\d{2}:?\d{2})?"
)


def parse_time(text: str) -> float | None:
    """Epoch seconds of an ISO 8601 / Neuron timestamp at the start of ``text``; None if absent."""
    m = _TS.match(text)
    if not m:
        return None
    mo = m.group("mo")
    month = int(mo) if mo.isdigit() else _MONTHS.get(mo, 0)
    if not 1 <= month <= 12:
        return None
    try:
        dt = _dt.datetime(int(m.group("y")), month, int(m.group("d")), int(m.group("h")), int(m.group("mi")),
                          int(m.group("s")), tzinfo=_dt.timezone.utc)
    except ValueError:
        return None
    frac = float("0." + m.group("f")) if m.group("f") else 0.0
    z = m.group("z")
    offset = 0.0
    if z and z != "Z":
        sign = -1 if z[0] == "-" else 1
        hhmm = z[1:].replace(":", "")
        offset = sign * (int(hhmm[:2]) * 3600 + int(hhmm[2:]) * 60)
    return dt.timestamp() + frac - offset


@dataclass(frozen=True)
class RankLog:
    """One rank's log of one generation: its lines (without their newlines), read once, in order.

    ``lines`` may be a generator: the trace is built in one pass, so a log of any size costs the
    trace's own bound (:data:`MAX_RANK_EVENTS`), not its length. ``first_line`` is the number of
    its first line in the file (None: not known, when only its tail was read and the lines before
    it could not be counted in time); ``times`` its time index (``(lines, wall)`` entries, see
    :mod:`neuron_watch.diagnosis.logread`) that dates the lines without a timestamp of their own.
    """

    generation: int
    rank: int
    lines: Iterable[str]
    source: str = ""
    first_line: int | None = 1
    times: Sequence[tuple[int, float]] = ()


#: Trace events kept per rank log (the newest; how many older ones were left out is in
#: ``otherData.dropped_events``): a run of a million steps must not make a trace of a million spans.
MAX_RANK_EVENTS = 20_000
#: A line without a timestamp takes the next stamped line's time when one comes within this many
#: lines (compiler dots and ``Compiler status PASS`` are printed just before a stamped line);
#: further away, the time its rank's log was written (the time index), else the last stamp seen.
LOOKAHEAD_LINES = 1000
#: Lines at the start of each log whose stamps may set the trace's origin (t0).
T0_LINES = 50


def _us(t: float, t0: float) -> float:
    return round((t - t0) * 1e6, 1)


class _RankTrack:
    """The trace events of one rank log, built line by line (absolute seconds until :meth:`emit`)."""

    def __init__(self, lg: RankLog, start: float, incidents: Sequence[tuple[float, Mapping[str, Any]]],
                 kb: KnowledgeBase) -> None:
        self.lg = lg
        self.kb = kb
        self.tid = lg.rank + 1
        self.incidents = incidents
        self.start = start
        self.events: collections.deque[dict[str, Any]] = collections.deque(maxlen=MAX_RANK_EVENTS)
        self.made = 0
        self.compile_open: float | None = None
        self.compile_line = ""
        self.last_step_t: float | None = None
        self.last_step: int | None = None
        self.wait_open: tuple[float, float, int] | None = None  # start, last, count
        self.last_progress = start
        self.now = start
        self.early: list[float] = []  # stamps of the first T0_LINES lines
        self.stopped_after: int | None = None
        self._counts = [n for n, _t in lg.times]

    def _add(self, ev: dict[str, Any]) -> None:
        self.made += 1
        self.events.append(ev)

    def span(self, name: str, cat: str, a: float, b: float, args: dict[str, Any]) -> None:
        self._add({"ph": "X", "name": name, "cat": cat, "pid": RANKS_PID, "tid": self.tid, "ts": a, "end": b,
                   "args": args})

    def _fallback(self, lineno: int | None, last_stamp: float | None) -> float:
        if lineno is not None and self._counts:
            i = bisect.bisect_left(self._counts, lineno)
            if i < len(self._counts):
                return self.lg.times[i][1]
        return last_stamp if last_stamp is not None else self.start

    def run(self, deadline_hit: Callable[[], bool] | None = None) -> None:
        """Read every line of the log once (until ``deadline_hit()`` says stop, checked every few
        thousand lines)."""
        pending: list[tuple[int | None, str, Any]] = []  # classified lines waiting for the next stamp
        unstamped = 0
        last_stamp: float | None = None
        first = self.lg.first_line
        n = 0
        lineno: int | None = None
        for n, line in enumerate(self.lg.lines):
            if deadline_hit is not None and n % 4096 == 4095 and deadline_hit():
                self.stopped_after = n  # lines read when the deadline came
                break
            lineno = None if first is None else first + n
            own = parse_time(line)
            m = self.kb.classify(line)
            if own is not None:
                if n < T0_LINES:
                    self.early.append(own)
                for p_no, p_line, p_m in pending:
                    self._line(p_no, p_line, p_m, own)
                pending.clear()
                unstamped = 0
                last_stamp = own
                if m is not None:
                    self._line(lineno, line, m, own)
                self.now = own
                continue
            unstamped += 1
            if m is not None:
                pending.append((lineno, line, m))
            if unstamped > LOOKAHEAD_LINES and pending:
                for p_no, p_line, p_m in pending:
                    self._line(p_no, p_line, p_m, self._fallback(p_no, last_stamp))
                pending.clear()
        for p_no, p_line, p_m in pending:
            self._line(p_no, p_line, p_m, self._fallback(p_no, last_stamp))
        if unstamped:  # the log ends with lines without a stamp: when the last of them was written
            self.now = max(self.now, self._fallback(lineno, last_stamp))
        self._close()

    def _line(self, lineno: int | None, line: str, m: Any, now: float) -> None:
        self.now = now
        eff = m.signature.effect
        where = {"file": self.lg.source, "line": lineno, "generation": self.lg.generation}
        if self.wait_open is not None and (eff is not Effect.COMM_WAIT or now - self.wait_open[1] > COMM_WAIT_GAP_S):
            self.span("communication wait", "comm_wait", self.wait_open[0], self.wait_open[1],
                      {"lines": self.wait_open[2], **where})
            self.wait_open = None
        if eff is Effect.COMPILE_START:
            if self.compile_open is None:
                self.compile_open, self.compile_line = now, line
            self.last_progress = now
        elif eff is Effect.COMPILE_END:
            # "Compiler status PASS" then "Compilation Successfully Completed": one span; a
            # cached-neff hit without a start is no compile at all.
            if self.compile_open is not None:
                self.span("compile", "compile", self.compile_open, now,
                          {"start": self.compile_line[:200], "end": line[:200], **where})
            self.compile_open = None
            self.last_progress = now
        elif eff is Effect.COMPILE_BEAT:
            self.last_progress = now
        elif eff is Effect.PROGRESS:
            if self.last_step_t is not None:
                self.span(f"step {m.step if m.step is not None else '?'}", "step", self.last_step_t, now,
                          {"step": m.step, "loss": m.loss, "previous_step": self.last_step})
            self.last_step_t, self.last_step = now, m.step
            self.last_progress = now
        elif eff is Effect.COMM_WAIT:
            self.wait_open = (now, now, 1) if self.wait_open is None else (self.wait_open[0], now,
                                                                             self.wait_open[2] + 1)
        elif eff is Effect.FATAL:
            self._add({"ph": "i", "s": "t", "name": m.signature.id, "cat": "fatal", "pid": RANKS_PID,
                       "tid": self.tid, "ts": now, "args": {"text": line[:300], **where}})

    def _close(self) -> None:
        g = self.lg.generation
        stop_t = self.incidents[0][0] if self.incidents else self.now
        if self.wait_open is not None:
            self.span("communication wait", "comm_wait", self.wait_open[0], max(self.wait_open[1], stop_t),
                      {"lines": self.wait_open[2], "generation": g})
        if self.compile_open is not None:
            self.span("compile", "compile", self.compile_open, max(self.now, stop_t),
                      {"start": self.compile_line[:200], "unfinished": True, "generation": g})
        for it, ie in self.incidents[:1]:
            label = str(ie.get("label", ""))
            if "hang" in label and it > self.last_progress:
                self.span(f"hang ({label})", "hang", self.last_progress, it,
                          {"since_last_progress_s": round(it - self.last_progress, 3), "generation": g})


def build_trace(events: Sequence[Mapping[str, Any]], logs: Iterable[RankLog], kb: KnowledgeBase,
                deadline_hit: Callable[[], bool] | None = None) -> dict[str, Any]:
    """The Chrome trace (``{"traceEvents": [...], ...}``) of a run. Pure (``logs`` may be lazy).

    ``events`` are the parsed lines of ``events.jsonl`` (``time``, ``event``, ``generation``, ...).
    Times in the trace are microseconds since the first known instant (``otherData.t0`` holds it
    as epoch seconds). Each log is read once, in one pass; ``deadline_hit()`` (checked every few
    thousand lines) stops the reading: the trace then holds what was read (``otherData.stopped_at_deadline``:
    per log, the lines read before it). ``otherData.dropped_events``
    counts, per log, the oldest events beyond :data:`MAX_RANK_EVENTS` that were left out.
    Raises ValueError when an event has no parseable ``time``.
    """
    evs = []
    for e in events:
        t = parse_time(str(e.get("time", "")))
        if t is None:
            raise ValueError(f"events.jsonl: event {e.get('event')!r} has no valid 'time' ({e.get('time')!r})")
        evs.append((t, e))
    evs.sort(key=lambda x: x[0])
    job: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": JOB_PID, "tid": 0, "args": {"name": "job"}},
        {"ph": "M", "name": "thread_name", "pid": JOB_PID, "tid": 0, "args": {"name": "events"}},
        {"ph": "M", "name": "process_name", "pid": RANKS_PID, "tid": 0, "args": {"name": "ranks"}},
    ]
    first_event = evs[0][0] if evs else None

    # -- generations and job-level markers ------------------------------------------------------
    gen_start: dict[int, float] = {}
    incidents: dict[int, list[tuple[float, Mapping[str, Any]]]] = {}
    for t, e in evs:
        g = int(e.get("generation", 0))
        gen_start.setdefault(g, t)
        kind = str(e.get("event"))
        args = {k: v for k, v in e.items() if k not in ("time", "event")}
        if kind in ("verdict", "incident", "restart", "job_finished", "job_started"):
            label = e.get("label", "")
            name = f"{kind}: {label}" if label else kind
            scope = "g" if kind in ("incident", "restart") else "p"
            job.append({"ph": "i", "s": scope, "name": name, "cat": kind, "pid": JOB_PID, "tid": 0,
                        "ts": t, "args": args})
        if kind == "incident" or (kind == "verdict" and e.get("action") in ("restart", "drain_and_restart", "stop")):
            incidents.setdefault(g, []).append((t, e))
    gens = sorted(gen_start)
    log_end_by_gen: dict[int, float] = {}

    # -- ranks -------------------------------------------------------------------------------
    tracks: list[_RankTrack] = []
    early: list[float] = []
    dropped: dict[str, int] = {}
    stopped: dict[str, int] = {}
    for lg in logs:
        if deadline_hit is not None and deadline_hit():
            break
        track = _RankTrack(lg, gen_start.get(lg.generation, first_event or 0.0), incidents.get(lg.generation, []), kb)
        track.run(deadline_hit)
        tracks.append(track)
        early.extend(track.early)
        if track.stopped_after is not None:
            stopped[lg.source or f"gen-{lg.generation}/rank-{lg.rank}"] = track.stopped_after
        if track.made > len(track.events):
            dropped[lg.source or f"gen-{lg.generation}/rank-{lg.rank}"] = track.made - len(track.events)
        log_end_by_gen[lg.generation] = max(log_end_by_gen.get(lg.generation, track.now), track.now)
    candidates = [t for t, _ in evs] + early
    t0 = min(candidates) if candidates else 0.0
    end = max([t for t, _ in evs] + [t0])

    def rel(ev: dict[str, Any]) -> dict[str, Any]:
        a = ev["ts"]
        ev["ts"] = _us(a, t0)
        if "end" in ev:
            ev["dur"] = max(1.0, _us(ev.pop("end"), t0) - ev["ts"])
        return ev

    out = [rel(e) if e["ph"] != "M" else e for e in job]
    named: set[int] = set()
    for track in sorted(tracks, key=lambda x: (x.lg.generation, x.lg.rank)):
        if track.tid not in named:
            named.add(track.tid)
            out.append({"ph": "M", "name": "thread_name", "pid": RANKS_PID, "tid": track.tid,
                        "args": {"name": f"rank {track.lg.rank}"}})
            out.append({"ph": "M", "name": "thread_sort_index", "pid": RANKS_PID, "tid": track.tid,
                        "args": {"sort_index": track.lg.rank}})
        out.extend(rel(e) for e in track.events)
    for i, g in enumerate(gens):
        a = gen_start[g]
        b = gen_start[gens[i + 1]] if i + 1 < len(gens) else max(end, log_end_by_gen.get(g, end))
        out.append({"ph": "X", "name": f"generation {g}", "cat": "generation", "pid": JOB_PID, "tid": 0,
                    "ts": _us(a, t0), "dur": max(1.0, _us(b, t0) - _us(a, t0)), "args": {"generation": g}})
    other: dict[str, Any] = {"t0": t0, "tool": "neuron-watch"}
    if dropped:
        other["dropped_events"] = dropped
    if stopped:
        other["stopped_at_deadline"] = stopped  # log -> lines read before the deadline stopped it
    return {"traceEvents": out, "displayTimeUnit": "ms", "otherData": other}


# ---------------------------------------------------------------------------------------------
# thin I/O
# ---------------------------------------------------------------------------------------------
_RANK_LOG = re.compile(r"^gen-(\d+)/rank-(\d+)\.log$")


def read_events(path: Path) -> list[dict[str, Any]]:
    """Parse ``events.jsonl`` line by line; a torn last line (writer killed mid-line, a full disk)
    is skipped, others raise."""
    out: list[dict[str, Any]] = []
    if not path.exists():
        return out
    bad: tuple[int, json.JSONDecodeError] | None = None
    with path.open(encoding="utf-8", errors="replace") as f:
        for i, line in enumerate(f):
            if bad is not None:  # a bad line that was not the last one
                raise ValueError(f"{path}:{bad[0] + 1}: not JSON ({bad[1]})") from bad[1]
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                bad = (i, exc)
                continue
            if isinstance(obj, dict):
                out.append(obj)
    if bad is not None:
        log.warning("%s: its last line is a torn record (not JSON: %s); skipped", path, bad[1])
    return out


def rank_logs(run_dir: Path, max_bytes: int | None = None, deadline: float | None = None,
              notes: list[ReadNote] | None = None,
              clock: Callable[[], float] = time.monotonic) -> Iterator[RankLog]:
    """The ``gen-*/rank-*.log`` of a run directory, each read lazily
    (see :func:`neuron_watch.diagnosis.logread.iter_lines`: its last ``max_bytes`` only, until
    ``deadline``), newest generation first (a deadline leaves out the oldest); what each read left
    out goes to ``notes``."""
    found = []
    for p in run_dir.glob("gen-*/rank-*.log"):
        m = _RANK_LOG.match(p.relative_to(run_dir).as_posix())
        if m:
            found.append((int(m.group(1)), int(m.group(2)), p))
    for gen, rank, p in sorted(found, key=lambda x: (-x[0], x[1])):
        if deadline is not None and clock() >= deadline:
            return  # the logs not reached are the caller's "unread"
        note = ReadNote(str(p))
        lines = iter_lines(note, max_bytes, deadline, clock)
        # The generator opens the file when the trace first asks for a line; its first line's number
        # is known only then, so the log is started here (reading nothing yet beyond the window's start).
        try:
            first = next(lines)
        except StopIteration:
            first = None
        except OSError as exc:
            log.warning("timeline: cannot read %s: %s", p, exc)
            continue
        if notes is not None:
            notes.append(note)
        body: Iterable[str] = lines if first is None else itertools.chain((first,), lines)
        yield RankLog(gen, rank, body, p.relative_to(run_dir).as_posix(), note.first_line,
                      read_time_index(str(p)) if note.first_line is not None else ())


def build_from_run_dir(run_dir: Path, kb: KnowledgeBase, max_bytes_per_log: int | None = None,
                       deadline: float | None = None,
                       clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Read ``events.jsonl`` and ``gen-*/rank-*.log`` of a run directory and build the trace, in memory
    bounded by the trace (logs are streamed). ``max_bytes_per_log``: read each log's end only;
    ``deadline`` (a ``clock()`` value): stop reading there. ``otherData.logs`` says, per log, what
    was left out (bytes before the part read, bytes the deadline left unread, lines cut); logs not
    reached before the deadline are listed in ``otherData.unread_logs``."""
    notes: list[ReadNote] = []

    def hit() -> bool:
        return deadline is not None and clock() >= deadline

    all_logs = sorted(p.relative_to(run_dir).as_posix() for p in run_dir.glob("gen-*/rank-*.log"))
    trace = build_trace(read_events(run_dir / "events.jsonl"),
                        rank_logs(run_dir, max_bytes_per_log, deadline, notes, clock), kb,
                        deadline_hit=hit if deadline is not None else None)
    partial = [n.to_dict() | {"path": Path(n.path).relative_to(run_dir).as_posix()}
               for n in notes if not n.whole or n.cut_lines]
    read = {Path(n.path).relative_to(run_dir).as_posix() for n in notes}
    if partial:
        trace["otherData"]["logs"] = partial
    unread = [p for p in all_logs if p not in read]
    if unread:
        trace["otherData"]["unread_logs"] = unread
    return trace


#: What the run's own ``timeline.json`` (written when the coordinator ends) reads at most: the last
#: bytes of each rank log, and seconds in all (the newest generations first). A flood of gigabytes
#: must not hold a job's exit for minutes; what was left out is said in ``otherData``.
RUN_TIMELINE_LOG_BYTES = 64 << 20
RUN_TIMELINE_SECONDS = 30.0


def write_timeline(run_dir: Path, kb: KnowledgeBase,
                   max_bytes_per_log: int | None = RUN_TIMELINE_LOG_BYTES,
                   seconds: float | None = RUN_TIMELINE_SECONDS, clock: Callable[[], float] = time.monotonic) -> Path:
    """Write ``<run-dir>/timeline.json`` atomically (temp file + rename); returns its path.
    ``max_bytes_per_log``, ``seconds``: the bounds of :func:`build_from_run_dir` (None: none)."""
    deadline = None if seconds is None else clock() + seconds
    trace = build_from_run_dir(run_dir, kb, max_bytes_per_log, deadline, clock)
    dest = run_dir / "timeline.json"
    tmp = run_dir / ".timeline.json.tmp"
    with tmp.open("w", encoding="utf-8") as f:
        json.dump(trace, f)
    tmp.replace(dest)
    return dest

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

import calendar
import datetime as _dt
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuron_watch.classify import Effect, KnowledgeBase

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
    """One rank's log of one generation (lines without their newlines)."""

    generation: int
    rank: int
    lines: Sequence[str]
    source: str = ""


def _us(t: float, t0: float) -> float:
    return round((t - t0) * 1e6, 1)


def _line_times(lines: Sequence[str], start: float) -> list[float]:
    """A time for every line: its own timestamp, else the next timestamped line's (compiler dots
    and ``Compiler status PASS`` carry none and are printed just before the next stamped line),
    else the previous one's, else ``start``."""
    own = [parse_time(x) for x in lines]
    out: list[float] = [start] * len(lines)
    nxt: float | None = None
    for i in range(len(lines) - 1, -1, -1):
        nxt = own[i] if own[i] is not None else nxt
        if nxt is not None:
            out[i] = nxt
    # lines after the last stamped one take the last stamp
    last = next((t for t in reversed(own) if t is not None), None)
    if last is not None:
        for i in range(len(lines) - 1, -1, -1):
            if own[i] is not None:
                break
            out[i] = last
    return out


def build_trace(events: Sequence[Mapping[str, Any]], logs: Sequence[RankLog], kb: KnowledgeBase) -> dict[str, Any]:
    """The Chrome trace (``{"traceEvents": [...], ...}``) of a run. Pure.

    ``events`` are the parsed lines of ``events.jsonl`` (``time``, ``event``, ``generation``, ...).
    Times in the trace are microseconds since the first known instant (``otherData.t0`` holds it
    as epoch seconds). Raises ValueError when an event has no parseable ``time``.
    """
    evs = []
    for e in events:
        t = parse_time(str(e.get("time", "")))
        if t is None:
            raise ValueError(f"events.jsonl: event {e.get('event')!r} has no valid 'time' ({e.get('time')!r})")
        evs.append((t, e))
    evs.sort(key=lambda x: x[0])
    candidates = [t for t, _ in evs] + [t for lg in logs for t in (parse_time(x) for x in lg.lines[:50]) if t]
    t0 = min(candidates) if candidates else 0.0
    end = max([t for t, _ in evs] + [t0])
    out: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": JOB_PID, "tid": 0, "args": {"name": "job"}},
        {"ph": "M", "name": "thread_name", "pid": JOB_PID, "tid": 0, "args": {"name": "events"}},
        {"ph": "M", "name": "process_name", "pid": RANKS_PID, "tid": 0, "args": {"name": "ranks"}},
    ]

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
            out.append({"ph": "i", "s": scope, "name": name, "cat": kind, "pid": JOB_PID, "tid": 0,
                        "ts": _us(t, t0), "args": args})
        if kind == "incident" or (kind == "verdict" and e.get("action") in ("restart", "drain_and_restart", "stop")):
            incidents.setdefault(g, []).append((t, e))
    gens = sorted(gen_start)
    log_end_by_gen: dict[int, float] = {}

    # -- ranks -------------------------------------------------------------------------------
    named: set[int] = set()
    for lg in sorted(logs, key=lambda x: (x.generation, x.rank)):
        tid = lg.rank + 1
        if tid not in named:
            named.add(tid)
            out.append({"ph": "M", "name": "thread_name", "pid": RANKS_PID, "tid": tid,
                        "args": {"name": f"rank {lg.rank}"}})
            out.append({"ph": "M", "name": "thread_sort_index", "pid": RANKS_PID, "tid": tid,
                        "args": {"sort_index": lg.rank}})
        now = gen_start.get(lg.generation, t0)
        compile_open: float | None = None
        compile_line = ""
        last_step_t: float | None = None
        last_step: int | None = None
        wait_open: tuple[float, float, int] | None = None  # start, last, count
        last_progress = now

        def span(name: str, cat: str, a: float, b: float, args: dict[str, Any], tid: int = tid) -> None:
            out.append({"ph": "X", "name": name, "cat": cat, "pid": RANKS_PID, "tid": tid,
                        "ts": _us(a, t0), "dur": max(1.0, _us(b, t0) - _us(a, t0)), "args": args})

        times = _line_times(lg.lines, now)
        for i, line in enumerate(lg.lines):
            now = times[i]
            m = kb.classify(line)
            if m is None:
                continue
            eff = m.signature.effect
            where = {"file": lg.source, "line": i + 1, "generation": lg.generation}
            if wait_open is not None and (eff is not Effect.COMM_WAIT or now - wait_open[1] > COMM_WAIT_GAP_S):
                span("communication wait", "comm_wait", wait_open[0], wait_open[1],
                     {"lines": wait_open[2], **where})
                wait_open = None
            if eff is Effect.COMPILE_START:
                if compile_open is None:
                    compile_open, compile_line = now, line
                last_progress = now
            elif eff is Effect.COMPILE_END:
                # "Compiler status PASS" then "Compilation Successfully Completed": one span; a
                # cached-neff hit without a start is no compile at all.
                if compile_open is not None:
                    span("compile", "compile", compile_open, now,
                         {"start": compile_line[:200], "end": line[:200], **where})
                compile_open = None
                last_progress = now
            elif eff is Effect.COMPILE_BEAT:
                last_progress = now
            elif eff is Effect.PROGRESS:
                if last_step_t is not None:
                    span(f"step {m.step if m.step is not None else '?'}", "step", last_step_t, now,
                         {"step": m.step, "loss": m.loss, "previous_step": last_step})
                last_step_t, last_step = now, m.step
                last_progress = now
            elif eff is Effect.COMM_WAIT:
                wait_open = (now, now, 1) if wait_open is None else (wait_open[0], now, wait_open[2] + 1)
            elif eff is Effect.FATAL:
                out.append({"ph": "i", "s": "t", "name": m.signature.id, "cat": "fatal", "pid": RANKS_PID,
                            "tid": tid, "ts": _us(now, t0), "args": {"text": line[:300], **where}})
        gen_incidents = incidents.get(lg.generation, [])
        stop_t = gen_incidents[0][0] if gen_incidents else now
        if wait_open is not None:
            span("communication wait", "comm_wait", wait_open[0], max(wait_open[1], stop_t),
                 {"lines": wait_open[2], "generation": lg.generation})
        if compile_open is not None:
            span("compile", "compile", compile_open, max(now, stop_t),
                 {"start": compile_line[:200], "unfinished": True, "generation": lg.generation})
        for it, ie in gen_incidents[:1]:
            label = str(ie.get("label", ""))
            if "hang" in label and it > last_progress:
                span(f"hang ({label})", "hang", last_progress, it,
                     {"since_last_progress_s": round(it - last_progress, 3), "generation": lg.generation})
        log_end_by_gen[lg.generation] = max(log_end_by_gen.get(lg.generation, now), now)

    for i, g in enumerate(gens):
        a = gen_start[g]
        b = gen_start[gens[i + 1]] if i + 1 < len(gens) else max(end, log_end_by_gen.get(g, end))
        out.append({"ph": "X", "name": f"generation {g}", "cat": "generation", "pid": JOB_PID, "tid": 0,
                    "ts": _us(a, t0), "dur": max(1.0, _us(b, t0) - _us(a, t0)), "args": {"generation": g}})
    return {"traceEvents": out, "displayTimeUnit": "ms", "otherData": {"t0": t0, "tool": "neuron-watch"}}


# ---------------------------------------------------------------------------------------------
# thin I/O
# ---------------------------------------------------------------------------------------------
_RANK_LOG = re.compile(r"^gen-(\d+)/rank-(\d+)\.log$")


def read_events(path: Path) -> list[dict[str, Any]]:
    """Parse ``events.jsonl``; a torn last line (writer killed mid-line) is skipped, others raise."""
    out: list[dict[str, Any]] = []
    if not path.exists():
        return out
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            if i == len(lines) - 1:
                continue
            raise ValueError(f"{path}:{i + 1}: not JSON ({exc})") from exc
        if isinstance(obj, dict):
            out.append(obj)
    return out


def build_from_run_dir(run_dir: Path, kb: KnowledgeBase | None = None) -> dict[str, Any]:
    """Read ``events.jsonl`` and ``gen-*/rank-*.log`` of a run directory and build the trace."""
    if kb is None:
        from neuron_watch.kb import default_knowledge_base

        kb = default_knowledge_base()
    logs = []
    for p in sorted(run_dir.glob("gen-*/rank-*.log")):
        m = _RANK_LOG.match(p.relative_to(run_dir).as_posix())
        if m:
            text = p.read_text(encoding="utf-8", errors="replace")
            logs.append(RankLog(int(m.group(1)), int(m.group(2)), text.splitlines(), p.relative_to(run_dir).as_posix()))
    return build_trace(read_events(run_dir / "events.jsonl"), logs, kb)


def write_timeline(run_dir: Path, kb: KnowledgeBase | None = None) -> Path:
    """Write ``<run-dir>/timeline.json`` atomically (temp file + rename); returns its path."""
    trace = build_from_run_dir(run_dir, kb)
    dest = run_dir / "timeline.json"
    tmp = run_dir / ".timeline.json.tmp"
    tmp.write_text(json.dumps(trace), encoding="utf-8")
    tmp.replace(dest)
    return dest

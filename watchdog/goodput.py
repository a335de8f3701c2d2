"""Goodput of a run, computed from its events (``events.jsonl``). Pure: no I/O, no clock.

    figures = compute_goodput(events)      # events: the dicts of events.jsonl, in file order

Which events it reads (all share ``time`` (ISO UTC) and ``generation``; docs/live.md has the table):

* ``job_started``: wall time starts; generation 0 starts.
* ``restart``: the next generation starts (at this event's time); ``checkpoint`` (a path whose
  name holds ``step_<N>``) or ``checkpoint_step`` says where it resumes.
* ``progress``: ``step``; the supervisor's samples of the job making progress (the first of each
  generation, then throttled). ``verdict`` and ``job_finished`` may carry ``last_progress`` (time)
  and ``last_step``: the newest progress the judge saw, which makes the figures exact.
* ``verdict``: label ``compiling`` opens a compile interval that the next non-compiling event of
  the generation closes; another label with an action other than ``wait`` is the generation's failure.
* ``compile_start`` / ``compile_end`` (optional, per ``node``/``rank``): explicit compile intervals.
* ``checkpoint``: ``step`` of a complete checkpoint and when it was seen (for work lost).
* ``incident``: evidence captured.
* ``job_finished``: wall time ends. Any ``goodput`` field it carries is ignored.

Figures (seconds unless named otherwise; None when the events do not say):

* ``effective_ratio`` = time making progress / wall time. Time making progress in a generation is
  first progress .. last progress, less compile intervals inside that span.
* ``useful_ratio``: the same with the work lost to failures (redone after restarts) taken off.
* per generation: ``startup_seconds`` (start -> first progress), ``compile_seconds`` (union of
  compile intervals), ``time_to_detect`` (last progress -> failure verdict), ``time_to_evidence``
  (verdict -> incident), ``time_to_relaunch`` (incident, else verdict -> the next generation's
  first progress), ``lost_steps``/``lost_seconds`` (last progress back to the checkpoint the next
  generation resumed from; from step 0 / first progress without a checkpoint).
* ``causes``: failure labels counted, and ``failures`` one entry per failed generation.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

_STEP_IN_PATH = re.compile(r"(?:step|iter|global_step|checkpoint)[_\-]?(\d+)(?!.*\d)", re.IGNORECASE)


def parse_time(value: Any) -> float | None:
    """Seconds since the epoch from an ISO 8601 string (``Z`` allowed) or a number; None if neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = _dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:  # events are UTC by contract; a naive time is read as UTC
        parsed = parsed.replace(tzinfo=_dt.timezone.utc)
    return parsed.timestamp()


def checkpoint_step(event: dict[str, Any]) -> int | None:
    """The step a ``restart`` resumes from: ``checkpoint_step``, else the last ``step_<N>`` in ``checkpoint``."""
    raw = event.get("checkpoint_step")
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    path = event.get("checkpoint")
    if isinstance(path, str):
        m = _STEP_IN_PATH.search(path.rstrip("/"))
        if m:
            return int(m.group(1))
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _union_length(intervals: Iterable[tuple[float, float]], lo: float | None = None,
                  hi: float | None = None) -> float:
    """Total length of the union of ``intervals``, each clipped to [lo, hi]."""
    clipped = []
    for a, b in intervals:
        a = a if lo is None else max(a, lo)
        b = b if hi is None else min(b, hi)
        if b > a:
            clipped.append((a, b))
    total, end = 0.0, None
    for a, b in sorted(clipped):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


@dataclass
class _Gen:
    number: int
    start: float
    end: float | None = None
    progress: list[tuple[float, int | None]] = field(default_factory=list)  # (time, step)
    compiles: list[tuple[float, float]] = field(default_factory=list)
    open_compile: float | None = None  # a "compiling" verdict not yet followed by another state
    open_rank_compiles: dict[tuple[str, int], float] = field(default_factory=dict)
    checkpoints: list[tuple[float, int]] = field(default_factory=list)  # (time seen, step)
    failure: dict[str, Any] | None = None
    failure_time: float | None = None
    incident_time: float | None = None
    resumed_step: int | None = None  # the checkpoint step this generation started from

    def close_compile(self, t: float) -> None:
        if self.open_compile is not None:
            self.compiles.append((self.open_compile, t))
            self.open_compile = None

    def last_progress(self, before: float | None = None) -> tuple[float, int | None] | None:
        pts = [p for p in self.progress if before is None or p[0] <= before]
        return max(pts, key=lambda p: p[0]) if pts else None

    def first_progress(self) -> tuple[float, int | None] | None:
        return min(self.progress, key=lambda p: p[0]) if self.progress else None


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def compute_goodput(events: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Goodput figures of one run from its events (see the module doc for names and meaning).

    Events without a readable ``time`` are skipped and counted in ``skipped_events``. Events are
    taken in file order; a run without ``job_finished`` is measured up to its last event and
    reported with ``finished: False``. Never raises on odd input.
    """
    timed: list[tuple[float, dict[str, Any]]] = []
    skipped = 0
    for ev in events:
        t = parse_time(ev.get("time")) if isinstance(ev, dict) else None
        if t is None:
            skipped += 1
        else:
            timed.append((t, ev))
    notes: list[str] = []
    if not timed:
        return {"finished": False, "wall_seconds": None, "effective_ratio": None, "useful_ratio": None,
                "generations": [], "causes": {}, "failures": [], "skipped_events": skipped,
                "notes": ["no events with a time"]}

    started = next((t for t, ev in timed if ev.get("event") == "job_started"), None)
    if started is None:
        notes.append("no job_started event: wall time starts at the first event")
        started = timed[0][0]
    finished = next((t for t, ev in timed if ev.get("event") == "job_finished"), None)
    end = finished if finished is not None else max(t for t, _ev in timed)

    gens: dict[int, _Gen] = {}
    current: _Gen | None = None

    def gen_for(number: int, t: float) -> _Gen:
        g = gens.get(number)
        if g is None:
            g = gens[number] = _Gen(number, start=t)
        return g

    for t, ev in timed:
        name = ev.get("event")
        number = _int(ev.get("generation"))
        if name == "restart":
            # The restart begins the next generation, whatever number the event itself carries.
            prev = current
            next_number = max(gens) + 1 if gens else 0
            if number is not None and number not in gens:
                next_number = number
            if prev is not None:
                prev.close_compile(t)
                prev.end = t
            current = gen_for(next_number, t)
            current.resumed_step = checkpoint_step(ev)
            continue
        if number is None:
            number = current.number if current is not None else 0
        if current is None or number != current.number:
            if current is not None and number < current.number and number in gens:
                g = gens[number]  # a late event of an earlier generation
            else:
                if current is not None and current.end is None:
                    current.close_compile(t)
                    current.end = t
                current = gen_for(number, started if not gens else t)
                g = current
        else:
            g = current
        if name in ("verdict", "job_finished"):
            lp = parse_time(ev.get("last_progress"))
            if lp is not None:
                g.progress.append((lp, _int(ev.get("last_step"))))
        if name == "progress":
            g.close_compile(t)
            g.progress.append((t, _int(ev.get("step"))))
        elif name == "verdict":
            if ev.get("label") == "compiling":
                if g.open_compile is None:
                    g.open_compile = t
            else:
                g.close_compile(t)
                if ev.get("action") not in (None, "wait") and g.failure is None:
                    g.failure, g.failure_time = ev, t
        elif name == "compile_start":
            g.open_rank_compiles[(str(ev.get("node")), _int(ev.get("rank")) or 0)] = t
        elif name == "compile_end":
            k = (str(ev.get("node")), _int(ev.get("rank")) or 0)
            if k in g.open_rank_compiles:
                g.compiles.append((g.open_rank_compiles.pop(k), t))
            elif isinstance(ev.get("seconds"), (int, float)):
                g.compiles.append((t - float(ev["seconds"]), t))
        elif name == "checkpoint":
            step = _int(ev.get("step"))
            if step is None:
                step = checkpoint_step(ev)
            if step is not None:
                g.checkpoints.append((t, step))
        elif name == "incident":
            g.close_compile(t)
            if g.incident_time is None:
                g.incident_time = t
        elif name == "job_finished":
            g.close_compile(t)

    # close what is still open at the end of the run
    for g in gens.values():
        if g.end is None:
            g.end = end
        g.close_compile(g.end)
        for t0 in g.open_rank_compiles.values():
            g.compiles.append((t0, g.end))

    order = sorted(gens.values(), key=lambda g: g.start)
    known_checkpoints: list[tuple[float, int]] = []
    out_gens: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    causes: dict[str, int] = {}
    progress_total = 0.0
    lost_total_s = 0.0
    lost_total_steps = 0
    compile_total = 0.0
    for i, g in enumerate(order):
        nxt = order[i + 1] if i + 1 < len(order) else None
        known_checkpoints.extend(g.checkpoints)
        first = g.first_progress()
        last = g.last_progress(before=g.failure_time) if g.failure_time is not None else g.last_progress()
        compile_s = _union_length(g.compiles)
        compile_total += compile_s
        prog = 0.0
        if first is not None and last is not None and last[0] > first[0]:
            prog = (last[0] - first[0]) - _union_length(g.compiles, first[0], last[0])
        progress_total += prog
        row: dict[str, Any] = {
            "generation": g.number,
            "start_unix": g.start,
            "end_unix": g.end,
            "startup_seconds": _r(first[0] - g.start) if first else None,
            "compile_seconds": _r(compile_s),
            "progress_seconds": _r(prog),
            "first_step": first[1] if first else None,
            "last_step": last[1] if last else None,
            "resumed_from_step": g.resumed_step,
            "outcome": "finished" if g.failure is None and nxt is None and finished is not None else None,
            "time_to_detect": None,
            "time_to_evidence": None,
            "time_to_relaunch": None,
            "lost_steps": None,
            "lost_seconds": None,
        }
        if g.failure is not None and g.failure_time is not None:
            label = str(g.failure.get("label", "unknown"))
            row["outcome"] = label
            causes[label] = causes.get(label, 0) + 1
            if last is not None:
                row["time_to_detect"] = _r(g.failure_time - last[0])
            if g.incident_time is not None:
                row["time_to_evidence"] = _r(g.incident_time - g.failure_time)
            if nxt is not None:
                nfirst = nxt.first_progress()
                since = g.incident_time if g.incident_time is not None else g.failure_time
                if nfirst is not None:
                    row["time_to_relaunch"] = _r(nfirst[0] - since)
                # Work lost: from the checkpoint the next generation resumed from up to the last progress.
                if last is not None and last[1] is not None:
                    ck = nxt.resumed_step
                    ck_time: float | None = None
                    if ck is None:
                        ck = 0
                        ck_time = first[0] if first else None
                    else:
                        seen = [t for t, s in known_checkpoints if s == ck]
                        at_step = [t for gg in order[: i + 1] for t, s in gg.progress if s == ck]
                        cands = seen or at_step
                        ck_time = min(cands) if cands else None
                        if ck_time is not None and ck_time < g.start:
                            ck_time = g.start  # saved by an earlier generation: all of this one is lost
                    row["lost_steps"] = max(0, last[1] - ck)
                    lost_total_steps += row["lost_steps"]
                    if ck_time is not None:
                        row["lost_seconds"] = _r(max(0.0, last[0] - ck_time) -
                                                 _union_length(g.compiles, ck_time, last[0]))
                        lost_total_s += row["lost_seconds"] or 0.0
                    else:
                        notes.append(f"generation {g.number}: no time for checkpoint step {ck}; lost seconds unknown")
            failures.append({"generation": g.number, "label": label, "culprit": g.failure.get("culprit"),
                             "action": g.failure.get("action"), "reason": g.failure.get("reason")})
        out_gens.append(row)
        if first is None:
            notes.append(f"generation {g.number}: no progress recorded")

    wall = end - started
    return {
        "finished": finished is not None,
        "wall_seconds": _r(wall),
        "progress_seconds": _r(progress_total),
        "effective_ratio": round(progress_total / wall, 4) if wall > 0 else None,
        "useful_seconds": _r(max(0.0, progress_total - lost_total_s)),
        "useful_ratio": round(max(0.0, progress_total - lost_total_s) / wall, 4) if wall > 0 else None,
        "compile_seconds": _r(compile_total),
        "restarts": max(0, len(order) - 1),
        "lost_steps": lost_total_steps,
        "lost_seconds": _r(lost_total_s),
        "causes": causes,
        "failures": failures,
        "generations": out_gens,
        "skipped_events": skipped,
        "notes": notes,
    }

"""Goodput of a run, computed from its events (``events.jsonl``). Pure: no I/O, no clock.

    figures = compute_goodput(events)      # events: the dicts of events.jsonl, in file order

Which events it reads (all share ``time`` (ISO UTC) and ``generation``; docs/live.md has the table):

* ``job_started``: wall time starts; generation 0 starts.
* ``restart``: the next generation starts (at this event's time); ``checkpoint`` (a path whose
  name holds the step: ``step_<N>``, HF ``checkpoint-<N>``, Lightning ``step=<N>.ckpt``; null: from
  scratch) or ``checkpoint_step`` says where it resumes.
* ``progress``: ``step`` (null for progress lines without one); the supervisor's samples of the job
  making progress (the first of each generation, then throttled), dated by the line that showed it.
  ``verdict`` and ``job_finished`` may carry ``last_progress`` (time) and ``last_step``: the
  newest progress the judge saw, which makes the figures exact.
* ``verdict``: label ``compiling`` opens a compile interval that the next non-compiling event of
  the generation closes; another label with an action other than ``wait`` is the generation's failure.
* ``compile_start`` / ``compile_end`` (optional, per ``node``/``rank``): explicit compile intervals.
* ``compile_report`` (per ``node``/``rank``): ``seconds`` a rank's compiler says it spent so far
  (torch-xla's ``CompileTime`` metric, the process's own total): the newest per rank counts.
* ``checkpoint``: ``step`` of a complete checkpoint and when it was seen (for work lost).
* ``incident``: evidence captured.
* ``job_finished``: wall time ends; ``exit_code``/``state`` say how (``outcome``). Any ``goodput``
  field it carries is ignored. ``gave_up``: the policy gave up (restarts exhausted).

Figures (seconds unless named otherwise; None when the events do not say):

* ``effective_ratio`` = time making progress / wall time. Time making progress in a generation is
  first progress .. last progress, less compile intervals inside that span.
* ``useful_ratio``: the same with the work lost to failures (redone after restarts) taken off.
* per generation: ``startup_seconds`` (start -> first progress), ``compile_seconds`` (union of
  compile intervals), ``reported_compile_seconds`` (the most any rank's compiler said it spent:
  ``compile_report``; None without one), ``time_to_detect`` (last progress -> failure verdict), ``time_to_evidence``
  (verdict -> incident), ``time_to_relaunch`` (incident, else verdict -> the next generation's
  first progress), ``lost_steps``/``lost_seconds`` (last progress back to the checkpoint the next
  generation resumed from; from step 0 / first progress without a checkpoint) and
  ``lost_steps_basis`` (``checkpoint``, ``scratch``, ``redone``: the checkpoint names no step, so
  counted from the step the next generation printed first; ``unknown``: None, with a note).
* ``finished`` is true only for a job that ended with exit 0; ``outcome`` is ``finished``,
  ``interrupted``, ``gave_up``, ``failed`` or ``running`` (no ``job_finished`` yet), ``exit_code``,
  ``end_reason`` (``job_finished``'s ``reason``: ``--max-restarts 2 used up``, a crash loop, a signal).
* ``causes``: failure labels counted, and ``failures`` one entry per failed generation.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

# HF Trainer ``checkpoint-500``, Lightning ``epoch=1-step=128.ckpt``, ``step_10``, ``iter_0000100``
# (Megatron), DeepSpeed ``global_step100``, NeMo ``...-step=128-consumed_samples=2048.0.ckpt``: the
# last number that follows one of these words (other numbers may come after it).
_STEP_IN_PATH = re.compile(r"(?:step|iter|global_step|checkpoint)[_\-=]?(\d+)(?!\d)", re.IGNORECASE)

#: ExitCode.RESTARTS_EXHAUSTED (errors.py; not imported: this module stays free of the CLI's imports)
_GAVE_UP_CODE = 5
#: interrupted: 128 + the signal (SIGINT 130, SIGTERM 143)
_SIGNAL_BASE = 128


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
        found = _STEP_IN_PATH.findall(path.rstrip("/"))
        if found:
            return int(found[-1])
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
    open_compile_step: int | None = None  # the job's step that verdict was given at
    open_rank_compiles: dict[tuple[str, int], float] = field(default_factory=dict)
    reported_compiles: dict[tuple[str, int], float] = field(default_factory=dict)  # rank -> its own total
    checkpoints: list[tuple[float, int]] = field(default_factory=list)  # (time seen, step)
    failure: dict[str, Any] | None = None
    failure_time: float | None = None
    incident_time: float | None = None
    resumed_step: int | None = None  # the checkpoint step this generation started from
    restarted: bool = False  # begun by a `restart` event
    resumed_checkpoint: str | None = None  # its checkpoint (None: from scratch)

    def close_compile(self, t: float) -> None:
        if self.open_compile is not None:
            self.compiles.append((self.open_compile, t))
            self.open_compile = None

    def progress_ends_compile(self, t: float, step: int | None) -> bool:
        """Is a ``progress`` event (dated by its line at ``t``) past the open compile? One of the
        step the compile was announced at, or dated before it, was sent late (progress events are
        throttled and dated by their line) and says nothing of the compile's end."""
        if self.open_compile is None or t <= self.open_compile:
            return False
        return step is None or self.open_compile_step is None or step > self.open_compile_step

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
    closing = next((ev for _t, ev in timed if ev.get("event") == "job_finished"), None)
    finished = next((t for t, ev in timed if ev.get("event") == "job_finished"), None)
    end = finished if finished is not None else max(t for t, _ev in timed)
    outcome, exit_code = _job_outcome(closing, any(ev.get("event") == "gave_up" for _t, ev in timed))

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
            current.restarted = True
            ck = ev.get("checkpoint")
            current.resumed_checkpoint = ck if isinstance(ck, str) and ck else None
            if current.resumed_checkpoint is None and current.resumed_step is not None:
                current.resumed_checkpoint = f"step {current.resumed_step}"
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
            step = _int(ev.get("step"))
            if g.progress_ends_compile(t, step):
                g.close_compile(t)
            g.progress.append((t, step))
        elif name == "verdict":
            if ev.get("label") == "compiling":
                if g.open_compile is None:
                    g.open_compile, g.open_compile_step = t, _int(ev.get("step"))
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
        elif name == "compile_report" and isinstance(ev.get("seconds"), (int, float)):
            g.reported_compiles[(str(ev.get("node")), _int(ev.get("rank")) or 0)] = float(ev["seconds"])
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
    lost_unknown = 0  # failed generations whose lost steps cannot be told
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
            # the compiler's own account where a rank printed one (torch-xla's metrics): the rank
            # that compiled longest; None when no rank did
            "reported_compile_seconds": _r(max(g.reported_compiles.values())) if g.reported_compiles else None,
            "progress_seconds": _r(prog),
            "first_step": first[1] if first else None,
            "last_step": last[1] if last else None,
            "resumed_from_step": g.resumed_step,
            "outcome": outcome if g.failure is None and nxt is None and outcome != "running" else None,
            "time_to_detect": None,
            "time_to_evidence": None,
            "time_to_relaunch": None,
            "lost_steps": None,
            "lost_steps_basis": None,
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
                lost = _lost_work(g, nxt, first, last, known_checkpoints, order[: i + 1])
                row["lost_steps"], row["lost_steps_basis"], row["lost_seconds"] = lost.steps, lost.basis, lost.seconds
                notes.extend(f"generation {g.number}: {n}" for n in lost.notes)
                if lost.steps is None:
                    lost_unknown += 1
                else:
                    lost_total_steps += lost.steps
                lost_total_s += lost.seconds or 0.0
            failures.append({"generation": g.number, "label": label, "culprit": g.failure.get("culprit"),
                             "action": g.failure.get("action"), "reason": g.failure.get("reason")})
        out_gens.append(row)
        if first is None:
            notes.append(f"generation {g.number}: no progress recorded")

    wall = end - started
    if lost_unknown:
        notes.append(f"work lost in steps is unknown for {lost_unknown} restart(s); the total counts the others")
    return {
        "finished": outcome == "finished",
        "outcome": outcome,
        "exit_code": exit_code,
        # why it ended, in the job's own words ("--max-restarts 2 used up", "crash loop: ...", a signal)
        "end_reason": None if closing is None or not closing.get("reason") else str(closing["reason"]),
        "wall_seconds": _r(wall),
        "progress_seconds": _r(progress_total),
        "effective_ratio": round(progress_total / wall, 4) if wall > 0 else None,
        "useful_seconds": _r(max(0.0, progress_total - lost_total_s)),
        "useful_ratio": round(max(0.0, progress_total - lost_total_s) / wall, 4) if wall > 0 else None,
        "compile_seconds": _r(compile_total),
        "restarts": max(0, len(order) - 1),
        "lost_steps": None if lost_unknown and not lost_total_steps else lost_total_steps,
        "lost_seconds": _r(lost_total_s),
        "causes": causes,
        "failures": failures,
        "generations": out_gens,
        "skipped_events": skipped,
        "notes": notes,
    }


def _interpolate(points: list[tuple[float, int | None]], step: int) -> float | None:
    """When ``step`` was reached, from the (time, step) samples around it (progress events are
    throttled, so the checkpoint's step is rarely one of them); None outside the samples."""
    known = sorted((t, s) for t, s in points if s is not None)
    for (t0, s0), (t1, s1) in itertools.pairwise(known):
        if s0 <= step <= s1 and s1 > s0:
            return t0 + (t1 - t0) * (step - s0) / (s1 - s0)
    return None


def _job_outcome(closing: dict[str, Any] | None, gave_up: bool) -> tuple[str, int | None]:
    """``(outcome, exit code)`` of the job from its ``job_finished`` event (None: still running).

    outcome: ``finished`` (exit 0), ``interrupted`` (stopped by a signal: state ``interrupted`` or
    exit 128+N), ``gave_up`` (a ``gave_up`` event, or exit 5: restarts exhausted), ``failed``
    (any other non-zero exit) or ``running`` (no ``job_finished``: measured up to the last event).
    """
    if closing is None:
        return "running", None
    code = _int(closing.get("exit_code"))
    state = closing.get("state")
    if code == 0 or (code is None and state == "finished"):
        return "finished", code
    if state == "interrupted" or (code is not None and code > _SIGNAL_BASE):
        return "interrupted", code
    if gave_up or code == _GAVE_UP_CODE:
        return "gave_up", code
    return "failed", code


@dataclass
class _Lost:
    steps: int | None
    basis: str  # checkpoint | scratch | redone | unknown
    seconds: float | None
    notes: list[str]


def _lost_work(g: _Gen, nxt: _Gen, first: tuple[float, int | None] | None, last: tuple[float, int | None] | None,
               known_checkpoints: list[tuple[float, int]], upto: Sequence[_Gen]) -> _Lost:
    """Work of failed generation ``g`` redone by ``nxt``: from the step it resumed from to ``g``'s last progress.

    The resume step is the checkpoint's (``restart``'s ``checkpoint_step``, else the number in its
    name: HF ``checkpoint-500``, Lightning ``step=128.ckpt``), 0 when it started from scratch. A
    checkpoint whose name holds no step (the DDP tutorial's ``snapshot.pt``) is resolved from what
    the next generation printed first: the steps it printed again (``g``'s last step - ``nxt``'s
    first) were redone (basis ``redone``; exact when the step is printed as it begins, as that
    tutorial prints "Epoch N", and a lower bound by one logging interval otherwise). Without a
    step in ``g``'s progress or in ``nxt``'s the steps lost are unknown, and said so in a note.
    A restart given no checkpoint is from scratch (step 0), unless the next generation's first
    step is past ``g``'s first: then the job resumed by itself and that step counts (``redone``).
    """
    notes: list[str] = []
    ck: int | None
    ck_time: float | None = None
    nfirst = nxt.first_progress()
    resumed_by_itself = (nfirst is not None and nfirst[1] is not None and first is not None
                         and first[1] is not None and nfirst[1] > first[1])
    if nxt.restarted and nxt.resumed_checkpoint is None and resumed_by_itself:
        # No checkpoint was handed over (no --checkpoint-dir), yet the job resumed on its own
        # (the DDP tutorial reloads snapshot.pt from its working directory).
        assert nfirst is not None
        ck, basis = nfirst[1], "redone"
        notes.append(f"the restart was given no checkpoint but the job resumed at step {ck} by itself; work "
                     "lost is counted from there")
    elif nxt.restarted and nxt.resumed_checkpoint is None:
        ck, basis = 0, "scratch"
        ck_time = first[0] if first else None
    elif nxt.resumed_step is not None:
        ck, basis = nxt.resumed_step, "checkpoint"
    else:
        ck = nfirst[1] if nfirst is not None else None
        name = nxt.resumed_checkpoint or "the checkpoint"
        if ck is not None:
            basis = "redone"
            notes.append(f"{name} names no step; work lost is counted from step {ck}, where the next "
                         "generation's progress resumed")
        else:
            basis = "unknown"
            notes.append(f"{name} names no step and the next generation printed none: work lost in steps "
                         "unknown")
    if ck is not None and ck_time is None:
        seen = [t for t, s in known_checkpoints if s == ck]
        at_step = [t for gg in upto for t, s in gg.progress if s == ck]
        cands = seen or at_step
        ck_time = min(cands) if cands else None
        if ck_time is not None and ck_time < g.start:
            ck_time = g.start  # saved by an earlier generation: all of this one is lost
        if ck_time is None and first is not None and first[1] is not None and first[1] >= ck:
            ck_time = first[0]  # every step of this generation was done again
        if ck_time is None:
            ck_time = _interpolate(g.progress, ck)
            if ck_time is not None:
                notes.append(f"the time of step {ck} is interpolated between progress samples")
    steps: int | None = None
    if last is None or last[1] is None:
        if basis != "unknown":
            notes.append("its progress lines carry no step number: work lost in steps unknown")
        basis = "unknown"
    elif ck is not None:
        steps = max(0, last[1] - ck)
    seconds: float | None = None
    if last is not None and ck_time is not None:
        seconds = _r(max(0.0, last[0] - ck_time) - _union_length(g.compiles, ck_time, last[0]))
    elif last is not None and basis != "unknown":
        notes.append(f"no time for step {ck}: lost seconds unknown")
    return _Lost(steps, basis, seconds, notes)

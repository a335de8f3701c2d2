"""What a run looked like, as typed data for the HTML report (``neuron-watch report RUN-DIR --html``).
Pure: no I/O, no clock.

    view = build_view(events, figures, status)   # events.jsonl's dicts, compute_goodput's figures,
                                                  # status.json (or None)

* Each generation's time is cut into phases that do not overlap: ``start-up`` (launch to the first
  progress), ``compiling`` (a ``compiling`` verdict to the next verdict or progress), ``progressing``,
  ``saving`` (a verdict that waits on a rank saving a checkpoint, to the next verdict or progress),
  ``hang`` (the last progress to the failure verdict of a hang; ``failure`` for any other label), ``capture``
  (the verdict to the incident), ``stop`` (the incident to the last node's ``stopped``),
  ``relaunch`` (to the next generation) and ``ending`` (the last generation's end after its last
  progress). The recovery's ``recovery_phase`` events mark capture and stop where an incident or
  ``stopped`` event is missing.
* Time by cause adds those phases up over the run; the progressing time the next generation did
  again (goodput's ``lost_seconds``) is its own cause, ``work lost (redone)``.
* The ranks' states come from ``status.json`` (the newest the coordinator wrote): counted per state,
  one strip per node, and the nodes whose ranks are not all in the job's most common state (the
  outliers), so that a job of thousands of nodes is drawn by node, never by rank.
"""

from __future__ import annotations

import collections
import enum
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from neuron_watch.outputs.goodput import parse_time


class PhaseKind(str, enum.Enum):
    STARTUP = "start-up"
    COMPILING = "compiling"
    PROGRESSING = "progressing"
    SAVING = "saving"
    HANG = "hang"
    FAILURE = "failure"
    CAPTURE = "capture"
    STOP = "stop"
    RELAUNCH = "relaunch"
    ENDING = "ending"


#: Phases that are work; every other phase is badput.
WORK = frozenset({PhaseKind.PROGRESSING})
LOST_CAUSE = "work lost (redone)"


@dataclass(frozen=True)
class Phase:
    kind: PhaseKind
    start: float
    end: float
    note: str = ""

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class StepPoint:
    time: float
    step: int
    generation: int


@dataclass(frozen=True)
class GenerationView:
    number: int
    start: float
    end: float
    outcome: str  # a failure label, the job's outcome for the last one, or "restarted"
    phases: tuple[Phase, ...]
    first_step: int | None
    last_step: int | None
    resumed_from: str | None  # the checkpoint it started from (None: from scratch or the first launch)
    checkpoints: tuple[tuple[float, int], ...] = ()  # complete checkpoints seen: (time, step)


@dataclass(frozen=True)
class IncidentView:
    number: int
    generation: int
    time: float
    label: str
    action: str
    culprit: str  # "node / rank R", or "" when none was named
    culprit_node: str  # its node alone ("" when not known)
    culprit_source: str
    reason: str
    advice: str
    bundles: tuple[str, ...]  # where the evidence is: S3 URLs or local paths, as the events say
    capture_seconds: float | None
    missing: tuple[str, ...]  # the evidence items the nodes could not capture


@dataclass(frozen=True)
class Cause:
    cause: str
    seconds: float
    share: float  # of the wall time


@dataclass(frozen=True)
class NodeStrip:
    node: str
    states: tuple[str, ...]  # one per rank, in rank order
    counts: tuple[tuple[str, int], ...]  # state -> ranks, most urgent first
    worst: str


@dataclass(frozen=True)
class RanksView:
    as_of: str  # status.json's `updated`
    generation: int | None
    job_state: str
    total: int
    counts: tuple[tuple[str, int], ...]  # state -> ranks, most urgent first
    usual: str  # the job's most common rank state
    nodes: tuple[NodeStrip, ...]
    outliers: tuple[NodeStrip, ...]  # nodes with a rank not in the usual state, most urgent first
    culprits: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # node -> incidents naming it


@dataclass(frozen=True)
class RunView:
    job_id: str
    run_dir: str
    start: float
    end: float
    outcome: str
    exit_code: int | None
    restarts: int
    effective_ratio: float | None
    useful_ratio: float | None
    generations: tuple[GenerationView, ...]
    steps: tuple[StepPoint, ...]
    incidents: tuple[IncidentView, ...]
    causes: tuple[Cause, ...]  # goodput first, then badput, largest first
    ranks: RanksView | None
    notes: tuple[str, ...] = ()
    skipped_events: int = 0
    figures: Mapping[str, Any] = field(default_factory=dict)


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def culprit_text(culprit: Any) -> str:
    """``node / rank R`` (or whichever half is known) of a ``culprit`` field; "" when none."""
    if not isinstance(culprit, Mapping):
        return "" if culprit in (None, "") else str(culprit)
    node, rank = culprit.get("node"), culprit.get("rank")
    parts = [str(node)] if node not in (None, "") else []
    if rank is not None:
        parts.append(f"rank {rank}")
    return " / ".join(parts)


def _is_failure(ev: Mapping[str, Any]) -> bool:
    return ev.get("event") == "verdict" and ev.get("action") not in (None, "wait")


def _is_saving(ev: Mapping[str, Any]) -> bool:
    # The judge's verdict while a synced save outlasts the hang timeout: healthy, wait, and a reason
    # saying that a rank is saving a checkpoint (the only sign of a save the events carry).
    return (ev.get("event") == "verdict" and ev.get("label") == "healthy" and ev.get("action") == "wait"
            and "saving a checkpoint" in str(ev.get("reason", "")))


@dataclass
class _Gen:
    number: int
    start: float
    events: list[tuple[float, Mapping[str, Any]]] = field(default_factory=list)
    end: float | None = None
    resumed_from: str | None = None


def _split_generations(timed: Sequence[tuple[float, Mapping[str, Any]]], start: float) -> list[_Gen]:
    """The run's generations with their events: a ``restart`` begins the next one (as in goodput);
    an event of an earlier generation that arrives late joins that generation."""
    gens: dict[int, _Gen] = {}
    current: _Gen | None = None
    for t, ev in timed:
        number = _int(ev.get("generation"))
        if ev.get("event") == "restart":
            nxt = max(gens) + 1 if gens else 0
            if number is not None and number not in gens:
                nxt = number
            if current is not None:
                current.end = t
            current = gens[nxt] = _Gen(nxt, t)
            ck = ev.get("checkpoint")
            current.resumed_from = ck if isinstance(ck, str) and ck else None
            continue
        if number is None:
            number = current.number if current is not None else 0
        if current is None or number > current.number:
            if current is not None and current.end is None:
                current.end = t
            current = gens.setdefault(number, _Gen(number, start if not gens else t))
        g = gens.get(number, current)
        g.events.append((t, ev))
    for g in gens.values():
        g.events.sort(key=lambda x: x[0])  # stable: events of one instant keep their file order
    return sorted(gens.values(), key=lambda g: g.start)


def _cut(base: list[Phase], over: Iterable[Phase]) -> list[Phase]:
    """``base`` (phases in order, not overlapping) with each of ``over`` laid on top of it."""
    out = list(base)
    for top in over:
        if top.end <= top.start:
            continue
        nxt: list[Phase] = []
        for p in out:
            if p.end <= top.start or p.start >= top.end or p.kind not in (PhaseKind.STARTUP, PhaseKind.PROGRESSING):
                nxt.append(p)
                continue
            if p.start < top.start:
                nxt.append(Phase(p.kind, p.start, top.start, p.note))
            nxt.append(Phase(top.kind, max(p.start, top.start), min(p.end, top.end), top.note))
            if p.end > top.end:
                nxt.append(Phase(p.kind, top.end, p.end, p.note))
        out = nxt
    merged: list[Phase] = []
    for p in out:
        if p.end <= p.start:
            continue
        if merged and merged[-1].kind is p.kind and merged[-1].end >= p.start and merged[-1].note == p.note:
            merged[-1] = Phase(p.kind, merged[-1].start, p.end, p.note)
        else:
            merged.append(p)
    return merged


def _phases(g: _Gen, end: float, last: bool) -> tuple[list[Phase], list[StepPoint], tuple[int | None, int | None]]:
    """One generation's phases, its step points and (first, last) step."""
    points: list[StepPoint] = []
    progress_times: list[float] = []
    failure: tuple[float, Mapping[str, Any]] | None = None
    incident_t: float | None = None
    stopped_t: float | None = None
    recovery: dict[str, float] = {}
    overlays: list[Phase] = []
    open_kind: tuple[PhaseKind, float] | None = None

    def close(t: float) -> None:
        nonlocal open_kind
        if open_kind is not None:
            overlays.append(Phase(open_kind[0], open_kind[1], t))
            open_kind = None

    for t, ev in g.events:
        name = ev.get("event")
        if failure is None and name in ("progress", "verdict", "job_finished"):
            lp, ls = parse_time(ev.get("last_progress")), _int(ev.get("last_step"))
            if name == "progress":
                lp, ls = t, _int(ev.get("step"))
            if lp is not None:
                progress_times.append(lp)
                if ls is not None:
                    points.append(StepPoint(lp, ls, g.number))
        if name == "progress" and failure is None:
            close(t)
        elif name == "verdict" and failure is None:
            kind = PhaseKind.COMPILING if ev.get("label") == "compiling" else (
                PhaseKind.SAVING if _is_saving(ev) else None)
            if open_kind is None or kind is not open_kind[0]:
                close(t)
                if kind is not None:
                    open_kind = (kind, t)
            if _is_failure(ev):
                failure = (t, ev)
        elif name == "incident" and incident_t is None:
            incident_t = t
        elif name == "stopped":
            stopped_t = t if stopped_t is None else max(stopped_t, t)
        elif name == "recovery_phase" and isinstance(ev.get("phase"), str):
            recovery.setdefault(str(ev["phase"]), t)
    fail_t = failure[0] if failure is not None else None
    if fail_t is not None and "capturing" in recovery:
        # The failure verdict is written once its incident is recorded: recovery entered capture
        # when it decided, and that is when the hang ended and the capture began.
        fail_t = min(fail_t, recovery["capturing"])
    close(fail_t if fail_t is not None else end)

    first = min(progress_times) if progress_times else None
    last_p = max((p for p in progress_times if fail_t is None or p <= fail_t), default=None)
    base: list[Phase] = []
    cursor = g.start
    if first is not None:
        base.append(Phase(PhaseKind.STARTUP, g.start, max(g.start, first)))
        assert last_p is not None
        base.append(Phase(PhaseKind.PROGRESSING, max(g.start, first), max(g.start, first, last_p)))
        cursor = max(g.start, first, last_p)
    if failure is not None and fail_t is not None:
        label = str(failure[1].get("label", ""))
        if first is None:  # it failed before any progress: all of it was start-up
            base.append(Phase(PhaseKind.STARTUP, cursor, max(cursor, fail_t)))
        else:
            kind = PhaseKind.HANG if "hang" in label else PhaseKind.FAILURE
            base.append(Phase(kind, cursor, max(cursor, fail_t), label))
        cursor = max(cursor, fail_t)
        capture_end = incident_t if incident_t is not None else recovery.get("stopping")
        if capture_end is not None and capture_end > cursor:
            base.append(Phase(PhaseKind.CAPTURE, cursor, min(capture_end, end), label))
            cursor = min(capture_end, end)
        stop_end = stopped_t if stopped_t is not None else recovery.get("restarting")
        if stop_end is not None and stop_end > cursor:
            base.append(Phase(PhaseKind.STOP, cursor, min(stop_end, end)))
            cursor = min(stop_end, end)
        if end > cursor:
            base.append(Phase(PhaseKind.ENDING if last else PhaseKind.RELAUNCH, cursor, end))
    elif first is None:
        base.append(Phase(PhaseKind.STARTUP, g.start, end))
    elif end > cursor:
        base.append(Phase(PhaseKind.ENDING if last else PhaseKind.RELAUNCH, cursor, end))
    phases = _cut(base, overlays)
    steps = [p.step for p in points]
    return phases, sorted(points, key=lambda p: p.time), (steps[0] if steps else None,
                                                           max(steps) if steps else None)


def _incidents(timed: Sequence[tuple[float, Mapping[str, Any]]]) -> list[IncidentView]:
    """Each ``incident`` with the failure verdict before it (reason, advice) and the bundles that
    hold its evidence (its ``artifacts``, and the ``uri`` of each ``upload`` of it)."""
    out: list[IncidentView] = []
    uploads: dict[int, list[str]] = {}
    for _t, ev in timed:
        n = _int(ev.get("incident"))
        if ev.get("event") == "upload" and n is not None and isinstance(ev.get("uri"), str) and ev.get("uri"):
            uploads.setdefault(n, []).append(str(ev["uri"]))
    last_failure: dict[int, Mapping[str, Any]] = {}
    for t, ev in timed:
        gen = _int(ev.get("generation")) or 0
        if _is_failure(ev):
            last_failure[gen] = ev
        if ev.get("event") != "incident":
            continue
        verdict = last_failure.get(gen, {})
        who = ev.get("culprit") if ev.get("culprit") is not None else verdict.get("culprit")
        number = _int(ev.get("incident")) or len(out) + 1
        art = ev.get("artifacts")
        bundles: list[str] = []
        if isinstance(art, str) and art:
            bundles.append(art)
        elif isinstance(art, Mapping):
            bundles += [str(v) for _k, v in sorted(art.items()) if v]
        known = set(bundles)
        bundles += [u for u in uploads.get(number, []) if u not in known]
        missing = ev.get("missing")
        if isinstance(missing, Mapping):
            names = tuple(sorted(str(k) for k in missing))
        elif isinstance(missing, list):
            names = tuple(str(k) for k in missing)
        else:
            names = tuple(f"{n} item(s)" for n in [_int(ev.get("missing_items"))] if n)
        out.append(IncidentView(
            number=number, generation=gen, time=t,
            label=str(ev.get("label") or verdict.get("label") or ""),
            action=str(verdict.get("action") or ""),
            culprit=culprit_text(who), culprit_node=str(who.get("node") or "") if isinstance(who, Mapping) else "",
            culprit_source=str(verdict.get("culprit_source") or ""),
            reason=str(verdict.get("reason") or ""),
            advice=str(verdict.get("advice") or ""),
            bundles=tuple(bundles),
            capture_seconds=_num(ev.get("capture_seconds")),
            missing=names,
        ))
    return out


def _causes(gens: Sequence[GenerationView], wall: float, lost: float) -> list[Cause]:
    totals: dict[str, float] = {}
    for g in gens:
        for p in g.phases:
            name = p.kind.value if not p.note or p.kind not in (PhaseKind.HANG, PhaseKind.FAILURE, PhaseKind.CAPTURE) \
                else f"{p.kind.value} ({p.note})"
            totals[name] = totals.get(name, 0.0) + p.seconds
    progressing = totals.pop(PhaseKind.PROGRESSING.value, 0.0)
    lost = min(lost, progressing)
    out = [Cause("progressing (goodput)", progressing - lost, 0.0)]
    if lost > 0:
        totals[LOST_CAUSE] = lost
    out += [Cause(k, v, 0.0) for k, v in sorted(totals.items(), key=lambda kv: -kv[1]) if v > 0]
    return [Cause(c.cause, round(c.seconds, 3), round(c.seconds / wall, 4) if wall > 0 else 0.0) for c in out]


def _ranks(status: Mapping[str, Any] | None, state_order: Sequence[str], max_outliers: int,
           incidents: Sequence[IncidentView] = ()) -> RanksView | None:
    rows = status.get("ranks") if status is not None else None
    if not isinstance(rows, list) or status is None:
        return None
    rank_of = {s: i for i, s in enumerate(state_order)}

    def urgency(state: str) -> int:
        return rank_of.get(state, -1)  # a state this version does not know comes first: unknown is not OK

    per_node: dict[str, list[tuple[int, str]]] = {}
    for r in rows:
        if not isinstance(r, dict):
            continue
        rank = r.get("rank")
        rank = rank if type(rank) is int else 0  # (a bool is no rank) - kept lean: 65,536 rows
        if rank < 0:  # rank -1 is a node's launcher (torchrun itself), not a rank of the job
            continue
        per_node.setdefault(str(r.get("node", "?")), []).append((rank, str(r.get("state") or "unobserved")))
    counts: collections.Counter[str] = collections.Counter()
    strips = []
    for node in sorted(per_node, key=_node_key):
        ranks = per_node[node]
        ranks.sort()
        states = tuple(s for _r, s in ranks)
        c = collections.Counter(states)
        counts.update(c)
        ordered = tuple(sorted(c.items(), key=lambda kv: urgency(kv[0])))
        strips.append(NodeStrip(node, states, ordered, ordered[0][0]))
    if not counts:
        return None
    usual = max(counts.items(), key=lambda kv: (kv[1], -urgency(kv[0])))[0]
    named: dict[str, list[int]] = {}
    for inc in incidents:
        if inc.culprit_node:
            named.setdefault(inc.culprit_node, []).append(inc.number)
    outliers = [s for s in strips if len(s.counts) > 1 or s.worst != usual or s.node in named]
    outliers.sort(key=lambda s: (urgency(s.worst), -sum(n for st, n in s.counts if st != usual)))
    return RanksView(
        as_of=str(status.get("updated") or ""), generation=_int(status.get("generation")),
        job_state=str(status.get("state") or ""), total=sum(counts.values()),
        counts=tuple(sorted(counts.items(), key=lambda kv: urgency(kv[0]))), usual=usual,
        nodes=tuple(strips), outliers=tuple(outliers[:max_outliers]),
        culprits={k: tuple(v) for k, v in named.items()})


def _node_key(name: str) -> tuple[str, int, str]:
    """Nodes in natural order (node-2 before node-10)."""
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return (head, int(tail) if tail else -1, name)


def build_view(events: Sequence[Mapping[str, Any]], figures: Mapping[str, Any],
               status: Mapping[str, Any] | None = None, *, state_order: Sequence[str] = (),
               run_dir: str = "", max_outliers: int = 200) -> RunView:
    """The run as a :class:`RunView`. ``figures``: :func:`neuron_watch.outputs.goodput.compute_goodput` of
    the same events (its ratios, lost seconds and notes are shown as they are). ``state_order``:
    rank states most urgent first (status.py's ``RANK_STATES``). Events without a readable time are
    left out (goodput counts them in ``skipped_events``). Never raises on odd input."""
    # File order, as goodput reads them: a restart begins the next generation where it stands in the
    # file (an event may be dated earlier than one written before it: progress is dated by its line).
    timed = [(t, ev) for ev in events if isinstance(ev, Mapping) and (t := parse_time(ev.get("time"))) is not None]
    if not timed:
        return RunView(job_id="", run_dir=run_dir, start=0.0, end=0.0, outcome=str(figures.get("outcome") or "unknown"),
                       exit_code=None, restarts=0, effective_ratio=None, useful_ratio=None, generations=(),
                       steps=(), incidents=(), causes=(), ranks=_ranks(status, state_order, max_outliers),
                       notes=tuple(str(n) for n in figures.get("notes", [])),
                       skipped_events=_int(figures.get("skipped_events")) or 0, figures=dict(figures))
    started = next((t for t, ev in timed if ev.get("event") == "job_started"), min(t for t, _ev in timed))
    end = next((t for t, ev in timed if ev.get("event") == "job_finished"), max(t for t, _ev in timed))
    end = max(end, started)
    job_id = next((str(ev.get("job_id")) for _t, ev in timed if ev.get("event") == "job_started" and ev.get("job_id")),
                  str(status.get("job_id", "")) if status is not None else "")
    raw = _split_generations(timed, started)
    gens: list[GenerationView] = []
    steps: list[StepPoint] = []
    fig_gens = {g.get("generation"): g for g in figures.get("generations", []) if isinstance(g, Mapping)}
    for i, g in enumerate(raw):
        last = i == len(raw) - 1
        g_end = min(max(g.end if g.end is not None else end, g.start), max(end, g.start))
        phases, points, (first_step, last_step) = _phases(g, g_end, last)
        steps += points
        fg = fig_gens.get(g.number, {})
        failure = next((ev for _t, ev in g.events if _is_failure(ev)), None)
        outcome = (str(failure.get("label")) if failure is not None
                   else str(figures.get("outcome") or "") if last else "restarted")
        checkpoints = tuple((t, s) for t, ev in g.events if ev.get("event") == "checkpoint"
                            and (s := _int(ev.get("step"))) is not None)
        gens.append(GenerationView(g.number, g.start, g_end, outcome, tuple(phases),
                                   first_step if first_step is not None else _int(fg.get("first_step")),
                                   last_step if last_step is not None else _int(fg.get("last_step")),
                                   g.resumed_from, checkpoints))
    wall = end - started
    lost = _num(figures.get("lost_seconds")) or 0.0
    incidents = tuple(_incidents(timed))
    return RunView(
        job_id=job_id, run_dir=run_dir, start=started, end=end,
        outcome=str(figures.get("outcome") or "unknown"), exit_code=_int(figures.get("exit_code")),
        restarts=max(0, len(gens) - 1), effective_ratio=_num(figures.get("effective_ratio")),
        useful_ratio=_num(figures.get("useful_ratio")), generations=tuple(gens), steps=tuple(steps),
        incidents=incidents, causes=tuple(_causes(gens, wall, lost)),
        ranks=_ranks(status, state_order, max_outliers, incidents),
        notes=tuple(str(n) for n in figures.get("notes", [])),
        skipped_events=_int(figures.get("skipped_events")) or 0, figures=dict(figures))


def step_curve(points: Sequence[StepPoint], phases: Sequence[Phase]) -> list[tuple[float, float]]:
    """The step over time through ``points`` (one generation's samples, in time order) for drawing:
    between two samples the step rises only while the generation was progressing, and holds through
    a compile or a save in between (progress samples are sparse: a straight line would draw steps
    made during a compile). Where no progressing phase lies between two samples, a straight line."""
    work = [(p.start, p.end) for p in phases if p.kind in WORK]
    out: list[tuple[float, float]] = []
    for a, b in itertools.pairwise(points):
        if not out:
            out.append((a.time, float(a.step)))
        inside = [(max(s, a.time), min(e, b.time)) for s, e in work if min(e, b.time) > max(s, a.time)]
        total = sum(e - s for s, e in inside)
        if total <= 0 or b.step == a.step:
            out.append((b.time, float(b.step)))
            continue
        done = 0.0
        for s, e in inside:
            out.append((s, a.step + (b.step - a.step) * done / total))
            done += e - s
            out.append((e, a.step + (b.step - a.step) * done / total))
        if inside[-1][1] < b.time:
            out.append((b.time, float(b.step)))
    if not out and points:
        out.append((points[0].time, float(points[0].step)))
    return [p for i, p in enumerate(out) if i == 0 or p != out[i - 1]]

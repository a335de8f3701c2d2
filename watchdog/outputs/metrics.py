"""What the coordinator knows, as Prometheus metrics. Pure: no I/O, no clock (``now`` is passed in).

    m = JobMetrics("job-1", rank_states=RANK_STATES)
    m.event({"event": "incident", "generation": 0, "label": "collective_hang", ...})   # every event
    m.status(status_doc)                                     # each status document (about once a second)
    m.set_goodput(compute_goodput(events))                   # now and then (it reads every event)
    families = m.families(now)                               # what a scrape shows at wall time ``now``

It is fed from the two streams every other output reads (the event stream and the ``status.json``
document), so what a dashboard shows is what ``events.jsonl`` and ``neuron-watch status`` say. The
HTTP side (``metrics_http.py``) turns :class:`Family` values into ``prometheus_client`` families.

Names follow Prometheus' conventions: a ``neuron_watch_`` prefix, the unit in the name
(``_seconds``, ``_ratio``), ``_total`` for counters, labels of low cardinality only (a job state,
a verdict label, a rank state, a cause: never a rank or a node, which a 2,048-node job would turn
into 65,536 series); the culprit is one ``_info`` series. README "Metrics" has the table.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from neuron_watch.events import JobState, Label
from neuron_watch.outputs.goodput import parse_time

PREFIX = "neuron_watch_"
#: steps/s is measured over the status documents of this many seconds (of one generation)
RATE_WINDOW = 30.0

Kind = Literal["gauge", "counter", "info", "stateset"]


@dataclass(frozen=True)
class Sample:
    """One series: its label values (in the family's ``labels`` order) and its value."""

    values: tuple[str, ...]
    value: float


@dataclass(frozen=True)
class Family:
    """One metric: ``name`` (a counter's ends in ``_total``; an info's in ``_info``), its kind, help
    and label names, and its samples. A ``stateset`` has one label (its own name) and a sample per
    state (1 for the state it is in, 0 for the others); an ``info`` one sample of value 1."""

    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...] = ()
    samples: tuple[Sample, ...] = ()

    def value(self, *values: str) -> float | None:
        """The value of the series with these label values, or None (no such series)."""
        return next((s.value for s in self.samples if s.values == values), None)


#: Where the hang timeout in force comes from (``Judge.timeout_in_force``)
TIMEOUT_KINDS = ("fixed", "calibrated", "default", "startup", "first_collective")
#: What a bad put is charged to (goodput.py's figures, summed over the generations). ``compile``
#: overlaps ``startup`` when a graph compiles before the first step.
BADPUT_CAUSES = ("startup", "compile", "hang_detection", "evidence", "relaunch", "lost_work")


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _every(known: Sequence[str], counts: Mapping[str, int]) -> list[tuple[str, float]]:
    """A counter's series: one per known label value from the start (at 0), so that PromQL's
    ``increase()`` sees a series' first rise (a series born at 1 shows no increase), then any
    other value seen."""
    return [(k, counts.get(k, 0)) for k in [*known, *sorted(set(counts) - set(known))]]


def badput_seconds(goodput: Mapping[str, Any]) -> dict[str, float]:
    """Seconds of wall time not spent making progress, by cause, from ``compute_goodput``'s figures:
    the first generation's start-up (later start-ups are part of ``relaunch``), the compiles, the
    time from the last progress to the failure verdict, the evidence capture, the verdict (or
    incident) to the next generation's first progress, and the work redone after restarts."""
    out = dict.fromkeys(BADPUT_CAUSES, 0.0)
    gens = [g for g in goodput.get("generations") or [] if isinstance(g, Mapping)]
    if gens:
        out["startup"] = _num(gens[0].get("startup_seconds")) or 0.0
    out["compile"] = _num(goodput.get("compile_seconds")) or 0.0
    for g in gens:
        out["hang_detection"] += _num(g.get("time_to_detect")) or 0.0
        out["evidence"] += _num(g.get("time_to_evidence")) or 0.0
        out["relaunch"] += _num(g.get("time_to_relaunch")) or 0.0
    out["lost_work"] = _num(goodput.get("lost_seconds")) or 0.0
    return {k: round(v, 3) for k, v in out.items()}


@dataclass(frozen=True)
class RankFigures:
    """What a status document's ranks add up to: how many are in each state, the longest compile."""

    states: dict[str, int]
    compile_max: float | None


def fold_ranks(ranks: Sequence[Any]) -> RankFigures:
    """Count a status document's ranks by state and find the longest compile. Comprehensions over
    plain dicts (what the coordinator builds), not an ABC check and branches per rank: at 65,536 ranks
    the difference is several times the cost (tests/benchmarks/bench_metrics.py prints both)."""
    plain = [r for r in ranks if isinstance(r, dict)]
    states: collections.Counter[str] = collections.Counter()
    for state, n in collections.Counter([r.get("state") for r in plain]).items():
        states[str(state)] += n
    compiles: list[float] = [r["compile_seconds"] for r in plain if type(r.get("compile_seconds")) in (int, float)]
    return RankFigures(dict(states), float(max(compiles)) if compiles else None)


#: a scraper's interval is the longest gap among its last scrapes (a scrape made late by load does not
#: shorten the wait for its next)
SCRAPE_GAPS_KEPT = 4
#: scrapers followed at once: a scanner's ever-new user agents must not grow the book
SCRAPERS_KEPT = 16
#: beyond two of its intervals, the time a scraper is given for the last scrape (a slow answer, a
#: Prometheus on a busy host)
FINAL_SCRAPE_SLACK = 1.0


@dataclass(frozen=True)
class Missed:
    """A scraper that did not fetch the final values: who (address and user agent), its interval,
    and how long before the end its last scrape began."""

    scraper: str
    interval: float
    last_before_end: float


class Scrapers:
    """Who scrapes the metrics, and how often, so that the end of a job can wait until every
    scraper that has been fetching them regularly has fetched the final values once.

    Prometheus pulls: without this, a job's last values (its last steps, its end state) reach a
    Prometheus only if a scrape happens to fall between the final status document and the server's
    close, a window far shorter than any scrape interval. Pure: times (monotonic seconds) are passed in.

        book = Scrapers()
        book.scraped("10.0.0.5 Prometheus/2.45.3", started)   # each scrape served whole
        book.close(now, cap=30.0)                             # the final values are folded
        book.wait(now)                                        # seconds still to wait (0: done)
        book.missed()                                         # who never fetched them
    """

    def __init__(self) -> None:
        self._starts: dict[str, collections.deque[float]] = {}  # oldest scraper first
        self.closing: float | None = None
        self._until: dict[str, float] = {}
        self.served_total = 0  # whole scrapes noted, ever

    def scraped(self, who: str, started: float) -> None:
        """``who`` was served a whole scrape that began at ``started``."""
        starts = self._starts.pop(who, None) or collections.deque(maxlen=SCRAPE_GAPS_KEPT + 1)
        starts.append(started)
        self.served_total += 1
        self._starts[who] = starts  # the most recent scraper last
        while len(self._starts) > SCRAPERS_KEPT:
            del self._starts[next(iter(self._starts))]

    def interval(self, who: str) -> float | None:
        """The longest gap between ``who``'s last scrapes; None before its second."""
        starts = self._starts.get(who, ())
        return max(b - a for a, b in itertools.pairwise(starts)) if len(starts) > 1 else None

    def close(self, now: float, cap: float) -> None:
        """The final values are folded at ``now``: a scrape that begins from now on serves them.
        Each scraper that scrapes regularly (two scrapes or more) and has not missed two of its
        scrapes yet is awaited until two of its intervals after its last scrape (and
        :data:`FINAL_SCRAPE_SLACK`), at most ``cap`` seconds from now. One scrape only (a person's
        curl) or a scraper gone quiet is not awaited; with ``cap`` 0 none is (nor said missed)."""
        self.closing = now
        self._until = {}
        for who, starts in self._starts.items() if cap > 0 else ():
            interval = self.interval(who)
            if interval is None:
                continue
            due = starts[-1] + 2 * interval + FINAL_SCRAPE_SLACK
            if due > now:
                self._until[who] = min(due, now + cap)

    def served(self, who: str) -> bool:
        """Whether ``who`` began a scrape after :meth:`close` (it fetched the final values)."""
        starts = self._starts.get(who)
        return self.closing is not None and starts is not None and starts[-1] >= self.closing

    def wait(self, now: float) -> float:
        """Seconds the end still waits at ``now``: until the last awaited scraper not served yet is due."""
        pending = [until for who, until in self._until.items() if not self.served(who)]
        return max(0.0, max(pending, default=now) - now)

    def missed(self) -> list[Missed]:
        """The awaited scrapers that did not fetch the final values (call once :meth:`wait` is 0)."""
        out = []
        for who in self._until:
            starts = self._starts.get(who)
            if starts is not None and not self.served(who) and self.closing is not None:
                out.append(Missed(who, self.interval(who) or 0.0, round(self.closing - starts[-1], 3)))
        return out


class JobMetrics:
    """The job's metrics, folded from its events and status documents.

    Args:
        job_id: the job's id (the ``job_info`` series).
        rank_states: every rank state a status document may hold (``status.RANK_STATES``): each
            gets a ``ranks`` series, 0 when no rank is in it, so a dashboard's series never vanish.
    """

    def __init__(self, job_id: str, rank_states: Sequence[str]) -> None:
        self.job_id = job_id
        self.rank_states = tuple(rank_states)
        self.state = JobState.STARTING.value
        self.generation = 0
        self.label: str | None = None  # the last verdict's
        self.state_entries: collections.Counter[str] = collections.Counter()
        self.verdicts: collections.Counter[str] = collections.Counter()
        self.restarts: collections.Counter[str] = collections.Counter()
        self.incidents: collections.Counter[str] = collections.Counter()
        self.give_ups: collections.Counter[str] = collections.Counter()
        self.culprit: tuple[str, str, str] | None = None  # node, rank, label of the last incident
        self._failure_label: str | None = None  # what the next restart is for
        self.agent_dropped: dict[str, int] = {}  # node -> lines its agent could not buffer (a running total)
        self.truncated: dict[str, int] = {}
        self.console_dropped = 0
        self.exit_code: int | None = None
        # from the status documents
        self.updated: float | None = None
        self.hang_timeout: tuple[float, str] | None = None
        #: the newest document's ranks, folded when a scrape asks (not in the coordinator's loop)
        self._ranks: Sequence[Any] = ()
        self._folded: Sequence[Any] | None = None
        self._rank_figures = RankFigures({}, None)
        self.nodes = {"observed": 0, "unobserved": 0}
        self.last_step: int | None = None
        self.last_progress: float | None = None  # wall time of the line that showed the newest progress
        self.io_faults = 0
        self.io_degraded = 0
        self.io_lost_lines = 0
        self.saving_since: float | None = None
        self.save_seconds_total = 0.0
        self._rate: collections.deque[tuple[float, int, int]] = collections.deque()
        self.goodput: Mapping[str, Any] | None = None

    # -- input -----------------------------------------------------------------------------------

    def event(self, e: Mapping[str, Any]) -> None:
        """Fold one event of the job's stream (``events.jsonl``'s dict)."""
        name = e.get("event")
        gen = _int(e.get("generation"))
        if gen is not None:
            self.generation = max(self.generation, gen)
        if name == "job_started":
            self.state_entries[JobState.STARTING.value] += 1
        elif name == "recovery_phase" and isinstance(e.get("phase"), str):
            self.state = e["phase"]
            self.state_entries[self.state] += 1
        elif name == "verdict":
            label = str(e.get("label"))
            self.label = label
            self.verdicts[label] += 1
            if e.get("action") not in (None, "wait"):
                self._failure_label = label
        elif name == "incident":
            label = str(e.get("label"))
            self.incidents[label] += 1
            self._failure_label = label
            c = e.get("culprit")
            if isinstance(c, Mapping):
                self.culprit = (str(c.get("node")), str(c.get("rank")), label)
        elif name == "restart":
            self.restarts[self._failure_label or "unknown"] += 1
            self._failure_label = None
        elif name == "gave_up":
            self.give_ups[str(e.get("label"))] += 1
        elif name == "job_finished":
            if isinstance(e.get("state"), str):
                self.state = e["state"]
            self.exit_code = _int(e.get("exit_code"))
        elif name == "agent_dropped":
            node = str(e.get("node"))
            self.agent_dropped[node] = max(self.agent_dropped.get(node, 0), _int(e.get("lines")) or 0)
        elif name == "lines_truncated":
            node = str(e.get("node"))
            self.truncated[node] = max(self.truncated.get(node, 0), _int(e.get("lines")) or 0)
        elif name == "warning" and e.get("kind") == "console_dropped":
            self.console_dropped = max(self.console_dropped, _int(e.get("lines")) or 0)

    def status(self, doc: Mapping[str, Any]) -> None:
        """Fold one status document (``status.json``; module doc of ``status.py``). Its ranks are
        only kept (a 65,536-rank job sends one such document a second): a scrape folds the newest."""
        t = _num(doc.get("updated_unix"))
        if isinstance(doc.get("state"), str):
            self.state = doc["state"]
        gen = _int(doc.get("generation"))
        if gen is not None:
            self.generation = max(self.generation, gen)
        if isinstance(doc.get("label"), str):
            self.label = doc["label"]
        timeout = _num(doc.get("hang_timeout"))
        self.hang_timeout = None if timeout is None else (timeout, str(doc.get("hang_timeout_kind") or "unknown"))
        ranks = doc.get("ranks")
        self._ranks = ranks if isinstance(ranks, list) else []
        nodes = doc.get("nodes")
        if isinstance(nodes, Mapping):
            unobserved = sum(1 for v in nodes.values() if isinstance(v, Mapping) and v.get("state") == "unobserved")
            self.nodes = {"observed": len(nodes) - unobserved, "unobserved": unobserved}
        io = doc.get("watchdog_io")
        if isinstance(io, Mapping):
            self.io_faults = max(self.io_faults, _int(io.get("faults")) or 0)
            self.io_lost_lines = max(self.io_lost_lines, _int(io.get("lost_lines")) or 0)
            degraded = io.get("degraded")
            self.io_degraded = len(degraded) if isinstance(degraded, Mapping) else 0
        step = _int(doc.get("last_step"))  # the judge's newest step of this generation
        if step is not None:
            self.last_step = step
        progressed = parse_time(doc.get("last_progress"))
        if progressed is not None and (self.last_progress is None or progressed > self.last_progress):
            self.last_progress = progressed
        if gen is not None and self._rate and self._rate[-1][1] != gen:
            self._rate.clear()  # a new generation: its rate is its own, from its own steps
        if t is not None:
            self._saving(t, any(r.get("state") == "saving" for r in self._ranks if isinstance(r, dict)))
            if step is not None and gen is not None:
                self._sample_rate(t, gen, step)
            self.updated = t

    def _saving(self, t: float, saving: bool) -> None:
        """Save seconds, at the status documents' resolution (about a second)."""
        if saving:
            if self.saving_since is None:
                self.saving_since = t
            elif self.updated is not None and t > self.updated:
                self.save_seconds_total += t - self.updated
        else:
            self.saving_since = None

    def _sample_rate(self, t: float, gen: int, step: int) -> None:
        rate = self._rate
        while rate and (rate[0][1] != gen or t - rate[0][0] > RATE_WINDOW or rate[0][2] > step):
            rate.popleft()
        rate.append((t, gen, step))

    def pending_ranks(self) -> Sequence[Any] | None:
        """The newest document's ranks when they are not folded yet (for :meth:`set_rank_figures`)."""
        return None if self._folded is self._ranks else self._ranks

    def set_rank_figures(self, ranks: Sequence[Any], figures: RankFigures) -> None:
        """``fold_ranks(ranks)``, computed elsewhere (outside a lock): kept if ``ranks`` is still the newest."""
        if ranks is self._ranks:
            self._folded, self._rank_figures = ranks, figures

    def set_goodput(self, figures: Mapping[str, Any] | None) -> None:
        """The goodput figures of the job so far (``goodput.compute_goodput`` of its events)."""
        self.goodput = figures

    # -- output ----------------------------------------------------------------------------------

    def steps_per_second(self) -> float | None:
        """Steps per second over the last :data:`RATE_WINDOW` seconds of this generation; None
        before two documents with steps."""
        if len(self._rate) < 2:
            return None
        (t0, _, s0), (t1, _, s1) = self._rate[0], self._rate[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 else None

    def families(self, now: float) -> list[Family]:
        """Every metric at wall time ``now``."""
        pending = self.pending_ranks()
        if pending is not None:
            self.set_rank_figures(pending, fold_ranks(pending))
        out: list[Family] = []

        def gauge(name: str, help: str, value: float | None) -> None:
            out.append(Family(PREFIX + name, "gauge", help, (), () if value is None else (Sample((), value),)))

        def by(name: str, kind: Kind, help: str, label: str, values: Iterable[tuple[str, float]]) -> None:
            out.append(Family(PREFIX + name, kind, help, (label,),
                              tuple(Sample((k,), float(v)) for k, v in values)))

        out.append(Family(PREFIX + "job_info", "info", "The job this coordinator watches.", ("job_id",),
                          (Sample((self.job_id,), 1.0),)))
        states = [s.value for s in JobState]
        if self.state not in states:
            states.append(self.state)
        by("job_state", "stateset", "The job's state (recovery's state machine).", PREFIX + "job_state",
           ((s, s == self.state) for s in states))
        by("job_state_entries_total", "counter",
           "Times the job entered each state (a brief state such as restarting shows here between scrapes).",
           "state", _every(states, self.state_entries))
        gauge("generation", "The current generation (0, then one more per restart).", self.generation)
        labels = [lb.value for lb in Label]
        if self.label is not None and self.label not in labels:
            labels.append(self.label)
        by("verdict", "stateset", "The label of the judge's last verdict (none before the first).",
           PREFIX + "verdict", ((lb, lb == self.label) for lb in labels))
        by("verdicts_total", "counter", "Verdicts reported, by label.", "label", _every(labels, self.verdicts))
        by("incidents_total", "counter", "Incidents (evidence captured), by the failure's label.", "label",
           _every(labels, self.incidents))
        by("restarts_total", "counter", "Restarts, by the label of the failure restarted from.", "label",
           _every(labels, self.restarts))
        by("give_ups_total", "counter", "Times recovery gave up, by the failure's label.", "label",
           _every(labels, self.give_ups))
        culprit = () if self.culprit is None else (Sample(self.culprit, 1.0),)
        out.append(Family(PREFIX + "culprit_info", "info", "The last incident's culprit.", ("node", "rank", "label"),
                          culprit))
        gauge("last_step", "The newest training step any rank printed.", self.last_step)
        gauge("steps_per_second", f"Training steps per second over the last {RATE_WINDOW:g} s of this generation.",
              self.steps_per_second())
        gauge("last_progress_timestamp_seconds", "Unix time of the line that showed the newest progress.",
              self.last_progress)
        gauge("last_progress_age_seconds", "Seconds since the line that showed the newest progress.",
              None if self.last_progress is None else max(0.0, now - self.last_progress))
        # no label on the seconds: `age > timeout` in PromQL then matches without ignoring()
        timeout = self.hang_timeout
        gauge("hang_timeout_seconds", "The hang timeout in force.", None if timeout is None else timeout[0])
        kinds = list(TIMEOUT_KINDS)
        if timeout is not None and timeout[1] not in kinds:
            kinds.append(timeout[1])
        by("hang_timeout_kind", "stateset", "Where the hang timeout in force comes from.", PREFIX + "hang_timeout_kind",
           () if timeout is None else ((k, k == timeout[1]) for k in kinds))
        counts = self._rank_figures.states
        rank_states = [*self.rank_states, *sorted(set(counts) - set(self.rank_states))]
        by("ranks", "gauge", "Ranks by state (status.json's rank states).", "state",
           ((s, counts.get(s, 0)) for s in rank_states))
        by("nodes", "gauge", "Nodes the coordinator hears (observed) or has not heard within the silence bound.",
           "state", sorted(self.nodes.items()))
        gauge("compile_seconds", "The longest any rank of this generation has spent compiling.",
              self._rank_figures.compile_max)
        gauge("save_seconds", "How long the synced checkpoint save under way has held the ranks (0: none).",
              0.0 if self.saving_since is None or self.updated is None else self.updated - self.saving_since)
        out.append(Family(PREFIX + "save_seconds_total", "counter", "Seconds some rank spent in a synced save.", (),
                          (Sample((), round(self.save_seconds_total, 3)),)))
        g = self.goodput
        gauge("goodput_effective_ratio", "Time making progress / wall time (goodput report).",
              None if g is None else _num(g.get("effective_ratio")))
        gauge("goodput_useful_ratio", "The same, less the work redone after restarts.",
              None if g is None else _num(g.get("useful_ratio")))
        by("badput_seconds", "gauge", "Wall time not making progress, by cause (compile may overlap startup).",
           "cause", () if g is None else badput_seconds(g).items())
        by("lines_dropped_total", "counter",
           "Lines of the job's output lost on the way: agent = not buffered while the coordinator was away, "
           "console = not echoed (the console was not read), disk = not written to the watchdog's own files.",
           "where", (("agent", sum(self.agent_dropped.values())), ("console", self.console_dropped),
                     ("disk", self.io_lost_lines)))
        out.append(Family(PREFIX + "lines_truncated_total", "counter", "Over-long lines cut to the wire's limit.", (),
                          (Sample((), float(sum(self.truncated.values()))),)))
        out.append(Family(PREFIX + "watchdog_io_faults_total", "counter",
                          "Failed writes or reads of the watchdog's own files (never fatal to the job).", (),
                          (Sample((), float(self.io_faults)),)))
        gauge("watchdog_degraded_paths", "The watchdog's own files failing now.", self.io_degraded)
        gauge("status_age_seconds", "Seconds since the coordinator's last status document (a stuck loop grows it).",
              None if self.updated is None else max(0.0, now - self.updated))
        gauge("job_exit_code", "The job's exit code, once it is over.", self.exit_code)
        return out

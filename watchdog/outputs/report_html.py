"""The run report as one self-contained HTML page (``neuron-watch report RUN-DIR --html OUT.html``).
Pure: a :class:`~neuron_watch.outputs.runview.RunView` in, a string out.

Everything is inline (CSS and SVG; no script, no font, no image, nothing fetched when the page is
viewed), so the file can be mailed, attached to a ticket or opened from an S3 bundle offline. Every
value that comes from a run (node names, reasons, paths: text the job or its logs wrote) goes
through :func:`html.escape`; a link is made only for a bundle that is an ``s3://`` or ``http(s)://``
URL or an absolute path, so a log line can never place a ``javascript:`` link in the page.

A job of thousands of nodes is drawn by node: one cell per node coloured by its most urgent rank
state, with the counts per state and a strip of ranks for each outlier node only.
"""

from __future__ import annotations

import datetime as _dt
import html
import urllib.parse
from collections.abc import Iterable, Sequence

from neuron_watch.outputs.runview import (
    Cause,
    GenerationView,
    IncidentView,
    PhaseKind,
    RanksView,
    RunView,
    StepPoint,
    step_curve,
)

PHASE_COLOURS: dict[PhaseKind, str] = {
    PhaseKind.STARTUP: "#9ecae1",
    PhaseKind.COMPILING: "#fdae6b",
    PhaseKind.PROGRESSING: "#74c476",
    PhaseKind.SAVING: "#6baed6",
    PhaseKind.HANG: "#de2d26",
    PhaseKind.FAILURE: "#a50f15",
    PhaseKind.CAPTURE: "#9e9ac8",
    PhaseKind.STOP: "#636363",
    PhaseKind.RELAUNCH: "#bdbdbd",
    PhaseKind.ENDING: "#d9d9d9",
}
STATE_COLOURS: dict[str, str] = {
    "unobserved": "#000000", "failed": "#a50f15", "stopped": "#ae017e", "silent": "#de2d26", "exited": "#636363",
    "waiting": "#fd8d3c", "printing": "#fdd0a2", "compiling": "#fdae6b", "saving": "#6baed6",
    "starting": "#9ecae1", "progressing": "#74c476", "finished": "#31a354", "interrupted": "#756bb1",
}
GEN_COLOURS = ("#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363", "#d6616b")
#: Points of the step curve drawn per generation (more are thinned evenly: a week of progress events).
MAX_CURVE_POINTS = 2000
#: Nodes drawn with one cell per rank; beyond this, one cell per node and strips for outliers only.
RANK_CELLS_UP_TO = 64
OUTLIERS_SHOWN = 100
#: Bundles listed one by one per incident; more (a directory per node) are shown by where they are.
BUNDLES_LISTED = 8

WIDTH = 1000  # SVG user units; the page scales them to the window
LEFT = 70
PLOT = WIDTH - LEFT - 10

CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:6px 0} td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;
vertical-align:top} th{background:#f4f4f4} td.n{text-align:right;font-variant-numeric:tabular-nums}
.sub{color:#666} .chip{display:inline-block;margin:2px 6px 2px 0;padding:1px 6px;border-radius:3px;color:#fff;
text-shadow:0 0 2px #000} .sw{display:inline-block;width:12px;height:12px;margin:0 4px -2px 10px}
svg{width:100%;height:auto;display:block} .bad{color:#a50f15;font-weight:600} code{font-size:12px}
.reason{max-width:520px;white-space:pre-wrap;word-break:break-word} .note{color:#666;font-size:13px}
"""


def e(value: object) -> str:
    """HTML-escaped text of ``value`` (quotes too: it may land in an attribute)."""
    return html.escape("" if value is None else str(value), quote=True)


def _utc(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _dur(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = round(seconds)
    if s < 60:
        return f"{seconds:.1f} s"
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def bundle_link(where: str) -> str:
    """A link to an incident's bundle: ``s3://`` and ``http(s)://`` as they are, an absolute path as
    ``file://``; anything else as plain text (never an ``href`` a log line could choose)."""
    scheme = urllib.parse.urlsplit(where).scheme.lower()
    if scheme in ("s3", "http", "https"):
        href = where
    elif where.startswith("/"):
        href = "file://" + urllib.parse.quote(where)
    else:
        return f"<code>{e(where)}</code>"
    return f'<a class="bundle" href="{e(href)}"><code>{e(where)}</code></a>'


class _Axis:
    def __init__(self, start: float, end: float) -> None:
        self.start, self.span = start, max(end - start, 1e-9)

    def x(self, t: float) -> float:
        return round(LEFT + PLOT * (t - self.start) / self.span, 2)

    def ticks(self, y0: float, y1: float) -> list[str]:
        step = _nice(self.span / 8)
        out = []
        k = 0
        while k * step <= self.span + 1e-9:
            x = self.x(self.start + k * step)
            out.append(f'<line x1="{x}" y1="{y0}" x2="{x}" y2="{y1}" stroke="#eee"/>'
                       f'<text x="{x}" y="{y1 + 12}" font-size="10" text-anchor="middle" fill="#666">'
                       f"+{e(_dur(k * step))}</text>")
            k += 1
        return out


def _nice(raw: float) -> float:
    for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400):
        if s >= raw:
            return float(s)
    return 86400.0 * (int(raw // 86400) + 1)


def _timeline(view: RunView, axis: _Axis) -> str:
    row, top = 26, 8
    h = top + row * len(view.generations) + 22
    parts = [f'<svg id="timeline-svg" viewBox="0 0 {WIDTH} {h}" role="img" aria-label="generations on a time axis">']
    parts += axis.ticks(top, h - 20)
    for i, g in enumerate(view.generations):
        y = top + i * row
        parts.append(f'<text x="{LEFT - 6}" y="{y + 16}" font-size="12" text-anchor="end">gen {g.number}</text>')
        for p in g.phases:
            x0, x1 = axis.x(p.start), axis.x(p.end)
            tip = f"generation {g.number}: {p.kind.value}{f' ({p.note})' if p.note else ''}, {_dur(p.seconds)} " \
                  f"from {_utc(p.start)} UTC"
            parts.append(f'<rect class="phase" data-phase="{e(p.kind.value)}" x="{x0}" y="{y + 3}" '
                         f'width="{max(0.5, round(x1 - x0, 2))}" height="{row - 8}" fill="{PHASE_COLOURS[p.kind]}">'
                         f"<title>{e(tip)}</title></rect>")
            label = f"{p.kind.value} {_dur(p.seconds)}"
            if x1 - x0 > 6.5 * len(label):  # written on the bar where it fits; the tooltip always has it
                parts.append(f'<text x="{round((x0 + x1) / 2, 2)}" y="{y + 16}" font-size="11" text-anchor="middle" '
                             f'fill="#222" pointer-events="none">{e(label)}</text>')
        for t, step in g.checkpoints:
            x = axis.x(t)
            parts.append(f'<path d="M{x} {y + 1}l-3 -4h6z" fill="#08519c"><title>checkpoint step {step} at '
                         f"{_utc(t)} UTC</title></path>")
    for inc in view.incidents:
        x = axis.x(inc.time)
        parts.append(f'<line x1="{x}" y1="{top}" x2="{x}" y2="{h - 20}" stroke="#a50f15" stroke-dasharray="3 2"/>'
                     f'<text x="{x + 3}" y="{top + 8}" font-size="10" fill="#a50f15">#{inc.number}</text>')
    parts.append("</svg>")
    legend = "".join(f'<span class="sw" style="background:{c}"></span>{e(k.value)}' for k, c in PHASE_COLOURS.items()
                     if any(p.kind is k for g in view.generations for p in g.phases))
    return "".join(parts) + f'<div class="note">{legend}; ▼ a complete checkpoint; dashed: an incident</div>'


def _thin(points: Sequence[tuple[float, float]], cap: int) -> list[tuple[float, float]]:
    if len(points) <= cap:
        return list(points)
    stride = len(points) / cap
    picked = [points[int(i * stride)] for i in range(cap)]
    return [*picked[:-1], points[-1]]


def _curve(view: RunView, axis: _Axis) -> str:
    if not view.steps:
        return '<p class="note">No progress with a step number in the events.</p>'
    h, top, bottom = 220, 10, 190
    top_step = max(p.step for p in view.steps) or 1
    low_step = min(0, min(p.step for p in view.steps))

    def y(step: float) -> float:
        return round(bottom - (bottom - top) * (step - low_step) / max(top_step - low_step, 1), 2)

    parts = [f'<svg id="steps-svg" viewBox="0 0 {WIDTH} {h + 14}" role="img" aria-label="step across restarts">']
    parts += axis.ticks(top, bottom)
    for frac in (0.0, 0.5, 1.0):
        s = round(low_step + frac * (top_step - low_step))
        parts.append(f'<text x="{LEFT - 6}" y="{y(s) + 4}" font-size="10" text-anchor="end">{s}</text>')
    for g in view.generations[1:]:
        x = axis.x(g.start)
        parts.append(f'<line x1="{x}" y1="{top}" x2="{x}" y2="{bottom}" stroke="#999" stroke-dasharray="4 3"/>'
                     f'<text x="{x + 3}" y="{bottom - 4}" font-size="10" fill="#666">restart → gen {g.number}</text>')
    by_gen: dict[int, list[StepPoint]] = {}
    for p in view.steps:
        by_gen.setdefault(p.generation, []).append(p)
    for i, (gen, pts) in enumerate(sorted(by_gen.items())):
        colour = GEN_COLOURS[i % len(GEN_COLOURS)]
        phases = next((g.phases for g in view.generations if g.number == gen), ())
        shown = _thin(step_curve(sorted(pts, key=lambda p: p.time), phases), MAX_CURVE_POINTS)
        coords = " ".join(f"{axis.x(t)},{y(s)}" for t, s in shown)
        parts.append(f'<polyline class="steps" data-generation="{gen}" points="{coords}" fill="none" '
                     f'stroke="{colour}" stroke-width="2"/>')
        last = max(pts, key=lambda p: p.time)
        parts.append(f'<circle cx="{axis.x(last.time)}" cy="{y(last.step)}" r="3" fill="{colour}">'
                     f"<title>generation {gen}: step {last.step} at {_utc(last.time)} UTC</title></circle>")
    parts.append("</svg>")
    return "".join(parts)


def _generations_table(gens: Iterable[GenerationView]) -> str:
    rows = ["<tr><th>generation</th><th>start (UTC)</th><th>length</th><th>ended</th><th>steps</th>"
            "<th>resumed from</th><th>time by phase</th></tr>"]
    for g in gens:
        by: dict[str, float] = {}
        for p in g.phases:
            by[p.kind.value] = by.get(p.kind.value, 0.0) + p.seconds
        phases = ", ".join(f"{k} {_dur(v)}" for k, v in by.items())
        steps = "-" if g.first_step is None else f"{g.first_step}..{g.last_step}"
        cls = "" if g.outcome in ("finished", "restarted", "running") else ' class="bad"'
        rows.append(f'<tr class="generation" data-generation="{g.number}"><td class="n">{g.number}</td>'
                    f"<td>{e(_utc(g.start))}</td><td class=\"n\">{e(_dur(g.end - g.start))}</td>"
                    f"<td{cls}>{e(g.outcome)}</td><td class=\"n\">{e(steps)}</td>"
                    f"<td>{e(g.resumed_from or '-')}</td><td>{e(phases)}</td></tr>")
    return "<table>" + "".join(rows) + "</table>"


def _incidents(incidents: Sequence[IncidentView]) -> str:
    if not incidents:
        return '<p class="note">No incident: nothing was captured or restarted.</p>'
    rows = ["<tr><th>#</th><th>gen</th><th>time (UTC)</th><th>verdict</th><th>action</th><th>culprit</th>"
            "<th>reason</th><th>bundle</th><th>capture</th></tr>"]
    for inc in incidents:
        source = f' <span class="sub">({e(inc.culprit_source)})</span>' if inc.culprit_source else ""
        bundles = _bundles(inc)
        missing = f'<br><span class="sub">missing: {e(", ".join(inc.missing))}</span>' if inc.missing else ""
        advice = f'<br><span class="sub">{e(inc.advice)}</span>' if inc.advice else ""
        rows.append(f'<tr class="incident" data-incident="{inc.number}"><td class="n">{inc.number}</td>'
                    f'<td class="n">{inc.generation}</td><td>{e(_utc(inc.time))}</td>'
                    f'<td class="label bad">{e(inc.label)}</td><td>{e(inc.action)}</td>'
                    f'<td class="culprit">{e(inc.culprit or "not named")}{source}</td>'
                    f'<td class="reason">{e(inc.reason)}{advice}</td><td>{bundles}</td>'
                    f'<td class="n">{e(_dur(inc.capture_seconds))}{missing}</td></tr>')
    return "<table>" + "".join(rows) + "</table>"


def _bundles(inc: IncidentView) -> str:
    """Each bundle of the incident; beyond :data:`BUNDLES_LISTED` (a directory per node of a large
    job), the culprit's node's and the place that holds them all, with their number."""
    if not inc.bundles:
        return "-"
    if len(inc.bundles) <= BUNDLES_LISTED:
        return "<br>".join(bundle_link(b) for b in inc.bundles)
    own = [b for b in inc.bundles if inc.culprit_node and b.rstrip("/").rsplit("/", 1)[-1] == inc.culprit_node]
    common = _common_dir(inc.bundles)
    out = [f"culprit's node: {bundle_link(b)}" for b in own[:BUNDLES_LISTED]]
    where = bundle_link(common) if common else "various places"
    out.append(f"all {len(inc.bundles)} bundles: under {where}")
    return "<br>".join(out)


def _common_dir(paths: Sequence[str]) -> str:
    """The longest common prefix of ``paths`` that ends at a ``/`` ("" when they share none)."""
    first, last = min(paths), max(paths)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[: first.rfind("/", 0, n) + 1] if "/" in first[:n] else ""


def _goodput(view: RunView) -> str:
    f = view.figures
    head = [("outcome", view.outcome + ("" if view.exit_code is None else f" (exit {view.exit_code})")),
            ("wall time", _dur(view.end - view.start)),
            ("effective training time ratio", _pct(view.effective_ratio)),
            ("useful ratio (lost work taken off)", _pct(view.useful_ratio)),
            ("restarts", str(view.restarts)),
            ("compile time paid", _dur(f.get("compile_seconds") if isinstance(f.get("compile_seconds"), float)
                                       else None)),
            ("work lost (steps)", "-" if f.get("lost_steps") is None else str(f.get("lost_steps")))]
    table = "<table>" + "".join(f"<tr><th>{e(k)}</th><td class=\"n\">{e(v)}</td></tr>" for k, v in head) + "</table>"
    return table + _causes(view.causes)


def _cause_colour(c: Cause) -> str:
    kind = c.cause.split(" (")[0]
    for k, colour in PHASE_COLOURS.items():
        if k.value == kind:
            return colour
    return "#31a354" if c.cause.startswith("progressing") else "#fcbba1"


def _causes(causes: Sequence[Cause]) -> str:
    if not causes:
        return ""
    x = 0.0
    bar = [f'<svg id="causes-svg" viewBox="0 0 {WIDTH} 30" role="img" aria-label="goodput and badput by cause">']
    for c in causes:
        w = round((WIDTH - 2) * c.share, 2)
        bar.append(f'<rect x="{round(x, 2)}" y="2" width="{w}" height="24" fill="{_cause_colour(c)}">'
                   f"<title>{e(c.cause)}: {e(_dur(c.seconds))} ({_pct(c.share)})</title></rect>")
        x += w
    bar.append("</svg>")
    rows = "".join(f'<tr class="cause"><td><span class="sw" style="background:{_cause_colour(c)};margin-left:0">'
                   f"</span>{e(c.cause)}</td><td class=\"n\">{e(_dur(c.seconds))}</td>"
                   f'<td class="n">{_pct(c.share)}</td></tr>' for c in causes)
    return "".join(bar) + "<table><tr><th>time by cause</th><th>time</th><th>of wall time</th></tr>" + rows + "</table>"


def _strip(states: Sequence[str], cell: int = 10) -> str:
    w = cell * len(states)
    rects = "".join(f'<rect x="{i * cell}" width="{cell - 1}" height="12" fill="{STATE_COLOURS.get(s, "#bbb")}">'
                    f"<title>rank {i} (on this node): {e(s)}</title></rect>" for i, s in enumerate(states))
    return f'<svg class="strip" viewBox="0 0 {w} 12" style="width:{w}px">{rects}</svg>'


def _ranks(r: RanksView | None) -> str:
    if r is None:
        return '<p class="note">No status.json with the ranks in the run directory.</p>'
    chips = "".join(f'<span class="chip state" data-state="{e(s)}" style="background:{STATE_COLOURS.get(s, "#bbb")}">'
                    f"{e(s)} {n}</span>" for s, n in r.counts)
    head = (f'<p>{r.total} rank(s) on {len(r.nodes)} node(s), as of {e(r.as_of)} (generation {e(r.generation)}, '
            f"job {e(r.job_state)}): {chips}</p>")
    if len(r.nodes) <= RANK_CELLS_UP_TO:
        rows = "".join(f'<tr class="node"><td>{e(n.node)}{_named(r, n.node)}</td><td>{_strip(n.states)}</td></tr>'
                       for n in r.nodes)
        return head + f"<table><tr><th>node</th><th>ranks</th></tr>{rows}</table>"
    per_row = 64
    cell = (WIDTH - 2) / per_row
    rows_n = (len(r.nodes) + per_row - 1) // per_row
    grid = [f'<svg id="nodes-svg" viewBox="0 0 {WIDTH} {round(rows_n * cell, 2)}" role="img" '
            f'aria-label="one cell per node, coloured by its most urgent rank state">']
    for i, n in enumerate(r.nodes):
        x, y = round((i % per_row) * cell, 2), round((i // per_row) * cell, 2)
        counts = ", ".join(f"{s} {k}" for s, k in n.counts)
        ring = ' stroke="#000" stroke-width="2"' if n.node in r.culprits else ""
        grid.append(f'<rect x="{x}" y="{y}" width="{round(cell - 1, 2)}" height="{round(cell - 1, 2)}" '
                    f'fill="{STATE_COLOURS.get(n.worst, "#bbb")}"{ring}><title>{e(n.node)}: {e(counts)}</title></rect>')
    grid.append("</svg>")
    shown = r.outliers[:OUTLIERS_SHOWN]
    more = len(r.outliers) - len(shown)
    rows = "".join(f'<tr class="node outlier"><td>{e(n.node)}{_named(r, n.node)}</td>'
                   f'<td>{e(", ".join(f"{s} {k}" for s, k in n.counts))}'
                   f"</td><td>{_strip(n.states, 6)}</td></tr>" for n in shown)
    tail = f'<p class="note">{more} more outlier node(s) not listed.</p>' if more > 0 else ""
    outl = (f"<h3>Outlier nodes: a rank not {e(r.usual)}, or an incident's culprit ({len(r.outliers)})</h3>"
            f"<table><tr><th>node</th><th>ranks by state</th><th>ranks</th></tr>{rows}</table>{tail}"
            if r.outliers else f'<p class="note">Every rank is {e(r.usual)}.</p>')
    return (head + '<p class="note">One cell per node, coloured by its most urgent rank state '
            "(hover for its counts); outlined: an incident's culprit.</p>" + "".join(grid) + outl)


def _named(r: RanksView, node: str) -> str:
    incidents = r.culprits.get(node)
    if not incidents:
        return ""
    return f' <span class="bad">culprit of {", ".join(f"#{n}" for n in incidents)}</span>'


def render(view: RunView, *, generated: str = "") -> str:
    """The page. ``generated``: when it was made, shown as given (the caller reads the clock)."""
    axis = _Axis(view.start, view.end)
    notes = "".join(f"<li>{e(n)}</li>" for n in view.notes)
    if view.skipped_events:
        notes += f"<li>{view.skipped_events} event line(s) could not be read and were skipped</li>"
    title = f"neuron-watch run {view.job_id or view.run_dir}"
    return "".join([
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        # nothing may be fetched when the page is viewed: no script, no remote anything
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "img-src data:\">",
        f"<title>{e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{e(title)}</h1><div class=\"sub\">{e(view.run_dir)} · {e(_utc(view.start))} – {e(_utc(view.end))} UTC"
        f"{' · made ' + e(generated) if generated else ''}</div>",
        '<section id="goodput"><h2>Goodput and badput by cause</h2>', _goodput(view), "</section>",
        '<section id="generations"><h2>Generations</h2>', _timeline(view, axis),
        _generations_table(view.generations), "</section>",
        '<section id="steps"><h2>Step across restarts</h2>', _curve(view, axis), "</section>",
        '<section id="incidents"><h2>Incidents</h2>', _incidents(view.incidents), "</section>",
        '<section id="ranks"><h2>Ranks by node</h2>', _ranks(view.ranks), "</section>",
        f'<section id="notes"><h2>Notes</h2><ul>{notes}</ul></section>' if notes else "",
        "</body></html>\n",
    ])

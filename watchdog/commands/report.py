"""``neuron-watch report RUN-DIR [--json | --html OUT.html]``: the goodput report of a run, from its
``events.jsonl``; ``--html`` writes the run as one self-contained page to look at (the generations
on a time axis, the step curve, the incidents, time by cause, the ranks by node: see
:mod:`neuron_watch.outputs.runview` and :mod:`neuron_watch.outputs.report_html`).

The figures come from :func:`neuron_watch.outputs.goodput.compute_goodput` (their meaning is documented
there and in docs/live.md). Lines of ``events.jsonl`` that are not JSON objects are counted in
``skipped_events``, never silently ignored.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import os
import sys
from pathlib import Path
from typing import Any

from neuron_watch.config import WatchConfig
from neuron_watch.errors import ExitCode, UsageError
from neuron_watch.outputs.goodput import compute_goodput
from neuron_watch.outputs.report_html import render as render_html
from neuron_watch.outputs.runview import RunView, build_view
from neuron_watch.outputs.status import RANK_STATES, read_status, text_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``report`` flags: the run directory and ``--json``."""
    parser.add_argument("run_dir", nargs="?", metavar="RUN-DIR",
                        help="a run directory holding events.jsonl (default: --run-dir)")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    out.add_argument("--html", metavar="OUT.html",
                     help="write the run as one self-contained HTML page to OUT.html (no network when viewed)")


def read_events(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The events of ``events.jsonl`` and how many lines were not JSON objects (read line by line).

    Raises:
        UsageError: the file does not exist or cannot be read.
    """
    events, bad, _torn = read_events_torn(path)
    return events, bad


def read_events_torn(path: Path) -> tuple[list[dict[str, Any]], int, bool]:
    """:func:`read_events`, and whether the file ends in a torn record (a last line without its
    newline that is not JSON: the writer stopped mid-line, killed or on a full disk); it is one of
    the lines counted as not JSON.

    Raises:
        UsageError: the file does not exist or cannot be read.
    """
    events: list[dict[str, Any]] = []
    bad = 0
    torn = False
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    bad += 1
                    torn = not line.endswith("\n")  # only the last line can lack its newline
                    continue
                if isinstance(obj, dict):
                    events.append(obj)
                else:
                    bad += 1
    except FileNotFoundError as exc:
        raise UsageError(f"no events file at {path}",
                         "give the run directory of a neuron-watch run (it holds events.jsonl)") from exc
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}", "check the path and its permissions") from exc
    return events, bad, torn


def report(run_dir: Path) -> dict[str, Any]:
    """Goodput figures of ``run_dir`` (``compute_goodput`` plus ``run_dir``); see :func:`read_events`.
    ``torn_last_event``: ``events.jsonl`` ends in a torn record (skipped; said in the notes)."""
    return _figures(run_dir, *read_events_torn(run_dir / "events.jsonl"))


def _figures(run_dir: Path, events: list[dict[str, Any]], bad: int, torn: bool) -> dict[str, Any]:
    figures = compute_goodput(events)
    figures["skipped_events"] += bad
    figures["run_dir"] = str(run_dir)
    figures["torn_last_event"] = torn
    if torn:
        figures.setdefault("notes", []).append(
            "events.jsonl ends in a torn record (its writer stopped mid-line: killed, or its disk was full); "
            "it was skipped, and the figures end with the event before it")
    return figures


def run_view(run_dir: Path) -> RunView:
    """The run of ``run_dir`` as the HTML page's model: its events, their goodput figures and the
    newest ``status.json`` (none: the page says so). Raises UsageError as :func:`read_events`."""
    events, bad, torn = read_events_torn(run_dir / "events.jsonl")
    figures = _figures(run_dir, events, bad, torn)
    status, problem = read_status(run_dir)
    view = build_view(events, figures, status, state_order=RANK_STATES, run_dir=str(run_dir))
    if status is None:
        return _with_note(view, f"ranks by node: {problem}")
    return view


def _with_note(view: RunView, note: str) -> RunView:
    return dataclasses.replace(view, notes=(*view.notes, note))


def write_html(run_dir: Path, out: Path, generated: str = "") -> Path:
    """Write the HTML report of ``run_dir`` to ``out`` atomically (temp file + rename); returns ``out``.

    Raises:
        UsageError: the run dir has no readable events, or ``out`` cannot be written.
    """
    page = render_html(run_view(run_dir), generated=generated)
    tmp = out.with_name(f".{out.name}.tmp.{os.getpid()}")
    try:
        tmp.write_text(page, encoding="utf-8")
        tmp.replace(out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"cannot write {out}: {exc.strerror}",
                         "give --html a path in a directory that exists and can be written") from exc
    return out


def _s(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.1f}"
    return str(x)


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _finished(figures: dict[str, Any]) -> str:
    if figures["finished"]:
        return "yes"
    outcome = figures.get("outcome")
    if outcome and outcome != "running":
        code = figures.get("exit_code")
        why = figures.get("end_reason")
        # a give-up says why (restarts spent, a crash loop): the one question a failed run's report must answer
        return (f"no: {outcome}" + ("" if code is None else f" (exit {code})")
                + (f": {why}" if why and outcome != "finished" else ""))
    return "no (measured up to the last event)"


def render(figures: dict[str, Any]) -> str:
    """The report as plain text: totals, then one column per generation (readable in 80 columns)."""
    lost = f"{_s(figures.get('lost_steps'))} / {_s(figures.get('lost_seconds'))}"
    totals: list[tuple[str, str]] = [
        ("finished", _finished(figures)),
        ("wall time (s)", _s(figures["wall_seconds"])),
        ("making progress (s)", _s(figures.get("progress_seconds"))),
        ("effective training time ratio", _pct(figures["effective_ratio"])),
        ("useful ratio (lost work taken off)", _pct(figures["useful_ratio"])),
        ("compile time paid (s)", _s(figures.get("compile_seconds"))),
        ("restarts", _s(figures.get("restarts"))),
        ("work lost (steps / s)", lost),
    ]
    causes = figures.get("causes") or {}
    totals.append(("causes", ", ".join(f"{k} x{v}" for k, v in sorted(causes.items())) or "none"))
    if figures.get("skipped_events"):
        totals.append(("skipped event lines", str(figures["skipped_events"])))
    out = [f"goodput of {figures.get('run_dir', 'run')}", ""]
    out += text_table([[k, v] for k, v in totals], right={1})

    rows: list[tuple[str, Any]] = [
        ("outcome", lambda g: g["outcome"] or "running/unknown"),
        ("steps", lambda g: f"{_s(g['first_step'])}..{_s(g['last_step'])}"),
        ("start -> first progress (s)", lambda g: _s(g["startup_seconds"])),
        ("compile (s)", lambda g: _s(g["compile_seconds"])),
        ("making progress (s)", lambda g: _s(g["progress_seconds"])),
        ("time to detect (s)", lambda g: _s(g["time_to_detect"])),
        ("time to evidence (s)", lambda g: _s(g["time_to_evidence"])),
        ("time to relaunch (s)", lambda g: _s(g["time_to_relaunch"])),
        ("work lost (steps)", lambda g: _s(g["lost_steps"])),
        ("work lost (s)", lambda g: _s(g["lost_seconds"])),
    ]
    generations = figures.get("generations", [])
    table = [["figure", *(f"gen {g['generation']}" for g in generations)]]
    table += [[name, *(get(g) for g in generations)] for name, get in rows]
    out += ["", "per generation", ""]
    out += text_table(table, right=set(range(1, len(generations) + 1)))
    out += [f"note: {note}" for note in figures.get("notes", [])]
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace, config: WatchConfig) -> int:
    """Print the goodput report of RUN-DIR (or ``--run-dir``), or write its HTML page (``--html``).
    Exit 0, or 2 for a bad directory or an OUT.html that cannot be written."""
    where = args.run_dir or config.run_dir
    if not where:
        raise UsageError("no run directory given", "run `neuron-watch report RUN-DIR`")
    run_dir = Path(where)
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir} is not a directory", "give the run directory of a neuron-watch run")
    if args.html:
        made = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        out = write_html(run_dir, Path(args.html), generated=made)
        sys.stdout.write(f"wrote {out} ({out.stat().st_size} bytes): open it in a browser\n")
        return int(ExitCode.OK)
    figures = report(run_dir)
    if args.json:
        json.dump(figures, sys.stdout, indent=1, sort_keys=True)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render(figures))
    return int(ExitCode.OK)

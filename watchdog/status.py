"""``neuron-watch status [RUN-DIR | --coordinator HOST:PORT]``: a live table of a job's ranks.

The supervisor writes ``<run-dir>/status.json`` atomically about once a second::

    {"job_id", "generation", "restarts", "state", "updated" (ISO UTC), "updated_unix",
     "ranks": [{"node", "rank", "state", "last_step", "last_line_age", "compile_seconds", "pid"}]}

This command reads it and shows one row per rank. Unknown is never shown as healthy: a file
older than ``--stale-after`` seconds while the job is not finished (the supervisor died, hangs or
lost its disk) turns the job and every rank to ``unobserved``; so does a missing or unreadable
file, and a rank state this version does not know. ``--once --json`` prints one JSON object and
exits 0 when the job is observed, 3 (unobserved) when it is not.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from neuron_watch.config import WatchConfig
from neuron_watch.errors import ExitCode, UsageError

#: Rank states, in the order the table sorts them by urgency (``starting`` comes from the judge).
RANK_STATES = ("unobserved", "failed", "silent", "exited", "waiting", "compiling", "saving", "starting",
               "progressing")
#: Job states after which status.json stops being refreshed: an old file is then expected.
FINAL_JOB_STATES = frozenset({"finished", "failed", "interrupted", "stopped"})
STALE_AFTER = 5.0

_STYLE = {"failed": "red", "progressing": "green", "compiling": "cyan", "saving": "cyan", "starting": "cyan",
          "waiting": "yellow", "silent": "red", "exited": "magenta", "unobserved": "bold red"}


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def assess(doc: dict[str, Any] | None, now: float, stale_after: float = STALE_AFTER,
           problem: str = "") -> dict[str, Any]:
    """What to show for ``doc`` (a parsed status.json, or None) at wall time ``now``. Pure.

    Returns ``{"job_id", "generation", "restarts", "state", "observed", "reason", "age",
    "updated", "ranks": [...]}`` where each rank's ``last_line_age`` is brought forward to ``now``
    and its ``state`` is one of :data:`RANK_STATES`. ``problem`` explains a missing ``doc``.
    """
    if doc is None:
        return {"job_id": None, "generation": None, "restarts": None, "state": "unobserved", "observed": False,
                "reason": problem or "no status.json", "age": None, "updated": None, "ranks": []}
    updated = _num(doc.get("updated_unix"))
    job_state = str(doc.get("state") or "unknown")
    age = None if updated is None else max(0.0, now - updated)
    final = job_state in FINAL_JOB_STATES
    observed, reason = True, ""
    if age is None:
        observed, reason = False, "status.json has no updated_unix"
    elif age > stale_after and not final:
        observed = False
        reason = (f"status.json is {age:.0f}s old and the job is not finished: the watchdog may have died "
                  f"or be stuck")
    ranks = []
    raw_ranks = doc.get("ranks")
    for r in raw_ranks if isinstance(raw_ranks, list) else []:
        if not isinstance(r, dict):
            continue
        state = str(r.get("state"))
        if state not in RANK_STATES:
            state = "unobserved"
        if not observed:
            state = "unobserved"
        line_age = _num(r.get("last_line_age"))
        if line_age is not None and age is not None and not final:
            line_age += age  # the file is `age` old; so is every age in it
        ranks.append({
            "node": r.get("node"),
            "rank": r.get("rank"),
            "state": state,
            "last_step": r.get("last_step"),
            "last_line_age": None if line_age is None else round(line_age, 1),
            "compile_seconds": _num(r.get("compile_seconds")),
            "pid": r.get("pid"),
        })
    ranks.sort(key=lambda r: (str(r["node"]), r["rank"] if isinstance(r["rank"], int) else -1))
    return {
        "job_id": doc.get("job_id"),
        "generation": doc.get("generation"),
        "restarts": doc.get("restarts"),
        "state": job_state if observed else "unobserved",
        "observed": observed,
        "reason": reason,
        "age": None if age is None else round(age, 1),
        "updated": doc.get("updated"),
        "ranks": ranks,
    }


def read_status(run_dir: Path) -> tuple[dict[str, Any] | None, str]:
    """The parsed ``status.json`` of ``run_dir`` or (None, why not)."""
    path = run_dir / "status.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, f"no {path.name} in {run_dir} yet (the job has not started, or is not a neuron-watch run)"
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"cannot read {path}: {exc}"
    except json.JSONDecodeError as exc:
        return None, f"{path} is not JSON ({exc.msg}); the supervisor writes it atomically, so this is a bug"
    if not isinstance(doc, dict):
        return None, f"{path} is not a JSON object"
    return doc, ""


def table(view: dict[str, Any]) -> Any:
    """A rich renderable of ``view`` (from :func:`assess`)."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    head = Text()
    head.append(f"job {view['job_id'] or '?'}  ")
    head.append(view["state"], style=_STYLE.get(view["state"], "bold"))
    head.append(f"  generation {view['generation'] if view['generation'] is not None else '?'}"
                f"  restarts {view['restarts'] if view['restarts'] is not None else '?'}")
    if view["age"] is not None:
        head.append(f"  updated {view['age']:.0f}s ago")
    t = Table(box=box.SIMPLE)
    for col, just in (("node", "left"), ("rank", "right"), ("state", "left"), ("last step", "right"),
                      ("last line", "right"), ("compile", "right"), ("pid", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in view["ranks"]:
        t.add_row(
            str(r["node"]),
            str(r["rank"]),
            Text(r["state"], style=_STYLE.get(r["state"], "")),
            "-" if r["last_step"] is None else str(r["last_step"]),
            "-" if r["last_line_age"] is None else f"{r['last_line_age']:.0f}s ago",
            "-" if not r["compile_seconds"] else f"{r['compile_seconds']:.0f}s",
            "-" if r["pid"] is None else str(r["pid"]),
        )
    parts: list[Any] = [head, t]
    if view["reason"]:
        parts.append(Text(view["reason"], style="red"))
    return Group(*parts)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``status`` flags."""
    parser.add_argument("run_dir", nargs="?", metavar="RUN-DIR", help="the job's run directory (default: --run-dir)")
    # own dest: the global --coordinator (before the command word) keeps its meaning for the watchdog
    parser.add_argument("--coordinator", dest="status_coordinator", metavar="HOST:PORT",
                        help="ask a multi-node job's coordinator instead of reading RUN-DIR")
    parser.add_argument("--once", action="store_true", help="print once and exit (0 observed, 3 unobserved)")
    parser.add_argument("--json", action="store_true", help="print JSON (implies --once)")
    parser.add_argument("--interval", type=float, default=1.0, metavar="SECONDS", help="refresh period (default 1)")
    parser.add_argument("--stale-after", type=float, default=STALE_AFTER, metavar="SECONDS",
                        help=f"status.json older than this means unobserved (default {STALE_AFTER:g})")


def run(args: argparse.Namespace, config: WatchConfig) -> int:
    """Show the table (live, or once); exit 0 when observed, 3 when not (``--once``/``--json``)."""
    if args.interval <= 0 or args.stale_after <= 0:
        raise UsageError("--interval and --stale-after must be positive", "e.g. --interval 1 --stale-after 5")
    if args.status_coordinator:
        return _run_view(args, _coordinator_view(args.status_coordinator, config, args.stale_after))
    where = args.run_dir or config.run_dir
    if not where:
        raise UsageError("no run directory given", "run `neuron-watch status RUN-DIR` (or set --run-dir)")
    run_dir = Path(where)
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir} is not a directory", "give the run directory of a neuron-watch run")

    def view() -> dict[str, Any]:
        doc, problem = read_status(run_dir)
        return assess(doc, time.time(), args.stale_after, problem)

    return _run_view(args, view)


def _coordinator_view(address: str, config: WatchConfig, stale_after: float) -> Callable[[], dict[str, Any]]:
    """A view that asks the job's coordinator (authenticated with the job's secret) each time."""
    from neuron_watch.auth import load_secret
    from neuron_watch.coordinator import query_status
    from neuron_watch.errors import TransportError

    secret = load_secret(os.environ, config.secret_file)

    def view() -> dict[str, Any]:
        try:
            doc: dict[str, Any] | None = query_status(address, secret)
            problem = ""
        except TransportError as exc:
            doc, problem = None, str(exc)
        return assess(doc, time.time(), stale_after, problem)

    return view


def _run_view(args: argparse.Namespace, view: Callable[[], dict[str, Any]]) -> int:
    if args.json or args.once:
        v = view()
        if args.json:
            json.dump(v, sys.stdout, indent=1, sort_keys=True)
            sys.stdout.write("\n")
        else:
            from rich.console import Console

            Console().print(table(v))
        return int(ExitCode.OK if v["observed"] else ExitCode.UNOBSERVED)

    from rich.console import Console
    from rich.live import Live

    console = Console()
    with Live(table(view()), console=console, refresh_per_second=4, screen=False) as live:
        try:
            while True:
                time.sleep(args.interval)  # a refresh period for a human, not a synchronisation
                live.update(table(view()))
        except KeyboardInterrupt:
            pass
    return int(ExitCode.OK)

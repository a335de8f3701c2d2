"""``neuron-watch status [RUN-DIR | --coordinator HOST:PORT]``: a live table of a job's ranks.

The supervisor writes ``<run-dir>/status.json`` atomically about once a second::

    {"job_id", "generation", "restarts", "state", "label" (the last verdict's), "hang_timeout",
     "hang_timeout_kind" (fixed | calibrated | default | startup | first_collective), "first_collective"
     (only while a collective is seen stuck before the first progress: "how", "stalled_for", "timeout",
     "timeout_name", "hang_in"), "last_progress" (ISO UTC of the line
     that showed the newest progress of this generation), "last_step", "updated" (ISO UTC), "updated_unix",
     "ranks": [{"node", "rank", "state", "last_step", "last_line_age", "compile_seconds", "pid"}]}

Rank states (from the judge): ``progressing``; ``silent`` (no output for a few normal step
intervals, at least a minute); ``waiting`` (on a peer); ``compiling``; ``saving``; ``stopped`` (its
process is stopped by a signal, state ``T`` in the node's readings: SIGSTOP, a debugger, Ctrl-Z;
it computes nothing until continued); ``exited``; ``failed``; ``starting`` (no line yet, or no
progress yet shortly after its first line); ``printing`` (output keeps coming, but none of it was
ever recognised as progress: see ``--progress-regex``). Once the job is over every rank shows the
job's state (``finished``, ``failed``, ``interrupted``), except a rank that failed.

A job of more than :data:`FULL_RANKS` ranks summarises them in status.json (:func:`summarise`:
``ranks_total``, ``ranks_by_state``, ``node_ranks`` per node, ``ranks`` the outliers only,
``ranks_omitted``; the coordinator keeps that summary by changes, ``job/statusbook.py``) and writes
every rank's row to ``ranks.json`` every 30 s; ``--ranks`` shows those.

This command reads it and shows one row per rank (per state, per node and the outliers for a big
job). Unknown is never shown as healthy: a file older than ``--stale-after`` seconds while the job
is not finished (the supervisor died, hangs or lost its disk) turns the job and every rank to
``unobserved``; so does a missing or unreadable file, and a rank state this version does not know.
``--once --json`` prints one JSON object and exits 0 when the job is observed, 3 (unobserved) when
it is not.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from neuron_watch.config import WatchConfig
from neuron_watch.errors import ExitCode, TransportError, UsageError
from neuron_watch.wire.auth import Signer
from neuron_watch.wire.protocol import Header, Kind, Msg, ProtocolError, StatusQuery, StatusReply, decode, encode

#: Rank states, most urgent first (see the module doc). A stopped rank (a signal stopped its process)
#: holds every rank that waits for it in a collective: the hang's likely culprit, next to a failed one.
RANK_STATES = ("unobserved", "failed", "stopped", "silent", "exited", "waiting", "printing", "compiling",
               "saving", "starting", "progressing", "finished", "interrupted")
#: Job states after which status.json stops being refreshed: an old file is then expected.
FINAL_JOB_STATES = frozenset({"finished", "failed", "interrupted"})
STALE_AFTER = 5.0

#: A bigger job's status.json summarises its ranks (:func:`summarise`): per state, per node, and
#: the outliers, at most OUTLIERS of them; every rank's row goes to ranks.json (``status --ranks``).
FULL_RANKS = 1024
OUTLIERS = 256
RANKS_FILE = "ranks.json"
#: Rank states that are not outliers by themselves (the healthy and the over).
USUAL_STATES = frozenset({"progressing", "finished", "interrupted"})
_USUAL = USUAL_STATES

#: ANSI clear screen + cursor home: the live view redraws with it, only on a terminal.
CLEAR = "\x1b[2J\x1b[H"


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def assess(doc: dict[str, Any] | None, now: float, stale_after: float = STALE_AFTER,
           problem: str = "") -> dict[str, Any]:
    """What to show for ``doc`` (a parsed status.json, or None) at wall time ``now``. Pure.

    Returns ``{"job_id", "generation", "restarts", "state", "observed", "reason", "age",
    "updated", "label", "hang_timeout", "hang_timeout_kind", "ranks": [...]}`` where each rank's
    ``last_line_age`` is brought forward to ``now``
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
    timeout = _num(doc.get("hang_timeout"))
    raw_ranks = doc.get("ranks")
    for r in raw_ranks if isinstance(raw_ranks, list) else []:
        if not isinstance(r, dict):
            continue
        state = str(r.get("state"))
        if state not in RANK_STATES:
            state = "unobserved"
        if not observed:
            state = "unobserved"
        elif final and state != "failed":
            state = job_state if job_state in RANK_STATES else "exited"  # an old file of an ended job
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
    summary: dict[str, Any] = {}
    if isinstance(doc.get("ranks_total"), int):  # a bigger job's summary (see summarise)
        total = doc["ranks_total"]
        raw = doc.get("ranks_by_state")
        by_state: dict[str, Any] = raw if isinstance(raw, dict) else {}
        summary = {"ranks_total": total, "ranks_omitted": doc.get("ranks_omitted"),
                   "ranks_by_state": dict(by_state) if observed else {"unobserved": total},
                   "node_ranks": doc.get("node_ranks") if isinstance(doc.get("node_ranks"), dict) else {}}
    return {
        "job_id": doc.get("job_id"),
        "generation": doc.get("generation"),
        "restarts": doc.get("restarts"),
        "state": job_state if observed else "unobserved",
        "observed": observed,
        "reason": reason,
        "age": None if age is None else round(age, 1),
        "updated": doc.get("updated"),
        "label": doc.get("label"),
        "hang_timeout": timeout,
        "hang_timeout_kind": doc.get("hang_timeout_kind"),
        "first_collective": doc.get("first_collective") if observed and not final and isinstance(
            doc.get("first_collective"), dict) else None,
        "ranks": ranks,
        **summary,
    }


def summarise(doc: dict[str, Any], limit: int = OUTLIERS) -> dict[str, Any]:
    """``doc`` (a status document listing every rank) with its ranks summarised. Pure.

    ``ranks_total``; ``ranks_by_state`` ({state: count}); ``node_ranks`` ({node: {"ranks", "states":
    {state: count}, "last_step": [lowest, highest], "last_line_age": the oldest}}); ``ranks``: the
    outliers only, most urgent first (a state other than progressing or over, then a last step 2 or
    more behind the newest, then the oldest last line), at most ``limit``; ``ranks_omitted``: how
    many ranks are not listed (their rows: ``ranks_file``).
    """
    ranks = [r for r in doc.get("ranks") or [] if isinstance(r, dict)]
    by_state: dict[str, int] = {}
    nodes: dict[str, dict[str, Any]] = {}
    steps = [r["last_step"] for r in ranks if isinstance(r.get("last_step"), int)]
    top = max(steps) if steps else None
    urgency = {s: i for i, s in enumerate(RANK_STATES)}
    outliers = []
    for r in ranks:
        state, step, age = str(r.get("state")), r.get("last_step"), _num(r.get("last_line_age"))
        by_state[state] = by_state.get(state, 0) + 1
        n = nodes.get(str(r.get("node")))
        if n is None:
            n = nodes[str(r.get("node"))] = {"ranks": 0, "states": {}, "last_step": [step, step], "last_line_age": age}
        n["ranks"] += 1
        n["states"][state] = n["states"].get(state, 0) + 1
        if isinstance(step, int):
            lo, hi = n["last_step"]
            n["last_step"] = [step if lo is None else min(lo, step), step if hi is None else max(hi, step)]
        if age is not None and (n["last_line_age"] is None or age > n["last_line_age"]):
            n["last_line_age"] = age
        behind = top - step if top is not None and isinstance(step, int) else 0
        if state not in _USUAL or behind >= 2:
            outliers.append((urgency.get(state, -1), -behind, -(age or 0.0), r))
    outliers.sort(key=lambda o: o[:3])
    listed = [o[3] for o in outliers[:limit]]
    return {**doc, "ranks": listed, "ranks_total": len(ranks), "ranks_by_state": by_state,
            "node_ranks": dict(sorted(nodes.items())), "ranks_omitted": len(ranks) - len(listed),
            "ranks_file": RANKS_FILE}


def with_every_rank(doc: dict[str, Any], run_dir: Path) -> tuple[dict[str, Any] | None, str]:
    """A summarised ``doc`` with every rank's row from ``ranks.json`` (their line ages brought to
    ``doc``'s time), or (None, why not)."""
    path = run_dir / RANKS_FILE
    try:
        every = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, f"no {RANKS_FILE} in {run_dir} yet (the coordinator writes it every 30 s in a job this big)"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"cannot read {path}: {exc}"
    rows, then, now = every.get("ranks"), _num(every.get("updated_unix")), _num(doc.get("updated_unix"))
    if not isinstance(rows, list) or then is None or now is None:
        return None, f"{path} has no ranks or no updated_unix: a bug of the coordinator that wrote it"
    later = max(0.0, now - then)
    rows = [{**r, "last_line_age": r["last_line_age"] + later} if isinstance(r, dict)
            and _num(r.get("last_line_age")) is not None else r for r in rows]
    return {k: v for k, v in doc.items() if k not in ("ranks_total", "ranks_omitted")} | {"ranks": rows}, ""


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


def text_table(rows: list[list[str]], right: set[int], indent: str = "  ") -> list[str]:
    """``rows`` (the first is the header) as aligned plain-text lines; columns in ``right`` are
    right-aligned. Trailing spaces are trimmed."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))] if rows else []
    out = []
    for r in rows:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))]
        out.append((indent + "  ".join(cells)).rstrip())
    return out


def table(view: dict[str, Any]) -> str:
    """``view`` (from :func:`assess`) as plain text: a header line, one row per rank, the reason."""
    head = (f"job {view['job_id'] or '?'}  {view['state']}"
            f"  generation {view['generation'] if view['generation'] is not None else '?'}"
            f"  restarts {view['restarts'] if view['restarts'] is not None else '?'}")
    if view.get("label"):
        head += f"  verdict {view['label']}"
    if view.get("hang_timeout") is not None:
        head += f"  hang timeout {view['hang_timeout']:.0f}s ({view.get('hang_timeout_kind') or '?'})"
    if view["age"] is not None:
        head += f"  updated {view['age']:.0f}s ago"
    summary: list[str] = []
    if view.get("ranks_total") is not None:
        by_state = view.get("ranks_by_state") or {}
        states = sorted(by_state.items(), key=lambda kv: RANK_STATES.index(kv[0]) if kv[0] in RANK_STATES else -1)
        summary = ["", f"{view['ranks_total']:,} ranks: " + ", ".join(f"{n:,} {s}" for s, n in states)]
        nodes = view.get("node_ranks") or {}
        odd = [(name, n) for name, n in nodes.items() if set(n.get("states") or {}) - _USUAL]
        if odd:
            summary.append(f"{len(odd)} of {len(nodes)} nodes have ranks that are not progressing:")
            summary += text_table([["node", "ranks", "states", "steps", "oldest line"]] + [
                [name, str(n.get("ranks")), ", ".join(f"{c} {s}" for s, c in sorted((n.get("states") or {}).items())),
                 "-".join(str(x) for x in (n.get("last_step") or []) if x is not None) or "-",
                 "-" if n.get("last_line_age") is None else f"{n['last_line_age']:.0f}s ago"]
                for name, n in odd[:20]], right={1})
        summary.append(f"the outliers ({len(view['ranks'])}; {view.get('ranks_omitted') or 0:,} ranks not listed: "
                       "every rank with --ranks)" if view["ranks"] else
                       f"no outliers ({view.get('ranks_omitted') or 0:,} ranks not listed: every rank with --ranks)")
    rows = [["node", "rank", "state", "last step", "last line", "compile", "pid"]]
    for r in view["ranks"]:
        rows.append([
            str(r["node"]),
            str(r["rank"]),
            r["state"],
            "-" if r["last_step"] is None else str(r["last_step"]),
            "-" if r["last_line_age"] is None else f"{r['last_line_age']:.0f}s ago",
            "-" if not r["compile_seconds"] else f"{r['compile_seconds']:.0f}s",
            "-" if r["pid"] is None else str(r["pid"]),
        ])
    lines = [head, *summary, "", *text_table(rows, right={1, 3, 4, 5, 6})]
    stall = view.get("first_collective")
    if stall:
        lines += ["", first_collective_said(stall, view["age"] or 0.0)]
    if view["reason"]:
        lines += ["", view["reason"]]
    return "\n".join(lines) + "\n"


def first_collective_said(stall: dict[str, Any], age: float) -> str:
    """status.json's ``first_collective`` in words: what the judge will do and when (``age``: how old the
    file is, brought forward as the ranks' ages are)."""
    stalled = (_num(stall.get("stalled_for")) or 0.0) + age
    timeout = _num(stall.get("timeout")) or 0.0
    left = timeout - stalled
    when = f"in {left:.0f}s" if left > 0 else "now"
    return (f"before the first step, {stall.get('how')} for {stalled:.0f}s: a collective_hang at the "
            f"{stall.get('timeout_name') or 'hang timeout'} {timeout:.0f}s ({when}), not at the startup timeout")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``status`` flags."""
    parser.add_argument("run_dir", nargs="?", metavar="RUN-DIR", help="the job's run directory (default: --run-dir)")
    # own dest: the global --coordinator (before the command word) keeps its meaning for the watchdog
    parser.add_argument("--coordinator", dest="status_coordinator", metavar="HOST:PORT",
                        help="ask a multi-node job's coordinator instead of reading RUN-DIR")
    parser.add_argument("--once", action="store_true", help="print once and exit (0 observed, 3 unobserved)")
    parser.add_argument("--json", action="store_true", help="print JSON (implies --once)")
    parser.add_argument("--ranks", action="store_true",
                        help=f"every rank's row: a job of more than {FULL_RANKS} ranks summarises them (per state, per "
                             f"node, the outliers) and writes every row to {RANKS_FILE} (at most 30 s old)")
    parser.add_argument("--interval", type=float, default=1.0, metavar="SECONDS", help="refresh period (default 1)")
    parser.add_argument("--stale-after", type=float, default=STALE_AFTER, metavar="SECONDS",
                        help=f"status.json older than this means unobserved (default {STALE_AFTER:g})")


def run(args: argparse.Namespace, config: WatchConfig) -> int:
    """Show the table (live, or once); exit 0 when observed, 3 when not (``--once``/``--json``)."""
    if args.interval <= 0 or args.stale_after <= 0:
        raise UsageError("--interval and --stale-after must be positive", "e.g. --interval 1 --stale-after 5")
    if args.status_coordinator:
        return _run_view(args, _coordinator_view(args.status_coordinator, config, args.stale_after,
                                                 getattr(args, "ranks", False)))
    where = args.run_dir or config.run_dir
    if not where:
        raise UsageError("no run directory given", "run `neuron-watch status RUN-DIR` (or set --run-dir)")
    run_dir = Path(where)
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir} is not a directory", "give the run directory of a neuron-watch run")

    def view() -> dict[str, Any]:
        doc, problem = read_status(run_dir)
        if doc is not None and getattr(args, "ranks", False) and "ranks_total" in doc:
            doc, problem = with_every_rank(doc, run_dir)
        return assess(doc, time.time(), args.stale_after, problem)

    return _run_view(args, view)


def _coordinator_view(address: str, config: WatchConfig, stale_after: float,
                      every: bool = False) -> Callable[[], dict[str, Any]]:
    """A view that asks the job's coordinator (authenticated with the job's secret) each time; it
    answers with every rank's row: summarised here as status.json is, unless ``every``."""
    from neuron_watch.errors import TransportError
    from neuron_watch.wire.auth import load_secret

    secret = load_secret(os.environ, config.secret_file)

    def view() -> dict[str, Any]:
        try:
            doc: dict[str, Any] | None = query_status(address, secret)
            problem = ""
            if doc is not None and not every and len(doc.get("ranks") or []) > FULL_RANKS:
                doc = summarise(doc)
        except TransportError as exc:
            doc, problem = None, str(exc)
        return assess(doc, time.time(), stale_after, problem)

    return view


def json_text(view: dict[str, Any]) -> str:
    """``view`` as ``status --json`` prints it: indented and sorted, its ``ranks`` last, one rank a line.

    (Each rank's row is encoded by the json module's C encoder; an indented document goes through its
    Python one, object by object: 5.6 of the 7 s CPU of ``status --json --ranks`` of 65,536 ranks.)"""
    rows = view.get("ranks")
    rest = {k: v for k, v in view.items() if k != "ranks"}
    if not isinstance(rows, list) or not rest:
        return json.dumps(view, indent=1, sort_keys=True)
    head = json.dumps(rest, indent=1, sort_keys=True)  # "{\n ...\n}"
    encode = json.JSONEncoder(sort_keys=True).encode
    listed = "[\n  " + ",\n  ".join(map(encode, rows)) + "\n ]" if rows else "[]"
    return f'{head[:-2]},\n "ranks": {listed}\n}}'


def _run_view(args: argparse.Namespace, view: Callable[[], dict[str, Any]]) -> int:
    if args.json or args.once:
        v = view()
        if args.json:
            sys.stdout.write(json_text(v) + "\n")
        else:
            sys.stdout.write(table(v))
        return int(ExitCode.OK if v["observed"] else ExitCode.UNOBSERVED)

    # On a terminal the table is redrawn in place; piped, each refresh is appended (a log).
    redraw = CLEAR if sys.stdout.isatty() else ""
    try:
        while True:
            sys.stdout.write(redraw + table(view()) + ("" if redraw else "\n"))
            sys.stdout.flush()
            time.sleep(args.interval)  # a refresh period for a human, not a synchronisation
    except KeyboardInterrupt:
        pass
    return int(ExitCode.OK)


def query_status(address: str, secret: bytes, timeout: float = 5.0) -> dict[str, Any]:
    """Ask the coordinator at ``address`` for the job's status document (``neuron-watch status``).

    Raises:
        TransportError: no authenticated answer within ``timeout`` (wrong address, secret or port).
    """
    from neuron_watch.wire.transport import AgentSocket

    signer = Signer.for_status(secret)
    sock = AgentSocket(address, linger_ms=0)
    nonce = secrets.randbits(62)
    session = (time.time_ns() // 1000) << 12
    try:
        h = Header(kind=Kind.STATUS_QUERY, job="", node="status-client", session=session, generation=0, seq=0,
                   mono=time.monotonic(), wall=time.time())
        deadline = time.monotonic() + timeout
        sent = False
        while time.monotonic() < deadline:
            if not sent:
                sent = sock.send(signer.sign(encode(Msg(h, StatusQuery(nonce)))))
            frames = sock.recv() if sock.poll(20) else None
            if frames is None:
                continue
            try:
                msg = decode(signer.verify(frames))
            except ProtocolError:
                continue
            if isinstance(msg.body, StatusReply) and msg.body.nonce == nonce and msg.header.target == session:
                doc: dict[str, Any] = json.loads(msg.body.doc)
                return doc
    finally:
        sock.close()
    raise TransportError(
        f"no answer from a coordinator at {address} within {timeout:.0f}s",
        "check the address (node 0 of the job, default port 29510) and that NEURON_WATCH_SECRET or "
        "--secret-file is the job's secret",
    )

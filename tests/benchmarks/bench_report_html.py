"""``neuron-watch report RUN-DIR --html`` on a synthetic 2,048-node x 32-rank run (prints figures; no
pass/fail): build time, file size, and the page's load in headless Chromium.

    .venv/bin/python -m tests.benchmarks.bench_report_html [--nodes 2048] [--ranks-per-node 32] [--hours 24]

The run dir written: ``events.jsonl`` of a day's run whose every node joins and says hello, with a
progress event every 30 s, a compile at each launch, three hangs (each: capture, an incident whose
bundle has a directory per node, an upload and a ``stopped`` per node, a restart), and the end;
``status.json`` with every rank, a few of them silent, waiting or exited. Printed: the events and
their size, the seconds to read them, to build the model and to render the page (and all three
as the command does them), the page's size, and the wall time of Chromium's ``--dump-dom`` and
``--screenshot`` of it (start to reaped).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from neuron_watch.commands.report import read_events_torn, run_view, write_html
from neuron_watch.events import iso_utc
from neuron_watch.outputs.report_html import render

T0 = 1_800_000_000.0
STEP_SECONDS = 2.0


def ev(at: float, event: str, generation: int, **fields: Any) -> dict[str, Any]:
    return {"time": iso_utc(T0 + at), "event": event, "generation": generation, **fields}


def events(nodes: int, ranks_per_node: int, hours: float, hangs: int = 3) -> list[dict[str, Any]]:
    names = [f"trn1-{i:04d}" for i in range(nodes)]
    wall = hours * 3600
    out = [ev(0, "job_started", 0, job_id="bench-2048", nodes=nodes)]
    for i, n in enumerate(names):
        out.append(ev(1 + i * 0.001, "node_joined", 0, node=n))
        out.append(ev(1 + i * 0.001, "node_hello", 0, node=n, ranks=list(range(i * ranks_per_node,
                                                                              (i + 1) * ranks_per_node))))
    span = wall / (hangs + 1)
    step = 0
    for g in range(hangs + 1):
        start = g * span + (60 if g else 0)  # each relaunch 60 s after its hang was detected
        out.append(ev(start + 5, "verdict", g, label="compiling", action="wait", reason="neuronx-cc compiling"))
        first = start + 900  # a 15-minute compile
        t = first
        end = (g + 1) * span - (600 if g < hangs else 0)  # the hang: 10 minutes without progress
        resumed = step
        while t < end:
            step = resumed + int((t - first) / STEP_SECONDS)
            out.append(ev(t, "progress", g, step=step))
            t += 30
        if g == hangs:
            out.append(ev(wall, "job_finished", g, exit_code=0, state="finished", restarts=hangs,
                          last_progress=iso_utc(T0 + wall), last_step=step))
            break
        culprit = {"node": names[(g * 613) % nodes], "rank": (g * 613) % nodes * ranks_per_node + 7}
        hang_at = (g + 1) * span
        out.append(ev(hang_at, "recovery_phase", g, phase="capturing", previous="running"))
        out.append(ev(hang_at + 40, "verdict", g, label="collective_hang", action="restart", culprit=culprit,
                      culprit_source="flight_recorder", last_progress=iso_utc(T0 + end), last_step=step,
                      reason=f"no rank progressed and none compiled for 600s; {culprit['node']}/rank"
                             f"{culprit['rank']} is 1 collective behind the other {nodes * ranks_per_node - 1}"))
        out.append(ev(hang_at + 40, "incident", g, incident=g + 1, label="collective_hang", culprit=culprit,
                      artifacts={n: f"s3://bench-bucket/bench-2048/incident-{g + 1}/{n}" for n in names},
                      capture_seconds=38.5, missing_items=0))
        for n in names:
            out.append(ev(hang_at + 41, "upload", g, node=n, incident=g + 1, ok=True,
                          uri=f"s3://bench-bucket/bench-2048/incident-{g + 1}/{n}"))
        for n in names:
            out.append(ev(hang_at + 55, "stopped", g, node=n, rung="sigterm", seconds=12.0))
        out.append(ev(hang_at + 56, "recovery_phase", g, phase="restarting", previous="stopping"))
        step = step - step % 500  # the newest checkpoint
        out.append(ev(hang_at + 59, "restart", g + 1, checkpoint=f"s3://ckpt/step_{step}", restarts=g + 1))
    return out


def status(nodes: int, ranks_per_node: int) -> dict[str, Any]:
    odd = {(17, 3): "silent", (1029, 0): "exited", (1030, 31): "waiting", (2000, 12): "silent"}
    return {"job_id": "bench-2048", "generation": 3, "state": "running", "updated": iso_utc(T0 + 86000),
            "ranks": [{"node": f"trn1-{n:04d}", "rank": n * ranks_per_node + r,
                       "state": odd.get((n, r), "progressing"), "last_step": 40000}
                      for n in range(nodes) for r in range(ranks_per_node)]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=2048)
    ap.add_argument("--ranks-per-node", type=int, default=32)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--no-browser", action="store_true", help="skip the Chromium timings")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-report-html-") as tmp:
        run_dir = Path(tmp) / "run"
        run_dir.mkdir()
        evs = events(args.nodes, args.ranks_per_node, args.hours)
        with (run_dir / "events.jsonl").open("w") as f:
            for e in evs:
                f.write(json.dumps(e) + "\n")
        (run_dir / "status.json").write_text(json.dumps(status(args.nodes, args.ranks_per_node)))
        size = (run_dir / "events.jsonl").stat().st_size
        print(f"run: {args.nodes} nodes x {args.ranks_per_node} ranks, {args.hours:g} h, {len(evs)} events "
              f"({size / 1e6:.1f} MB), status.json {(run_dir / 'status.json').stat().st_size / 1e6:.1f} MB")
        t = time.perf_counter()
        read_events_torn(run_dir / "events.jsonl")
        t_read = time.perf_counter() - t
        t = time.perf_counter()
        view = run_view(run_dir)
        t_view = time.perf_counter() - t
        t = time.perf_counter()
        page = render(view)
        t_render = time.perf_counter() - t
        print(f"read events {t_read:.2f} s; read + goodput + model (with status.json) {t_view:.2f} s; "
              f"render {t_render:.2f} s")
        out = Path(tmp) / "report.html"
        t = time.perf_counter()
        write_html(run_dir, out)
        t_all = time.perf_counter() - t
        strips = page.count('class="strip"')
        print(f"report --html as the command does it: {t_all:.2f} s; page {out.stat().st_size / 1e3:.0f} kB "
              f"({len(page)} characters), {page.count('<rect')} SVG rects, {strips} rank strips")
        if args.no_browser:
            return
        from tests.fixtures import chromium

        dom = chromium.render(out, Path(tmp))
        print(f"chromium --dump-dom: {dom.seconds:.2f} s wall (start to reaped), DOM {len(dom.dom) / 1e3:.0f} kB, "
              f"survivors {dom.survivors}")
        shot = Path(tmp) / "report.png"
        pic = chromium.render(out, Path(tmp), screenshot=shot)
        print(f"chromium --screenshot 1280x2000: {pic.seconds:.2f} s wall, PNG {shot.stat().st_size / 1e3:.0f} kB, "
              f"survivors {pic.survivors}")
        blank = Path(tmp) / "blank.html"
        blank.write_text("<!DOCTYPE html><title>blank</title>")
        base = chromium.render(blank, Path(tmp))
        print(f"chromium --dump-dom of an empty page (the browser's own start and stop): {base.seconds:.2f} s")


if __name__ == "__main__":
    main()

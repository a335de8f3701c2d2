"""An incident's capture, the run's timeline and its report against the size of the rank logs (prints
figures; no pass/fail).

    .venv/bin/python tests/benchmarks/bench_capture.py [--sizes 10,100,1000] [--ranks 4] [--evidence-timeout 5]

For each size (MB of rank logs in all, split over ``--ranks`` logs of one generation, with their time
index and an ``events.jsonl``, generated in a temp dir and deleted after), each measured function runs
in a fresh Python process, so its peak RSS is its own: ``capture_node_bundle`` (the node's bundle,
with ``--evidence-timeout``; no external tools), ``write_timeline`` (the run's ``timeline.json`` at a
coordinator's end) and ``report`` (the goodput report). Printed per function: peak RSS, the RSS it
added over the imports, seconds, and for the capture what its manifest says was missing or timed out.

The child imports ``neuron_watch`` as the parent's environment finds it: run it once with this tree
and once with ``PYTHONPATH`` pointing at a directory where ``neuron_watch`` is another tree's
``watchdog/`` (a ``git worktree`` of main) for before/after figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

#: The measured functions, run in a child process; each prints one JSON object.
CHILD = r"""
import json, resource, sys, time
from pathlib import Path
kind, run_dir, timeout = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])
import neuron_watch
from neuron_watch.node import evidence
from neuron_watch.commands import report
from neuron_watch.outputs import timeline
from neuron_watch.diagnosis.kb import default_knowledge_base
kb = default_knowledge_base()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.monotonic()
extra = {}
if kind == "capture":
    logs = {int(p.stem.split("-")[1]): p for p in (run_dir / "gen-1").glob("rank-*.log")}
    ctx = evidence.IncidentContext(job_id="bench", generation=1, incident=1, node="n0", run_dir=run_dir,
                                   rank_logs=logs, verdict={"label": "collective_hang"}, deadline_s=timeout,
                                   tool_path="", compile_workdir_glob=str(run_dir / "none" / "*"))
    res = evidence.capture_node_bundle(ctx)
    extra = {"missing": sorted(m["item"] for m in res.manifest["missing"]
                               if m["item"] not in ("core-dump", "input-dumps", "ndet", "compile", "sysfs-ecc.json",
                                                    "kernel.txt", "neuron-ls.json")),
             "timed_out": res.manifest["timed_out"]}
elif kind == "timeline":
    timeline.write_timeline(run_dir, kb)
else:
    report.report(run_dir)
seconds = time.monotonic() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"peak_mb": peak / 1024, "added_mb": (peak - base) / 1024, "seconds": seconds,
                  "module": neuron_watch.__file__, **extra}))
"""

NOISE = ("INFO dataloader worker 3 prefetched batch; queue depth 4; host memory 31.2 GiB used of 512 GiB; "
         "nothing to see here\n")


def make_run(root: str, total_mb: int, ranks: int) -> None:
    """A run dir with ``ranks`` rank logs of ``total_mb`` MB in all (a step line every 50 lines, a
    runtime warning now and then, the rest plain output) and their time indexes."""
    gen = os.path.join(root, "gen-1")
    os.makedirs(gen)
    per_rank = total_mb * 1_000_000 // ranks
    with open(os.path.join(root, "events.jsonl"), "w") as f:
        f.write(json.dumps({"time": "2026-11-21T13:00:00.000Z", "event": "job_started", "generation": 1}) + "\n")
        f.write(json.dumps({"time": "2026-11-21T15:00:00.000Z", "event": "verdict", "generation": 1,
                            "label": "collective_hang", "action": "restart"}) + "\n")
    for rank in range(ranks):
        step, written, lines = 0, 0, 0
        with open(os.path.join(gen, f"rank-{rank}.log"), "w") as log, \
                open(os.path.join(gen, f"rank-{rank}.times"), "w") as times:
            while written < per_rank:
                block = []
                for i in range(2000):
                    if i % 50 == 0:
                        step += 1
                        block.append(f"step {step} loss 2.{step % 1000:03d} step_time 0.100s\n")
                    elif i % 997 == 0:
                        block.append("2026-Nov-21 13:12:00.0241 332066:332494 [29] include/socket.h:579 CCOM WARN "
                                     "Timeout waiting for RX (waited 120 sec) - retrying\n")
                    else:
                        block.append(NOISE)
                text = "".join(block)
                log.write(text)
                written += len(text)
                lines += len(block)
                times.write(f"{lines} {1795784400 + lines / 10000:.3f}\n")


def measure(kind: str, run_dir: str, timeout: float) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", CHILD, kind, run_dir, str(timeout)], capture_output=True,
                         text=True, timeout=1800, check=False)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,100,1000", help="MB of rank logs in all, comma-separated")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--evidence-timeout", type=float, default=5.0)
    ap.add_argument("--kinds", default="capture,timeline,report")
    args = ap.parse_args()
    print(f"python {sys.version.split()[0]}; {args.ranks} rank logs; capture deadline {args.evidence_timeout}s")
    for size in (int(s) for s in args.sizes.split(",")):
        d = tempfile.mkdtemp(prefix="bench-capture-")
        try:
            t0 = time.monotonic()
            make_run(d, size, args.ranks)
            print(f"\n{size} MB of rank logs (generated in {time.monotonic() - t0:.1f}s)")
            for kind in args.kinds.split(","):
                r = measure(kind, d, args.evidence_timeout)
                if "error" in r:
                    print(f"  {kind:9} failed: {r['error']}")
                    continue
                line = (f"  {kind:9} peak RSS {r['peak_mb']:7.1f} MB (+{r['added_mb']:7.1f} MB)  "
                        f"{r['seconds']:6.2f} s")
                if kind == "capture":
                    line += f"  missing {r['missing']} timed out {r['timed_out']}"
                print(line)
            print(f"  (neuron_watch from {os.path.dirname(str(r.get('module', '?')))})")
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Ranks killed by overlapping requests to their worker server (prints figures; no pass/fail).

    .venv/bin/python -m tests.benchmarks.bench_probe_overlap [--ranks 40] [--stacks neuron_watch_stacks]
        [--askers mix|stacks] [--bootstrap DIR] [--depth 0] [--iters 200]

Ranks one after another, each a gloo rank of one (``import torch``, ``--iters`` ``all_reduce`` at
``--depth`` frames, "done"), started with a rank bootstrap (``--bootstrap``: this checkout's by
default; another checkout's ``watchdog/node/rank_bootstrap`` measures that one). Three askers, each
on its own connection past ``call_handler``'s one-at-a-time turns (as users' tools would), from the
moment the rank's socket appears until it exits: ``mix`` asks the stacks handler, fr_trace_json and
the stacks handler again (what neuron-watch asks; tests/process/test_rank_probe.py's overlapping
test), ``stacks`` asks the stacks handler three times. ``--stacks dump_traceback`` asks torch's own.
Printed: ranks that did not exit 0 with "done" (their codes: -11 SIGSEGV, -6 SIGABRT) and the
answers counted.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading

from neuron_watch.node.rank_probe import BOOTSTRAP_DIR, DIR_ENV, STACKS_HANDLER
from tests.fixtures.probe_ask import ask_raw

RANK = """
import os, sys, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="file://" + os.environ["INIT_FILE"], rank=0, world_size=1)
t = torch.ones(1000)
def deep(n):  # a training step's depth: the loop, the model, its modules
    if n:
        return deep(n - 1)
    for _ in range(int(sys.argv[2])):
        dist.all_reduce(t)
deep(int(sys.argv[1]))
print("done", flush=True)
"""


def one_rank(work: str, bootstrap: str, handlers: tuple[str, ...], depth: int, iters: int,
             answered: dict[str, int]) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "PYTHONPATH")}
    env.update({DIR_ENV: work, "PYTHONPATH": bootstrap, "RANK": "0", "LOCAL_RANK": "0",
                "TORCH_FR_BUFFER_SIZE": "64", "INIT_FILE": os.path.join(work, "init")})
    rank = subprocess.Popen([sys.executable, "-c", RANK, str(depth), str(iters)], env=env, cwd=work,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    sock = os.path.join(work, "r0.sock")
    lock = threading.Lock()

    def ask(handler: str) -> None:
        while rank.poll() is None:
            try:
                if ask_raw(sock, handler).startswith(b"HTTP/1.1 200"):
                    with lock:
                        answered[handler] = answered.get(handler, 0) + 1
            except OSError:
                pass  # not listening yet, or gone

    askers = [threading.Thread(target=ask, args=(h,)) for h in handlers]
    for t in askers:
        t.start()
    try:
        out = rank.communicate(timeout=300)[0]
    except subprocess.TimeoutExpired:
        os.killpg(rank.pid, signal.SIGKILL)
        out = rank.communicate()[0] + "(hung: killed)"
    for t in askers:
        t.join()
    return rank.returncode, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=40)
    ap.add_argument("--stacks", default=STACKS_HANDLER, help="the stack handler asked")
    ap.add_argument("--askers", choices=("mix", "stacks"), default="mix")
    ap.add_argument("--bootstrap", default=BOOTSTRAP_DIR)
    ap.add_argument("--depth", type=int, default=0)
    ap.add_argument("--iters", type=int, default=200)
    a = ap.parse_args()
    handlers = (a.stacks, "fr_trace_json", a.stacks) if a.askers == "mix" else (a.stacks,) * 3
    answered: dict[str, int] = {}
    failed: list[int] = []
    for _ in range(a.ranks):
        with tempfile.TemporaryDirectory(prefix="nw-ovl-") as work:
            code, out = one_rank(work, a.bootstrap, handlers, a.depth, a.iters, answered)
        if code != 0 or "done" not in out:
            failed.append(code)
    print(f"askers {'+'.join(handlers)}, bootstrap {a.bootstrap}: {len(failed)} of {a.ranks} ranks failed "
          f"(codes {failed}); answers {answered}")


if __name__ == "__main__":
    main()

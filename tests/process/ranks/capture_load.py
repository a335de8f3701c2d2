"""Rank programs that load the watchdog's capture and tailing (no torch: fast to start).

    flood MB AHEAD [WIDTH]
                      step lines until the watchdog saw one; then MB MiB of plain lines of WIDTH bytes
                      (default 94; a step line every MiB), at most AHEAD MiB ahead of the rank's log; then
                      ``flood done`` and silence (a hang: the watchdog captures after a flood of rank logs)
    hangon FILE       ignores SIGTERM (the stop waits its whole deadline); a step line every 0.2 s until
                      FILE exists, then silence (a hang)
    longlines MB N    5 step lines; then N lines of MB MiB each (each ends ``<end of line R.I>``), 5 more
                      step lines, ``training done``
"""

from __future__ import annotations

import os
import signal
import sys
import time


def steps(first: int, last: int) -> None:
    for n in range(first, last + 1):
        print(f"step {n} loss {1.0 / n:.4f}", flush=True)
        time.sleep(0.2)


def progress_seen(run_dir: str) -> bool:
    """The watchdog's events say a step was seen (``progress``)."""
    try:
        with open(os.path.join(run_dir, "events.jsonl"), encoding="utf-8") as f:
            return any('"event": "progress"' in line for line in f)
    except OSError:
        return False


def flood(mb: int, ahead_mb: int, width: int = 94) -> None:
    """Steps until the watchdog has seen one (its start may come after ours under load), then MB MiB of
    lines, never more than ``ahead_mb`` MiB ahead of what the watchdog wrote to this rank's log (so the
    flood lands in the rank log, not in a skipped backlog), then silence."""
    rank = int(os.environ.get("RANK", "0"))
    run_dir = os.environ["NEURON_WATCH_RUN_DIR"]
    ours = os.path.join(run_dir, f"gen-{os.environ.get('NEURON_WATCH_GENERATION', '0')}", f"rank-{rank}.log")
    n = 0
    while not progress_seen(run_dir):
        n += 1
        print(f"step {n} loss {1.0 / n:.4f}", flush=True)
        time.sleep(0.2)
    head = f"rank {rank} flood "
    line = head + "z" * max(1, width - len(head) - 1) + "\n"
    block = line * ((1 << 20) // len(line))
    out = sys.stdout
    written = 0
    for i in range(mb):
        while True:
            try:
                logged = os.path.getsize(ours)
            except OSError:
                logged = 0
            if written - logged < ahead_mb << 20:
                break
            time.sleep(0.05)
        step = f"step {n + i + 1} loss {1.0 / (n + i + 1):.4f}\n"  # progress, so only the silence after is a hang
        out.write(block + step)
        out.flush()
        written += len(block) + len(step)
    print("flood done", flush=True)
    time.sleep(3600)


def longlines(mb: int, count: int) -> None:
    rank = int(os.environ.get("RANK", "0"))
    steps(1, 5)
    for i in range(count):
        sys.stdout.write("w" * (mb << 20) + f"<end of line {rank}.{i}>\n")
        sys.stdout.flush()
    steps(6, 10)
    print("training done", flush=True)


def hangon(trigger: str) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    n = 0
    while not os.path.exists(trigger):
        n += 1
        print(f"step {n} loss {1.0 / n:.4f}", flush=True)
        time.sleep(0.2)
    time.sleep(3600)


def main() -> None:
    mode = sys.argv[1]
    if mode == "hangon":
        hangon(sys.argv[2])
    elif mode == "flood":
        flood(int(sys.argv[2]), int(sys.argv[3]), *(int(w) for w in sys.argv[4:5]))
    elif mode == "longlines":
        longlines(int(sys.argv[2]), int(sys.argv[3]))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()

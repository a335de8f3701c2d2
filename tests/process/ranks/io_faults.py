"""Rank programs for the watchdog's I/O-fault and lost-output tests (no torch: fast to start).

    steady SECONDS [--crash-on FILE] [--save-to DIR] [--pad N] [--then SECONDS] [--until FILE]
        prints ``step N loss X`` (then N dots) every 0.1 s for SECONDS, then ``training done``; in generation 0
        (``NEURON_WATCH_GENERATION``) rank 1 exits 3 as soon as FILE exists (the test's trigger);
        rank 0 of generation 0 saves an NxD-style checkpoint DIR/step_5 (``done`` written last)
        at step 5. Every rank prints the checkpoint it was started from first. ``--then``: the later
        generations' SECONDS (a restart's generation only has to resume and finish). ``--until``: SECONDS
        is the longest; it ends (``training done``) as soon as FILE exists (the test has seen what it
        waited for). ``--deaf 1``: SIGTERM and SIGINT are ignored (a rank whose own handler never lets
        it end: only SIGKILL stops it).
    bigline MB        5 step lines, one line of MB MiB, 10 step lines, ``training done``
    flood N [--pad B] N lines as fast as Python writes them (each B more characters long with ``--pad``),
                      then ``training done``
    hwburst MB        5 step lines; then rank 1 writes MB MiB of lines, the runtime's uncorrectable
                      HBM error line (the runtime's own format) and exits 1; the others wait
"""

from __future__ import annotations

import datetime
import os
import signal
import sys
import time


def steady(seconds: float, crash_on: str, save_to: str, pad: int = 0, then: float | None = None,
           until: str = "") -> None:
    rank = int(os.environ.get("RANK", "0"))
    gen0 = os.environ.get("NEURON_WATCH_GENERATION", "0") == "0"
    if not gen0 and then is not None:
        seconds = then
    print(f"resuming from {os.environ.get('NEURON_WATCH_CHECKPOINT', '')!r}", flush=True)
    t0 = time.monotonic()
    n = 0
    while time.monotonic() - t0 < seconds and not (until and os.path.exists(until)):
        n += 1
        print(f"step {n} loss {1.0 / n:.4f}" + ("  " + "." * pad if pad else ""), flush=True)
        if save_to and gen0 and rank == 0 and n == 5:
            d = os.path.join(save_to, "step_5")
            os.makedirs(d, exist_ok=True)
            open(os.path.join(d, "checkpoint"), "w").close()
            open(os.path.join(d, "done"), "w").close()
        if crash_on and gen0 and rank == 1 and os.path.exists(crash_on):
            print("rank 1: exiting with 3", flush=True)
            sys.exit(3)
        time.sleep(0.1)
    print("training done", flush=True)


def main() -> None:
    mode, arg = sys.argv[1], sys.argv[2]
    opts = dict(zip(sys.argv[3::2], sys.argv[4::2], strict=False))
    rank = int(os.environ.get("RANK", "0"))
    if mode == "steady":
        if opts.get("--deaf") == "1":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        then = float(opts["--then"]) if "--then" in opts else None
        steady(float(arg), opts.get("--crash-on", ""), opts.get("--save-to", ""), int(opts.get("--pad", "0")), then,
               opts.get("--until", ""))
    elif mode == "bigline":
        for n in range(1, 6):
            print(f"step {n} loss {1.0 / n:.4f}", flush=True)
            time.sleep(0.1)
        sys.stdout.write("x" * (int(arg) << 20) + "\n")
        sys.stdout.flush()
        for n in range(6, 16):
            print(f"step {n} loss {1.0 / n:.4f}", flush=True)
        print("training done", flush=True)
    elif mode == "flood":
        w = sys.stdout.write
        pad = " " + "x" * int(opts["--pad"]) if "--pad" in opts else ""
        for i in range(int(arg)):
            w(f"flood line {i} of rank {rank}{pad}\n")
        sys.stdout.flush()
        print("training done", flush=True)
    elif mode == "hwburst":
        for n in range(1, 6):
            print(f"step {n} loss {1.0 / n:.4f}", flush=True)
            time.sleep(0.2)
        if rank != 1:
            time.sleep(120)
            return
        line = "burst " + "y" * 100 + "\n"
        sys.stdout.write(line * ((int(arg) << 20) // len(line)))
        ts = datetime.datetime.now().strftime("%Y-%b-%d %H:%M:%S.%f")[:-2]
        # the Neuron runtime's uncorrectable-HBM error, as examples/toy/train.py prints it
        print(f"{ts} {os.getpid()}:{os.getpid()} ERROR   NRT:nrt_infodump                            "
              "Failure: NRT_EXEC_HW_ERR_HBM_UE in nrt_execute()", flush=True)
        os._exit(1)
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()

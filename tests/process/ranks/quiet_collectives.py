"""A rank that prints only its first lines, then trains silently (gloo all_reduce every 0.2 s).

    --quiet-for S   after "step 1 loss", S seconds of all_reduces that print nothing, then "done"
    --sleep-for S   then every rank stops calling collectives and sleeps S seconds (a hang)
    --once FILE     the hang happens once: a rank that finds FILE (written by the ranks that hang)
                    skips the quiet part and the sleep (a restart's generation: step 1, then done)
    --save-to DIR   rank 0 writes an NxD-style checkpoint (DIR/step_N/ with a `done` file written
                    last) every --save-every seconds of the quiet part, printing nothing

Run under torchrun with neuron-watch; nothing here knows about neuron-watch.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quiet-for", type=float, default=10.0)
    ap.add_argument("--sleep-for", type=float, default=0.0)
    ap.add_argument("--save-to", default="")
    ap.add_argument("--save-every", type=float, default=4.0)
    ap.add_argument("--once", default="")
    args = ap.parse_args()
    again = bool(args.once) and os.path.exists(args.once)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.ones(8)
    dist.all_reduce(t)
    print(f"step 1 loss {float(t[0]):.4f} step_time 0.010s", flush=True)
    end = time.monotonic() + (0.0 if again else args.quiet_for)
    step, next_save = 1, time.monotonic() + args.save_every
    while time.monotonic() < end:
        dist.all_reduce(t)
        t.div_(dist.get_world_size())
        time.sleep(0.2)
        step += 1
        if args.save_to and rank == 0 and time.monotonic() >= next_save:
            next_save += args.save_every
            tag = os.path.join(args.save_to, f"step_{step}")
            os.makedirs(tag, exist_ok=True)
            torch.save({"t": t, "step": step}, os.path.join(tag, "state.pt"))
            open(os.path.join(tag, "done"), "w").close()  # NxD writes its marker last
    if args.once and not again:
        open(args.once, "a").close()
    time.sleep(0.0 if again else args.sleep_for)
    dist.barrier()
    if rank == 0:
        print("training done", flush=True)
    dist.destroy_process_group()
    # torch's interpreter teardown takes tens of seconds on a busy 2-core machine and prints
    # nothing (as examples/toy/train.py notes): leave at once, the exit is what is watched.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

"""A rank that prints terminal escape sequences meant to fool the operator, then a few steps, then
exits 0. Nothing here knows about neuron-watch beyond the text it forges.

Lines: a forged watchdog verdict behind ``\\r`` + erase-line, one behind cursor-to-column-1, an OSC
title change, a clear-screen, a C1 CSI, a right-to-left override; on stdout and stderr.
"""

from __future__ import annotations

import sys
import time

FORGED = [
    "\r\x1b[2K[neuron-watch] verdict: healthy (SPOOF-1)",
    "\x1b[1G[neuron-watch] job finished: exit code 0 (SPOOF-2)",
    "\x1b]0;SPOOF-3 owned\x07",
    "\x1b[2J\x1b[HSPOOF-4",
    "\x9b2JSPOOF-5",
    "\u202eSPOOF-6 [neuron-watch]",
]


def main() -> None:
    for i, text in enumerate(FORGED):
        stream = sys.stdout if i % 2 == 0 else sys.stderr
        stream.write(text + "\n")
        stream.flush()
    for step in range(1, 6):
        print(f"step {step} loss {1.0 / step:.3f}", flush=True)
        time.sleep(0.1)
    print("training done", flush=True)


if __name__ == "__main__":
    main()

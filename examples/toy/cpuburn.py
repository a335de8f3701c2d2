"""CPU work for the toy's stand-ins: a compile in a compiler process (``neuronx-cc``) or in the rank itself
(an engine build, ``train.py --build-at``) shows from outside only as CPU time that grows."""

from __future__ import annotations

import os
import time


def burn_cpu(seconds: float) -> None:
    """Compute for ``seconds``: ``TOY_COMPILER_CPU_SHARE=F`` (0 < F <= 1, default 1) of each tenth of a
    second, asleep the rest. The CPU time still grows all along, as a watcher sees a real compile's
    grow, for a fraction of the cost (the test suite runs many compiles on few cores)."""
    share = min(1.0, max(0.01, float(os.environ.get("TOY_COMPILER_CPU_SHARE", "1"))))
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        slice_end = min(time.monotonic() + 0.1 * share, end)
        while time.monotonic() < slice_end:
            for i in range(2000):
                x += i * i
        if share < 1.0:
            time.sleep(max(0.0, min(0.1 * (1.0 - share), end - time.monotonic())))

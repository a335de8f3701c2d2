"""Read py-spy stack dumps to name the culprit of a hang. Pure: texts in, decision out.

In a synchronous job every healthy rank of a hung step sits inside a collective (DDP's backward
all-reduce, ``all_reduce``, ``barrier``, XLA's ``mark_step`` waiting on the device); the rank that
caused the hang is the one that is *not*. gloo and NCCL print nothing while they wait, so for a
silent hang the stacks are the only evidence of who is to blame.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: Frames that mean "this thread is waiting for its peers".
COLLECTIVE_FRAMES = re.compile(
    r"\b(?:all_reduce|allreduce|all_gather|allgather|reduce_scatter|broadcast|barrier|all_to_all|"
    r"_engine_run_backward|run_backward|wait_stream|_wait|mark_step|sync_multi|_xla_sync|"
    r"recv|send|irecv|isend|monitored_barrier)\b|torch/distributed/|torch_xla/"
)


def main_thread(dump: str) -> str:
    """The main thread's frames of one ``py-spy dump`` text ('' if none is found)."""
    m = re.search(r'^Thread \d+ \([^)]*\): "MainThread"\n((?:[ \t]+.*\n?)*)', dump, re.MULTILINE)
    return m.group(1) if m else ""


def in_collective(dump: str) -> bool | None:
    """True if the main thread waits in a collective, False if not, None if the dump has no main thread."""
    frames = main_thread(dump)
    if not frames:
        return None
    return COLLECTIVE_FRAMES.search(frames) is not None


def hang_culprits(dumps: Mapping[int, str]) -> list[int]:
    """Ranks not in a collective while at least one other rank is; empty when stacks do not tell.

    A single rank outside is the culprit. Several outside and several inside still narrow it down;
    every rank outside (or every rank inside) tells nothing.
    """
    state = {r: in_collective(d) for r, d in dumps.items()}
    outside = sorted(r for r, s in state.items() if s is False)
    inside = [r for r, s in state.items() if s is True]
    return outside if outside and inside else []


def collective_states(dumps: Mapping[int, str]) -> dict[int, bool]:
    """Rank -> in a collective (True) or not (False); ranks whose dump tells nothing are left out.

    Used by a node agent to report its ranks to the coordinator, which decides across nodes.
    """
    out: dict[int, bool] = {}
    for r, d in dumps.items():
        s = in_collective(d)
        if s is not None:
            out[r] = s
    return out

"""Read stack dumps (py-spy's, or faulthandler's from the ranks' worker server) to name the culprit of a hang. Pure.

In a synchronous job every healthy rank of a hung step sits inside a collective (DDP's backward
all-reduce, ``all_reduce``, ``barrier``, XLA's ``mark_step`` waiting on the device); the rank that
caused the hang is the one that is *not*. gloo and NCCL print nothing while they wait, so for a
silent hang the stacks are the only evidence of who is to blame.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Hashable, Mapping
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

#: Frames that mean "this thread is waiting for its peers". Below the frameworks, the calls a process polls
#: while its messages are in flight, by their APIs' names: libfabric's completion queue and counter reads
#: (fi_eq.h, fi_cq(3): ``fi_cq_read``/``fi_cq_readfrom``/``fi_cq_sread``, ``fi_cntr_wait``), Open MPI's progress
#: engine (opal/runtime/opal_progress.c, ``opal_progress``) and MPI's waits (``MPI_Wait``/``PMPI_Waitall``...,
#: MPICH's ``MPID_Progress_wait``): a stuck Open MPI job over EFA dumped by gdb shows its ranks spinning in them
#: (ofiwg/libfabric#6565, round issue23-heldout-29 part A).
COLLECTIVE_FRAMES = re.compile(
    r"\b(?:all_reduce|allreduce|all_gather|allgather|reduce_scatter|broadcast|barrier|all_to_all|"
    r"_engine_run_backward|run_backward|wait_stream|_wait|mark_step|sync_multi|_xla_sync|"
    r"recv|send|irecv|isend|monitored_barrier|"
    r"fi_cq_s?read(?:from)?|fi_cntr_wait|opal_progress|P?MPI_Wait(?:all|any|some)?|MPID\w*_Progress_wait)\b|"
    r"torch/distributed/|torch_xla/"
)

#: Frames that mean "this thread waits for its device", which in a step waits for the collectives
#: queued on it: torch's ``Stream``/``Event``/``cuda.synchronize`` (torch/cuda/streams.py,
#: torch/cuda/__init__.py), the CUDA runtime's and driver's synchronising calls by their API names
#: (``cudaStreamSynchronize``, ``cuStreamSynchronize``...), c10d's wait on a work object
#: (``WorkNCCL::wait``/``synchronize``), XLA's ``wait_device_ops`` and JAX's ``block_until_ready``; and the
#: copies to the host that wait for the stream's work before they copy (the CUDA runtime API's "API synchronization
#: behavior": ``cudaMemcpy``, and ``cudaMemcpyAsync`` into pageable memory, return when the copy is done, after the
#: work queued before it), as torch's ``.item()``/``.cpu()`` make them (``_local_scalar_dense_cuda``).
DEVICE_WAIT_FRAMES = re.compile(
    r"\b(?:synchronize|cu(?:da)?(?:Stream|Device|Event|Ctx)Synchronize|wait_device_ops|block_until_ready|"
    r"cudaMemcpy(?:Async)?|cuMemcpyDtoH(?:_v2)?|_local_scalar_dense_cuda|"
    r"WorkNCCL::(?:wait|synchronize\w*)|Work(?:Gloo)?::wait)\b|torch/cuda/streams\.py"
)


#: A thread of Python's ``faulthandler`` text (what torch's worker server answers to
#: ``dump_traceback``): ``Thread 0x00007f... (most recent call first):`` or ``Current thread ...``,
#: then ``  File "path", line N in function`` lines, innermost first.
_FH_THREAD = re.compile(r"^(?:Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):\n((?:[ \t]+.*\n?)*)",
                        re.MULTILINE)
_FH_FRAME = re.compile(r'^[ \t]+File "([^"]*)", line (\d+) in (.+?)\s*$', re.MULTILINE)


def main_thread(dump: str) -> str:
    """The main thread's frames of one stack dump ('' if none is found), one frame per line as
    ``function (file:line)``, innermost first.

    Two formats: ``py-spy dump`` (the main thread is named) and Python's ``faulthandler`` (torch's
    worker server's ``dump_traceback``), which names no thread: there the main thread is the one
    that was not started by ``threading`` (its outermost frame is not ``threading.py``'s
    ``_bootstrap``); faulthandler lists the newest thread first, so the last such thread is the
    main one when several qualify.
    """
    m = re.search(r'^Thread \d+ \([^)]*\): "MainThread"\n((?:[ \t]+.*\n?)*)', dump, re.MULTILINE)
    if m:
        return m.group(1)
    main = ""
    for block in _FH_THREAD.finditer(dump):
        frames = _FH_FRAME.findall(block.group(1))
        if not frames:
            continue  # "<no Python frame>": the worker server's own thread
        outermost_file, _, outermost_fn = frames[-1]
        if outermost_fn == "_bootstrap" and outermost_file.endswith("threading.py"):
            continue
        main = "".join(f"    {fn} ({path}:{line})\n" for path, line, fn in frames)
    return main


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


_FRAME = re.compile(r"^\s+(\S.*?) \(([^:()]+)(?::\d+)?\)\s*$", re.MULTILINE)


def top_frame(dump: str) -> str | None:
    """The main thread's innermost frame as ``function (file)`` without its line number, or None."""
    m = _FRAME.search(main_thread(dump))
    return f"{m.group(1)} ({m.group(2)})" if m else None


def _function(frame: str) -> str:
    return frame.split(" (", 1)[0]


def stack_culprit(tops: Mapping[K, str | None], waiting: Mapping[K, bool | None]) -> tuple[K, str] | None:
    """The one rank whose stack sets it apart in a hang, with the clause that says how; else None.

    ``tops``: each rank's innermost main-thread frame (:func:`top_frame`); ``waiting``: whether it
    waits in a collective (:func:`in_collective`). Ranks of a hung synchronous job wait at the same
    place (DDP's backward, an ``all_reduce``, a ``barrier``); the rank that caused it is elsewhere.
    A rank is *with the others* when its innermost frame is shared by another rank or is a
    collective; exactly one rank not with the others, against at least two that are, is the culprit.
    """
    readable = {k: t for k, t in tops.items() if t}
    counts = Counter(readable.values())
    together = [k for k, t in readable.items() if counts[t] > 1 or waiting.get(k)]
    apart = [k for k in readable if k not in together]
    if len(apart) == 1 and len(together) >= 2:
        shared = Counter(readable[k] for k in together).most_common(1)[0][0]
        where = _function(shared)
        return apart[0], (f"{apart[0]}'s stack differs from the {len(together)} others, which wait in {where} "
                          f"(it is in {_function(readable[apart[0]])})")
    outside = [k for k, s in waiting.items() if s is False]
    if len(outside) == 1 and any(waiting.values()):
        return outside[0], f"{outside[0]} is the only rank not waiting in a collective"
    return None


def odd_one_out(tops: Mapping[K, str | None]) -> tuple[K, str] | None:
    """The one rank whose innermost frame differs from the one frame all the others share (at
    least two), with the clause that says so; else None.

    For the stacks ranks leave as a failed job ends (an exception, or torchrun's SIGTERM): ranks in
    step end in the same collective call; one that ran a different collective (a skipped
    ``all_reduce``: it is already in the next step's backward) ends elsewhere.
    """
    readable = {k: t for k, t in tops.items() if t}
    counts = Counter(readable.values())
    if len(counts) != 2:
        return None
    (shared, n), (odd_top, one) = counts.most_common()
    if one != 1 or n < 2:
        return None
    odd = next(k for k, t in readable.items() if t == odd_top)
    return odd, (f"{odd}'s stack as the ranks ended differs from the {n} others, which were in "
                 f"{_function(shared)} (it was in {_function(odd_top)})")


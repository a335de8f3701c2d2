"""What node 0's wrapper does when the job's coordinator, its child process, ends (pure).

The coordinator runs in a process of its own (docs/multinode.md, "The coordinator's own
process"): an abort in libzmq (``Assertion failed: !_io_error``: a full receive queue whose peer closed, met
by the heartbeat timer) or any crash
of its code ends that process, not the wrapper, whose agent keeps the node's ranks. The wrapper
starts it again, up to a bound, and the new one takes up the job (:mod:`neuron_watch.job.memory`);
past the bound the node runs on unobserved, as any node whose coordinator is lost, and its ranks
are never stopped for it. And what a coordinator started again does about the recovery its
predecessor had under way (:func:`resume`: docs/multinode.md, "A crash mid-recovery").
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

#: How many times one wrapper starts its coordinator again. A coordinator that crashes this often
#: crashes for a reason a new one will meet again (its run dir, its disk, a bug on this job's input).
MAX_COORDINATOR_RESTARTS = 3


class HostAction(enum.Enum):
    ENDED = "ended"  # the job is over: it said so before it exited
    RESTART = "restart"  # it crashed: start it again
    GIVE_UP = "give_up"  # it crashed once too often: run on unobserved


@dataclass(frozen=True)
class HostDecision:
    action: HostAction
    cause: str  # "signal SIGABRT", "exit code 1"
    message: str  # the console line


def after_exit(cause: str, said_over: bool, restarts_done: int, pid: int,
               limit: int = MAX_COORDINATOR_RESTARTS) -> HostDecision:
    """The coordinator (``pid``) exited for ``cause`` (``signal SIGABRT``, ``exit code 1``);
    ``said_over``: it said the job was over first; ``restarts_done``: how often this wrapper
    started it again before."""
    if said_over:
        return HostDecision(HostAction.ENDED, cause, f"the job's coordinator (pid {pid}) ended ({cause})")
    if restarts_done < limit:
        return HostDecision(HostAction.RESTART, cause,
                            f"the job's coordinator (pid {pid}) died ({cause}) while the job runs: starting it "
                            f"again ({restarts_done + 1} of {limit}); the ranks keep running, the nodes reconnect "
                            "and resend what it had not acknowledged")
    return HostDecision(HostAction.GIVE_UP, cause,
                        f"the job's coordinator (pid {pid}) died ({cause}) after {limit} restart(s): not starting it "
                        "again. This node's ranks keep running UNOBSERVED: no hang is judged and nothing is "
                        "restarted; every node handles a lost coordinator as docs/multinode.md says (its ranks "
                        "are never stopped while they work). Check the coordinator's last lines above and "
                        "coordinator-state.json in the run dir")


# -- a crash mid-recovery ------------------------------------------------------------------------


class UnderWay(enum.Enum):
    """The recovery its coordinator had under way (``coordinator-state.json``, written at the end of
    every turn): the verdict given, the restart not yet counted (CAPTURE, STOP); or counted, the next
    generation and its checkpoint chosen, the relaunch asked (RELAUNCH)."""

    CAPTURE = "capture"
    STOP = "stop"
    RELAUNCH = "relaunch"


class ResumeAction(enum.Enum):
    GO_ON = "go_on"  # nothing owed: judge the job as it is found
    WAIT = "wait"  # the nodes are not all back yet: what they run decides
    STOP_AND_RESTART = "stop_and_restart"  # the verdict's restart is owed: stop what is left, restart once
    RELAUNCH = "relaunch"  # the restart was counted and its generation chosen: start that generation


@dataclass(frozen=True)
class Resumption:
    action: ResumeAction
    message: str  # said on the console and in the ``coordinator_resumed`` warning


#: How long a coordinator started again waits for its nodes before it resumes a recovery with those
#: that came back (a node that never does is then handled by the stop's own deadlines).
RESUME_JOIN_WAIT = 30.0


def launch_confirmed(generation: int, *, launched: int | None, nodes_at: tuple[int, ...], all_back: bool) -> bool:
    """Whether ``generation`` is known to run: the relauncher says so (the srun step of it), or every
    node of the job is back and says it runs it or a later one (its hello, its statuses: an agent
    takes a generation when its ``launch`` arrives). Until then a relaunch may still be lost (a
    coordinator that dies with the ``launch`` in its socket's queue), so it stays ``under_way``
    (pure; the arguments as :func:`resume`'s)."""
    return (launched is not None and launched >= generation) or (all_back and bool(nodes_at)
                                                                 and min(nodes_at) >= generation)


def resume(under_way: UnderWay | None, generation: int, *, launched: int | None, nodes_at: tuple[int, ...],
           all_back: bool, waited: float, join_wait: float = RESUME_JOIN_WAIT) -> Resumption:
    """What a coordinator started again does about the recovery its predecessor had ``under_way``
    when it died, so that the restart is neither lost nor done twice, and no healthy new generation
    is stopped (pure).

    ``generation``: the recorded one (for RELAUNCH, the generation the relaunch was to start);
    ``launched``: the generation the relauncher knows to run (the srun step's), -1 when nothing runs,
    None when it cannot know (torchrun: every node's agent launches); ``nodes_at``: the generation
    each node that is back says it runs; ``all_back``: every node of the job is back; ``waited``:
    seconds since this coordinator started."""
    if under_way is None:
        return Resumption(ResumeAction.GO_ON, "")
    settled = all_back or waited >= join_wait or launched == -1
    newest = max(nodes_at, default=-1)
    if under_way is UnderWay.RELAUNCH:
        if launch_confirmed(generation, launched=launched, nodes_at=nodes_at, all_back=all_back):
            return Resumption(ResumeAction.GO_ON, f"generation {generation} runs: the relaunch its predecessor "
                                                  "asked for was done; it is judged as any generation")
        if launched is None and not settled:
            return Resumption(ResumeAction.WAIT, "")
        if newest >= generation:
            # some node runs the new generation, another not: never stop a node that works; the one
            # left behind shows no progress and is judged as any node is
            return Resumption(ResumeAction.GO_ON, f"generation {generation} runs on part of the job only: it is "
                                                  "judged as it is (a node left behind is a hang like any)")
        return Resumption(ResumeAction.RELAUNCH, f"its predecessor died relaunching: generation {generation} is "
                                                 "started now from the checkpoint it chose (the restart was counted "
                                                 "once, before)")
    if (launched is not None and launched > generation) or (all_back and nodes_at and min(nodes_at) > generation):
        return Resumption(ResumeAction.GO_ON, f"a generation after {generation} runs: nothing is owed")
    if not settled:
        return Resumption(ResumeAction.WAIT, "")
    what = "capturing evidence" if under_way is UnderWay.CAPTURE else "stopping the job"
    return Resumption(ResumeAction.STOP_AND_RESTART,
                      f"its predecessor died {what} after its verdict: the verdict stands, what is left of "
                      f"generation {generation} is stopped and the job restarted once")

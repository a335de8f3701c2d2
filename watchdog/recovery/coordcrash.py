"""What node 0's wrapper does when the job's coordinator, its child process, ends (pure).

The coordinator runs in a process of its own (docs/multinode.md, "The coordinator's own
process"): an abort in libzmq (``Assertion failed: !_io_error``: a full receive queue whose peer closed, met
by the heartbeat timer) or any crash
of its code ends that process, not the wrapper, whose agent keeps the node's ranks. The wrapper
starts it again, up to a bound, and the new one takes up the job (:mod:`neuron_watch.job.memory`);
past the bound the node runs on unobserved, as any node whose coordinator is lost, and its ranks
are never stopped for it.
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

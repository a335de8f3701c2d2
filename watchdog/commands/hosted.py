"""The job's coordinator in a process of its own, started by the node that hosts it.

    python -m neuron_watch.commands.hosted SPEC_FILE READY_FD [--after CAUSE]

Not a command for operators: node 0's wrapper (``neuron-watch torchrun`` of a multi-node job)
or the batch step of ``neuron-watch srun`` (which keeps the srun steps and answers this
coordinator's requests for them: :class:`neuron_watch.commands.srun.HostedSteps`) starts it
(:class:`neuron_watch.runtime.HostedCoordinator`) so that a crash of the coordinator
(libzmq's ``Assertion failed: !_io_error`` abort, any bug of its code) ends this process, not the
wrapper whose agent keeps the node's ranks; the wrapper starts it again (``--after``: why the
last one ended) and the new one takes up the job from its run dir (:mod:`neuron_watch.job.memory`).

``SPEC_FILE`` (JSON, mode 0600, written by the wrapper): the watch options, the address to bind,
the job id, the run dir, the job's size and the ``job_started`` event's fields. The job's secret
comes as for every entry point (``NEURON_WATCH_SECRET`` or ``--secret-file``). On ``READY_FD`` it
says ``ready <endpoint>`` once it listens (or ``port-in-use``: the wrapper then joins whoever holds
the port, as an elastic node does), and ``over <code>`` once the job is over; then it exits with
the job's code. A signal stops every node of the job and ends it with 128+signal, as the signal to
node 0's wrapper always did (the wrapper forwards its own).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any

from neuron_watch.commands.srun import STEP_END_GRACE, HostedSteps, hosted_steps
from neuron_watch.config import WatchConfig
from neuron_watch.errors import ExitCode, NeuronWatchError
from neuron_watch.events import EventKind
from neuron_watch.iofaults import IOHealth
from neuron_watch.job.hosting import HostLink
from neuron_watch.job.memory import recall
from neuron_watch.node.signal_latch import SignalLatch
from neuron_watch.outputs.console import status_line_for
from neuron_watch.outputs.nbconsole import nonblocking_console
from neuron_watch.recovery.policy import RestartPolicy
from neuron_watch.runtime import build_coordinator, close_coordinator, knowledge_base, serve_coordinator
from neuron_watch.wire.auth import load_secret
from neuron_watch.wire.transport import PortInUse

log = logging.getLogger("neuron_watch")


def serve(spec: dict[str, Any], ready_fd: int, after: str | None) -> int:
    """Build the coordinator of ``spec``, take up the job if a predecessor left it, serve it to its end."""
    config = WatchConfig(**spec["config"])
    run_dir, job_id = spec["run_dir"], spec["job_id"]
    secret = load_secret(os.environ, config.secret_file)
    kb = knowledge_base(config)
    health = IOHealth(spec.get("node", ""))
    wrapper = HostLink(ready_fd)  # a wrapper gone is not our problem (its lifeline ends us)
    entry = spec.get("entry") or {}
    steps: HostedSteps | None = None
    policy: RestartPolicy | None = None
    generation = 0
    if entry.get("kind") == "srun":  # the batch step keeps the srun steps; we ask it (commands/srun.py)
        steps, policy, generation = hosted_steps(config, entry, wrapper, restarted=after is not None)
        steps.read()  # what the batch step keeps: a coordinator started again learns it first
    try:
        coord = build_coordinator(config, kb, bind=spec["bind"], secret=secret, run_dir=run_dir, job_id=job_id,
                                  nodes=spec.get("nodes"), health=health, status_line=status_line_for(config),
                                  relauncher=steps, generation=generation, policy=policy)
    except PortInUse:
        wrapper.tell("port-in-use")
        return int(ExitCode.UNOBSERVED)
    if steps is not None:
        steps.coord = coord
    try:
        if after is None:
            coord.events.emit(EventKind.JOB_STARTED, generation, **spec["job_started"])
        else:
            memory = recall(run_dir)
            if memory is not None:
                coord.status_files.kept.restore(coord.recovery, memory)
            message = (f"the job's coordinator was restarted on {spec.get('node', 'its host')} (pid {os.getpid()}) "
                       f"after its predecessor died ({after}); "
                       + (f"it takes up generation {memory.generation} with {memory.restarts} restart(s) used"
                          if memory is not None else
                          "no record of the job was left (coordinator-state.json): it starts at generation 0")
                       + "; the nodes reconnect and resend what was not acknowledged")
            coord.events.emit(EventKind.WARNING, coord.generation, kind="coordinator_restarted", cause=after,
                              pid=os.getpid(), message=message, resumed=memory is not None,
                              restarts=coord.restarts)
            log.warning("%s", message)
        wrapper.tell("ready", coord.endpoint)
        signals = SignalLatch()
        signals.install()
        with nonblocking_console():  # a stalled console must not stall the coordinator (nbconsole.py)
            code = serve_coordinator(coord, signals, stop_job_on_signal=True, watch=[ready_fd])
            if steps is not None:  # the job is over: its step ends (its srun_step_ended is ours to say)
                steps.finish(STEP_END_GRACE, STEP_END_GRACE + config.stop_timeout + 10.0)
        if coord.exit_code is not None:
            wrapper.tell("over", str(code))
        return code
    finally:
        close_coordinator(coord, kb)


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.DEBUG if os.environ.get("NEURON_WATCH_DEBUG") else logging.INFO,
                        format="[neuron-watch] %(message)s", stream=sys.stderr)
    spec_file, ready_fd = argv[0], int(argv[1])
    after = argv[3] if len(argv) > 3 and argv[2] == "--after" else None
    with open(spec_file, encoding="utf-8") as f:
        spec = json.load(f)
    try:
        return serve(spec, ready_fd, after)
    except NeuronWatchError as exc:
        print(f"neuron-watch: error: {exc}", file=sys.stderr)
        return int(exc.exit_code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

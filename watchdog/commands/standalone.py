"""``neuron-watch coordinator``: a job's coordinator on its own, for agents that do not host one.

    neuron-watch coordinator --bind HOST:PORT [--nodes N] [--silence S] [WATCH OPTIONS]
    neuron-watch coordinator --new-secret FILE

Its nodes run ``neuron-watch --coordinator HOST:PORT torchrun ...`` with
``NEURON_WATCH_HOST_COORDINATOR=0`` (docs/multinode.md). It is wired like every other entry point
(:mod:`neuron_watch.runtime`): the same job id as its agents (``--job-id``, else
``slurm-$SLURM_JOB_ID``), the same judge, recovery, event sinks (``--mqtt``, the console) and
status. A signal ends this process only: its agents keep their ranks running while they work, as
when any coordinator is lost (docs/multinode.md).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket

from neuron_watch import __version__
from neuron_watch.config import WatchConfig
from neuron_watch.errors import UsageError
from neuron_watch.events import EventKind
from neuron_watch.iofaults import check_run_dir
from neuron_watch.node.signal_latch import SignalLatch
from neuron_watch.outputs.console import hang_timeout_source, say, status_line_for
from neuron_watch.outputs.nbconsole import nonblocking_console
from neuron_watch.runtime import (
    build_coordinator,
    close_coordinator,
    knowledge_base,
    resolve_job_id,
    resolve_run_dir,
    serve_coordinator,
)
from neuron_watch.wire.auth import load_secret, write_secret_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bind", metavar="HOST:PORT", help="address to listen on (port 0: any free port)")
    parser.add_argument("--nodes", type=int, default=None, metavar="N", help="judge only once N nodes joined")
    parser.add_argument("--silence", type=float, default=10.0, metavar="SECONDS",
                        help="a node silent this long is `unobserved` (default 10)")
    parser.add_argument("--new-secret", metavar="FILE",
                        help="write a fresh job secret to FILE (mode 0600) and exit")


def run(args: argparse.Namespace, config: WatchConfig) -> int:
    """Serve until the job is over (its exit code) or a signal (128+signal)."""
    if args.new_secret:
        write_secret_file(args.new_secret)
        print(f"wrote a new job secret to {args.new_secret} (mode 0600)")
        return 0
    if not args.bind:
        raise UsageError("--bind HOST:PORT is required", "e.g. `neuron-watch coordinator --bind 0.0.0.0:29400`")
    host, _, port = args.bind.rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--bind {args.bind!r} is not HOST:PORT with a port in 0..65535",
                         "e.g. `neuron-watch coordinator --bind 0.0.0.0:29400` (port 0: any free port)")
    secret = load_secret(os.environ, config.secret_file)
    job = resolve_job_id(config, os.environ)
    run_dir = resolve_run_dir(config, job)
    check_run_dir(run_dir)
    kb = knowledge_base(config)  # a bad table or regex fails here, before anything starts
    coord = build_coordinator(config, kb, bind=args.bind, secret=secret, run_dir=run_dir, job_id=job, nodes=args.nodes,
                              status_line=status_line_for(config), announce=True, silence=args.silence)
    # the job's first event, as every entry point writes it (its nodes start their own commands)
    coord.events.emit(EventKind.JOB_STARTED, 0, job_id=job, node=socket.gethostname().split(".")[0],
                      version=__version__, command=None, checkpoint=None, config=config.redacted(),
                      nodes=args.nodes)
    signals = SignalLatch()
    old = signals.install()
    # The banner on stdout is read by scripts (the endpoint of port 0); the console line is for operators.
    print(f"neuron-watch coordinator for job {job} on {coord.endpoint} ({socket.gethostname()}), "
          f"run dir {run_dir}", flush=True)
    say(f"start: coordinator for job {job} on {coord.endpoint}, waiting for {args.nodes or 'any number of'} "
        f"node(s); hang timeout {hang_timeout_source(config, os.environ)}")
    try:
        with nonblocking_console():  # a stalled console must not stall the coordinator (nbconsole.py)
            return serve_coordinator(coord, signals, stop_job_on_signal=False)
    finally:
        close_coordinator(coord, kb)
        for s, h in old.items():
            signal.signal(s, h)

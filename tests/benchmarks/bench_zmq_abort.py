"""Reproduce (or rule out) libzmq's ``Assertion failed: !_io_error (src/stream_engine_base.cpp:310)``.

    .venv/bin/python tests/benchmarks/bench_zmq_abort.py [--seconds 60] [--dealers 256] [--patterns ...]

Seen once in a 1,024-node ``bench_scale.py`` run: the coordinator's process aborted when the
simulated agents closed their connections while it was behind and still sending acks. What
libzmq 4.3.5's source says (``stream_engine_base.cpp``, ``epoll.cpp``, ``zmtp_engine.cpp``):

* an engine whose session pipe is full (the ROUTER's ``RCVHWM`` reached: the application is
  behind) stops reading its TCP socket (``_input_stopped``, POLLIN off);
* EPOLLERR/EPOLLHUP still reach ``in_event`` with POLLIN off (``epoll_t::loop``): a peer that
  resets the connection (RST: it closed with unread data, or our heartbeat PING hit its closed
  socket) makes ``in_event_internal`` see ``_input_stopped``, remove the fd and set ``_io_error``;
  the engine lives on until the application reads (``restart_input`` then ends it);
* meanwhile two paths call ``out_event`` without looking at ``_io_error``, which asserts it false:
  the ZMTP heartbeat timer (``timer_event``: HEARTBEAT_IVL, 1 s in our transport) and a PING still
  in the engine's decoded input when ``restart_input`` processes it (``produce_pong_message``).
  libzmq issue 4364 (open: "pub-sub mode crash by _io_error", heartbeats on) is this; its fix
  (PR 4377/4378) was closed unmerged. ``restart_output`` (our acks) checks ``_io_error`` and is safe.

So the conditions are: heartbeats on, a receive queue full (the application behind), and peers
resetting their connections while it stays full for longer than a heartbeat interval.

Every trial runs the ROUTER (the project's own socket options, ``transport.CoordinatorSocket``)
in a child process and the DEALERs in another; an abort is the ROUTER child ending on SIGABRT,
counted with libzmq's message from its stderr. Patterns:

* ``behind-rst``: the ROUTER does not read for ``--stall`` s (input stops on every connection)
  while it sends acks; the DEALERs flood it, do not read its acks (their kernel buffers keep
  unread data, so their close is a reset) and close all at once with LINGER 0;
* ``behind-fin``: the same, but the DEALERs read everything and close cleanly (FIN);
* ``keeping-up``: the ROUTER reads all the time (input never stops), the DEALERs reset as in
  the first pattern.

Prints, per pattern, trials, aborts and the libzmq lines seen. No timing threshold: figures only.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time

import zmq

from neuron_watch.wire.transport import HEARTBEAT_IVL_MS, CoordinatorSocket

PATTERNS = ("behind-rst", "behind-fin", "keeping-up")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def send_ack(coord: CoordinatorSocket, rid: bytes, ack: bytes) -> None:
    """An ack to one dealer, as the coordinator sends them; one not connected (ROUTER_MANDATORY) or
    whose queue is full is passed over."""
    with contextlib.suppress(zmq.ZMQError):
        coord.sock.send_multipart([rid, ack], zmq.NOBLOCK)


def router_child(port: int, pattern: str, seconds: float, stall: float, dealers: int, hwm: int) -> int:
    """The coordinator's side: the project's ROUTER; behind (not reading) for ``stall`` s, then
    draining, in turns; sending an ack to every dealer all the time (as a coordinator does)."""
    coord = CoordinatorSocket(f"127.0.0.1:{port}", hwm=hwm)
    end = time.monotonic() + seconds
    ids = [b"d%d" % i for i in range(dealers)]
    ack = b"x" * 512
    while time.monotonic() < end:
        behind_until = time.monotonic() + (stall if pattern != "keeping-up" else 0.0)
        while time.monotonic() < behind_until:
            for rid in ids:
                send_ack(coord, rid, ack)
            time.sleep(0.01)
        drain_until = time.monotonic() + 0.5
        while time.monotonic() < drain_until:
            if coord.poll(10):
                while coord.recv() is not None:
                    pass
            for rid in ids[:32]:
                with contextlib.suppress(zmq.ZMQError):
                    coord.sock.send_multipart([rid, ack], zmq.NOBLOCK)
    coord.close()
    return 0


def dealer_child(port: int, pattern: str, seconds: float, dealers: int, hwm: int) -> int:
    """The agents' side: ``dealers`` DEALERs (heartbeats on, as the agents' are) that flood the
    ROUTER, then all close at once: with unread input and LINGER 0 (a reset) or after reading
    everything (a clean close). Reconnect and repeat until ``seconds`` have passed."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    end = time.monotonic() + seconds
    body = b"y" * 4096
    while time.monotonic() < end:
        socks: list[zmq.Socket[bytes]] = []
        for i in range(dealers):
            s = ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.ROUTING_ID, b"d%d" % i)
            s.setsockopt(zmq.LINGER, 0)
            s.setsockopt(zmq.SNDHWM, hwm)
            s.setsockopt(zmq.RCVHWM, 1 if pattern != "behind-fin" else hwm)
            s.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_IVL_MS)
            s.setsockopt(zmq.HEARTBEAT_TIMEOUT, 5000)
            s.connect(f"tcp://127.0.0.1:{port}")
            socks.append(s)
        flood_until = time.monotonic() + 0.3 + (0.7 * (time.monotonic() % 1.0))  # phases vary
        while time.monotonic() < flood_until:
            for s in socks:
                with contextlib.suppress(zmq.Again):
                    s.send(body, zmq.NOBLOCK)
                if pattern == "behind-fin":
                    try:
                        while True:
                            s.recv(zmq.NOBLOCK)
                    except zmq.Again:
                        pass
        for s in socks:
            s.close(linger=0)
    ctx.term()
    return 0


def trial(pattern: str, seconds: float, stall: float, dealers: int, hwm: int) -> tuple[int | None, str]:
    """One trial: both children for ``seconds``; (the ROUTER child's return code, its stderr)."""
    port = free_port()
    me = os.path.abspath(__file__)
    common = [str(port), pattern, str(seconds), str(dealers), str(hwm)]
    router = subprocess.Popen([sys.executable, me, "--as-router", *common, str(stall)], stderr=subprocess.PIPE,
                              start_new_session=True)
    time.sleep(0.3)  # the bind; the dealers reconnect anyway
    dealer = subprocess.Popen([sys.executable, me, "--as-dealers", *common], stderr=subprocess.DEVNULL,
                              start_new_session=True)
    procs = (router, dealer)
    try:
        _, err = router.communicate(timeout=seconds + 30)
    except subprocess.TimeoutExpired:
        err = b""
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    return router.returncode, err.decode(errors="replace")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--as-router":
        port, pattern, seconds, dealers, hwm, stall = sys.argv[2:8]
        sys.exit(router_child(int(port), pattern, float(seconds), float(stall), int(dealers), int(hwm)))
    if len(sys.argv) > 1 and sys.argv[1] == "--as-dealers":
        port, pattern, seconds, dealers, hwm = sys.argv[2:7]
        sys.exit(dealer_child(int(port), pattern, float(seconds), int(dealers), int(hwm)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="length of one trial")
    ap.add_argument("--trials", type=int, default=3, help="trials per pattern")
    ap.add_argument("--dealers", type=int, default=256)
    ap.add_argument("--hwm", type=int, default=10, help="SNDHWM/RCVHWM of both sides (the project's: 10000)")
    ap.add_argument("--stall", type=float, default=3.0, help="seconds the ROUTER does not read, each turn")
    ap.add_argument("--patterns", default=",".join(PATTERNS))
    args = ap.parse_args()
    print(f"libzmq {zmq.zmq_version()} (pyzmq {zmq.pyzmq_version()}), heartbeat {HEARTBEAT_IVL_MS} ms, "
          f"{args.dealers} dealers, hwm {args.hwm}, stall {args.stall}s, {args.trials} x {args.seconds}s a pattern")
    for pattern in args.patterns.split(","):
        aborts, seen = 0, set()
        for _ in range(args.trials):
            code, err = trial(pattern, args.seconds, args.stall, args.dealers, args.hwm)
            if code == -signal.SIGABRT:
                aborts += 1
                seen.update(line for line in err.splitlines() if "Assertion" in line)
            elif code not in (0, None):
                seen.add(f"exit {code}: {err.strip().splitlines()[-1:] }")
        print(f"{pattern:12s} trials {args.trials}  aborts {aborts}  {'; '.join(sorted(seen)) or '-'}", flush=True)


if __name__ == "__main__":
    main()

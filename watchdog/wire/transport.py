"""pyzmq sockets for the coordinator/agent link: a thin shell, no message logic.

The coordinator binds a ROUTER; each agent connects a DEALER. Agents send signed messages,
the coordinator answers with signed commands (acks included) addressed by ZeroMQ routing id.
Every option that decides whether data can be lost or a process can hang is set explicitly:

* ``LINGER``: how long ``close()`` may wait to flush (0 for the coordinator: a stopping
  coordinator must not hang on a dead agent; short for agents).
* ``IMMEDIATE`` on the agent: queue only on a live connection, so while the coordinator is
  away ``send`` fails at once and the agent's own bounded buffer (which resends) holds the data
  instead of an invisible libzmq queue (a connected PUSH queues up to SNDHWM messages in silence).
* ``ROUTER_MANDATORY`` on the coordinator: a command to a vanished agent fails loudly (counted)
  instead of being discarded in silence.
* ZMTP heartbeats: a peer that vanished without closing TCP (power loss, netns torn down) is
  noticed within ``HEARTBEAT_TIMEOUT`` and the DEALER reconnects.
* ``MAXMSGSIZE``: a peer cannot make the coordinator allocate without bound.
"""

from __future__ import annotations

import errno
import re

import zmq

from neuron_watch.errors import TransportError
from neuron_watch.wire.protocol import MAX_FRAME_BYTES

HEARTBEAT_IVL_MS = 1000
HEARTBEAT_TIMEOUT_MS = 5000


def endpoint_of(address: str) -> str:
    """``HOST:PORT`` (or a ``tcp://``/``ipc://`` URL) -> a ZeroMQ endpoint. Port 0 -> any free port.

    Raises:
        TransportError: the address is neither.
    """
    if "://" in address:
        return address
    m = re.fullmatch(r"\[?([^\[\]\s]+?)\]?:(\d{1,5}|\*)", address)
    if not m:
        raise TransportError(f"not an address: {address!r}", "use HOST:PORT, e.g. 10.0.0.5:29400")
    port = "*" if m.group(2) in ("0", "*") else m.group(2)
    return f"tcp://{m.group(1)}:{port}"


def _common(sock: zmq.Socket[bytes], linger_ms: int, hwm: int) -> None:
    sock.setsockopt(zmq.LINGER, linger_ms)
    sock.setsockopt(zmq.SNDHWM, hwm)
    sock.setsockopt(zmq.RCVHWM, hwm)
    sock.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME_BYTES + 4096)
    sock.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_IVL_MS)
    sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT_MS)
    sock.setsockopt(zmq.HEARTBEAT_TTL, HEARTBEAT_TIMEOUT_MS)


class PortInUse(TransportError):
    """The coordinator's port is held by another process of this host: another job's coordinator, a
    coordinator of this job that another node of it started first, or another program."""

    def __init__(self, endpoint: str) -> None:
        super().__init__(f"cannot bind the coordinator to {endpoint}: the port is already in use on this host "
                         "(another job's coordinator, or another program, holds it)",
                         "give this job its own coordinator port on every node: --coordinator HOST:PORT")
        self.endpoint = endpoint


class CoordinatorSocket:
    """The coordinator's bound ROUTER. ``endpoint`` is the address actually bound (LAST_ENDPOINT)."""

    def __init__(self, address: str, *, ctx: zmq.Context[zmq.Socket[bytes]] | None = None,
                 linger_ms: int = 0, hwm: int = 10000) -> None:
        self._own_ctx = ctx is None
        self.ctx = ctx or zmq.Context()
        self.sock: zmq.Socket[bytes] = self.ctx.socket(zmq.ROUTER)
        _common(self.sock, linger_ms, hwm)
        self.sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        ep = endpoint_of(address)
        try:
            self.sock.bind(ep)
        except zmq.ZMQError as exc:
            self.close()
            if exc.errno == errno.EADDRINUSE:
                raise PortInUse(ep) from exc
            raise TransportError(f"cannot bind the coordinator to {ep}: {exc.strerror}",
                                 "pick a free port (HOST:0 picks one) and an address of this host") from exc
        last = self.sock.getsockopt(zmq.LAST_ENDPOINT)
        self.endpoint = last.decode() if isinstance(last, bytes) else str(last)

    def poll(self, timeout_ms: int) -> bool:
        """True when a message can be received; waits at most ``timeout_ms``."""
        return bool(self.sock.poll(timeout_ms, zmq.POLLIN))

    def recv(self) -> tuple[bytes, list[bytes]] | None:
        """``(routing_id, frames)`` of the next message, or None if none is waiting."""
        try:
            parts = self.sock.recv_multipart(zmq.NOBLOCK, copy=True)
        except zmq.Again:
            return None
        return parts[0], parts[1:]

    def send(self, routing_id: bytes, frames: list[bytes]) -> bool:
        """Queue ``frames`` for one agent; False if it is gone or its queue is full (caller counts)."""
        try:
            self.sock.send_multipart([routing_id, *frames], zmq.NOBLOCK)
        except (zmq.Again, zmq.ZMQError):
            return False
        return True

    def close(self) -> None:
        self.sock.close(linger=0)
        if self._own_ctx:
            self.ctx.term()


class AgentSocket:
    """An agent's DEALER connected to the coordinator (libzmq reconnects by itself)."""

    def __init__(self, address: str, *, ctx: zmq.Context[zmq.Socket[bytes]] | None = None,
                 linger_ms: int = 200, hwm: int = 1000) -> None:
        self._own_ctx = ctx is None
        self.ctx = ctx or zmq.Context()
        self.sock: zmq.Socket[bytes] = self.ctx.socket(zmq.DEALER)
        _common(self.sock, linger_ms, hwm)
        self.sock.setsockopt(zmq.IMMEDIATE, 1)
        self.sock.setsockopt(zmq.RECONNECT_IVL, 100)
        self.sock.setsockopt(zmq.RECONNECT_IVL_MAX, 2000)
        self.endpoint = endpoint_of(address)
        try:
            self.sock.connect(self.endpoint)
        except zmq.ZMQError as exc:
            self.close()
            raise TransportError(f"cannot connect to the coordinator at {self.endpoint}: {exc.strerror}",
                                 "check --coordinator HOST:PORT") from exc

    def poll(self, timeout_ms: int) -> bool:
        return bool(self.sock.poll(timeout_ms, zmq.POLLIN))

    def recv(self) -> list[bytes] | None:
        """The next message's frames, or None if none is waiting."""
        try:
            return self.sock.recv_multipart(zmq.NOBLOCK, copy=True)
        except zmq.Again:
            return None

    def send(self, frames: list[bytes]) -> bool:
        """Hand ``frames`` to libzmq; False while no connection is up or its queue is full."""
        try:
            self.sock.send_multipart(frames, zmq.NOBLOCK)
        except zmq.Again:
            return False
        return True

    def close(self) -> None:
        self.sock.close()
        if self._own_ctx:
            self.ctx.term()

"""One request in flight per rank socket from the node (rank_probe.call_handler): the probe's
``fr_trace_json`` polls and a capture's stacks take turns. A stand-in worker server on a unix socket
in this process (no torch) holds each request until the test lets it go."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from neuron_watch.node.rank_probe import STACKS_HANDLER, call_handler, remove_probe_dir


class HeldServer:
    """Answers each request only when the test releases it; counts requests being handled at once."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(path)
        self.listener.listen(8)
        self.release = threading.Semaphore(0)
        self.arrived = threading.Semaphore(0)
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most_at_once = 0
        self.handlers: list[str] = []
        self.threads: list[threading.Thread] = []
        self.acceptor = threading.Thread(target=self._accept, daemon=True)
        self.acceptor.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                request += chunk
            with self.lock:
                self.in_flight += 1
                self.most_at_once = max(self.most_at_once, self.in_flight)
                self.handlers.append(request.split(b" ")[1].decode().rsplit("/", 1)[1])
            self.arrived.release()
            self.release.acquire()
            with self.lock:
                self.in_flight -= 1
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[HeldServer]:
    s = HeldServer(str(tmp_path / "r0.sock"))
    yield s
    for _ in range(8):
        s.release.release()  # nothing left held
    s.close()
    remove_probe_dir(str(tmp_path))


def test_a_capture_waits_for_the_probes_request_in_flight_then_is_answered(server: HeldServer) -> None:
    answers: dict[str, bytes] = {}

    def ask(handler: str) -> None:
        answers[handler] = call_handler(server.path, handler, timeout=30)

    poll = threading.Thread(target=ask, args=("fr_trace_json",))
    poll.start()
    assert server.arrived.acquire(timeout=30)  # the poll is in the rank's hands
    capture = threading.Thread(target=ask, args=(STACKS_HANDLER,))
    capture.start()  # waits for its turn (the next test shows it is not sent meanwhile)
    server.release.release()
    assert server.arrived.acquire(timeout=30)
    server.release.release()
    poll.join(30)
    capture.join(30)
    assert answers == {"fr_trace_json": b"ok", STACKS_HANDLER: b"ok"}
    assert server.handlers == ["fr_trace_json", STACKS_HANDLER] and server.most_at_once == 1


def test_a_turn_that_does_not_come_within_the_timeout_is_a_timeout_error(server: HeldServer) -> None:
    poll = threading.Thread(target=call_handler, args=(server.path, "fr_trace_json", 30))
    poll.start()
    assert server.arrived.acquire(timeout=30)
    with pytest.raises(TimeoutError, match="still in flight"):
        call_handler(server.path, STACKS_HANDLER, timeout=0.2)
    assert server.handlers == ["fr_trace_json"]  # the rank was never asked twice at once
    server.release.release()
    poll.join(30)


def test_two_ranks_are_asked_at_once(tmp_path: Path) -> None:
    # the turns are per rank socket: a capture of every rank at once stays one tool timeout
    a, b = HeldServer(str(tmp_path / "r0.sock")), HeldServer(str(tmp_path / "r1.sock"))
    try:
        ts = [threading.Thread(target=call_handler, args=(s.path, STACKS_HANDLER, 30)) for s in (a, b)]
        for t in ts:
            t.start()
        assert a.arrived.acquire(timeout=30) and b.arrived.acquire(timeout=30)  # both in flight together
        a.release.release()
        b.release.release()
        for t in ts:
            t.join(30)
    finally:
        a.close()
        b.close()
        remove_probe_dir(str(tmp_path))

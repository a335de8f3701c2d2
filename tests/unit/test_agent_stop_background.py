"""A stop runs beside the agent's loop (a stop in the loop would freeze status and the link for its
whole deadline): :meth:`AgentLink.dispatch` starts it through ``begin_stop``, keeps turning, reports
``stopped`` once it is done, and carries out the commands received meanwhile after it, in order.
No socket: a fake one records what would go out."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from neuron_watch.events import EvidenceReport, StopReport
from neuron_watch.node.agent_link import AgentLink
from neuron_watch.wire.protocol import (
    NO_VERDICT,
    Body,
    Header,
    Launch,
    Msg,
    Status,
    Stop,
    decode,
    encode_header,
    kind_of,
)


class FakeSocket:
    def __init__(self) -> None:
        self.sent: list[list[bytes]] = []

    def send(self, frames: list[bytes]) -> bool:
        self.sent.append(frames)
        return True

    def recv(self) -> list[bytes] | None:
        return None

    def poll(self, timeout_ms: int) -> bool:
        return False

    def close(self) -> None:
        pass


class Node:
    """A node whose stop the test finishes by hand."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.stop_done = False

    def capture(self, incident: str, reason: str, verdict: Mapping[str, Any] = NO_VERDICT) -> EvidenceReport:
        self.calls.append("capture")
        return EvidenceReport()

    def stop(self, deadline: float, verdict: Mapping[str, Any] = NO_VERDICT) -> StopReport:
        raise AssertionError("the blocking stop must not be used")

    def begin_stop(self, deadline: float, verdict: Mapping[str, Any] = NO_VERDICT) -> Callable[[], StopReport | None]:
        self.calls.append("begin_stop")
        return lambda: StopReport(rung="sigterm") if self.stop_done else None

    def checkpoint(self) -> str:
        return "/ckpt/step_5"

    def launch(self, generation: int, checkpoint: str) -> None:
        self.calls.append(f"launch {generation} {checkpoint}")


def command(body: Body, seq: int) -> Msg:
    return Msg(Header(kind=kind_of(body), job="j", node="coordinator", session=1, generation=0, seq=seq,
                      mono=0.0, wall=0.0, target=5), body)


def statuses(link: AgentLink) -> list[str]:
    out = []
    for i in range(len(link.outbox)):
        p = link.outbox._q[i]
        if p.header.kind.value == "status":
            body = decode([encode_header(p.header), p.body]).body
            assert isinstance(body, Status)
            out.append(body.state)
    return out


def test_commands_wait_for_a_stop_that_runs_in_the_background_and_the_link_keeps_turning() -> None:
    sock = FakeSocket()
    link = AgentLink("tcp://127.0.0.1:1", b"k" * 32, job="j", node="n1", session=5, socket=sock)
    node = Node()
    assert link.dispatch([command(Stop("incident-1", 15.0), 0), command(Launch(1, "/ckpt/step_5"), 1)],
                         node, 0.0, 0.0) is None
    assert node.calls == ["begin_stop"] and link.stop_running
    for t in range(1, 30):  # the loop turns while the stop runs: heartbeats go out, nothing launches
        link.tick(float(t), float(t))
        assert link.dispatch([], node, float(t), float(t)) is None
    assert node.calls == ["begin_stop"] and "stopped" not in statuses(link)
    assert len(sock.sent) > 5  # the link kept sending during the stop (resends of what is unacknowledged)
    node.stop_done = True
    link.dispatch([], node, 30.0, 30.0)
    assert not link.stop_running
    assert node.calls == ["begin_stop", "launch 1 /ckpt/step_5"]  # after the stop, in order
    assert statuses(link)[-2:] == ["stopped", "launched"]

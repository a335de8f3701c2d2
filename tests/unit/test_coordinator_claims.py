"""Two agents claiming one node: the second to reach the coordinator is refused, whichever of them
started first (an agent's session grows with its start time, so the refused one may be the
older). Fake clock; signed messages handed to ``handle``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from neuron_watch.job.coordinator import Coordinator, CoordinatorSettings
from neuron_watch.wire.auth import Signer
from neuron_watch.wire.protocol import Header, Hello, Msg, encode, kind_of
from tests.unit.test_coordinator_progress import COORDINATOR_SESSION, JOB, SECRET, W0, Clock

NODE = "host-n1"


def hello(session: int, pid: int, echo: int) -> list[bytes]:
    h = Header(kind=kind_of(Hello("host", pid)), job=JOB, node=NODE, session=session, generation=0, seq=0,
               base=0, mono=1.0, wall=W0 + 1.0, sent=1.0, echo=echo)
    return Signer.for_agent(SECRET, JOB).sign(encode(Msg(h, Hello("host", pid, place=1))))


def coordinator(tmp_path: Path, nodes: int) -> Coordinator:
    """A coordinator of ``nodes`` expected nodes on a fake clock that never declares a node silent."""
    clock = Clock()
    return Coordinator("127.0.0.1:0", SECRET, str(tmp_path / "run"), job=JOB,
                       settings=CoordinatorSettings(expected_nodes=nodes, silence=1e6), clock=clock.mono,
                       wall=clock.wall, announce=False, session=COORDINATOR_SESSION)


def named(coord: Coordinator, name: str) -> list[dict[str, Any]]:
    return [e for e in coord.events.history if e["event"] == name]


@pytest.mark.parametrize("second_session", [100, 300], ids=["second-started-first", "second-started-last"])
def test_the_second_claimant_is_challenged_and_refused_whichever_started_first(
        tmp_path: Path, second_session: int) -> None:
    coord = coordinator(tmp_path, nodes=2)
    try:
        coord.handle(b"first", hello(200, 11, COORDINATOR_SESSION), 1.0)
        assert [e["node"] for e in named(coord, "node_joined")] == [NODE]
        # the other agent has not learnt our session yet: it must be told it, or it waits forever
        challenges = coord.counters.challenges
        coord.handle(b"second", hello(second_session, 22, 0), 1.1)
        assert coord.counters.challenges == challenges + 1
        coord.handle(b"second", hello(second_session, 22, COORDINATOR_SESSION), 1.7)
        (refusal,) = named(coord, "node_refused")
        assert refusal["node"] == NODE and refusal["place"] == 1 and "(pid 11" in refusal["reason"]
        assert "(pid 22)" in refusal["reason"] and len(named(coord, "node_joined")) == 1
        # the holder is still the first agent
        assert coord.nodes[NODE].session == 200 and coord.nodes[NODE].pid == 11
    finally:
        coord.close()


def test_a_replay_of_the_holders_own_unechoed_frame_gets_no_challenge(tmp_path: Path) -> None:
    coord = coordinator(tmp_path, nodes=2)
    try:
        coord.handle(b"first", hello(200, 11, COORDINATOR_SESSION), 1.0)
        challenges = coord.counters.challenges
        coord.handle(b"elsewhere", hello(200, 11, 0), 2.0)  # its first, unechoed frame, replayed
        assert coord.counters.challenges == challenges and not named(coord, "node_refused")
    finally:
        coord.close()


def test_a_stop_broadcast_with_no_verdict_is_an_event_with_an_empty_map(tmp_path: Path) -> None:
    """A signal's stop carries the read-only empty verdict map (protocol.NO_VERDICT): its command
    event must still be written (a deep copy of the map raised, and the wrapper exited 1 on SIGTERM)."""
    from types import MappingProxyType

    from neuron_watch.wire.protocol import NO_VERDICT, Stop

    coord = coordinator(tmp_path, nodes=1)
    try:
        coord.broadcast(Stop("signal 15", 10.0, NO_VERDICT))
        coord.broadcast(Stop("incident 1", 10.0, MappingProxyType({"label": "collective_hang", "ranks": ("n/0",)})))
        stops = [e for e in named(coord, "command") if e["command"] == "stop"]
        assert [e["verdict"] for e in stops] == [{}, {"label": "collective_hang", "ranks": ["n/0"]}]
    finally:
        coord.close()

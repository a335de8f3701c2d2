"""Coordinator and agent links over real ZeroMQ sockets on loopback.

Each test binds ``tcp://127.0.0.1:0`` and reads the bound endpoint (LAST_ENDPOINT), so tests
never collide on ports. Waiting is polling with a deadline for the real sockets to deliver.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from neuron_watch.diagnosis.judge import Judge
from neuron_watch.errors import TransportError
from neuron_watch.events import EvidenceReport, LogLine, RankKey, StopReport
from neuron_watch.job.coordinator import Coordinator, CoordinatorSettings, NodeState
from neuron_watch.node.agent_link import AgentLink, new_session
from neuron_watch.node.link_commands import JobRefused
from neuron_watch.node.link_settings import LinkSettings
from neuron_watch.wire.auth import Signer
from neuron_watch.wire.protocol import NO_VERDICT, Header, Kind, Msg, Refused, Stop, encode
from neuron_watch.wire.transport import CoordinatorSocket

pytestmark = pytest.mark.integration

SECRET = b"a job secret of enough bytes 0123456789"
JOB = "job-7"


def pump(coords: list[Coordinator], links: list[AgentLink], until: Callable[[], bool], deadline: float = 15.0,
         commands: list[Msg] | None = None) -> None:
    """Drive every loop until ``until()`` holds; fail after ``deadline`` seconds of real time."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        now, wall = time.monotonic(), time.time()
        for link in links:
            got = link.tick(now, wall)
            if commands is not None:
                commands.extend(got)
        for c in coords:
            c.poll(0.005)
            c.tick(time.monotonic())
        if until():
            return
    raise AssertionError("condition not reached before the deadline")


def make_link(endpoint: str, node: str = "node1", secret: bytes = SECRET, **settings: float) -> AgentLink:
    s = LinkSettings(**settings) if settings else LinkSettings()  # type: ignore[arg-type]
    return AgentLink(endpoint, secret, job=JOB, node=node, session=new_session(time.time()), settings=s)


def merged(run_dir: Path) -> list[str]:
    return [ln.split(" | ", 1)[1] for ln in (run_dir / "merged.log").read_text().splitlines()]


def rank_lines(run_dir: Path, tag: str) -> list[str]:
    """The texts merged.log holds for one ``node/rankN``, in file order."""
    return [ln.split(" | ", 1)[1] for ln in (run_dir / "merged.log").read_text().splitlines()
            if ln.split(" | ", 1)[0].endswith(" " + tag)]


@pytest.fixture
def coordinator(tmp_path: Path):  # type: ignore[no-untyped-def]
    c = Coordinator("127.0.0.1:0", SECRET, str(tmp_path / "coord"), job=JOB)
    yield c
    c.close()


def test_lines_arrive_in_order_acked_and_tagged(coordinator: Coordinator, tmp_path: Path) -> None:
    assert coordinator.endpoint.startswith("tcp://127.0.0.1:") and not coordinator.endpoint.endswith(":0")
    a, b = make_link(coordinator.endpoint, "node1"), make_link(coordinator.endpoint, "node2")
    try:
        now, wall = time.monotonic(), time.time()
        a.hello("host-a", 11, [0, 1], now, wall)
        for i in range(1000):
            a.add_line(LogLine(RankKey(a.node, i % 2), f"step {i}", now, wall, "/logs/r.log", i))
            b.add_line(LogLine(RankKey(b.node, 2), f"b {i}", now, wall))
        pump([coordinator], [a, b], lambda: coordinator.counters.lines == 2000 and len(a.outbox) == 0
             and len(b.outbox) == 0)
        coordinator.tick(time.monotonic())
        # Each rank's lines in order (a batch groups a node's lines per rank).
        assert rank_lines(tmp_path / "coord", "node1/rank0") == [f"step {i}" for i in range(0, 1000, 2)]
        assert rank_lines(tmp_path / "coord", "node1/rank1") == [f"step {i}" for i in range(1, 1000, 2)]
        assert rank_lines(tmp_path / "coord", "node2/rank2") == [f"b {i}" for i in range(1000)]
        assert len(merged(tmp_path / "coord")) == 2000
        assert coordinator.tail(RankKey("node1", 1), 3) == ["step 995", "step 997", "step 999"]
        assert len(coordinator.tail(RankKey("node2", 2))) == coordinator.settings.tail_lines
        s = coordinator.summary(time.monotonic())
        assert s["nodes"]["node1"]["hostname"] == "host-a" and s["nodes"]["node1"]["ranks"] == [0, 1]
        assert s["nodes"]["node1"]["seq"]["lost"] == 0 and s["refused"]["bad"] == {}
    finally:
        a.close()
        b.close()


def test_wrong_secret_is_refused_and_counted(coordinator: Coordinator) -> None:
    bad = make_link(coordinator.endpoint, "intruder", secret=b"not the job secret, 32 bytes long")
    try:
        now, wall = time.monotonic(), time.time()
        for i in range(20):
            bad.add_line(LogLine(RankKey(bad.node, 0), f"fake {i}", now, wall))
        bad.flush_lines(now, wall)
        pump([coordinator], [bad], lambda: coordinator.counters.bad.get("auth", 0) >= 1)
        assert coordinator.nodes == {} and coordinator.counters.lines == 0
        assert len(bad.outbox) == 1  # never acknowledged: nobody accepted it
    finally:
        bad.close()


def test_agent_takes_commands_only_from_the_coordinator(coordinator: Coordinator) -> None:
    link = make_link(coordinator.endpoint)
    got: list[Msg] = []
    try:
        link.hello("h", 1, [0], time.monotonic(), time.time())
        pump([coordinator], [link], lambda: "node1" in coordinator.nodes and link.last_heard is not None)
        view = coordinator.nodes["node1"]

        def forged(signer: Signer, seq: int, target: int, job: str = JOB) -> list[bytes]:
            h = Header(kind=Kind.STOP, job=job, node="coordinator", session=coordinator.session + 1, generation=0,
                       seq=seq, target=target)
            return signer.sign(encode(Msg(h, Stop("forged", 0.0))))

        sends = [
            forged(Signer.for_coordinator(b"another secret, also 32 bytes!!", JOB), 10_000, view.session),  # no secret
            forged(Signer.for_agent(SECRET, JOB), 10_001, view.session),  # agent key: reflection
            forged(Signer.for_coordinator(SECRET, JOB), 10_002, view.session + 1),  # another agent session
            forged(Signer.for_coordinator(SECRET, JOB), 10_003, view.session, job="other-job"),  # another job
            [b"\x00garbage"],
        ]
        for frames in sends:
            assert coordinator.sock.send(view.routing_id, frames)
        pump([coordinator], [link], lambda: link.counters.bad_frames + link.counters.wrong_target >= 5,
             commands=got)
        assert got == []
        assert link.counters.bad_by_problem == {"auth": 3} and link.counters.wrong_target == 2
        # The real coordinator's command is accepted, exactly once even if replayed.
        assert coordinator.send("node1", Stop("real", 5.0))
        pump([coordinator], [link], lambda: bool(got), commands=got)
        assert [type(m.body).__name__ for m in got] == ["Stop"] and got[0].body == Stop("real", 5.0)
    finally:
        link.close()


def test_replayed_agent_messages_are_ingested_once(coordinator: Coordinator) -> None:
    link = make_link(coordinator.endpoint)
    try:
        now, wall = time.monotonic(), time.time()
        link.add_line(LogLine(RankKey(link.node, 0), "only once", now, wall))
        link.flush_lines(now, wall)
        pump([coordinator], [link], lambda: coordinator.counters.lines == 1 and len(link.outbox) == 0)
        link.outbox._q.clear()
        link.outbox.next_seq = 0
        link.add_line(LogLine(RankKey(link.node, 0), "only once", now, wall))
        link.flush_lines(now, wall)
        pump([coordinator], [link], lambda: coordinator.counters.duplicates >= 1)
        assert coordinator.counters.lines == 1
    finally:
        link.close()


def _rebind(address: str, run_dir: Path) -> Coordinator:
    # libzmq closes asynchronously: the old port can be busy for a moment (EADDRINUSE).
    end = time.monotonic() + 10
    while True:
        try:
            return Coordinator(address, SECRET, str(run_dir), job=JOB)
        except TransportError:
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


def test_reconnect_resends_everything_in_order(tmp_path: Path) -> None:
    run = tmp_path / "coord"
    first = Coordinator("127.0.0.1:0", SECRET, str(run), job=JOB)
    address = first.endpoint.removeprefix("tcp://")
    link = make_link(first.endpoint, resend_after=0.3, batch_lines=500)
    try:
        now, wall = time.monotonic(), time.time()
        for i in range(100):
            link.add_line(LogLine(RankKey(link.node, 0), f"line {i}", now, wall))
        pump([first], [link], lambda: first.counters.lines == 100 and len(link.outbox) == 0)
        first.close()
        for i in range(100, 600):  # coordinator away: the agent buffers
            link.add_line(LogLine(RankKey(link.node, 0), f"line {i}", time.monotonic(), time.time()))
        link.tick(time.monotonic(), time.time())
        assert link.outbox.lines == 500 and link.outbox.dropped_lines == 0
        second = _rebind(address, run)
        try:
            pump([second], [link], lambda: second.counters.lines >= 500 and len(link.outbox) == 0)
            second.tick(time.monotonic())
            assert merged(run) == [f"line {i}" for i in range(600)]
            assert second.summary(time.monotonic())["nodes"]["node1"]["seq"]["lost"] == 0
        finally:
            second.close()
    finally:
        link.close()


def test_overflow_beyond_the_buffer_is_counted_and_reported(tmp_path: Path) -> None:
    probe = CoordinatorSocket("127.0.0.1:0")
    address = probe.endpoint.removeprefix("tcp://")
    probe.close()
    link = make_link(f"tcp://{address}", batch_lines=10, max_lines=100, resend_after=0.3)
    try:
        for i in range(300):  # nobody listening: 30 batches of 10, room for 10 of them
            link.add_line(LogLine(RankKey(link.node, 0), f"line {i}", time.monotonic(), time.time()))
        link.tick(time.monotonic(), time.time())
        assert (link.outbox.lines, link.outbox.dropped_lines, link.outbox.dropped_msgs) == (100, 200, 20)
        coord = _rebind(address, tmp_path / "coord")
        try:
            pump([coord], [link], lambda: coord.counters.lines >= 100 and len(link.outbox) == 0
                 and coord.nodes["node1"].reported_dropped_lines == 200)
            coord.tick(time.monotonic())
            assert merged(tmp_path / "coord") == [f"line {i}" for i in range(200, 300)]
            node = coord.summary(time.monotonic())["nodes"]["node1"]
            assert node["agent_dropped_lines"] == 200 and node["agent_dropped_msgs"] == 20
            events = (tmp_path / "coord" / "events.jsonl").read_text()
            assert '"event": "agent_dropped"' in events
        finally:
            coord.close()
    finally:
        link.close()


def test_a_silent_node_is_unobserved_never_healthy(coordinator: Coordinator) -> None:
    coordinator.settings = CoordinatorSettings(silence=5.0)
    link = make_link(coordinator.endpoint)
    try:
        link.hello("h", 1, [0], time.monotonic(), time.time())
        pump([coordinator], [link], lambda: "node1" in coordinator.nodes)
        later = time.monotonic() + 60  # the clock is an argument: no sleeping
        coordinator.tick(later)
        s = coordinator.summary(later)
        assert s["nodes"]["node1"]["state"] == "unobserved" and s["nodes"]["node1"]["last_heard_ago"] >= 60
        link.add_line(LogLine(RankKey(link.node, 0), "back", time.monotonic(), time.time()))
        link.flush_lines(time.monotonic(), time.time())
        pump([coordinator], [link], lambda: coordinator.nodes["node1"].state is NodeState.CONNECTED)
    finally:
        link.close()


class RecordingNode:
    """Stands in for the node's supervisor behind :class:`NodeControl` (records what it was told)."""

    def __init__(self, checkpoint: str) -> None:
        self.calls: list[tuple[object, ...]] = []
        self._checkpoint = checkpoint

    def capture(self, incident: str, reason: str, verdict: Mapping[str, Any] = NO_VERDICT) -> EvidenceReport:
        self.calls.append(("capture", incident.split("-")[-1]))
        return EvidenceReport(bundle=f"/bundles/{incident}")

    def stop(self, deadline: float, verdict: Mapping[str, Any] = NO_VERDICT) -> StopReport:
        self.calls.append(("stop", deadline))
        return StopReport(rung="sigterm", seconds=0.1)

    def checkpoint(self) -> str:
        return self._checkpoint

    def launch(self, generation: int, checkpoint: str) -> None:
        self.calls.append(("launch", generation, checkpoint))


def test_a_hang_on_one_node_restarts_every_node_from_one_checkpoint(tmp_path: Path) -> None:
    from neuron_watch.config import WatchConfig
    from neuron_watch.job.coordinator import Phase
    from neuron_watch.runtime import default_judge_factory

    coord = Coordinator("127.0.0.1:0", SECRET, str(tmp_path / "coord"), job=JOB,
                        settings=CoordinatorSettings(expected_nodes=2, silence=1e6, stop_timeout=7.0),
                        judge_factory=default_judge_factory(WatchConfig(hang_timeout=30.0)))
    links = [make_link(coord.endpoint, "node0"), make_link(coord.endpoint, "node1")]
    # The nodes see different newest checkpoints (node1's copy is further); one is chosen for all.
    nodes = {"node0": RecordingNode("/ckpt/step_2"), "node1": RecordingNode("/ckpt/step_3")}
    try:
        t0, wall = time.monotonic(), time.time()
        for n, link in enumerate(links):
            link.hello(f"h{n}", 1, [2 * n, 2 * n + 1], t0, wall)
            for step in range(1, 4):
                for r in (2 * n, 2 * n + 1):
                    link.add_line(LogLine(RankKey(link.node, r), f"step {step} loss 2.{step}", t0, wall))
            link.flush_lines(t0, wall)

        def drive(until: Callable[[], bool], now: float) -> None:
            end = time.monotonic() + 15
            while not until():
                assert time.monotonic() < end, "not reached before the deadline"
                for link in links:
                    m, w = time.monotonic(), time.time()
                    assert link.dispatch(link.tick(m, w), nodes[link.node], m, w) is None
                coord.poll(0.005)
                coord.tick(now)

        drive(lambda: coord.counters.lines == 12, time.monotonic())
        assert coord.phase is Phase.RUNNING and all(n.calls == [] for n in nodes.values())
        hung_at = time.monotonic() + 100  # nobody progressed for 100 s > hang timeout 30 s
        drive(lambda: all(len(n.calls) == 3 for n in nodes.values()) and coord.phase is Phase.RUNNING, hung_at)
        assert coord.last_verdict is not None and coord.last_verdict.label.value == "collective_hang"
        for node in nodes.values():
            assert node.calls == [("capture", "1"), ("stop", 7.0), ("launch", 1, "/ckpt/step_3")]
        assert coord.generation == 1 and all(link.generation == 1 for link in links)
        drive(lambda: all(v.status == "launched" for v in coord.nodes.values()), hung_at)
        events = [json.loads(x) for x in (tmp_path / "coord" / "events.jsonl").read_text().splitlines()]
        phases = [e["phase"] for e in events if e["event"] == "recovery_phase"]
        assert phases == ["running", "capturing", "stopping", "restarting", "starting", "running"]
        assert [e["checkpoint"] for e in events if e["event"] == "restart"] == ["/ckpt/step_3"]
    finally:
        for link in links:
            link.close()
        coord.close()


def test_shutdown_ends_every_node_with_the_exit_code(tmp_path: Path) -> None:
    from neuron_watch.diagnosis.judge import JudgeSettings
    from neuron_watch.diagnosis.kb import default_knowledge_base
    from neuron_watch.events import Action, Label, Verdict

    class StopJudge(Judge):
        """A verdict that must not be restarted (a configuration error on node1)."""

        def verdict(self, now: float, final: bool = False) -> Verdict:
            return Verdict(Label.CONFIG_ERROR, Action.STOP, reason="EFA is off on node1")

    coord = Coordinator("127.0.0.1:0", SECRET, str(tmp_path / "coord"), job=JOB,
                        settings=CoordinatorSettings(expected_nodes=2, silence=1e6),
                        judge_factory=lambda g, now: StopJudge(default_knowledge_base(), JudgeSettings(), now))
    links = [make_link(coord.endpoint, "node0"), make_link(coord.endpoint, "node1")]
    nodes = {"node0": RecordingNode(""), "node1": RecordingNode("")}
    codes: dict[str, int] = {}
    try:
        for link in links:
            link.hello("h", 1, [0], time.monotonic(), time.time())
        end = time.monotonic() + 15
        while len(codes) < 2:
            assert time.monotonic() < end
            for link in links:
                m, w = time.monotonic(), time.time()
                code = link.dispatch(link.tick(m, w), nodes[link.node], m, w)
                if code is not None:
                    codes[link.node] = code
            coord.poll(0.005)
            coord.tick(time.monotonic())
        assert codes == {"node0": 4, "node1": 4} and coord.exit_code == 4
        assert all([c[0] for c in n.calls] == ["capture", "stop"] for n in nodes.values())
    finally:
        for link in links:
            link.close()
        coord.close()


@pytest.mark.parametrize("agent_regex, classified", [(None, True), (r"it=(?P<step>\d+)", False), ("", False)])
def test_agents_classify_their_lines_when_their_table_is_the_coordinators(
        tmp_path: Path, agent_regex: str | None, classified: bool) -> None:
    """Same table: the coordinator takes the agent's matches. Another table (or none): it classifies."""
    from neuron_watch.config import WatchConfig
    from neuron_watch.diagnosis.kb import default_knowledge_base
    from neuron_watch.runtime import default_judge_factory

    coord = Coordinator("127.0.0.1:0", SECRET, str(tmp_path / "coord"), job=JOB,
                        settings=CoordinatorSettings(silence=1e6),
                        judge_factory=default_judge_factory(WatchConfig(hang_timeout=30.0)))
    link = make_link(coord.endpoint)
    if agent_regex != "":
        link.set_knowledge_base(default_knowledge_base(agent_regex))
    try:
        now, wall = time.monotonic(), time.time()
        for step in range(1, 301):
            for r in range(4):
                link.add_line(LogLine(RankKey(link.node, r), f"step {step} loss 2.{step}", now, wall,
                                      f"/logs/{r}.log", step))
        link.add_line(LogLine(RankKey(link.node, 2), "CCOM WARN Timeout waiting for RX (waited 120 sec) - retrying",
                              now, wall))
        link.flush_lines(now, wall)
        pump([coord], [link], lambda: coord.counters.lines == 1201 and len(link.outbox) == 0)
        assert (coord.counters.unclassified_batches == 0) is classified
        judge = coord.judge
        assert isinstance(judge, Judge)
        assert judge.max_step == 300 and [st.step for st in judge.ranks.values()] == [300] * 4
        assert judge.ranks[RankKey("node1", 2)].last_wait_line is not None
        assert judge.ranks[RankKey("node1", 3)].progress_line().lineno == (300 if classified else 0)  # type: ignore[union-attr]
    finally:
        link.close()
        coord.close()


def _refusal(link: AgentLink, coordinator: Coordinator) -> JobRefused:
    """Drive ``link`` until the coordinator's refusal reaches it; the refusal it raises."""
    got: list[Msg] = []
    pump([coordinator], [link], lambda: any(isinstance(m.body, Refused) for m in got), commands=got)
    with pytest.raises(JobRefused) as ei:
        link.dispatch(got, RecordingNode(""), time.monotonic(), time.time())
    return ei.value


def test_a_second_live_agent_claiming_a_nodes_name_is_refused_naming_both_hosts(coordinator: Coordinator) -> None:
    """Nodes are known by their place; two live agents with one name (two nodes that share a host
    name, given the same NEURON_WATCH_NODE) were merged into one node, and a hang of that job was
    never judged. The newcomer is refused, the holder goes on."""
    first, second = make_link(coordinator.endpoint, "trn-a"), make_link(coordinator.endpoint, "trn-a")
    try:
        first.hello("host-a", 101, [0, 1], time.monotonic(), time.time(), place=0)
        pump([coordinator], [first], lambda: coordinator.nodes.get("trn-a") is not None
             and coordinator.nodes["trn-a"].place == 0)
        second.hello("host-b", 202, [2, 3], time.monotonic(), time.time(), place=1)
        refused = _refusal(second, coordinator)
        assert refused.same_job and "host-a (pid 101" in refused.reason and "host-b (pid 202)" in refused.reason
        first.add_line(LogLine(RankKey(first.node, 0), "step 5 loss 1.0", time.monotonic(), time.time()))
        pump([coordinator], [first], lambda: coordinator.counters.lines == 1)
        view = coordinator.nodes["trn-a"]
        assert (view.session, view.hostname, view.place) == (first.session, "host-a", 0)
        names = [e["event"] for e in coordinator.events.history]
        assert names.count("node_refused") == 1 and "node_rejoined" not in names
    finally:
        first.close()
        second.close()


def test_a_second_live_agent_claiming_a_nodes_place_is_refused(coordinator: Coordinator) -> None:
    first, second = make_link(coordinator.endpoint, "trn-a"), make_link(coordinator.endpoint, "trn-b")
    try:
        first.hello("host-a", 101, [2, 3], time.monotonic(), time.time(), place=1)
        pump([coordinator], [first], lambda: "trn-a" in coordinator.nodes and coordinator.nodes["trn-a"].place == 1)
        second.hello("host-b", 202, [2, 3], time.monotonic(), time.time(), place=1)
        refused = _refusal(second, coordinator)
        assert "place 1" in refused.reason and "'trn-a' on host-a" in refused.reason
        assert "trn-b" not in coordinator.nodes
    finally:
        first.close()
        second.close()


def test_an_agent_that_really_restarted_takes_its_place_once_the_old_session_is_silent(tmp_path: Path) -> None:
    """A restarted agent is told apart by its session: its predecessor fell silent."""
    skew = [0.0]
    coord = Coordinator("127.0.0.1:0", SECRET, str(tmp_path / "coord"), job=JOB,
                        settings=CoordinatorSettings(silence=5.0), clock=lambda: time.monotonic() + skew[0])
    old, new = make_link(coord.endpoint, "trn-a"), make_link(coord.endpoint, "trn-a")
    try:
        old.hello("host-a", 101, [0], time.monotonic(), time.time(), place=0)
        pump([coord], [old], lambda: "trn-a" in coord.nodes and coord.nodes["trn-a"].place == 0)
        old.close()
        skew[0] = 30.0  # the old agent has been silent for 30 s > silence (the clock is an argument)
        new.hello("host-a", 303, [0], time.monotonic(), time.time(), place=0)
        pump([coord], [new], lambda: coord.nodes["trn-a"].session == new.session and coord.nodes["trn-a"].pid == 303)
        names = [e["event"] for e in coord.events.history]
        assert "node_rejoined" in names and "node_refused" not in names
    finally:
        new.close()
        coord.close()

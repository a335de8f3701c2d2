"""The wire format without sockets: round trips, version mismatch, truncated/garbage frames, replay."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import msgpack
import pytest

from neuron_watch import protocol as p
from neuron_watch.protocol import (
    Ack,
    CaptureEvidence,
    Disposition,
    ExitInfo,
    Exits,
    Header,
    Heartbeat,
    Hello,
    Kind,
    Launch,
    Lines,
    Msg,
    Procs,
    ProcSample,
    ProtocolError,
    SequenceTracker,
    Shutdown,
    Status,
    Stop,
    WireLine,
    decode,
    encode,
    kind_of,
)

BODIES = [
    Hello("trn1-node-3", 4242, (0, 1, 2, 3), "0.1.0"),
    Lines((
        WireLine(0, 0.25, 0.25, "step 12 loss 2.3401", "/logs/rank0.log", 88),
        WireLine(3, 0.0, 0.0, "2026-Nov-21 13:05:01.0123 CCOM WARN Timeout waiting for RX (waited 120 sec) - retrying",
                 "", 0),
        WireLine(0, 0.1, 0.1, "ünïcødé ✓", "/logs/rank0.log", 89),
    )),
    Heartbeat(3, 120, 2),
    Procs((ProcSample(1, 5151, 93.5, 0.2),)),
    Exits((ExitInfo(2, -9, 0.0), ExitInfo(-1, 1, 0.5))),
    Status("stopped", "rung=sigkill", "/ckpt/step_1200", 0, 0),
    Ack(41),
    CaptureEvidence("g0-1763730000-collective_hang", "rank 5 stopped progressing"),
    Stop("g0-incident", 15.0),
    Launch(1, "/ckpt/step_1200"),
    Shutdown("config_error: not restartable", 4),
]


def _header(kind: Kind, **kw: object) -> Header:
    base: dict[str, object] = dict(kind=kind, job="1234", node="node1", session=(1763730000 << 12) | 7,
                                   generation=2, seq=17, base=11, mono=1234.5, wall=1763730000.25, rank=-1,
                                   target=0, sent=1234.75)
    base.update(kw)
    return Header(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("body", BODIES, ids=lambda b: type(b).__name__)
def test_round_trip(body: p.Body) -> None:
    msg = Msg(_header(kind_of(body)), body)
    frames = encode(msg)
    assert len(frames) == 2 and all(isinstance(f, bytes) for f in frames)
    assert decode(frames) == msg


def test_lines_send_each_source_once() -> None:
    lines = Lines(tuple(WireLine(0, 0.0, 0.0, f"step {i}", "/very/long/path/to/rank0.log", i) for i in range(50)))
    body = encode(Msg(_header(Kind.LINES), lines))[1]
    assert body.count(b"/very/long/path/to/rank0.log") == 1


def test_commands_and_agent_kinds_are_disjoint() -> None:
    assert {k for k in Kind if k.is_command} == {Kind.ACK, Kind.CAPTURE_EVIDENCE, Kind.STOP, Kind.LAUNCH,
                                                 Kind.SHUTDOWN}
    assert p.AGENT_KINDS.isdisjoint(p.COMMAND_KINDS)


def test_kind_must_match_body() -> None:
    with pytest.raises(ProtocolError) as ei:
        encode(Msg(_header(Kind.STOP), Heartbeat()))
    assert ei.value.problem == "kind"


def test_version_mismatch_names_both_versions() -> None:
    frames = encode(Msg(_header(Kind.HEARTBEAT, version=2), Heartbeat()))
    with pytest.raises(ProtocolError) as ei:
        decode(frames)
    assert ei.value.problem == "version"
    assert "2" in ei.value.message and str(p.SCHEMA_VERSION) in ei.value.message
    # A future header of another shape is still reported as a version mismatch, not garbage.
    with pytest.raises(ProtocolError) as ei:
        decode([msgpack.packb([99, {"new": "layout"}]), frames[1]])
    assert ei.value.problem == "version"


@pytest.mark.parametrize("body", BODIES, ids=lambda b: type(b).__name__)
def test_every_truncation_is_refused(body: p.Body) -> None:
    header, payload = encode(Msg(_header(kind_of(body)), body))
    for cut in range(len(header)):
        with pytest.raises(ProtocolError):
            decode([header[:cut], payload])
    for cut in range(len(payload)):
        with pytest.raises(ProtocolError):
            decode([header, payload[:cut]])


def test_truncated_frame_is_named_truncated() -> None:
    header, payload = encode(Msg(_header(Kind.LINES), BODIES[1]))
    with pytest.raises(ProtocolError) as ei:
        decode([header, payload[:-3]])
    assert ei.value.problem == "truncated"
    with pytest.raises(ProtocolError) as ei:
        decode([header])
    assert ei.value.problem == "truncated"


@pytest.mark.parametrize("frames, problem", [
    ([b"\xc1", b"\x90"], "garbage"),  # 0xc1 is never valid msgpack
    ([b"hello world", b"x"], "garbage"),
    ([msgpack.packb({"v": 1}), b"\x90"], "garbage"),  # a map, not the header array
    ([msgpack.packb([1, "lines", "j"]), b"\x90"], "truncated"),  # too few header fields
    ([msgpack.packb([1, "reboot", "j", "n", 1, 0, 0, 0, 0.0, 0.0, -1, 0, 0.0]), b"\x90"], "kind"),
    ([msgpack.packb([1, "stop", "j", "n", "x", 0, 0, 0, 0.0, 0.0, -1, 0, 0.0]), b"\x90"], "field"),
    ([msgpack.packb([1, "stop", "j", "n", 1, 0, 0, 0, float("nan"), 0.0, -1, 0, 0.0]), b"\x90"], "field"),
    ([b"a", b"b", b"c"], "garbage"),
])
def test_garbage_is_refused_with_a_named_problem(frames: list[bytes], problem: str) -> None:
    with pytest.raises(ProtocolError) as ei:
        decode(frames)
    assert ei.value.problem == problem


def test_trailing_bytes_and_bad_fields_are_refused() -> None:
    header, payload = encode(Msg(_header(Kind.ACK), Ack(3)))
    with pytest.raises(ProtocolError):
        decode([header + b"\x00", payload])
    with pytest.raises(ProtocolError):
        decode([header, msgpack.packb(["three"])])
    with pytest.raises(ProtocolError):  # source index out of range
        decode([encode(Msg(_header(Kind.LINES), Lines(())))[0], msgpack.packb([[], [[0, 0.0, 0.0, "x", 3, 0]]])])
    with pytest.raises(ProtocolError):  # msgpack ext types are never accepted
        decode([header, msgpack.packb([msgpack.ExtType(5, b"x")])])


def test_random_mutations_never_escape_as_other_errors() -> None:
    rng = random.Random(20261121)
    good = [encode(Msg(_header(kind_of(b)), b)) for b in BODIES]
    accepted = 0
    for _ in range(3000):
        frames = [bytearray(f) for f in rng.choice(good)]
        f = rng.choice(frames)
        for _ in range(rng.randint(1, 4)):
            if f:
                f[rng.randrange(len(f))] = rng.randrange(256)
        try:
            decode([bytes(x) for x in frames])
            accepted += 1  # a flip inside a string or number can still be a well-formed message
        except ProtocolError:
            pass
    assert accepted < 3000


def test_pure_module_has_no_io_imports() -> None:
    tree = ast.parse(Path(p.__file__).read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert names.isdisjoint({"os", "zmq", "subprocess", "asyncio", "boto3", "socket", "pickle"})


# ---- replay and loss ------------------------------------------------------------------------


def test_in_order_accepts_once_and_refuses_replays() -> None:
    t = SequenceTracker(in_order=True)
    assert [t.check("n1", 5, s, 0) for s in range(3)] == [Disposition.ACCEPT] * 3
    assert t.check("n1", 5, 1, 0) is Disposition.DUPLICATE
    assert t.check("n1", 5, 2, 0) is Disposition.DUPLICATE
    st = t.stats("n1")
    assert st is not None and (st.accepted, st.duplicates, st.lost, st.expected) == (3, 2, 0, 3)


def test_a_gap_the_sender_still_holds_waits_for_the_resend() -> None:
    t = SequenceTracker()
    t.check("n1", 5, 0, 0)
    assert t.check("n1", 5, 2, 1) is Disposition.EARLY  # seq 1 missing, sender still holds it (base 1)
    assert t.check("n1", 5, 1, 1) is Disposition.ACCEPT
    assert t.check("n1", 5, 2, 1) is Disposition.ACCEPT
    st = t.stats("n1")
    assert st is not None and (st.early, st.lost) == (1, 0)


def test_a_gap_the_sender_dropped_is_counted_as_lost() -> None:
    t = SequenceTracker()
    t.check("n1", 5, 0, 0)
    # The agent's buffer overflowed: it only holds 7.. now; 1..6 are gone for good.
    assert t.check("n1", 5, 7, 7) is Disposition.ACCEPT
    st = t.stats("n1")
    assert st is not None and st.lost == 6 and st.expected == 8
    # Its first message after the overflow can be a later one: jump to base, wait for the rest.
    assert t.check("n1", 5, 12, 10) is Disposition.EARLY
    assert t.stats("n1").lost == 8  # type: ignore[union-attr]
    assert t.check("n1", 5, 10, 10) is Disposition.ACCEPT


def test_first_contact_starts_at_the_senders_base() -> None:
    t = SequenceTracker()
    # A coordinator that starts late: the agent still holds 3.. and sends 9 first.
    assert t.check("n2", 8, 9, 3) is Disposition.EARLY
    assert [t.check("n2", 8, s, 3) for s in range(3, 10)] == [Disposition.ACCEPT] * 7


def test_sessions_newer_replaces_older_is_stale() -> None:
    t = SequenceTracker()
    t.check("n1", 100, 0, 0)
    t.check("n1", 100, 1, 0)
    assert t.check("n1", 200, 0, 0) is Disposition.ACCEPT  # agent restarted
    assert t.check("n1", 100, 2, 0) is Disposition.STALE_SESSION  # the old session replayed
    st = t.stats("n1")
    assert st is not None and (st.sessions, st.stale, st.accepted) == (2, 1, 3)


def test_loose_mode_allows_gaps_but_not_replays() -> None:
    t = SequenceTracker(in_order=False)
    assert t.check("coordinator", 1, 4, 4) is Disposition.ACCEPT
    assert t.check("coordinator", 1, 9, 9) is Disposition.ACCEPT
    assert t.check("coordinator", 1, 9, 9) is Disposition.DUPLICATE
    assert t.check("coordinator", 1, 5, 5) is Disposition.DUPLICATE
    assert t.stats("coordinator").lost == 0  # type: ignore[union-attr]

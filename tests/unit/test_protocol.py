"""The wire format without sockets: round trips, version mismatch, truncated/garbage frames, replay."""

from __future__ import annotations

import ast
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import pytest

from neuron_watch.diagnosis.flight_recorder import GroupProgress
from neuron_watch.events import EvidenceReport, LauncherExit, StopReport
from neuron_watch.wire import protocol as p
from neuron_watch.wire.protocol import (
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
    LineMatch,
    Lines,
    Msg,
    Procs,
    ProcSample,
    ProtocolError,
    RankLines,
    RankProgress,
    SequenceTracker,
    Shutdown,
    Status,
    Stop,
    decode,
    encode,
    kind_of,
)

V = p.SCHEMA_VERSION
RX = "2026-Nov-21 13:05:01.0123 CCOM WARN Timeout waiting for RX (waited 120 sec) - retrying"

BODIES = [
    Hello("trn1-node-3", 4242, (0, 1, 2, 3), "0.1.0"),
    Lines(
        (
            RankLines(0, 2, 0.25, 0.1, 0.25, "step 12 loss 2.3401\nünïcødé ✓"),
            RankLines(3, 1, 0.0, 0.0, 0.0, RX),
        ),
        (
            LineMatch(0, "progress.step", 12, 2.3401, 0.25, "step 12 loss 2.3401", "/logs/rank0.log", 88),
            LineMatch(1, "ccom.rx_timeout", None, None, 0.0, RX, "", 0),
        ),
        (1 << 62) + 12345,
    ),
    Lines((RankLines(7, 3, 1.5, 0.0, -0.5, "\n\nlast"),)),  # empty lines; not classified
    Lines((RankLines(5, 2, 0.4, 0.1, 0.4, "step 12 loss 2.5\nstep 13 loss 2.4"), RankLines(6, 1, 0.2, 0.2, 0.2, RX)),
          (LineMatch(1, "ccom.rx_timeout", None, None, 0.2, RX, "/logs/rank6.log", 3),),
          99, (RankProgress(0, "progress.step", 13, 2.4, "/logs/rank5.log", 41),)),  # a rank of steps, coalesced
    # a rank's failure and the lines around it: the error block its cause is read from
    Lines((RankLines(3, 2, 0.3, 0.1, 0.3,
                     "    raise RuntimeError('set-up failed') from e\nRuntimeError: set-up failed"),),
          (LineMatch(0, "host.unrecognised_error", None, None, 0.1, "RuntimeError: set-up failed", "/logs/rank3.log",
                     9),),
          99, (), (p.RankBlock(0, "/logs/rank3.log", 0.1, (5, 6, 8, 9),
                               "ValueError: bad --lr\n\n    raise RuntimeError('set-up failed') from e\n"
                               "RuntimeError: set-up failed"),)),
    # paced (schema 10): rank 5 held (its lines only for the job's log), rank 6 judged with its row of 3 progress
    # lines (2 held before), and rank 9's held row, due, in a batch where it has no line
    Lines((RankLines(5, 1, 0.4, 0.4, 0.4, "step 14 loss 2.3"), RankLines(6, 1, 0.2, 0.2, 0.2, "step 14 loss 2.2")),
          (), 99, (RankProgress(1, "progress.step", 14, 2.2, "/logs/rank6.log", 44, 3),), (), (1,),
          (p.HeldProgress(9, "progress.step", 13, None, 2.5, 2.5, "step 13", "/logs/rank9.log", 40, 4),)),
    # held rows alone (the ranks went quiet), every rank judged
    Lines((), (), 99, (), (), None, (p.HeldProgress(2, "progress.step", 7, 0.5, 3.0, 3.25, "step 7", "", 0),)),
    Heartbeat(3, 120, 2),
    Heartbeat(0, 0, 0, 7),  # 7 lines cut to the wire's line limit so far
    Procs((ProcSample(1, 5151, 93.5, 0.2),)),
    Procs((), (), ((0, 11), (1, 12)), (
        p.RankCollectives(0, (GroupProgress("0", 41, -1, 42, "gloo:all_reduce", "scheduled", 1795451782.4),)),
        p.RankCollectives(1, (), "no recorder: TORCH_FR_BUFFER_SIZE=0", 1.5),
        # the newest entry's sequence id and shapes (a rank out of step is told by them)
        p.RankCollectives(2, (GroupProgress("0", 13, -1, 13, "gloo:all_reduce", "scheduled", 1.5, 13,
                                            "[[2177]] Float"),)),
    )),
    # what each rank process does: its tree's CPU, stopped or not (rank 1 stopped)
    Procs((), (), ((0, 11), (1, 12)), (), (p.WorkerActivity(0, 812.25, "R"), p.WorkerActivity(1, 3.5, "T"))),
    Exits((ExitInfo(2, -9, 0.0), ExitInfo(-1, 1, 0.5))),
    # a clean exit read from the rank's own record (schema 9): code 0 presumed, next to an exit status
    Exits((ExitInfo(1, 0, 0.25, presumed=True), ExitInfo(3, 3, 0.0))),
    Status("stopped", "sigkill, 15.0s", "/ckpt/step_1200", 0, 0,
           report=StopReport(rung="sigkill", seconds=15.0, survivors=(77,), uploads=({"ok": True},)).to_wire()),
    Status("evidence_done", "/run/incidents/incident-1/n0", "", 1, 2, 3,
           report=EvidenceReport(bundle="/b", proc_states={3: "T"}, in_collective={0: True},
                                 manifest={"items": [{"path": "logs/rank-0.log"}]}).to_wire()),
    Status("finished", "exit code 0", "", report=LauncherExit(0).to_wire()),
    Hello("trn-7", 4242, (4, 5, 6, 7), "0.1.0", place=1),
    p.Refused("job-a", "job-b", "this coordinator runs job job-a"),
    Ack(41),
    Ack(42, 1024, 2.5),  # the job's size and how far behind the coordinator is
    CaptureEvidence("g0-1763730000-collective_hang", "rank 5 stopped progressing"),
    Stop("g0-incident", 15.0),
    CaptureEvidence("incident-2", "hang", {"label": "collective_hang"}),
    Stop("incident-2", 15.0, {"label": "collective_hang", "culprit": {"node": "n1", "rank": 3}}),
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


def test_a_procs_body_with_a_worker_without_activity_decodes() -> None:
    """Schema 9 sends a procs body by column: a worker the agent saw no activity of has None for its CPU
    and state; one with only one of the two is refused."""
    body = Procs((), (), ((0, 11), (1, 12)), (), (p.WorkerActivity(1, 9.0, "S"),))
    head, raw = encode(Msg(_header(Kind.PROCS), body))
    assert decode([head, raw]).body == body
    wire = msgpack.unpackb(raw)
    assert wire[2] == [[0, 1], [11, 12], [None, 9.0], [None, "S"]]  # the workers' four columns
    wire[2][3][0] = "R"  # a state without its CPU
    with pytest.raises(ProtocolError, match="both its tree_cpu_seconds and its state, or neither"):
        decode([head, msgpack.packb(wire)])


def test_a_procs_body_sends_each_text_of_its_groups_once_and_shares_it() -> None:
    """The groups' names, ops, states and shapes travel as indices into one list of texts a message: the
    decoded groups of every rank share one object per text (the judge keeps them for every rank)."""
    group = GroupProgress("0", 41, 41, 41, "nccl:all_reduce", "completed", 1.5, 41, "[[2177]] Float")
    body = Procs((), (), (), tuple(p.RankCollectives(r, (group, group._replace(group="1")), "", 0.5) for r in range(3)))
    head, raw = encode(Msg(_header(Kind.PROCS), body))
    wire = msgpack.unpackb(raw)
    assert wire[3][0] == ["0", "1", "nccl:all_reduce", "completed", "[[2177]] Float"]
    decoded = decode([head, raw]).body
    assert decoded == body and isinstance(decoded, Procs)
    assert len({id(g.op) for c in decoded.collectives for g in c.groups}) == 1
    for where, value, problem in ((4, [3, 2, 2], "more groups than the columns hold"),  # the counts
                                  (4, [2, 2, 1], "more groups than the readings announce"),
                                  (5, [0, 0, 0, 0, 0, 9], "text index 9 out of range")):  # a group's name
        bad = msgpack.unpackb(raw)
        bad[3][where] = value
        with pytest.raises(ProtocolError, match=problem):
            decode([head, msgpack.packb(bad)])


def test_an_exit_says_presumed_only_as_a_4th_item_of_1() -> None:
    body = Exits((ExitInfo(1, 0, 0.25, presumed=True), ExitInfo(2, -9, 0.0)))
    head, raw = encode(Msg(_header(Kind.EXITS), body))
    assert msgpack.unpackb(raw) == [[[1, 0, 0.25, 1], [2, -9, 0.0]]]  # an exit status keeps its 3 items
    assert decode([head, raw]).body == body
    for bad, says in (([1, 0, 0.25, 0], "presumed"), ([1, 0, 0.25, True], "presumed"),
                      ([1, 0, 0.25, 1, 7], "expected 3 or 4"), ([1, 0], "expected 3 or 4")):
        with pytest.raises(ProtocolError, match=says):
            decode([head, msgpack.packb([[bad]])])


def test_lines_send_each_source_once() -> None:
    text = "\n".join(f"step {i}" for i in range(50))
    lines = Lines((RankLines(0, 50, 0.0, 0.0, 0.0, text),),
                  tuple(LineMatch(0, "progress.step", i, None, 0.0, f"step {i}", "/very/long/path/to/rank0.log", i)
                        for i in range(50)), 7)
    body = encode(Msg(_header(Kind.LINES), lines))[1]
    assert body.count(b"/very/long/path/to/rank0.log") == 1
    assert decode(encode(Msg(_header(Kind.LINES), lines))).body == lines


def _lines_body(ranks: list[list[object]], matches: list[list[object]] | None = None, sources: list[str] | None = None,
                classified: int = 0, progress: list[list[object]] | None = None) -> list[bytes]:
    return [encode(Msg(_header(Kind.LINES), BODIES[2]))[0],
            msgpack.packb([classified, sources or [""], ranks, matches or [], progress or []])]


@pytest.mark.parametrize("ranks, matches", [
    ([[0, 2, 0.0, 0.0, 0.0, "one line only"]], None),  # announced 2 lines, holds 1
    ([[0, 1, 0.0, 0.0, 0.0, "two\nlines"]], None),  # announced 1, holds 2
    ([[0, 0, 0.0, 0.0, 0.0, ""]], None),  # zero lines
    ([], None),  # no rank at all
    ([[0, 1, 0.0, 0.0, 0.0, "a"], [0, 1, 0.0, 0.0, 0.0, "b"]], None),  # a rank twice
    ([[0, 1, 0.0, 0.5, 0.0, "a"]], None),  # the newest line older than the first
    ([[0, 1, float("nan"), 0.0, 0.0, "a"]], None),
    ([[0, 1, 0.0, 0.0, 0.0, b"bytes, not text"]], None),
    ([[0, 1, 0.0, 0.0, 0.0, "a"]], [[1, "progress.step", 1, None, 0.0, "a", 0, 0]]),  # no rank 1 in the batch
    ([[0, 1, 0.0, 0.0, 0.0, "a"]], [[0, "progress.step", 1, None, 0.0, "a", 1, 0]]),  # no source 1
    ([[0, 1, 0.0, 0.0, 0.0, "a"]], [[0, "progress.step", 1, float("inf"), 0.0, "a", 0, 0]]),  # loss not finite
    ([[0, 1, 0.0, 0.0, 0.0, "a"]], [[0, "progress.step", 1.5, None, 0.0, "a", 0, 0]]),  # step not an integer
    ([[0, 1, 0.0, 0.0, 0.0, "a"]], [[0, "progress.step", 1, None, 0.0, "a\nb", 0, 0]]),  # newline in a match
    ([[0, 1, 0.0, 0.0, 0.0, "a"]], [[0, "progress.step", 1, None, 0.0, "a", 0]]),  # a field short
])
def test_inconsistent_lines_bodies_are_refused(ranks: list[list[object]], matches: list[list[object]] | None) -> None:
    with pytest.raises(ProtocolError) as ei:
        decode(_lines_body(ranks, matches))
    assert ei.value.problem == "field"


@pytest.mark.parametrize("progress", [
    [[1, "progress.step", 3, None, 0, 0, 1]],  # no rank 1 in the batch
    [[0, "progress.step", 3, None, 0, 0, 1], [0, "progress.step", 4, None, 0, 0, 1]],  # one rank coalesced twice
    [[0, "progress.step", None, None, 0, 0, 1]],  # a progress row always has its step
    [[0, "progress.step", 3, None, 1, 0, 1]],  # no source 1
    [[0, "progress.step", 3, float("nan"), 0, 0, 1]],  # loss not finite
    [[0, "progress.step", 3, None, 0, 0, 0]],  # standing for no line
    [[0, "progress.step", 3, None, 0, 0]],  # a field short (schema 9's row, without its count)
])
def test_inconsistent_progress_rows_are_refused(progress: list[list[object]]) -> None:
    with pytest.raises(ProtocolError) as ei:
        decode(_lines_body([[0, 1, 0.0, 0.0, 0.0, "step 3"]], progress=progress))
    assert ei.value.problem == "field"


@pytest.mark.parametrize("blocks", [
    [[1, 0, 0.0, [1], "a"]],  # no rank 1 in the batch
    [[0, 1, 0.0, [1], "a"]],  # no source 1
    [[0, 0, 0.0, [1, 2], "one line only"]],  # two line numbers, one line
    [[0, 0, 0.0, [], ""]],  # no line
    [[0, 0, 0.0, [1.5], "a"]],  # a line number that is not an integer
    [[0, 0, float("nan"), [1], "a"]],  # an age that is not finite
    [[0, 0, 0.0, [1]]],  # a field short
    [[0, 0, 0.0, [1], "a"]] * (p.MAX_BLOCKS_PER_RANK + 1),  # more blocks than a sender sends
    "not a list",
])
def test_inconsistent_error_blocks_are_refused(blocks: object) -> None:
    frames = [encode(Msg(_header(Kind.LINES), BODIES[2]))[0],
              msgpack.packb([0, [""], [[0, 1, 0.0, 0.0, 0.0, "a"]], [], [], blocks])]
    with pytest.raises(ProtocolError) as ei:
        decode(frames)
    assert ei.value.problem in ("field", "truncated")


_STEP_RANKS = [[0, 1, 0.0, 0.0, 0.0, "step 3"], [1, 1, 0.0, 0.0, 0.0, "step 3"]]


@pytest.mark.parametrize("matches, progress, judged, held", [
    ([], [], [2], []),  # no rank 2 in the batch
    ([], [], [0, 0], []),  # a rank judged twice
    ([], [], "all", []),  # not a list
    ([], [[1, "progress.step", 3, None, 0, 0, 1]], [0], []),  # a progress row of a rank not judged
    ([[1, "progress.step", 3, None, 0.0, "step 3", 0, 0]], [], [0], []),  # a match of a rank not judged
    ([], [], None, [[1, "progress.step", 3, None, 0.0, 0.0, "step 3", 0, 0, 1]]),  # held, but it has lines here
    ([], [], None, [[5, "progress.step", 3, None, 0.0, 0.0, "step 3", 0, 0, 1]] * 2),  # held twice
    ([], [], None, [[5, "progress.step", None, None, 0.0, 0.0, "step 3", 0, 0, 1]]),  # held without its step
    ([], [], None, [[5, "progress.step", 3, None, 0.0, 0.0, "step 3\nstep 4", 0, 0, 1]]),  # two lines in one
    ([], [], None, [[5, "progress.step", 3, None, 0.0, 0.0, "step 3", 1, 0, 1]]),  # no source 1
    ([], [], None, [[5, "progress.step", 3, None, 0.0, 0.0, "step 3", 0, 0, 0]]),  # standing for no line
    ([], [], None, [[5, "progress.step", 3, None, 0.0, 0.0, "step 3", 0, 0]]),  # a field short
])
def test_inconsistent_paced_bodies_are_refused(matches: list[Any], progress: list[Any], judged: Any,
                                               held: list[Any]) -> None:
    frames = [encode(Msg(_header(Kind.LINES), BODIES[2]))[0],
              msgpack.packb([99, [""], _STEP_RANKS, matches, progress, [], judged, held])]
    with pytest.raises(ProtocolError) as ei:
        decode(frames)
    assert ei.value.problem == "field"


def test_only_a_body_with_held_rows_may_name_no_rank() -> None:
    held = [[5, "progress.step", 3, None, 0.0, 0.0, "step 3", 0, 0, 1]]
    head = encode(Msg(_header(Kind.LINES), BODIES[2]))[0]
    body = decode([head, msgpack.packb([99, [""], [], [], [], [], None, held])]).body
    assert isinstance(body, Lines) and not body.ranks and body.held[0].rank == 5
    with pytest.raises(ProtocolError):
        decode([head, msgpack.packb([99, [""], [], [], [], [], None, []])])


def test_fingerprint_must_fit_63_bits() -> None:
    assert decode(_lines_body([[0, 1, 0.0, 0.0, 0.0, "a"]], classified=(1 << 63) - 1)).body.classified == (1 << 63) - 1
    for bad in (-1, 1 << 63):
        with pytest.raises(ProtocolError):
            decode(_lines_body([[0, 1, 0.0, 0.0, 0.0, "a"]], classified=bad))


def test_lines_count() -> None:
    assert BODIES[1].n_lines == 3 and BODIES[2].n_lines == 3


def test_commands_and_agent_kinds_are_disjoint() -> None:
    assert {k for k in Kind if k.is_command} == {Kind.ACK, Kind.CAPTURE_EVIDENCE, Kind.STOP, Kind.LAUNCH,
                                                 Kind.SHUTDOWN, Kind.REFUSED, Kind.STATUS_REPLY}
    assert p.AGENT_KINDS.isdisjoint(p.COMMAND_KINDS)


def test_kind_must_match_body() -> None:
    with pytest.raises(ProtocolError) as ei:
        encode(Msg(_header(Kind.STOP), Heartbeat()))
    assert ei.value.problem == "kind"


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, p.SCHEMA_VERSION + 1])
def test_version_mismatch_names_both_versions(version: int) -> None:
    # 1: an agent from before the joined-text lines body; it must hear "version", not "garbage".
    # 2: an agent from before the flight recorder readings in procs.
    # 3: an agent from before the echoed session, the frame limit and the job-bound keys.
    # 4: an agent from before its place in the hello and typed status reports.
    # 5: an agent from before the coalesced progress rows (its lines body has 4 items).
    # 6: a peer that sends the verdict of a capture or a stop as JSON in a string.
    # 7: a coordinator that refuses a lines body carrying the error blocks around a failure (6 items)
    #    or a procs body saying only what changed (5 items).
    # 8: a peer that sends a procs body by row (a list per worker and per flight recorder group), or a coordinator
    # that refuses an exit of 4 items (a clean exit presumed from the rank's record).
    # 9: a coordinator that takes every rank of a lines body to its judge (schema 10 leaves out the ranks whose
    # steady progress the node holds: Lines.judged) and knows neither held rows nor a progress row's count.
    # 10: a coordinator that refuses a lines body counting the lines its node left out (Lines.shed, nine items).
    # 11: a peer whose header has 14 items (schema 12 adds the urgent flag the coordinator orders by).
    assert p.SCHEMA_VERSION == 12
    frames = encode(Msg(_header(Kind.HEARTBEAT, version=version), Heartbeat()))
    with pytest.raises(ProtocolError) as ei:
        decode(frames)
    assert ei.value.problem == "version"
    assert f"peer speaks {version}" in ei.value.message and f"speaks {p.SCHEMA_VERSION}" in ei.value.message
    assert "same neuron-watch version" in ei.value.hint
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
    ([msgpack.packb([V, "lines", "j"]), b"\x90"], "truncated"),  # too few header fields
    ([msgpack.packb([V, "reboot", "j", "n", 1, 0, 0, 0, 0.0, 0.0, -1, 0, 0.0, 0, False]), b"\x90"], "kind"),
    ([msgpack.packb([V, "stop", "j", "n", "x", 0, 0, 0, 0.0, 0.0, -1, 0, 0.0, 0, False]), b"\x90"], "field"),
    ([msgpack.packb([V, "stop", "j", "n", 1, 0, 0, 0, float("nan"), 0.0, -1, 0, 0.0, 0, False]), b"\x90"], "field"),
    ([msgpack.packb([V, "stop", "j", "n", 1, 0, 0, 0, 0.0, 0.0, -1, 0, 0.0, "echo", False]), b"\x90"], "field"),
    ([msgpack.packb([V, "stop", "j", "n", 1, 0, 0, 0, 0.0, 0.0, -1, 0, 0.0, 0, 1]), b"\x90"], "field"),  # urgent: bool
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
    with pytest.raises(ProtocolError):  # a version-1 lines body (one row per line) is not a version-2 one
        decode([encode(Msg(_header(Kind.LINES), BODIES[2]))[0], msgpack.packb([[], [[0, 0.0, 0.0, "x", 0, 0]]])])
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


def _agree(fast: object, checked: Callable[[list[Any]], object], body: list[Any], tally: Counter[str]) -> None:
    """A fast decode (None: declined) against the checked one on the same body: the fast path never
    accepts what the checked one refuses, and decodes what it accepts alike."""
    try:
        slow = checked(body)
    except ProtocolError:
        slow = None
    assert fast == slow or (fast is None and slow is not None)
    tally["fast_only"] += fast is not None and slow is None
    tally["slow_only"] += fast is None and slow is not None
    tally["both"] += fast is not None


def test_fast_lines_decode_agrees_with_the_checked_one() -> None:
    """The coordinator's column-wise decode accepts exactly what the row-by-row one accepts, and
    decodes it alike; bodies are mutated one field at a time into wrong values."""
    rng = random.Random(77)
    wrong = [None, True, -1, 0, 2**70, 1.5, float("nan"), float("inf"), "", "x\ny", b"b", [], [1], {"k": 1}]
    tally: Counter[str] = Counter()
    for _ in range(3000):
        n = rng.randrange(1, 5)
        ranks = [[r, k, d + 0.5, d, -d, "\n".join(f"l{r}.{i}" for i in range(k))]
                 for r, k, d in ((r, rng.randrange(1, 4), rng.random()) for r in range(n))]
        matches = [[rng.randrange(n), "sig", rng.choice((None, 3)), rng.choice((None, 1.5)), 0.25, "t", 0, 9]
                   for _ in range(rng.randrange(0, 4))]
        progress = [[c, "step", 7, rng.choice((None, 2.5)), 0, 4, rng.choice((1, 3))]
                    for c in rng.sample(range(n), rng.randrange(0, n + 1))]
        body: list[object] = [rng.choice((0, 5)), ["/a"], ranks, matches, progress]
        if rng.random() < 0.9:
            target: list[object] = rng.choice([body, *ranks, *matches, *progress])
            target[rng.randrange(len(target))] = rng.choice(wrong)
        _agree(p._decode_lines_fast(body), p._decode_lines_checked, body, tally)
    assert tally["fast_only"] == 0 and tally["both"] > 300
    # What the fast path passes on is decided by the checked one (integers where agents send floats).
    assert tally["slow_only"] < 300


def test_fast_procs_decode_agrees_with_the_checked_one() -> None:
    """Every node's procs body (its workers, their activity, the flight recorder readings) is decoded
    column by column; it accepts exactly what the item-by-item decode accepts, and decodes it alike.
    Bodies as agents send them (workers without activity too), mutated one field at a time into wrong
    values, a column shortened or lengthened."""
    rng = random.Random(78)
    wrong = [None, True, -1, 0, 2**70, 1.5, float("nan"), float("inf"), "", "x", b"b", [], [1], {"k": 1}]
    tally: Counter[str] = Counter()
    for _ in range(3000):
        n = rng.randrange(0, 4)
        samples = [ProcSample(r, 900 + r, rng.random() * 50, rng.random())
                   for r in range(rng.randrange(0, 3))]
        workers = tuple((r, 100 + r) for r in range(n))
        activity = tuple(p.WorkerActivity(r, rng.random() * 900, rng.choice(("R", "S", "T")))
                         for r in range(n) if rng.random() < 0.95)
        groups = tuple(GroupProgress(str(g), 40, 40, 41, "gloo:all_reduce", "scheduled", 1795451782.4, 41,
                                     "[[4]] Float") for g in range(rng.randrange(0, 3)))
        readings = tuple(p.RankCollectives(r, groups, rng.choice(("", "no recorder")), rng.random()) for r in range(n))
        body: list[Any] = msgpack.unpackb(p.encode_body(Procs(tuple(samples), ("/cache/a.lock",), workers, readings,
                                                              activity, rng.choice((-1, 4)), (7,))))
        if rng.random() < 0.9:
            columns: list[list[Any]] = [body, body[1], body[4], body[4][1], *body[2], *body[3], *body[0]]
            target = rng.choice([c for c in columns if c])
            spot = rng.randrange(len(target))
            if rng.random() < 0.1:
                del target[spot]
            elif rng.random() < 0.1:
                target.append(target[spot])
            else:
                target[spot] = rng.choice(wrong)
        try:
            fast = p._decode_procs_fast(body)
        except Exception as exc:  # the fast path refuses by returning None, never by raising
            raise AssertionError(f"the fast path raised {exc!r} on {body!r:.200}") from exc
        _agree(fast, p._decode_procs_checked, body, tally)
    assert tally["fast_only"] == 0 and tally["both"] > 300
    # workers without activity and integers where agents send floats: the checked path decides
    assert tally["slow_only"] < 900


def test_capture_and_stop_from_a_coordinator_without_the_verdict_field_still_decode() -> None:
    """The verdict field was added within schema 2: a 2-field body (an older coordinator) decodes."""
    import msgpack

    for kind, body, want in ((Kind.CAPTURE_EVIDENCE, ["incident-1", "hang"], CaptureEvidence("incident-1", "hang")),
                             (Kind.STOP, ["incident-1", 15.0], Stop("incident-1", 15.0))):
        header = p.encode(Msg(_header(kind), want))[0]
        assert p.decode([header, msgpack.packb(body)]).body == want


def test_a_verdict_sent_as_json_text_is_refused_by_name() -> None:
    """The verdict of a capture and of a stop is a map: text in its place (a peer of schema 6 under a
    patched version) is refused, and the refusal names the field."""
    import msgpack

    for kind, body, want in ((Kind.CAPTURE_EVIDENCE, ["incident-1", "hang", '{"label": "collective_hang"}'],
                              CaptureEvidence("incident-1", "hang")),
                             (Kind.STOP, ["incident-1", 15.0, '{"label": "collective_hang"}'], Stop("incident-1"))):
        header = p.encode(Msg(_header(kind), want))[0]
        with pytest.raises(ProtocolError) as ei:
            p.decode([header, msgpack.packb(body)])
        assert ei.value.problem == "field" and "verdict must be a map" in ei.value.message


def test_the_echoed_coordinator_session_round_trips() -> None:
    h = _header(Kind.HEARTBEAT, echo=(1763730000 << 12) | 99)
    assert decode(encode(Msg(h, Heartbeat()))).header.echo == (1763730000 << 12) | 99
    assert decode(encode(Msg(_header(Kind.HEARTBEAT), Heartbeat()))).header.echo == 0


def test_frame_limits_are_consistent() -> None:
    """A batch of one longest line, sent twice (its rank's text and its match), fits a body; a
    body plus its header fits a frame."""
    assert 2 * p.MAX_LINE_BYTES + (1 << 16) < p.MAX_BODY_BYTES < p.MAX_FRAME_BYTES


def test_a_short_line_is_never_cut() -> None:
    text = "step 1 loss 2.0 " * 1000
    assert p.cut_line(text) == (text, 0)
    wide = "\u00e9" * (p.MAX_LINE_BYTES // 2)  # 2 bytes a character: exactly the limit
    assert p.cut_line(wide) == (wide, 0)


@pytest.mark.parametrize("char", ["x", "\u00e9", "\u2713", "\U0001f600"])
def test_an_oversized_line_is_cut_on_a_character_boundary_and_marked(char: str) -> None:
    n = (p.MAX_LINE_BYTES * 3) // len(char.encode())
    text = "head " + char * n
    cut, dropped = p.cut_line(text)
    size = len(text.encode())
    assert dropped > 0 and len(cut.encode()) <= p.MAX_LINE_BYTES
    assert cut.startswith("head " + char * 10)
    assert cut.endswith(f"[neuron-watch: line cut, {dropped} of {size} bytes not sent]")
    kept = cut[: cut.rindex(" [neuron-watch: line cut")]
    assert len(kept.encode()) + dropped == size and set(kept[5:]) == {char}  # no half character


def test_utf8_sizes() -> None:
    assert p.utf8_sizes(["", "abc", "\u00e9", "\U0001f600"]) == [0, 3, 2, 4]


def test_an_oversized_frame_is_refused_before_it_is_unpacked() -> None:
    header = encode(Msg(_header(Kind.HEARTBEAT), Heartbeat()))[0]
    with pytest.raises(ProtocolError) as ei:
        decode([header, b"\x90" + b" " * p.MAX_FRAME_BYTES])
    assert ei.value.problem == "oversize"


def test_typed_reports_survive_the_wire_and_an_unknown_field_is_ignored() -> None:
    """A status report travels as a map (schema 5), never JSON inside a string; each report type
    has one constructor from the wire that tolerates fields it does not know."""
    ev = EvidenceReport(bundle="/b", seconds=1.5, missing=2, proc_states={3: "T", 1: "gone"},
                        stack_tops={0: "wait (distributed_c10d.py)"}, in_collective={0: True, 3: False},
                        manifest={"items": []}, error="")
    st = StopReport(rung="sigterm", seconds=0.4, survivors=(), continued=(1234,), uploads=({"ok": True},))
    for report, typ in ((ev, EvidenceReport), (st, StopReport)):
        msg = Msg(_header(Kind.STATUS), Status("x", report=report.to_wire()))
        body = decode(encode(msg)).body
        assert isinstance(body, Status)
        assert typ.from_wire({**body.report, "from_a_newer_agent": 1}) == report
    assert LauncherExit.from_wire(LauncherExit(-9).to_wire()) == LauncherExit(-9)
    assert LauncherExit.from_wire({}) is None


@pytest.mark.parametrize("report", [{1: "rank keys must be text"}, ["not", "a", "map"]])
def test_a_status_report_that_is_not_a_text_keyed_map_is_refused(report: Any) -> None:
    frames = encode(Msg(_header(Kind.STATUS), Status("stopped")))
    raw = msgpack.unpackb(frames[1], strict_map_key=False)
    raw[6] = report
    with pytest.raises(ProtocolError) as ei:
        decode([frames[0], msgpack.packb(raw, use_bin_type=True)])
    assert ei.value.problem in ("field", "garbage")

"""An agent link's bounds (:class:`LinkSettings`) and what it counts (:class:`LinkCounters`):
what it sent, resent, refused, cut and lost, reported in the node's summary and, for lines, in
every heartbeat and status."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class LinkSettings:
    """Batching, heartbeat and buffer bounds of an agent link."""

    # Send a batch when this many lines are pending (a flood; normally batch_age decides) ... The
    # coordinator's cost is per batch and rank: 4,000 lines of 32 ranks is ~125 lines a rank
    # (bench_wire.py: 2x the coordinator throughput of 500-line batches).
    batch_lines: int = 4000
    batch_age: float = 0.05  # ... or when the oldest pending line is this old (seconds)
    heartbeat: float = 1.0  # seconds between heartbeats when nothing else is sent
    resend_after: float = 3.0  # no ack progress for this long -> resend everything unacknowledged
    max_lines: int = 200_000  # outbox bound, in lines
    max_msgs: int = 20_000  # outbox bound, in messages
    max_bytes: int = 512 << 20  # outbox bound, in encoded bytes (a flood of megabyte lines)
    window_bytes: int = 128 << 20  # at most this much sent and not yet acknowledged


@dataclass
class LinkCounters:
    """What the agent refused or lost; reported in
    :meth:`~neuron_watch.node.agent_link.AgentLink.summary`."""

    sent: int = 0
    resent: int = 0
    resend_rounds: int = 0
    send_refused: int = 0  # sends refused while the coordinator was away (retried later)
    bad_frames: int = 0  # unauthenticated / undecodable frames from the socket, dropped
    bad_by_problem: dict[str, int] = dataclasses.field(default_factory=dict)
    wrong_target: int = 0  # commands for another agent session or job, dropped
    replayed: int = 0  # duplicate or stale-session commands, dropped
    challenges: int = 0  # the coordinator asked for a resend with its session echoed
    truncated_lines: int = 0  # lines cut to MAX_LINE_BYTES (each marked in its text)
    truncated_bytes: int = 0
    split_batches: int = 0  # batches sent as several messages to stay under the frame limit
    oversize_dropped: int = 0  # messages that could not be made to fit (never expected; counted as dropped)
    #: lines around a failure a bound kept out of its error block (node/error_context.py; the lines still go)
    block_lines_left_out: int = 0
    #: lines left out of merged.log while the coordinator was behind (node/bulk_shed.py; the batches' judged
    #: parts still go, each with its count; the ranks' own logs have every line)
    bulk_lines_shed: int = 0

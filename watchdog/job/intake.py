"""The messages the coordinator has taken off its socket and not yet handled, urgent ones first.

Why: one coordinator takes ~1,260 messages a second from 1,024 nodes at 10 lines/s and falls seconds
behind on a busy host; ZeroMQ's queues are first in, first out per connection and fair between
connections, so a hang line waited there behind every node's steady batches (docs/multinode.md, "The
judged part never waits behind the bulk"). Taking a message off the socket costs microseconds;
handling it (signature, decode, the judge) ~0.7 ms. So the endpoint takes what is waiting into this
queue, reading each header, and handles first the messages a node flagged urgent (``Header.urgent``,
:mod:`neuron_watch.node.urgent`: a failure's line, an exit, a status), each with the messages of its
node that came before it, in their order; the rest as they came.

Ordering: a node's messages are handled in the order they came, always (the sequence tracker takes
them in order, and a rank's older steady lines reach the judge before its verdict line). Only the
order between nodes changes, which was never given: each node has its own connection, which ZeroMQ
serves in turn. Every urgent message is handled before any steady one, so the failures of several
nodes still reach the judge in the order they came, with every exit and "training finished".
What a failure's verdict reads of the steady messages it overtakes is which ranks exist: the rank that
"alone reported nothing" is the culprit of a hang every other rank reports, and a rank the judge has not
heard of yet is not counted (tests/unit/test_intake.py: a node's first lines overtaken make its
neighbour the culprit). So urgent messages go first only once the judge knows every rank the nodes
announced (:class:`UrgentGate`); before that, as they came. (The flight recorder readings near a failure,
a rank's last words, go urgent as well: node/urgent.py.)

Bounds: at most ``max_bytes`` of frames wait here (the endpoint stops taking at that, and the rest waits
in the socket's queues as before); the nodes' unacknowledged bytes are bounded by their send windows
anyway (acks go after handling; :data:`~neuron_watch.wire.protocol.COORDINATOR_QUEUE_BYTES` in all), so
this holds what the socket's queues held, in this process.

The header read here is not yet trusted (the signature is checked when the message is handled): it only
orders. A forged urgent flag moves the named node's messages ahead in their own order, nothing else.

Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from neuron_watch.events import RankKey
from neuron_watch.job.nodes import NodeView
from neuron_watch.wire.protocol import COORDINATOR_QUEUE_BYTES, Header

#: While the urgent lane is shut and the judge holds as many ranks as the nodes announced, whether it knows
#: each of them is looked at this often at most (~30 ms at 65,536 ranks; its ranks may include a launcher's).
GATE_CHECK_EVERY = 1.0
#: Bytes of frames the coordinator holds taken off its socket and not yet handled (beyond it, messages
#: wait in the socket's queues): what the nodes' send windows let them have unacknowledged in all, so an
#: urgent message is always within reach. (128 MiB was measured first: at 1,024 nodes x 10 lines/s, 5-7 s
#: behind, hang lines then waited 1-3 s in the socket's queues behind it; at 768 nodes, 1.5 s behind, 89 MiB.)
MAX_TAKEN_BYTES = COORDINATOR_QUEUE_BYTES


@dataclass(frozen=True, slots=True)
class Taken:
    """One message taken off the socket: who sent it (the connection), its frames, its header if it
    could be read (None: it is handled in its turn, where its fault is counted)."""

    routing_id: bytes
    frames: list[bytes]
    header: Header | None
    size: int


class Intake:
    """Messages taken off the socket, handed out urgent first (see the module's docstring)."""

    def __init__(self, max_bytes: int = MAX_TAKEN_BYTES) -> None:
        self.max_bytes = max_bytes
        self._q: deque[Taken] = deque()
        self._bytes = 0
        self._urgent = 0  # urgent messages in the queue
        self.most_bytes = 0  # the most bytes held at once (coordinator.json)

    def __len__(self) -> int:
        return len(self._q)

    def room(self) -> bool:
        """Whether another message may be taken."""
        return self._bytes < self.max_bytes

    def put(self, routing_id: bytes, frames: list[bytes], header: Header | None) -> None:
        size = sum(len(f) for f in frames)
        self._q.append(Taken(routing_id, frames, header, size))
        self._bytes += size
        if self._bytes > self.most_bytes:
            self.most_bytes = self._bytes
        if header is not None and header.urgent:
            self._urgent += 1

    def next(self) -> Taken | None:
        """The oldest message (None: none)."""
        if not self._q:
            return None
        item = self._q.popleft()
        self._forget(item)
        return item

    def urgent(self) -> list[Taken]:
        """Every urgent message and, before each, the messages of its node that came before it, in the
        order they came; taken out of the queue (empty when none is urgent: the common case costs a test)."""
        if not self._urgent:
            return []
        last: dict[str, int] = {}  # node -> place of its newest urgent message
        for i, item in enumerate(self._q):
            h = item.header
            if h is not None and h.urgent:
                last[h.node] = i
        out: list[Taken] = []
        kept: deque[Taken] = deque()
        for i, item in enumerate(self._q):
            h = item.header
            if h is not None and i <= last.get(h.node, -1):
                out.append(item)
                self._forget(item)
            else:
                kept.append(item)
        self._q = kept
        return out

    def _forget(self, item: Taken) -> None:
        self._bytes -= item.size
        if item.header is not None and item.header.urgent:
            self._urgent -= 1


class UrgentGate:
    """Whether urgent messages may go first: once every node the job expects has joined and the judge knows
    every rank the nodes' hellos announced (see the module's docstring); shut again for a new judge (a new
    generation) or a node that joins."""

    def __init__(self) -> None:
        self._judge: object | None = None  # the judge it opened for
        self._nodes = -1  # the nodes it counted then
        self._next_check = -math.inf

    def open(self, judge: object | None, views: Mapping[str, NodeView], joined: bool, now: float) -> bool:
        """Whether the lane is open at ``now`` (``joined``: every node the job expects has said hello)."""
        ranks = getattr(judge, "ranks", None)  # (a test's judge may keep none: the lane stays shut)
        if ranks is None or not joined:
            self._judge = None
            return False
        if judge is self._judge and len(views) == self._nodes:
            return True
        # (a count first, ~30 us at 1,024 nodes, each turn while shut: the lane opens a turn after the last rank
        # is heard of; each rank looked up only when the count is there)
        if len(ranks) < sum(len(v.ranks) for v in views.values()) or now < self._next_check:
            return False
        self._next_check = now + GATE_CHECK_EVERY
        if not all(RankKey(v.node, r) in ranks for v in views.values() for r in v.ranks):
            return False
        self._judge, self._nodes = judge, len(views)
        return True

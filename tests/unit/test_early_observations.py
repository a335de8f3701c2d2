"""What a node sees before its link exists is replayed into the link in order (observations.EarlyObservations)."""

from __future__ import annotations

from typing import Any

from neuron_watch.events import LogLine, NodeStatus, RankKey
from neuron_watch.node.observations import EarlyObservations, LinesLost, StatusSeen


class RecordingLink:
    def __init__(self) -> None:
        self.dropped_lines = 0
        self.said: list[tuple[str, int]] = []

    def add_line(self, *args: Any, **kwargs: Any) -> None:
        self.said.append(("line", self.dropped_lines))

    def count_lost(self, lines: int) -> None:
        self.dropped_lines += lines

    def status(self, state: str, *args: Any, **kwargs: Any) -> None:
        self.said.append((state, self.dropped_lines))  # a status carries the count as it is then

    def add_compilers(self, *args: Any, **kwargs: Any) -> None:
        pass


def test_lines_lost_before_the_link_existed_are_in_the_status_that_follows_them() -> None:
    """A flood that ended before the link existed: its skipped lines must be in the replayed
    "finished" status, which job_finished is built from (they once arrived after it)."""
    early = EarlyObservations()
    early.observe(LogLine(RankKey("n", 0), "step 1", 1.0, 2.0, "f", 1))
    early.observe(LinesLost(4_000_000))
    early.observe(StatusSeen(NodeStatus.FINISHING, 3.0, 4.0))
    early.observe(LinesLost(200_000))
    early.observe(StatusSeen(NodeStatus.FINISHED, 5.0, 6.0))
    link = RecordingLink()
    early.replay(link)  # type: ignore[arg-type]
    assert link.said == [("line", 0), ("finishing", 4_000_000), ("finished", 4_200_000)]

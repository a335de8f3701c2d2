"""An incident's ``tails.log``: the verdict's ranks' tails as the job log holds them."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.events import Action, Label, LogLine, RankKey, Verdict
from neuron_watch.iofaults import IOHealth
from neuron_watch.job.joblog import INCIDENT_TAIL_RANKS, JobLog, incident_tails
from neuron_watch.wire.protocol import Header, Kind, lines_body


def test_the_culprits_tail_comes_first_and_the_verdicts_ranks_are_bounded(tmp_path: Path) -> None:
    joblog = JobLog(str(tmp_path), IOHealth(), 3, gap=lambda n, b, e: f"gap {n}")
    lines = [LogLine(RankKey("n1", r), f"r{r} line {i}", 10.0, 1000.0) for i in range(5) for r in range(12)]
    h = Header(kind=Kind.LINES, job="j", node="n1", session=1, generation=0, seq=0, mono=10.0, wall=1000.0)
    joblog.write(h, lines_body(lines, 10.0, 1000.0), True)
    ranks = tuple(RankKey("n1", r) for r in range(12))
    verdict = Verdict(Label.COLLECTIVE_HANG, Action.RESTART, ranks=ranks, culprit=RankKey("n1", 7))
    text = incident_tails(joblog, verdict)
    sections = text.split("\n==> ")
    assert sections[0] == "==> n1/rank7: its last 3 line(s) <==\nr7 line 2\nr7 line 3\nr7 line 4\n"
    assert sections[1].startswith("n1/rank0: its last 3 line(s) <==\nr0 line 2\n")
    assert len(sections) == INCIDENT_TAIL_RANKS + 1 and sections[-1] == "4 more rank(s) of the verdict not listed <==\n"
    # a rank the log holds nothing of is listed, empty
    assert incident_tails(joblog, Verdict(Label.COLLECTIVE_HANG, Action.RESTART, culprit=RankKey("n9", 0))) == (
        "==> n9/rank0: its last 0 line(s) <==\n")
    joblog.close()

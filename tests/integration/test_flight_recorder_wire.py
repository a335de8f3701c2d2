"""Flight recorder readings from an agent link to the coordinator's judge, over real ZeroMQ on loopback."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from neuron_watch.config import WatchConfig
from neuron_watch.diagnosis.flight_recorder import GroupProgress
from neuron_watch.diagnosis.judge import Judge
from neuron_watch.events import Label, RankKey
from neuron_watch.job.coordinator import Coordinator, CoordinatorSettings
from neuron_watch.runtime import default_judge_factory
from tests.integration.test_transport import JOB, SECRET, make_link, pump

pytestmark = pytest.mark.integration


def test_readings_reach_the_judge_and_name_the_rank_behind(tmp_path: Path) -> None:
    coord = Coordinator("127.0.0.1:0", SECRET, str(tmp_path / "coord"), job=JOB,
                        settings=CoordinatorSettings(silence=1e6),
                        judge_factory=default_judge_factory(WatchConfig(hang_timeout=30.0, startup_timeout=60.0)))
    link = make_link(coord.endpoint, "node1")
    try:
        t0, wall = time.monotonic(), time.time()
        link.hello("h", 1, [0, 1, 2, 3, 4], t0, wall)
        readings = [(r, (GroupProgress("0", 40, -1, 40 if r == 3 else 42, "gloo:all_reduce", "scheduled", wall),),
                     "", t0) for r in range(4)]
        readings.append((4, (), "no recorder: ModuleNotFoundError: No module named 'torch._C'", t0))
        link.add_compilers([], t0, wall, always=True, workers=[(r, 100 + r) for r in range(5)],
                           collectives=readings)
        judge = coord.judge
        assert isinstance(judge, Judge)
        pump([coord], [link], lambda: RankKey("node1", 3) in judge.ranks and bool(judge.ranks[RankKey("node1", 3)]
                                                                                   .collectives))
        st = judge.ranks[RankKey("node1", 0)]
        assert st.collectives["0"].enqueued == 42 and st.last_collective is not None
        assert st.last_collective == pytest.approx(time.monotonic(), abs=10.0)  # placed on our clock
        assert coord.status_doc(time.monotonic())["liveness"] == {
            "output": True, "flight_recorder": 4,
            "no_flight_recorder": {"node1/4": "no recorder: ModuleNotFoundError: No module named 'torch._C'"}}
        v = judge.verdict(time.monotonic() + 100)  # one reading: start-up's collectives, the startup timeout
        assert v.label is Label.COLLECTIVE_HANG and v.culprit == RankKey("node1", 3)
        assert v.culprit_source == "flight_recorder" and "2 collectives behind" in v.reason
    finally:
        link.close()
        coord.close()

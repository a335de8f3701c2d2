"""The coordinator's node registry (job/nodes.py, pure): holders of a name or a place, silence, rejoins."""

from __future__ import annotations

import random

from neuron_watch.events import NodeStatus
from neuron_watch.job.nodes import NodeRegistry
from neuron_watch.job.statusdoc import NodeState


def test_a_live_holder_of_the_name_or_the_place_keeps_it_until_silent_or_exited() -> None:
    reg = NodeRegistry(silence=10.0)
    view, rejoined = reg.join("n0", 1, b"r", 0, 100.0)
    view.place = 0
    assert not rejoined and reg.holder("n0", 1, 0, 101.0) is None  # its own session
    assert reg.holder("n0", 2, -1, 105.0) == (view, True)  # another session, same name
    assert reg.holder("n1", 3, 0, 105.0) == (view, False)  # another name, same place
    assert reg.holder("n1", 3, 1, 105.0) is None  # another place
    assert reg.holder("n0", 2, -1, 110.5) is None  # the holder is silent
    view.status = NodeStatus.EXITED
    assert reg.holder("n0", 2, -1, 105.0) is None


def test_silence_marks_each_node_once_and_a_rejoin_keeps_its_line_count() -> None:
    reg = NodeRegistry(silence=10.0)
    a, _ = reg.join("a", 1, b"a", 0, 100.0)
    reg.join("b", 1, b"b", 0, 105.0)
    assert reg.newly_silent(110.0) == [] and [v.node for v in reg.newly_silent(112.0)] == ["a"]
    assert reg.newly_silent(113.0) == [] and a.state is NodeState.UNOBSERVED
    reg.rebase(30.0, 140.0)  # a pause of ours: the nodes were not silent
    assert reg.views["b"].last_heard == 135.0 and [v.node for v in reg.newly_silent(140.0)] == []
    a.lines = 42
    again, rejoined = reg.join("a", 2, b"a2", 1, 150.0)
    assert rejoined and again.lines == 42 and again.state is NodeState.CONNECTED and reg.views["a"] is again
    assert reg.size(None) == 2 and reg.size(5) == 5 and reg.enough(2) and not reg.enough(3) and reg.enough(None)


def test_silence_is_found_as_a_pass_every_turn_finds_it() -> None:
    """The registry passes over the nodes only when one can be silent: over a job's life (messages,
    a pause of ours, rejoins, a node heard again) it marks the same nodes at the same turns as a
    pass over every node at every turn does."""
    rng = random.Random(7)
    reg, ref = NodeRegistry(silence=10.0), NodeRegistry(silence=10.0)
    for r in (reg, ref):
        for n in range(20):
            r.join(f"n{n}", 1, b"x", 0, 0.0)
    now = 0.0
    marked: list[str] = []
    for turn in range(4000):
        now += 0.05
        if turn % 97 == 0:
            for r in (reg, ref):
                r.rebase(3.0, now)
        for n in range(20):
            if rng.random() < (0.002 if n % 5 == 0 else 0.05):  # every 5th node speaks rarely
                for r in (reg, ref):
                    v = r.views[f"n{n}"]
                    v.last_heard, v.state = now, NodeState.CONNECTED  # heard again (the coordinator's received)
        if turn == 2000:
            for r in (reg, ref):
                r.join("n3", 2, b"y", 0, now)  # a rejoin: a new view, heard now
        got = [v.node for v in reg.newly_silent(now)]
        want = []  # the pass over every node at every turn
        for v in ref.views.values():
            if v.state is NodeState.CONNECTED and now - v.last_heard > ref.silence:
                v.state = NodeState.UNOBSERVED
                want.append(v.node)
        assert got == want, f"turn {turn}"
        marked += got
    assert len(marked) > 10  # the rarely speaking nodes went silent, again and again

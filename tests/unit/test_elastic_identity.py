"""An elastic torchrun launch (c10d, no ``--node_rank``): which wrapper may host the coordinator, the
place and name a node takes from its rendezvous, and a coordinator port that is already taken."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from types import SimpleNamespace
from typing import Any

import pytest

from neuron_watch.commands.supervisor import _may_host, _placed
from neuron_watch.config import WatchConfig
from neuron_watch.launchers.base import LaunchInfo
from neuron_watch.launchers.torchrun import TorchrunLauncher, _is_host
from neuron_watch.node.procs import ProcessSampler
from neuron_watch.runtime import elastic_torchrun_node, host_name, on_this_host
from neuron_watch.wire.transport import CoordinatorSocket, PortInUse
from tests.fixtures.procs import kill_group

HOST = host_name()


def parsed(**overrides: Any) -> dict[str, Any]:
    """What torchrun's own parser returns for ``--nnodes 2 --nproc_per_node 2 ...`` (node_rank
    defaults to 0 in every wrapper's parse, given or not)."""
    a: dict[str, Any] = {"nproc_per_node": "2", "nnodes": "2", "node_rank": 0, "rdzv_backend": "static",
                         "rdzv_endpoint": "", "rdzv_id": "none", "rdzv_conf": "", "standalone": False,
                         "master_addr": "127.0.0.1", "master_port": 29500, "redirects": "3", "log_dir": "/x"}
    a.update(overrides)
    return a


def info_of(**overrides: Any) -> LaunchInfo:
    launcher = TorchrunLauncher.__new__(TorchrunLauncher)
    return launcher._info(parsed(**overrides), "/run/gen-0")


def test_c10d_is_elastic_static_and_standalone_are_not() -> None:
    elastic = info_of(rdzv_backend="c10d", rdzv_endpoint="10.0.0.5:29400", rdzv_id="j1")
    assert elastic.elastic and elastic.coordinator_host == "10.0.0.5" and elastic.rank_offset is None
    assert not info_of().elastic
    assert not info_of(rdzv_backend="c10d", standalone=True, nnodes="1").elastic
    assert info_of(rdzv_backend="c10d", rdzv_endpoint="h:1", nnodes="1:4").elastic


@pytest.mark.parametrize(("nnodes", "most", "judged_at"),
                         [("2", 2, 2), ("1:4", 4, 1), ("2:2", 2, 2), ("x", None, None)])
def test_an_elastic_range_is_judged_once_its_minimum_joined(nnodes: str, most: int | None,
                                                            judged_at: int | None) -> None:
    """``--nnodes 1:4`` runs once one node joined: waiting for four before judging never judged a
    job that runs on fewer (a hang on one node of ``1:2`` went unseen)."""
    info = info_of(rdzv_backend="c10d", rdzv_endpoint="h:1", nnodes=nnodes)
    assert (info.nnodes, info.nodes_to_judge) == (most, judged_at)


@pytest.mark.parametrize(("conf", "expected"), [("", None), ("is_host=true", True), ("timeout=9,is_host=0", False),
                                                ("join_timeout=600", None), ("is_host=maybe", None)])
def test_rdzv_conf_is_host_is_read_as_torchrun_reads_it(conf: str, expected: bool | None) -> None:
    assert _is_host(conf) is expected


def test_an_elastic_node_takes_its_place_from_the_rendezvous() -> None:
    node = elastic_torchrun_node({}, 1, 4242)
    assert (node.place, node.name) == (1, f"{HOST}-n1")
    # placed by nobody (torchrun ended before its rendezvous): still a name of its own on a shared host
    assert elastic_torchrun_node({}, None, 4242).name == f"{HOST}-p4242"
    named = elastic_torchrun_node({"NEURON_WATCH_NODE": "trn-7"}, 0, 1)
    assert (named.place, named.name) == (0, "trn-7")  # a name unique by itself is kept


def test_the_coordinators_host_is_told_by_its_addresses() -> None:
    assert on_this_host("127.0.0.1") and on_this_host("localhost")
    assert not on_this_host("192.0.2.1")  # TEST-NET-1: never an address of this host
    assert not on_this_host("no-such-host.invalid")


@pytest.mark.parametrize(("overrides", "coordinator", "expected"), [
    ({}, None, True),  # static: node_rank 0 hosts
    ({"node_rank": 1}, None, False),
    ({"rdzv_backend": "c10d", "rdzv_endpoint": "127.0.0.1:29400"}, None, True),  # elastic, this host
    ({"rdzv_backend": "c10d", "rdzv_endpoint": "192.0.2.1:29400"}, None, False),  # elastic, another host
    ({"rdzv_backend": "c10d", "rdzv_endpoint": "192.0.2.1:29400", "rdzv_conf": "is_host=1"}, None, True),
    ({"rdzv_backend": "c10d", "rdzv_endpoint": "127.0.0.1:29400", "rdzv_conf": "is_host=0"}, None, False),
    # an explicit --coordinator is on this host or not, whatever the rendezvous says
    ({"rdzv_backend": "c10d", "rdzv_endpoint": "192.0.2.1:29400", "rdzv_conf": "is_host=0"}, "127.0.0.1:1", True),
])
def test_who_may_host_the_coordinator(overrides: dict[str, Any], coordinator: str | None, expected: bool) -> None:
    info = info_of(**overrides)
    address = coordinator or f"{info.coordinator_host}:29510"
    assert _may_host(WatchConfig(coordinator=coordinator), info, address) is expected


def test_a_coordinator_port_already_taken_says_so() -> None:
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(PortInUse) as err:
            CoordinatorSocket(f"0.0.0.0:{port}")
    text = str(err.value)
    assert "already in use" in text and "its own coordinator port" in text and "pick a free port" not in text


def test_the_sampler_reads_the_group_rank_the_rendezvous_gave() -> None:
    worker = "import sys; sys.stdin.readline()"
    code = (f"import os, subprocess, sys; subprocess.run([sys.executable, '-c', {worker!r}], "
            "env=dict(os.environ, LOCAL_RANK='0', RANK='2', GROUP_RANK='1'))")
    launcher = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, start_new_session=True)
    try:
        sampler = ProcessSampler()
        deadline = time.monotonic() + 30
        workers = sampler.sample(launcher.pid)[0]
        while not workers and time.monotonic() < deadline:  # polls the child's start
            time.sleep(0.01)
            workers = sampler.sample(launcher.pid)[0]
        assert [(w.rank, w.group_rank) for w in workers] == [(2, 1)]
    finally:
        kill_group(launcher)  # type: ignore[arg-type]


class FakeAgent:
    """What the placement wait reads of a node's agent."""

    def __init__(self, info: LaunchInfo | None, group_rank: int | None = None, ended: bool = False,
                 workers: dict[int, int] | None = None) -> None:
        self.info, self.group_rank, self.launcher_ended = info, group_rank, ended
        self.gen = SimpleNamespace(worker_pids=workers or {})

    def watch_early(self) -> bool:
        return self.info is not None


@pytest.mark.parametrize(("agent", "placed"), [
    (FakeAgent(None), False),  # the shape is not known yet
    (FakeAgent(info_of()), True),  # static: node_rank says it
    (FakeAgent(info_of(rdzv_backend="c10d", rdzv_endpoint="h:1")), False),  # waiting in the rendezvous
    (FakeAgent(info_of(rdzv_backend="c10d", rdzv_endpoint="h:1"), group_rank=1, workers={2: 10}), True),
    (FakeAgent(info_of(rdzv_backend="c10d", rdzv_endpoint="h:1"), ended=True), True),  # placed by nobody
    # workers that carry no GROUP_RANK end the wait: never a job left unwatched
    (FakeAgent(info_of(rdzv_backend="c10d", rdzv_endpoint="h:1"), workers={0: 10}), True),
])
def test_an_elastic_node_waits_for_its_place_and_only_for_it(agent: FakeAgent, placed: bool) -> None:
    assert _placed(agent) is placed  # type: ignore[arg-type]

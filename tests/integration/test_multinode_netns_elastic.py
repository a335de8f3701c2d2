"""An elastic job on two hosts that are really apart (each ``neuron-watch torchrun`` in its own
network namespace, own IP address and hostname): torchrun's recommended form, ``--rdzv_backend
c10d --rdzv_endpoint <host a>:PORT --rdzv_id X`` and no ``--node_rank``, no ``--coordinator``, no
``--job-id``. The coordinator is where the rendezvous is (host a, its default port), each node's
place is what the rendezvous gave it."""

from __future__ import annotations

import json
import secrets
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.fixtures.procs import NEURON_WATCH, TOY, events, named, pids_with_env, start_node
from tests.integration.test_multinode_netns import in_host, two_hosts  # noqa: F401 - the fixture

pytestmark = pytest.mark.integration


def test_two_hosts_elastic_without_node_rank_hang_judged_both_restart(
    tmp_path: Path, two_hosts: list[tuple[str, str]], toy_env: dict[str, str]  # noqa: F811
) -> None:
    ip0 = two_hosts[0][1]
    ckpt, rdzv_id = tmp_path / "ckpt", f"el-{secrets.token_hex(3)}"
    nodes = []
    with ExitStack() as stack:
        for name, _ip in two_hosts:
            run_dir = tmp_path / name
            argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "--checkpoint-dir", str(ckpt),
                    "--hang-timeout", "6",
                    "torchrun", "--nnodes", "2", "--nproc_per_node", "1", "--rdzv_backend", "c10d",
                    "--rdzv_endpoint", f"{ip0}:29400", "--rdzv_id", rdzv_id,
                    TOY, "--checkpoint-dir", str(ckpt), "--steps", "14", "--hang-at", "8", "--hang-rank", "1"]
            env = dict(toy_env, NEURON_WATCH_SECRET="n" * 32, GLOO_SOCKET_IFNAME="eth0")
            p = start_node(stack, in_host(name, tmp_path, argv), cwd=tmp_path, env=env,
                           out=tmp_path / f"{name}.out", run_dir=run_dir)
            nodes.append((p, run_dir, name))
        deadline = time.monotonic() + 300
        codes = [p.wait(max(1.0, deadline - time.monotonic())) for p, _, _ in nodes]
        logs = "".join((tmp_path / f"{n}.out").read_text()[-2500:] for _, _, n in nodes)
        assert codes == [0, 0], logs
        # the rendezvous host's wrapper hosts the coordinator; the other never tried
        assert (nodes[0][1] / "events.jsonl").exists() and not (nodes[1][1] / "events.jsonl").exists()
        evs = events(nodes[0][1])
        hellos = {e["node"]: (e["hostname"], e["place"]) for e in named(evs, "node_hello")}
        assert sorted(h for h, _ in hellos.values()) == sorted(n for n, _ in two_hosts)
        assert sorted(place for _, place in hellos.values()) == [0, 1]
        for node, (host, place) in hellos.items():
            assert node == f"{host}-n{place}"  # named after its host and the place torchrun gave it
        hang = [e for e in named(evs, "verdict") if e["label"] == "collective_hang"]
        assert len(hang) == 1 and hang[0]["culprit"]["rank"] == 1
        assert hellos[hang[0]["culprit"]["node"]][1] == 1  # rank 1 is group rank 1's (one rank a node)
        restart = named(evs, "restart")
        assert len(restart) == 1 and restart[0]["checkpoint"].endswith("step_5")
        node_of_host = {host: node for node, (host, _) in hellos.items()}
        for _p, run_dir, name in nodes:
            gen1 = json.loads((run_dir / "gen-1" / f"command-{node_of_host[name]}.json").read_text())
            assert gen1["checkpoint"] == restart[0]["checkpoint"]
        assert named(evs, "job_finished")[-1]["exit_code"] == 0
        for _p, run_dir, _n in nodes:
            assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []

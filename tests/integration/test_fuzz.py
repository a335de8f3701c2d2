"""Thousands of random frames at a live ``neuron-watch coordinator`` process and at an agent.

The coordinator must keep running, ingest none of it as lines, register no node, and still
serve a real agent afterwards; an agent must accept none of it as a command.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgpack
import pytest
import zmq

from neuron_watch.events import LogLine, RankKey
from neuron_watch.node.agent_link import AgentLink, new_session
from neuron_watch.wire.auth import Signer
from neuron_watch.wire.protocol import SCHEMA_VERSION, Header, Heartbeat, Kind, Lines, Msg, RankLines, Stop, encode
from neuron_watch.wire.transport import CoordinatorSocket
from tests.fixtures.procs import kill_group

pytestmark = pytest.mark.integration

SECRET = "fuzzing secret, long enough 0123456789"
JOB = "fuzz-1"


def random_frames(rng: random.Random, agent_signer: Signer) -> list[bytes]:
    """One hostile message: random bytes, plausible msgpack, forged or mangled signatures, commands."""
    choice = rng.randrange(8)
    h = Header(kind=Kind.LINES, job=JOB, node=f"n{rng.randrange(4)}", session=rng.randrange(1 << 40),
               generation=0, seq=rng.randrange(100))
    good = encode(Msg(h, Lines((RankLines(0, 1, 0.0, 0.0, 0.0, "step 1 loss 1.0"),))))
    if choice == 0:
        return [rng.randbytes(rng.randrange(0, 300)) for _ in range(rng.randrange(1, 5))]
    if choice == 1:
        return [msgpack.packb([SCHEMA_VERSION, "lines", JOB, "n1", 1, 0, rng.randrange(9), 0, 0.0, 0.0, -1, 0, 0.0, 0]),
                msgpack.packb([0, [], [[0, 1, 0.0, 0.0, 0.0, "x"]], [], []]), rng.randbytes(32)]  # random MAC
    if choice == 2:
        return Signer.for_agent(rng.randbytes(32), JOB).sign(good)  # another secret
    if choice == 3:
        signed = agent_signer.sign(good)
        i = rng.randrange(len(signed))
        f = bytearray(signed[i])
        if f:
            f[rng.randrange(len(f))] ^= 1 << rng.randrange(8)
        signed[i] = bytes(f)
        return signed  # one bit flipped in a real message
    if choice == 4:
        signed = agent_signer.sign(good)
        del signed[rng.randrange(len(signed))]
        if rng.random() < 0.5 and signed:
            signed[-1] = signed[-1][: rng.randrange(len(signed[-1]) + 1)]
        return signed  # a frame missing, maybe another cut short
    if choice == 5:
        # The coordinator never takes commands, whoever signs them (an agent's key: counted as
        # not_agent_kind; the coordinator's: auth). An agent takes none addressed to session 1.
        hs = Header(kind=Kind.STOP, job=JOB, node="n1", session=1, generation=0, seq=rng.randrange(100), target=1)
        signer = agent_signer if rng.random() < 0.5 else Signer.for_coordinator(SECRET.encode(), JOB)
        return signer.sign(encode(Msg(hs, Stop("fuzz"))))
    hb = Header(kind=Kind.HEARTBEAT, job="other-job", node="n1", session=1, generation=0, seq=rng.randrange(100))
    if choice == 6:
        return agent_signer.sign(encode(Msg(hb, Heartbeat())))  # this job's key, another job's name: auth
    # the same secret, another job's keys: refused by name (wrong_job)
    return Signer.for_agent(SECRET.encode(), "other-job").sign(encode(Msg(hb, Heartbeat())))




def test_random_frames_at_a_live_coordinator(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    env = {**os.environ, "NEURON_WATCH_SECRET": SECRET}
    env = {k: v for k, v in env.items() if not k.startswith("NEURON_WATCH_") or k == "NEURON_WATCH_SECRET"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "neuron_watch.cli", "--run-dir", str(run_dir), "--job-id", JOB,
         "coordinator", "--bind", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    ctx = zmq.Context()
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        endpoint = banner.split(" on ", 1)[1].split(" ", 1)[0]
        assert endpoint.startswith("tcp://127.0.0.1:"), banner
        rng = random.Random(4)
        agent_signer = Signer.for_agent(SECRET.encode(), JOB)
        socks = [ctx.socket(zmq.DEALER) for _ in range(4)]
        for s in socks:
            s.setsockopt(zmq.LINGER, 2000)
            s.connect(endpoint)
        n = 5000
        for i in range(n):
            frames = random_frames(rng, agent_signer)
            socks[i % 4].send_multipart(frames or [b""])
        for s in socks:
            s.close()  # linger flushes what is queued
        # A real agent is still served afterwards, and its line is the only one ingested.
        link = AgentLink(endpoint, SECRET.encode(), job=JOB, node="real", session=new_session(time.time()))
        try:
            link.add_line(LogLine(RankKey(link.node, 0), "real line", time.monotonic(), time.time()))
            link.flush_lines(time.monotonic(), time.time())
            end = time.monotonic() + 20
            while len(link.outbox) or link.last_heard is None:
                assert time.monotonic() < end, "the coordinator stopped answering"
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                link.tick(time.monotonic(), time.time())
                time.sleep(0.01)  # a real agent's loop period
        finally:
            link.close()
        summary_path = run_dir / "coordinator.json"
        end = time.monotonic() + 20
        while True:  # the summary is rewritten every second; wait for the one that saw everything
            s = json.loads(summary_path.read_text()) if summary_path.exists() else {}
            if s.get("frames", 0) >= n + 1 and s.get("lines"):
                break
            assert time.monotonic() < end, s
            time.sleep(0.1)
        assert proc.poll() is None  # still running
        assert s["lines"] == 1 and list(s["nodes"]) == ["real"]
        refused = s["refused"]
        assert sum(refused["bad"].values()) + refused["wrong_job"] + refused["not_agent_kind"] == n
        assert refused["not_agent_kind"] > 0 and refused["bad"].get("auth", 0) > 0 and refused["wrong_job"] > 0
        # merged.log is there from the start; its writer process writes the line the summary counted
        # when it runs, up to its flush period later (seconds on a loaded machine)
        merged = run_dir / "merged.log"
        end = time.monotonic() + 20
        while not merged.read_text().endswith("real/rank0 | real line\n"):
            assert time.monotonic() < end, merged.read_text()[-500:]
            time.sleep(0.1)
        assert len(merged.read_text().splitlines()) == 1
    finally:
        ctx.term()
        code = kill_group(proc)
    assert code == 128 + signal.SIGTERM
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)


def test_random_frames_at_an_agent_are_never_commands(tmp_path: Path) -> None:
    fake = CoordinatorSocket("127.0.0.1:0")
    link = AgentLink(fake.endpoint, SECRET.encode(), job=JOB, node="n1", session=new_session(time.time()))
    try:
        link.hello("h", 1, [0], time.monotonic(), time.time())
        end = time.monotonic() + 10
        while (item := fake.recv()) is None:
            assert time.monotonic() < end
            link.tick(time.monotonic(), time.time())
            fake.poll(10)
        routing_id = item[0]
        rng = random.Random(5)
        agent_signer = Signer.for_agent(SECRET.encode(), JOB)
        n = 3000
        for _ in range(n):
            assert fake.send(routing_id, random_frames(rng, agent_signer) or [b""])
        got = []
        end = time.monotonic() + 20
        c = link.counters
        while c.bad_frames + c.wrong_target + c.replayed < n:
            assert time.monotonic() < end, link.summary()
            got.extend(link.tick(time.monotonic(), time.time()))
            link.sock.poll(10)
        # Choice 5 is signed with the right coordinator key but addressed to no session of ours.
        assert got == [] and c.wrong_target > 0 and c.bad_frames > 0
    finally:
        link.close()
        fake.close()

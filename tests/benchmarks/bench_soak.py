"""Soak: a healthy 2-node job under neuron-watch with a fault of the watchdog's world every 2 minutes.

Figures, no pass/fail. One ``neuron-watch torchrun`` per node on this machine (node 0
hosts the coordinator, node 1 reaches it through a TCP relay of ours), the toy job training the
whole time. Every ``--every`` seconds one fault, in turn:

* ``pause``: the coordinator (node 0's wrapper) is SIGSTOPped for ``--pause`` seconds (45 by
  default, longer than the agents' ``--coordinator-silence`` of 30 s), then SIGCONTed;
* ``disk``: node 0's run dir (a tmpfs we mount, when we may: root) is filled to the last byte
  for 20 s, then freed. The ranks' own log files live there too (torchrun's ``--log-dir``);
* ``replay``: the bytes node 1 sent the coordinator at the start of its link (ZMTP greeting,
  hello, first batches), captured by the relay, are replayed 10 times on fresh connections;
* ``flood``: 200,000 lines appended at once to the output file of one of node 1's ranks;
* ``broker``: the MQTT broker the coordinator publishes to (mosquitto) is stopped for 10 s
  and started again on the same port.

At the end (``--minutes``) the operator stops the job with SIGTERM to node 0's wrapper. Printed:
the faults and what each did, restarts (false = no rank of that generation had exited with an
error before it: the watchdog restarted a job that had not failed), the goodput figures of
``job_finished``, the last step, the exit codes, and the pids that survived (none expected).

    .venv/bin/python -m tests.benchmarks.bench_soak [--minutes 30] [--every 120] [--pause 45] [--faults pause,flood]

Every process runs in its own session, is stopped against one deadline and reaped; anything left
carrying a run dir is killed and reported.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tests.fixtures.mqtt import Mosquitto
from tests.fixtures.procs import NEURON_WATCH, TOY, VENV_BIN, free_port, kill_group, pids_with_env

NPROC = 2
CAPTURE_BYTES = 256 * 1024


class Relay:
    """A TCP relay to the coordinator that keeps the first bytes each client sent (for replays)."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.captured = bytearray()
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(("127.0.0.1", self.upstream), timeout=5)
            except OSError:
                client.close()
                continue
            up.settimeout(None)
            self._conns += [client, up]
            first = not self.captured
            threading.Thread(target=self._pump, args=(client, up, first), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, capture: bool) -> None:
        try:
            while data := src.recv(65536):
                if capture and len(self.captured) < CAPTURE_BYTES:
                    self.captured += data[: CAPTURE_BYTES - len(self.captured)]
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._stop.set()
        self.sock.close()
        for c in self._conns:
            with contextlib.suppress(OSError):
                c.close()


def _events(run_dir: Path) -> list[dict[str, Any]]:
    try:
        text = (run_dir / "events.jsonl").read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--every", type=float, default=120.0, help="seconds between faults")
    ap.add_argument("--pause", type=float, default=45.0, help="seconds the coordinator stays SIGSTOPped")
    ap.add_argument("--step-time", type=float, default=0.2)
    ap.add_argument("--faults", default="pause,disk,replay,flood,broker",
                    help="which faults, in this order, repeated (default: all five)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="nw-soak-"))
    run0, run1, ckpt = tmp / "node0", tmp / "node1", tmp / "ckpt"
    run0.mkdir()
    mounted = False
    if os.geteuid() == 0:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(run0)],
                                 capture_output=True).returncode == 0
    (tmp / "mqtt").mkdir()
    broker = Mosquitto(tmp / "mqtt")
    broker.start()
    master, coord = free_port(), free_port()
    relay = Relay(coord)
    job_id = f"soak-{secrets.token_hex(3)}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON_WATCH_")}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    procs: list[subprocess.Popen[str]] = []
    outs = []
    for i, (run_dir, port) in enumerate(((run0, coord), (run1, relay.port))):
        node_env = dict(env, NEURON_WATCH_NODE=f"n{i}", NEURON_WATCH_SECRET="s" * 32)
        argv = [NEURON_WATCH, "--quiet", "--job-id", job_id, "--run-dir", str(run_dir), "--checkpoint-dir", str(ckpt),
                "--coordinator", f"127.0.0.1:{port}",
                *(["--mqtt", broker.url] if i == 0 else []),
                "torchrun", "--nnodes", "2", "--node_rank", str(i), "--nproc_per_node", str(NPROC),
                "--master_addr", "127.0.0.1", "--master_port", str(master),
                TOY, "--checkpoint-dir", str(ckpt), "--steps", "10000000", "--step-time", str(args.step_time),
                "--checkpoint-every", "50"]
        out = open(tmp / f"node{i}.out", "w")  # noqa: SIM115 - closed below
        outs.append(out)
        procs.append(subprocess.Popen(argv, cwd=tmp, env=node_env, stdout=out, stderr=subprocess.STDOUT, text=True,
                                      start_new_session=True))
    p0, p1 = procs
    codes: list[int] = []
    alive = False
    faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    log: list[tuple[float, str, str]] = []
    t0 = time.monotonic()
    end = t0 + args.minutes * 60
    next_fault, k = t0 + args.every, 0
    print(f"soak: {args.minutes:g} min, a fault every {args.every:g}s; run dirs in {tmp}"
          f"{' (node 0 on a tmpfs)' if mounted else ''}", flush=True)
    try:
        while time.monotonic() < end and p0.poll() is None and p1.poll() is None:
            if time.monotonic() < next_fault:
                time.sleep(0.5)
                continue
            kind = faults[k % len(faults)]
            k += 1
            at = time.monotonic() - t0
            what = inject(kind, args, p0, run0, run1, relay, broker, coord, mounted)
            log.append((at, kind, what))
            print(f"  {at:6.0f}s  {kind:7s} {what}", flush=True)
            next_fault += args.every
        alive = p0.poll() is None and p1.poll() is None
        if p0.poll() is None:
            os.kill(p0.pid, signal.SIGTERM)  # the operator ends the job: the coordinator stops every node
        for p in procs:
            try:
                codes.append(p.wait(120))
            except subprocess.TimeoutExpired:
                codes.append(kill_group(p))
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGCONT)
            kill_group(p)
        survivors = []
        for run_dir in (run0, run1):
            deadline = time.monotonic() + 15
            while (left := pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir))) and time.monotonic() < deadline:
                time.sleep(0.2)
            for pid in left:
                survivors.append(pid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        broker.stop()
        relay.close()
        for out in outs:
            out.close()
        evs = _events(run0)
        if mounted:
            # keep what the run dir held: copy the events out before the tmpfs goes
            with contextlib.suppress(OSError):
                (tmp / "node0-events.jsonl").write_text((run0 / "events.jsonl").read_text())
            subprocess.run(["umount", "-l", str(run0)], check=False)
    report(evs, log, codes, alive, survivors, tmp, time.monotonic() - t0)
    return 0


def inject(kind: str, args: argparse.Namespace, p0: subprocess.Popen[str], run0: Path, run1: Path, relay: Relay,
           broker: Mosquitto, coord: int, mounted: bool) -> str:
    if kind == "pause":
        os.kill(p0.pid, signal.SIGSTOP)
        try:
            time.sleep(args.pause)
        finally:
            os.kill(p0.pid, signal.SIGCONT)
        return f"coordinator SIGSTOPped for {args.pause:g}s"
    if kind == "disk":
        if not mounted:
            return "skipped (no tmpfs: needs root)"
        fill = run0 / "fill.bin"
        written = 0
        with contextlib.suppress(OSError), open(fill, "wb") as f:
            chunk = b"\0" * (1 << 20)
            while True:
                written += f.write(chunk)
                f.flush()
        time.sleep(20)
        with contextlib.suppress(OSError):
            fill.unlink()
        return f"run dir filled ({written >> 20} MiB) for 20s, then freed"
    if kind == "replay":
        data = bytes(relay.captured)
        if not data:
            return "skipped (nothing captured)"
        sent = 0
        for _ in range(10):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", coord), timeout=5) as s:
                s.sendall(data)
                sent += 1
                time.sleep(0.5)
        return f"{len(data)} captured bytes of node 1's link replayed on {sent} connection(s)"
    if kind == "flood":
        files = sorted(glob.glob(str(run1 / "gen-*" / "torchrun" / "**" / "stdout.log"), recursive=True),
                       key=os.path.getmtime)
        if not files:
            return "skipped (no rank output file found)"
        target = files[-1]
        with open(target, "a") as f:
            for i in range(0, 200_000, 10_000):
                f.write("".join(f"flood line {j} " + "x" * 80 + "\n" for j in range(i, i + 10_000)))
        return f"200000 lines appended to {os.path.relpath(target, run1)} (node 1)"
    if kind == "broker":
        broker.stop()
        time.sleep(10)
        broker.start()
        return "mosquitto stopped for 10s and started again"
    raise ValueError(kind)


def report(evs: list[dict[str, Any]], log: list[tuple[float, str, str]], codes: list[int], alive: bool,
           survivors: list[int], tmp: Path, seconds: float) -> None:
    restarts = [e for e in evs if e["event"] == "restart"]
    false_restarts = []
    for r in restarts:
        gen = r["generation"] - 1
        crashed = [e for e in evs if e["event"] == "rank_exit" and e["generation"] == gen and e.get("exit_code")]
        if not crashed:
            false_restarts.append(r)
    verdicts = [e for e in evs if e["event"] == "verdict" and e.get("action") != "wait"]
    finished = [e for e in evs if e["event"] == "job_finished"]
    goodput = finished[0].get("goodput", {}) if finished else {}
    warnings: dict[str, int] = {}
    for e in evs:
        if e["event"] == "warning":
            warnings[str(e.get("kind"))] = warnings.get(str(e.get("kind")), 0) + 1
    lost = sum((tmp / f"node{i}.out").read_text(errors="replace").count("lost the coordinator") for i in (0, 1))
    print(f"ran {seconds / 60:.1f} min, {len(log)} fault(s); job alive until the end: {alive}")
    print(f"restarts: {len(restarts)}, false restarts: {len(false_restarts)}")
    for r in restarts:
        print(f"  restart at {r['time']}: {r.get('reason')}")
    for v in verdicts:
        print(f"  verdict {v['label']} -> {v.get('action')}: {str(v.get('reason'))[:160]}")
    print(f"goodput: effective {goodput.get('effective_ratio')}, useful {goodput.get('useful_ratio')}, "
          f"outcome {goodput.get('outcome')}, exit code {finished[0]['exit_code'] if finished else None}")
    print(f"last step: {finished[0].get('last_step') if finished else None}; node exit codes {codes}; "
          f"warnings {warnings}; 'lost the coordinator' lines {lost}; agent_dropped events "
          f"{sum(1 for e in evs if e['event'] == 'agent_dropped')}")
    print(f"pids that survived: {survivors or 'none'}; files in {tmp}")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())

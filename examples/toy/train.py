"""A tiny real DDP training job (torch on the CPU, gloo) for neuron-watch demos and tests.

It checkpoints every few steps in the NxD layout (``<dir>/step_<N>/`` holding the state, with a
``checkpoint`` file written first and ``done`` written last), resumes from ``--resume-from`` or
``$NEURON_WATCH_CHECKPOINT``, and can inject faults, by default only in generation 0
(``$NEURON_WATCH_RESTART_COUNT``) so that a restart recovers:

* ``--hang-at STEP --hang-rank R``: rank R never joins the step's collective (the others block in it);
* ``--crash-at STEP --crash-rank R``: rank R exits with ``--crash-code``;
* ``--hw-error-at STEP --hw-error-rank R``: rank R prints the runtime's uncorrectable HBM error
  (``NRT_EXEC_HW_ERR_HBM_UE``, a hardware verdict: drain the node) and exits 1;
* ``--compile-at STEP --compile-rank R --compile-seconds S``: rank R "recompiles a graph": it prints
  the real compiler-wrapper lines (notes/neuron.md §3) and runs a CPU-burning child whose argv is
  ``neuronx-cc compile ...`` (``examples/toy/neuronx-cc``), while the other ranks wait in the
  collective and print the Neuron runtime's ``Timeout waiting for RX`` warning every
  ``--rx-warn-every`` seconds, as real ranks do while a peer compiles;
* ``--build-at STEP --build-rank R --build-seconds S``: rank R builds an engine in its own process, as a
  program that builds its TensorRT engines itself does: it prints the announcement (turbo-ocr's
  ``Building TRT engine: <onnx> -> <plan>``), burns CPU in the rank itself for S seconds with nothing
  printed and no compiler process, then prints ``Built: <plan> (<size> MB)``; with ``--build-stuck``
  the announced build never runs: the rank waits forever, using no CPU (a builder deadlocked), while
  the other ranks wait for it in the collective;
* ``--slow-save-at STEP --save-seconds S``: the synced checkpoint save of that step takes S seconds
  more on rank 0 (a slow shared filesystem) while every other rank waits in the save's barrier.

The gradients are averaged by ``DistributedDataParallel`` and stepped by ``torch.optim.SGD``
(``--grad-sync ddp``, the default). ``--grad-sync allreduce`` (or ``TOY_GRAD_SYNC=allreduce``) does
the same arithmetic by hand: one ``all_reduce`` of the flattened gradients, then ``p -= lr * grad``.
A step then runs the same collectives (the gradients' all-reduce, the loss's) in the same places,
but the rank never imports ``torch._dynamo``, which DDP's and the optimizer's constructors do: a
second or more of CPU at every rank's start, which a job whose subject is not DDP need not pay.

Run it with torchrun (or ``neuron-watch torchrun``)::

    torchrun --nproc_per_node 4 examples/toy/train.py --steps 40 --checkpoint-dir /tmp/ckpt

or one process per rank under srun (or ``neuron-watch srun``), the rank from ``SLURM_PROCID``::

    MASTER_ADDR=$(hostname) MASTER_PORT=29500 srun -N 2 --ntasks-per-node 2 python examples/toy/train.py
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import subprocess
import sys
import threading
import time
import uuid

import torch
import torch.distributed as dist
from cpuburn import burn_cpu  # (this script's folder is the first on the path)

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--checkpoint-dir", default=os.environ.get("TOY_CHECKPOINT_DIR", "toy-checkpoints"))
    p.add_argument("--checkpoint-every", type=int, default=5)
    p.add_argument("--resume-from", default=None, help="a step_<N> directory ('' = start fresh)")
    p.add_argument("--step-time", type=float, default=0.05, help="seconds of pretend work per step")
    p.add_argument("--pg-timeout", type=float, default=1800.0, help="gloo collective timeout (torch default 30 min)")
    p.add_argument("--fault-generation", type=int, default=0, help="inject faults only in this generation (-1: all)")
    p.add_argument("--hang-at", type=int, default=-1)
    p.add_argument("--hang-rank", type=int, default=1)
    p.add_argument("--crash-at", type=int, default=-1)
    p.add_argument("--crash-rank", type=int, default=1)
    p.add_argument("--crash-code", type=int, default=3)
    p.add_argument("--compile-at", type=int, default=-1)
    p.add_argument("--compile-rank", type=int, default=0)
    p.add_argument("--compile-seconds", type=float, default=30.0)
    p.add_argument("--rx-warn-every", type=float, default=120.0)
    p.add_argument("--build-at", type=int, default=-1)
    p.add_argument("--build-rank", type=int, default=1)
    p.add_argument("--build-seconds", type=float, default=30.0)
    p.add_argument("--build-stuck", action="store_true", help="the announced build never runs (no CPU)")
    p.add_argument("--nan-at", type=int, default=-1, help="from this step on, report a NaN loss (numerical error)")
    p.add_argument("--hw-error-at", type=int, default=-1,
                   help="at this step, rank --hw-error-rank prints the runtime's uncorrectable-HBM error and exits 1")
    p.add_argument("--hw-error-rank", type=int, default=1)
    p.add_argument("--slow-save-at", type=int, default=-1, help="the checkpoint save of this step is slow")
    p.add_argument("--save-seconds", type=float, default=30.0)
    p.add_argument("--normal-exit", action="store_true",
                   help="at the end, leave through the interpreter's normal exit (its exit handlers run, the rank "
                        "probe records a clean exit) instead of os._exit(0)")
    p.add_argument("--grad-sync", choices=("ddp", "allreduce"), default=os.environ.get("TOY_GRAD_SYNC", "ddp"),
                   help="ddp: DistributedDataParallel and torch.optim.SGD; allreduce: the same by hand, one "
                        "all_reduce of the gradients (no torch._dynamo import; default $TOY_GRAD_SYNC or ddp)")
    return p.parse_args()


def log(msg: str) -> None:
    print(msg, flush=True)


class CcomWarner:
    """Prints the Neuron runtime's RX-timeout warning while this rank waits in a collective."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.waiting_since: float | None = None
        self._stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        warned = 0
        while not self._stop.wait(0.2):
            since = self.waiting_since
            if since is None:
                warned = 0
                continue
            due = int((time.monotonic() - since) // self.every)
            if due > warned:
                warned = due
                ts = datetime.datetime.now().strftime("%Y-%b-%d %H:%M:%S.%f")[:-2]
                log(f"{ts} {os.getpid()}:{threading.get_native_id()} [0] include/socket.h:579 CCOM WARN "
                    f"Timeout waiting for RX (waited {int(self.every)} sec) - retrying")


def emulate_compile(seconds: float) -> None:
    """What a JIT graph compile looks like from outside: wrapper lines, dots, a busy neuronx-cc child."""
    work = f"/tmp/{os.environ.get('USER', 'no-user')}/neuroncc_compile_workdir/{uuid.uuid4()}"
    module = f"MODULE_{uuid.uuid4().int % 10**19}+d41d8cd9"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S") + ".000297"
    log(f"{stamp}:  {os.getpid()}  INFO ||NEURON_CACHE||: Compile cache path: /var/tmp/neuron-compile-cache")
    log(f"{stamp}:  {os.getpid()}  INFO ||NEURON_CC_WRAPPER||: Call compiler with cmd: neuronx-cc compile "
        f"--target=trn1 --framework=XLA {work}/model.{module}.hlo_module.pb --output {work}/model.{module}.neff "
        "--verbose=35")
    child = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "neuronx-cc"), "compile", "--target=trn1", "--framework=XLA",
         f"{work}/model.{module}.hlo_module.pb", "--output", f"{work}/model.{module}.neff",
         f"--burn-seconds={seconds}"]
    )
    while child.poll() is None:
        sys.stdout.write(".")
        sys.stdout.flush()
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=min(20.0, max(1.0, seconds / 5)))
    print(flush=True)
    if child.returncode != 0:
        log(f"RuntimeError: neuronx-cc compilation failed with {child.returncode}. Check compiler logs.")
        sys.exit(1)
    log("Compiler status PASS")
    log(f"{time.strftime('%Y-%m-%d %H:%M:%S')}.000003: {os.getpid()} [INFO]: Compilation Successfully Completed "
        f"for model.{module}.hlo_module.pb")


def emulate_engine_build(seconds: float, stuck: bool) -> None:
    """What an engine build in the rank's own process looks like from outside: the program's own
    announcement (turbo-ocr's words, tests/data/real-logs/compiling/turboocr-17-building-trt-engines-hours),
    nothing printed while the rank computes, then the engine's line; no compiler process, so only the
    rank's CPU time shows the build. ``stuck``: it never builds, and waits forever without CPU."""
    plan = f"/tmp/{os.environ.get('USER', 'no-user')}/toy-engines/model_{uuid.uuid4().int % 10**19}.trt"

    def stamp() -> str:
        return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    log(f"{stamp()} Building TRT engine: model.onnx -> {plan}")
    while stuck:
        time.sleep(3600)
    burn_cpu(seconds)
    log(f"{stamp()} Built: {plan} (4.59903 MB)")


class HandSGD:
    """``torch.optim.SGD`` without momentum, with the gradients averaged over the ranks by one
    ``all_reduce`` (what DDP does in ``backward``): no ``torch.optim``, no DDP, so no ``torch._dynamo``."""

    def __init__(self, model: torch.nn.Module, lr: float, world: int) -> None:
        self.params = list(model.parameters())
        self.lr, self.world = lr, world
        with torch.no_grad():  # DDP's start: every rank begins from rank 0's weights
            for p in self.params:
                dist.broadcast(p, 0)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def _grads(self) -> list[torch.Tensor]:
        grads = []
        for p in self.params:
            assert p.grad is not None, "backward() runs before the gradients are averaged"
            grads.append(p.grad)
        return grads

    def sync(self) -> None:
        """Average the gradients over the ranks: the collective a hung peer blocks."""
        grads = self._grads()
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= self.world
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()

    def step(self) -> None:
        with torch.no_grad():
            for p, g in zip(self.params, self._grads(), strict=True):
                p.add_(g, alpha=-self.lr)

    def state_dict(self) -> dict[str, float]:
        return {"lr": self.lr}

    def load_state_dict(self, state: dict[str, object]) -> None:
        pass  # no momentum: an SGD has no state to carry over


def save_checkpoint(ckdir: str, step: int, model: torch.nn.Module, opt: torch.optim.Optimizer | HandSGD,
                    rank: int, extra_seconds: float = 0.0) -> None:
    tag = os.path.join(ckdir, f"step_{step}")
    if rank == 0:
        log(f"synced saving of checkpoint step_{step} began")
        os.makedirs(tag, exist_ok=True)
        with open(os.path.join(tag, "checkpoint"), "w") as f:
            f.write("1")
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, os.path.join(tag, "state.pt"))
        time.sleep(extra_seconds)  # a slow filesystem; the other ranks wait in the barrier, silent
    dist.barrier()
    if rank == 0:
        with open(os.path.join(tag, "done"), "w") as f:  # written last: the checkpoint is complete
            f.write("1")
        log(f"synced saving of checkpoint step_{step} completed")


def main() -> None:
    args = parse_args()
    generation = int(os.environ.get("NEURON_WATCH_RESTART_COUNT", os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")))
    faults_on = args.fault_generation < 0 or generation == args.fault_generation
    timeout = datetime.timedelta(seconds=args.pg_timeout)
    if "RANK" not in os.environ and "SLURM_PROCID" in os.environ:
        # One process per rank started by srun itself (the Megatron-LM/NeMo way on Slurm): the rank
        # and world come from Slurm, MASTER_ADDR/MASTER_PORT from the batch script.
        dist.init_process_group("gloo", rank=int(os.environ["SLURM_PROCID"]),
                                world_size=int(os.environ["SLURM_NTASKS"]), timeout=timeout)
    else:  # torchrun's environment
        dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt: torch.optim.Optimizer | HandSGD
    if args.grad_sync == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        model: torch.nn.Module = DDP(net)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
    else:
        model = net
        opt = HandSGD(net, 0.01, world)
    resume = args.resume_from if args.resume_from is not None else os.environ.get("NEURON_WATCH_CHECKPOINT", "")
    start = 1
    if resume:
        state = torch.load(os.path.join(resume, "state.pt"), weights_only=True)
        net.load_state_dict(state["model"])
        if "param_groups" in state["opt"]:  # an optimizer's own state (not HandSGD's)
            opt.load_state_dict(state["opt"])
        start = state["step"] + 1
        log(f"loading checkpoint from {resume} done: resuming at step {start}")
    warner = CcomWarner(args.rx_warn_every)
    gen = torch.Generator().manual_seed(rank * 1000 + start)
    for step in range(start, args.steps + 1):
        t0 = time.monotonic()
        x = torch.randn(64, 16, generator=gen)
        loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
        if faults_on and rank == args.crash_rank and step == args.crash_at:
            log(f"step {step}: injected crash, exit({args.crash_code})")
            os._exit(args.crash_code)
        if faults_on and rank == args.hang_rank and step == args.hang_at:
            log(f"step {step}: injected hang: rank {rank} will not join the collective")
            while True:
                time.sleep(3600)
        if faults_on and rank == args.hw_error_rank and step == args.hw_error_at:
            ts = datetime.datetime.now().strftime("%Y-%b-%d %H:%M:%S.%f")[:-2]
            log(f"{ts} {os.getpid()}:{os.getpid()} ERROR   NRT:nrt_infodump                            "
                "Failure: NRT_EXEC_HW_ERR_HBM_UE in nrt_execute()")
            os._exit(1)
        if faults_on and rank == args.compile_rank and step == args.compile_at:
            emulate_compile(args.compile_seconds)
        if faults_on and rank == args.build_rank and step == args.build_at:
            emulate_engine_build(args.build_seconds, args.build_stuck)
        opt.zero_grad()
        warner.waiting_since = time.monotonic()
        loss.backward()  # DDP all-reduces the gradients here: the collective a hung peer blocks
        if isinstance(opt, HandSGD):
            opt.sync()
        t = torch.tensor([loss.item()])
        dist.all_reduce(t)
        warner.waiting_since = None
        opt.step()
        time.sleep(args.step_time)
        mean = t.item() / world
        if faults_on and 0 <= args.nan_at <= step:  # once NaN, it stays NaN (as in a real run)
            mean = float("nan")
        log(f"step {step} loss {mean:.6f} step_time {time.monotonic() - t0:.3f}s")
        if step % args.checkpoint_every == 0:
            slow = faults_on and step == args.slow_save_at
            save_checkpoint(args.checkpoint_dir, step, net, opt, rank, args.save_seconds if slow else 0.0)
    dist.barrier()
    log(f"training done at step {args.steps}")
    dist.destroy_process_group()
    # torch's interpreter teardown takes seconds on a busy machine and prints nothing; a demo job
    # has nothing left to flush, so it leaves at once (the watchdog sees the exit, not a silence).
    sys.stdout.flush()
    if not args.normal_exit:
        os._exit(0)


if __name__ == "__main__":
    main()

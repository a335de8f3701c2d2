#!/usr/bin/env python3
"""SageMaker entry point: runs once per host and execs ``neuron-watch torchrun`` for that host.

Use it *without* ``distribution={"torch_distributed": ...}``: that runner builds torchrun itself and
leaves no place for a wrapper (notes/neuron.md §5.4). SageMaker's plain runner starts this file on
every host; it turns the SM_* environment into torchrun's arguments:

    SM_HOSTS='["algo-1","algo-2"]'  SM_CURRENT_HOST=algo-2  SM_NUM_NEURONS=32
    -> neuron-watch --checkpoint-dir /opt/ml/checkpoints --run-dir /opt/ml/output/data/neuron-watch/algo-2
         torchrun --nnodes 2 --nproc_per_node 32 --node_rank 1 --master_addr <algo-1> --master_port 7777
         train.py --checkpoint-dir /opt/ml/checkpoints <hyperparameters...>

* ranks per host: ``SM_NUM_NEURONS`` (NeuronCores), else ``SM_NUM_GPUS``, else ``NPROC_PER_NODE``
  (default 1: a CPU run, as in the tests);
* master: the first of the sorted hosts (``MASTER_ADDR`` if the container set it), resolved to an
  IP when possible (the Neuron runtime fails on FQDNs > 63 characters); port ``MASTER_PORT`` or 7777;
* checkpoints: ``/opt/ml/checkpoints`` (synced with ``checkpoint_s3_uri``; restarts inside the job
  read the local copy), or ``CHECKPOINT_DIR``; artifacts under ``/opt/ml/output/data`` (uploaded
  at job end), or ``RUN_DIR``;
* the training script: ``TRAIN_SCRIPT``, else ``train.py`` next to this file, else the toy job;
* hyperparameters (this file's arguments) go to the training script.

``neuron-watch --dry-run`` (or ``NEURON_WATCH_DRY_RUN=1``) prints the exact command instead of running it.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_CHECKPOINTS = "/opt/ml/checkpoints"
DEFAULT_OUTPUT = "/opt/ml/output/data"
SAGEMAKER_MASTER_PORT = "7777"  # what the SageMaker toolkits use


class EntryError(Exception):
    """The SM_* environment is missing or inconsistent."""


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env.get(name, "0") or 0)
    except ValueError as exc:
        raise EntryError(f"{name}={env.get(name)!r} is not a number") from exc


def resolve(host: str) -> str:
    """``host`` as an IPv4 address when DNS knows it, else unchanged."""
    try:
        return socket.gethostbyname(host)
    except OSError:
        return host


def build_command(env: Mapping[str, str], user_args: Sequence[str], *, neuron_watch: str = "neuron-watch",
                  resolver: Callable[[str], str] = resolve) -> list[str]:
    """The argv to exec on this host. Pure apart from ``resolver`` (host -> address).

    Raises:
        EntryError: SM_HOSTS is not a JSON list, or SM_CURRENT_HOST is not in it.
    """
    try:
        hosts = sorted(json.loads(env.get("SM_HOSTS", "")))
    except ValueError as exc:
        raise EntryError(f"SM_HOSTS is not a JSON list: {env.get('SM_HOSTS')!r}") from exc
    current = env.get("SM_CURRENT_HOST", "")
    if not hosts or current not in hosts:
        raise EntryError(f"SM_CURRENT_HOST={current!r} is not in SM_HOSTS={hosts}")
    nproc = _int(env, "SM_NUM_NEURONS") or _int(env, "SM_NUM_GPUS") or _int(env, "NPROC_PER_NODE") or 1
    master = env.get("MASTER_ADDR") or hosts[0]
    master = resolver(master)
    port = env.get("MASTER_PORT") or SAGEMAKER_MASTER_PORT
    ckpt = env.get("CHECKPOINT_DIR") or DEFAULT_CHECKPOINTS
    run_dir = env.get("RUN_DIR") or f"{env.get('SM_OUTPUT_DATA_DIR') or DEFAULT_OUTPUT}/neuron-watch/{current}"
    train = env.get("TRAIN_SCRIPT") or str(HERE / "train.py" if (HERE / "train.py").exists()
                                           else HERE.parent / "toy" / "train.py")
    return [neuron_watch, "--checkpoint-dir", ckpt, "--run-dir", run_dir,
            "torchrun", "--nnodes", str(len(hosts)), "--nproc_per_node", str(nproc),
            "--node_rank", str(hosts.index(current)), "--master_addr", str(master), "--master_port", port,
            train, "--checkpoint-dir", ckpt, *user_args]


def main() -> int:
    env = dict(os.environ)
    try:
        argv = build_command(env, sys.argv[1:])
    except EntryError as exc:
        print(f"entry.py: {exc}; run this as a SageMaker entry point or set SM_HOSTS/SM_CURRENT_HOST", file=sys.stderr)
        return 2
    if (env.get("SM_CURRENT_INSTANCE_TYPE") or "").startswith(("ml.trn", "ml.p4", "ml.p5")):
        # The torch_distributed runner would set these for EFA instances; we bypass it.
        env.setdefault("FI_PROVIDER", "efa")
        env.setdefault("FI_EFA_USE_DEVICE_RDMA", "1")
    # Every host's agent names itself after its SageMaker host (algo-1, algo-2, ...): host names
    # inside the containers need not be unique.
    env.setdefault("NEURON_WATCH_NODE", env["SM_CURRENT_HOST"])
    if env.get("TRAINING_JOB_NAME"):  # one job id on every host: the training job's name
        env.setdefault("NEURON_WATCH_JOB_ID", env["TRAINING_JOB_NAME"])
    print("entry.py: exec " + " ".join(argv), flush=True)
    os.makedirs(argv[argv.index("--run-dir") + 1], exist_ok=True)
    os.execvpe(argv[0], argv, env)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())

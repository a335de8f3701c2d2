#!/bin/bash
# Per-node launcher: srun starts ONE copy of this script on every node of the allocation
# (the Neuron samples' layout); it runs torchrun under neuron-watch for that node.
#
# Environment knobs (all optional):
#   TRAIN_SCRIPT      training script (default: ../toy/train.py, the toy DDP job; put your model here)
#   NPROC_PER_NODE    ranks per node (default: NeuronCores from neuron-ls, else 2 on a CPU host)
#   MASTER_PORT       rendezvous port (default 41000, as NxDT/NNM; reserve it with
#                     `sysctl -w net.ipv4.ip_local_reserved_ports=41000` on real clusters)
#   CHECKPOINT_DIR    shared checkpoint directory (default $SLURM_SUBMIT_DIR/checkpoints/$SLURM_JOB_ID;
#                     a requeued job keeps its id, so it resumes from its own checkpoints)
#   RUN_DIR           neuron-watch run directory of this node (default logs/<job>/<restart>/<node id>)
#   COMPILE=1         compile-first run: wrap in neuron_parallel_compile and run COMPILE_STEPS steps
# Everything after the script name is passed to the training script.
set -euo pipefail
: "${SLURM_JOB_NODELIST:?run this under srun inside an sbatch allocation}"
: "${SLURM_NODEID:?run this under srun (one task per node)}"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TRAIN_SCRIPT=${TRAIN_SCRIPT:-$HERE/../toy/train.py}
MASTER_PORT=${MASTER_PORT:-41000}
NNODES=${SLURM_NNODES:-$SLURM_NTASKS}
RESTART=${SLURM_RESTART_COUNT:-0}

# The master is the first node of the allocation, passed as an IP address: the Neuron runtime
# fails on FQDNs longer than 63 characters, and trn1 has several interfaces that /etc/hosts may
# map wrongly. Slurm's NodeAddr first (an IP on ParallelCluster), else DNS.
head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
addr=$(scontrol show node "$head" | sed -n 's/.*NodeAddr=\([^ ]*\).*/\1/p' | head -n 1)
if ! [[ $addr =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    addr=$(getent ahostsv4 "${addr:-$head}" | awk 'NR == 1 { print $1 }')
fi
if [ -z "$addr" ]; then echo "run_node.sh: cannot resolve the master node $head to an IP" >&2; exit 2; fi
export MASTER_ADDR=$addr MASTER_PORT

if [ -z "${NPROC_PER_NODE:-}" ]; then
    if command -v neuron-ls >/dev/null 2>&1; then
        NPROC_PER_NODE=$(neuron-ls -j | python3 -c 'import json,sys; print(sum(d["nc_count"] for d in json.load(sys.stdin)))')
    else
        NPROC_PER_NODE=2   # CPU host: the toy job
    fi
fi

# EFA on trn1/trn2 (notes: FI_EFA_FORK_SAFE is needed on kernels < 5.15; neuron-watch sets it there).
if [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
    export FI_PROVIDER=efa FI_EFA_USE_DEVICE_RDMA=1
fi

CHECKPOINT_DIR=${CHECKPOINT_DIR:-${SLURM_SUBMIT_DIR:-$PWD}/checkpoints/$SLURM_JOB_ID}
RUN_DIR=${RUN_DIR:-${SLURM_SUBMIT_DIR:-$PWD}/logs/$SLURM_JOB_ID/$RESTART/$SLURM_NODEID}
MAYBE_COMPILE=()
if [ "${COMPILE:-0}" = "1" ]; then
    CHECKPOINT_DIR=$CHECKPOINT_DIR-compile   # a compile run never resumes the real run's checkpoints
    if command -v neuron_parallel_compile >/dev/null 2>&1; then
        MAYBE_COMPILE=(neuron_parallel_compile)
    else
        echo "run_node.sh: neuron_parallel_compile not found; running the graph-extraction pass only" >&2
        export NEURON_EXTRACT_GRAPHS_ONLY=1
    fi
    set -- --steps "${COMPILE_STEPS:-4}" "$@"
fi
mkdir -p "$CHECKPOINT_DIR" "$RUN_DIR"

echo "run_node.sh: node $SLURM_NODEID/$NNODES on $(hostname) master=$MASTER_ADDR:$MASTER_PORT nproc=$NPROC_PER_NODE restart=$RESTART"
exec "${MAYBE_COMPILE[@]}" neuron-watch --run-dir "$RUN_DIR" --checkpoint-dir "$CHECKPOINT_DIR" \
    torchrun --nproc_per_node "$NPROC_PER_NODE" --nnodes "$NNODES" --node_rank "$SLURM_NODEID" \
    --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT" \
    "$TRAIN_SCRIPT" --checkpoint-dir "$CHECKPOINT_DIR" "$@"

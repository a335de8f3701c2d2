#!/bin/bash
# ParallelCluster OnNodeConfigured custom action: install neuron-watch's Slurm hooks on compute nodes.
# ParallelCluster >= 3.6 owns Prolog=/Epilog= (they point at prolog.d/* and epilog.d/*, and
# CustomSlurmSettings cannot change them), so we drop our scripts into those directories.
# Args: $1 = the neuron-watch executable (default: the shared venv's), $2 = the hook config to copy.
set -euo pipefail
. /etc/parallelcluster/cfnconfig
[ "${cfn_node_type:-}" = "ComputeFleet" ] || exit 0
NW=${1:-/fsx/neuron-watch-venv/bin/neuron-watch}
CONF=${2:-}
SLURM_ETC=/opt/slurm/etc/scripts
SRC=$(dirname "$NW")/../share/neuron-watch/slurm   # or a checkout's slurm/ directory
[ -d "$SRC" ] || SRC=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p /etc/neuron-watch "$SLURM_ETC/prolog.d" "$SLURM_ETC/epilog.d"
[ -n "$CONF" ] && cp "$CONF" /etc/neuron-watch/slurm.toml
# A small wrapper per hook: says which neuron-watch to use (hooks get no PATH) and runs ours.
for hook in prolog epilog; do
    install -m 0755 "$SRC/$hook" "/etc/neuron-watch/$hook"
    printf '#!/bin/bash\nNEURON_WATCH_BIN=%q exec /etc/neuron-watch/%s "$@"\n' "$NW" "$hook" \
        > "$SLURM_ETC/$hook.d/80_neuron_watch_$hook"
    chmod 0755 "$SLURM_ETC/$hook.d/80_neuron_watch_$hook"
done

#!/usr/bin/env bash
# The demo: a real 3-rank torchrun training job (CPU, gloo) under neuron-watch. Rank 2 hangs in a
# collective at step 12 of the first run; neuron-watch sees that no rank progresses, captures the
# evidence (stack dumps of every rank, before anything is killed), stops the job, and restarts it
# from the newest complete checkpoint; the job then finishes. Run from anywhere:
#   examples/toy/demo.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/setup
D=$(mktemp -d "${TMPDIR:-/tmp}/neuron-watch-demo.XXXXXX")
export PATH="$PWD/.venv/bin:$PATH"
set +e
neuron-watch --run-dir "$D/run" --checkpoint-dir "$D/checkpoints" --hang-timeout 10 \
  torchrun --nproc_per_node 3 examples/toy/train.py \
    --steps 30 --checkpoint-dir "$D/checkpoints" --hang-at 12 --hang-rank 2
code=$?
set -e
echo
echo "== what happened (events.jsonl) =="
python3 - "$D/run/events.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    extra = {k: e[k] for k in ("label", "culprit", "reason", "checkpoint", "exit_code", "restarts") if k in e}
    if e["event"] in ("job_started", "verdict", "incident", "stopped", "restart", "gave_up", "job_finished"):
        print(f'{e["time"]}  gen {e["generation"]}  {e["event"]:13} {json.dumps(extra)}')
PY
echo
neuron-watch report "$D/run" || true
echo "run directory: $D/run (rank logs, incidents/, timeline.json for Perfetto)"
exit $code

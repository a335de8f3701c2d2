"""A rank whose output comes in an envelope, dead after its first lines: the live verdict is diagnose's.

Real torchrun, 2 CPU ranks. Each rank relays what its trainer printed the way a container runtime
keeps it, Docker's json-file records (moby ``daemon/logger/jsonfilelog``: ``{"log":"...\\n",
"stream":"stderr","time":"<RFC 3339 nano>"}``), under one plain line of its own, and exits after five
lines: a configuration error (a missing package) that ends an early crash. Five lines do not decide
an envelope while more may come (``envelopes.detect`` waits for 8), so the node holds the records back;
the rank's end reads its files to their end and releases them as ``neuron-watch diagnose`` reads the
five-line log: opened. The live judge then reads the message, not the record around it, and its
verdict (configuration, stopped, never restarted) is what ``diagnose`` reads in the rank logs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.procs import NEURON_WATCH, pids_with_env, run_to_end
from tests.fixtures.stopped import stopped_as_diagnose_reads_it

pytestmark = pytest.mark.process

SCRIPT = """\
import datetime
import json
import sys

TRAINER = [
    "Traceback (most recent call last):",
    '  File "/workspace/train.py", line 9, in <module>',
    "    import torch_neuronx",
    "ModuleNotFoundError: No module named 'torch_neuronx'",
]

print("relaying the container's log (json-file)", flush=True)
for line in TRAINER:
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
    record = {"log": line + "\\n", "stream": "stderr", "time": stamp}
    print(json.dumps(record, separators=(",", ":")), flush=True)
sys.exit(1)
"""


def test_a_rank_dead_after_five_json_file_records_is_judged_on_their_messages_as_diagnose_reads_them(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    script = tmp_path / "relay.py"
    script.write_text(SCRIPT)
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "--max-restarts", "3",
            "torchrun", "--nproc_per_node", "2", str(script)]
    code, out = run_to_end(argv, str(tmp_path), toy_env, run_dir, 240)
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    live = stopped_as_diagnose_reads_it(run_dir, code, out, toy_env)
    texts = [e["text"] for e in live["evidence"]]
    # the judge read the message the record holds, not the record
    assert any(t.startswith("ModuleNotFoundError: No module named 'torch_neuronx'") for t in texts), texts
    assert not any('"log":' in t for t in texts), texts
    # the rank logs keep the records as the rank printed them
    assert '{"log":"ModuleNotFoundError' in (run_dir / "gen-0" / "rank-0.log").read_text()

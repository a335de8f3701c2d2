"""A set-up the program refuses, told only by its message, stops a live job at once, as diagnose reads it.

Real torchrun, 2 CPU ranks, ``--max-restarts 2``: each rank raises, at start-up, the error TensorFlow gives
when its collectives are configured too late (the words of the real-log excerpt
``config_error/tensorflow-34568-collective-ops-configured-at-startup``). Its class (``RuntimeError``) says
nothing of a cause and no signature knows its words; its message says what the program refuses
(exctaxonomy.setup_refusal). Offline ``diagnose`` read it as configuration; live, the crash was restarted
and stopped only when it repeated. The live judge now reads a crash as ``diagnose`` does
(diagnosis/crashreading.py): stopped in the first generation, the advice on the console.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.diagnosis.errorclass import CONFIG_ADVICE
from tests.fixtures.procs import NEURON_WATCH, pids_with_env, run_to_end
from tests.fixtures.stopped import stopped_as_diagnose_reads_it

pytestmark = pytest.mark.process

SCRIPT = """\
import torch.distributed  # the rank gets as far as a real job's imports


def configure_collectives():
    raise RuntimeError("Collective ops must be configured at program startup")


configure_collectives()
"""


def test_a_refused_set_up_is_stopped_in_the_first_generation(tmp_path: Path, toy_env: dict[str, str]) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "--max-restarts", "2",
            "torchrun", "--nproc_per_node", "2", str(script)]
    code, out = run_to_end(argv, str(tmp_path), toy_env, run_dir, 240)
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    live = stopped_as_diagnose_reads_it(run_dir, code, out, toy_env)
    assert "Collective ops must be configured at program startup" in live["evidence"][0]["text"]
    assert live["advice"] == CONFIG_ADVICE
    assert CONFIG_ADVICE[:60] in out, out[-3000:]  # the console says what to do

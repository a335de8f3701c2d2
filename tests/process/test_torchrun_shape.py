"""The job's shape as torchrun's own parser (run by torchrun's interpreter) reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.launchers.torchrun import TorchrunLauncher

pytestmark = pytest.mark.process


@pytest.mark.parametrize(
    ("args", "offset"),
    [
        # static rendezvous (the default with --master_addr): node_rank fixes the global ranks
        (["--nnodes", "3", "--nproc_per_node", "4", "--node_rank", "2", "--master_addr", "10.0.0.1"], 8),
        (["--nproc_per_node", "4"], 0),  # one node
        # a c10d rendezvous assigns group ranks at run time: learned from the workers instead
        (["--nnodes", "2", "--nproc_per_node", "2", "--rdzv_backend", "c10d", "--rdzv_endpoint", "h:29400"], None),
    ],
)
def test_rank_offset_is_known_before_start_only_for_a_static_rendezvous(
    tmp_path: Path, args: list[str], offset: int | None
) -> None:
    info = TorchrunLauncher([*args, "train.py"], marker="test").describe(str(tmp_path))
    assert info.rank_offset == offset

"""torchrun as our launcher: the job's shape by torchrun's own parser, and the spare started ahead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neuron_watch.launchers import torchrun_args
from neuron_watch.launchers.base import LaunchInfo
from neuron_watch.launchers.torchrun import TorchrunLauncher, _parse_snippet
from neuron_watch.node.procs import MARKER_ENV, alive, can_raise_priority_to, marked_pids
from tests.fixtures.procs import NEURON_WATCH, TOY, events, named, wait_until_gone

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


_SHAPES = [
    ["--nproc_per_node", "2", "train.py", "--lr", "0.1"],
    ["--nnodes", "1:4", "--nproc-per-node=3", "--rdzv-backend", "c10d", "--rdzv-endpoint", "h:29400",
     "--numa-binding", "node", "--duplicate-stdout-filters", "a,,b", "-r", "3", "train.py"],
    ["--standalone", "--no-python", "--local-ranks-filter", "0", "--signals-to-handle", "SIGUSR2", "run.sh"],
]


@pytest.mark.parametrize("argv", _SHAPES)
def test_the_parser_read_from_torchruns_source_reads_arguments_as_torchrun_does(argv: list[str]) -> None:
    from torch.distributed.run import get_args_parser

    expected = {k: (v if isinstance(v, (int, float, str, bool, type(None))) else str(v))
                for k, v in vars(get_args_parser().parse_args(argv)).items()}
    assert torchrun_args.parsed(argv) == expected


def test_a_torchrun_whose_source_cannot_be_read_so_gets_its_parser_by_the_import(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(torchrun_args, "_RUN", "torch.distributed.no_such_module")
    monkeypatch.setattr(torchrun_args._Source, "_loaded", {})
    assert torchrun_args.parsed(_SHAPES[0])["nproc_per_node"] == "2"
    assert "reading torchrun's parser by importing torch (LookupError: no source file for " in capsys.readouterr().err


def _torch_imported(importtime: str) -> list[str]:
    """The lines of ``-X importtime``'s list that are torch's top module or torch.distributed."""
    return [line for line in importtime.splitlines() if line.rstrip().endswith((" torch", " torch.distributed"))]


def test_the_parse_child_refuses_a_bad_flag_before_importing_torch_and_a_bad_value_by_torchruns_check() -> None:
    ok = subprocess.run([sys.executable, "-c", _parse_snippet(), *_SHAPES[1]], capture_output=True,
                        text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout.strip().splitlines()[-1]) == torchrun_args.parsed(_SHAPES[1])
    assert "by importing torch" not in ok.stderr  # no fall-back to the full import for the parser
    # -X importtime lists every module imported: argparse's refusal comes before any of torch's
    bad = subprocess.run([sys.executable, "-X", "importtime", "-c", _parse_snippet(), "--numa-binding", "bogus",
                          "train.py"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert "invalid choice: 'bogus'" in bad.stderr
    assert not _torch_imported(bad.stderr)
    # a value the parser takes and torchrun's own configuration check refuses (torchrun exits 1 there):
    # refused by the check asked for (torchrun_args.CHECK, after torchrun's early end), whatever the shape
    for argv in ([torchrun_args.CHECK, "--nnodes", "2", "--node_rank", "1", "--nproc_per_node", "two", "train.py"],
                 [torchrun_args.CHECK, "--nproc_per_node", "two", "train.py"]):
        two = subprocess.run([sys.executable, "-c", _parse_snippet(), *argv], capture_output=True, text=True,
                             timeout=120)
        assert two.returncode == 2, argv
        assert "Unsupported nproc_per_node value: two" in two.stderr
        assert two.stdout.strip() == ""


def test_the_parse_child_imports_no_torch_for_any_shape_and_leaves_the_check_to_an_early_end() -> None:
    # every launch, of one node or several: its shape without torch (torchrun's check runs only if it
    # ends early; it checks before its rendezvous, so a torchrun of several nodes that refuses ends early)
    for argv in (*_SHAPES[:2], ["--nproc_per_node", "two", "train.py"],
                 ["--nnodes", "2", "--node_rank", "1", "--nproc_per_node", "two", "train.py"]):
        one = subprocess.run([sys.executable, "-X", "importtime", "-c", _parse_snippet(), *argv],
                             capture_output=True, text=True, timeout=120)
        assert one.returncode == 0, one.stderr[-2000:]
        assert json.loads(one.stdout.strip().splitlines()[-1]) == torchrun_args.parsed(argv)
        assert not _torch_imported(one.stderr), argv
    launcher = TorchrunLauncher(["--nproc_per_node", "two", "train.py"], marker="test")
    assert all(launcher.checks_after_exit(LaunchInfo(nnodes=n)) for n in (1, 2, None))
    refused = launcher.refusal("/g", 120)
    assert refused is not None and "Unsupported nproc_per_node value: two" in refused.message
    assert TorchrunLauncher(["--nproc_per_node", "2", "train.py"], marker="test").refusal("/g", 120) is None


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, MARKER_ENV: f"spare-test-{tmp_path.name}", **extra}


def _started_script(tmp_path: Path) -> TorchrunLauncher:
    script = tmp_path / "train.py"
    script.write_text("import os\nprint('rank', os.environ['RANK'], 'gen', os.environ['NEURON_WATCH_GENERATION'], "
                      "'nice', os.nice(0))\n")
    return TorchrunLauncher(["--nproc_per_node", "1", str(script)], marker="unused")


def _finish(launcher: TorchrunLauncher) -> str:
    assert launcher.proc is not None
    launcher.proc.wait(120)
    out = "\n".join(launcher.read_output(final=True))
    launcher.stop(5)
    return out


def test_the_spare_runs_the_next_generation_with_that_generations_environment(tmp_path: Path) -> None:
    launcher = _started_script(tmp_path)
    launcher.prewarm(_env(tmp_path, NEURON_WATCH_GENERATION="0"))
    spare = launcher.spare_pids()
    assert len(spare) == 1
    if can_raise_priority_to(os.nice(0)):  # it waits at nice 19, taking only idle CPU
        deadline = time.monotonic() + 60
        while os.getpriority(os.PRIO_PROCESS, spare[0]) != 19:
            assert time.monotonic() < deadline, "the spare never lowered its priority"
            time.sleep(0.01)
    pid = launcher.start(str(tmp_path / "gen-1"), "", _env(tmp_path, NEURON_WATCH_GENERATION="1"))
    assert (pid,) == spare
    assert _finish(launcher) == ""  # torchrun itself says nothing; the rank wrote to its file
    logs = list((tmp_path / "gen-1" / "torchrun").glob("*/attempt_0/0/stdout.log"))
    # the spare imported at nice 19 where it may, but the ranks run at our priority
    assert [p.read_text() for p in logs] == [f"rank 0 gen 1 nice {os.nice(0)}\n"]
    assert launcher.spare_pids() == ()


def test_a_spare_with_another_environment_is_not_used_and_nothing_of_it_survives(tmp_path: Path) -> None:
    launcher = _started_script(tmp_path)
    launcher.prewarm(_env(tmp_path, NEURON_WATCH_GENERATION="0", SOMETHING="old"))
    (spare,) = launcher.spare_pids()
    pid = launcher.start(str(tmp_path / "gen-1"), "", _env(tmp_path, NEURON_WATCH_GENERATION="1", SOMETHING="new"))
    assert pid != spare and not alive(spare)
    _finish(launcher)
    assert marked_pids(f"spare-test-{tmp_path.name}") == []


def test_a_generation_stop_keeps_the_spare_and_a_final_stop_ends_it(tmp_path: Path) -> None:
    launcher = _started_script(tmp_path)
    env = _env(tmp_path, NEURON_WATCH_GENERATION="0")
    launcher.marker = env[MARKER_ENV]
    launcher.start(str(tmp_path / "gen-0"), "", env)
    launcher.prewarm(env)
    (spare,) = launcher.spare_pids()
    launcher.stop(5, keep_spare=True)
    assert alive(spare) and marked_pids(launcher.marker) == [spare]
    launcher.stop(5)
    assert marked_pids(launcher.marker) == [] and launcher.spare_pids() == ()


def test_torchrun_run_as_a_module_by_a_named_interpreter_is_watched_as_torchrun(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    """``neuron-watch python3 -m torch.distributed.run ARGS``, torchrun's other form: that interpreter runs
    torchrun (it used to be refused: "invalid choice: 'python3'")."""
    run_dir = tmp_path / "run"
    r = subprocess.run([NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), sys.executable, "-m",
                        "torch.distributed.run", "--standalone", "--nproc_per_node", "1", TOY, "--steps", "3",
                        "--checkpoint-dir", str(tmp_path / "ckpt")],
                       cwd=tmp_path, env=toy_env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (command,) = run_dir.glob("gen-0/command-*.json")
    assert json.loads(command.read_text())["argv"][:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert named(events(run_dir), "job_finished")[0]["exit_code"] == 0
    assert wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 10) == []

"""Real runs shared by the process tests of several files (session-scoped, each read by tests of one
``xdist_group`` so that pytest-xdist's loadgroup keeps them on the worker that ran it). The runs that
tests of both tiers read are in tests/fixtures/runs.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.procs import pids_with_env, toy_environment
from tests.fixtures.runs import HANG_TIMEOUT


@pytest.fixture(scope="session")
def crash_restart(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path, Path]:
    """One run read by the crash's console test and its checkpoint's test: 2 ranks, rank 1 crashes
    at step 12 of 16 (checkpoints every 5 steps), ``--quiet``, the next generation's torchrun
    started ahead as soon as generation 0 trains (``--prewarm-after 0``); one restart from step_10.
    (exit code, console, run dir, checkpoint dir); no pid of it survives."""
    from tests.process.test_torchrun_job import watch

    tmp_path = tmp_path_factory.mktemp("crash-restart")
    code, out, run_dir, ckpt = watch(
        tmp_path, toy_environment(), "--steps", "16", "--crash-at", "12", "--crash-rank", "1",
        "--checkpoint-every", "5", watch_args=("--quiet", "--prewarm-after", "0"))
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    return code, out, run_dir, ckpt


@pytest.fixture(scope="session")
def slow_save(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path, Path]:
    """One run read by the long save's console test and its hang test: 2 ranks, rank 0 spends 14 s
    in the synced save of step 10 of 12 while the others wait in its barrier, silent, with a 6 s
    hang timeout, ``--quiet``. (exit code, console, run dir, checkpoint dir); no pid of it survives."""
    from tests.process.test_torchrun_job import watch

    tmp_path = tmp_path_factory.mktemp("slow-save")
    code, out, run_dir, ckpt = watch(
        tmp_path, toy_environment(), "--steps", "12", "--checkpoint-every", "5", "--slow-save-at", "10",
        "--save-seconds", "14", watch_args=("--hang-timeout", "6", "--quiet"))
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    return code, out, run_dir, ckpt


#: the compile run's hang timeout; its compile lasts more than three of them. The shared hang runs'
#: (tests/fixtures/runs.py) too, so that diagnose reads every run it compares with one
COMPILE_HANG_TIMEOUT = HANG_TIMEOUT


@pytest.fixture(scope="session")
def long_compile(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path, Path]:
    """One run read by the compile's console test, its not-a-hang test and the diagnose of its run
    dir: 2 ranks, rank 0 compiles at step 3 of 8 for three hang timeouts and more
    (``COMPILE_HANG_TIMEOUT``) while rank 1 prints RX timeouts every 2 s, ``--quiet``. A step takes
    1.5 s, so the run's own verdict sees the compile end (process samples and verdicts come every
    second) before the job does. (exit code, console, run dir, checkpoint dir); no pid of it survives."""
    from tests.process.test_torchrun_job import watch

    tmp_path = tmp_path_factory.mktemp("long-compile")
    code, out, run_dir, ckpt = watch(
        tmp_path, toy_environment(), "--steps", "8", "--compile-at", "3", "--compile-rank", "0",
        "--compile-seconds", str(3 * COMPILE_HANG_TIMEOUT + 2), "--rx-warn-every", "2", "--step-time", "1.5",
        watch_args=("--hang-timeout", str(COMPILE_HANG_TIMEOUT), "--quiet"))
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    return code, out, run_dir, ckpt


@pytest.fixture(scope="session")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path, Path]:
    """One run read by the clean finish's test and the diagnose of its run dir: 2 ranks, 12 steps, no
    fault, hang timeout ``COMPILE_HANG_TIMEOUT`` (diagnose reads the run with the same). (exit code,
    console, run dir, checkpoint dir); no pid of it survives."""
    from tests.process.test_torchrun_job import watch

    tmp_path = tmp_path_factory.mktemp("clean")
    code, out, run_dir, ckpt = watch(tmp_path, toy_environment(), "--steps", "12",
                                     watch_args=("--hang-timeout", str(COMPILE_HANG_TIMEOUT)))
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    return code, out, run_dir, ckpt


@pytest.fixture(scope="session")
def crash_no_restart(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path, Path]:
    """One run read by the exit code's test and the diagnose of its run dir: 2 ranks, rank 1
    crashes at step 3 of 6, ``--max-restarts 0`` (the job ends with torchrun's exit code), hang
    timeout ``COMPILE_HANG_TIMEOUT`` (diagnose reads the run with the same). (exit code, console,
    run dir, checkpoint dir); no pid of it survives."""
    from tests.process.test_torchrun_job import watch

    tmp_path = tmp_path_factory.mktemp("crash-no-restart")
    code, out, run_dir, ckpt = watch(
        tmp_path, toy_environment(), "--steps", "6", "--crash-at", "3", "--crash-rank", "1",
        watch_args=("--hang-timeout", str(COMPILE_HANG_TIMEOUT), "--max-restarts", "0"))
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    return code, out, run_dir, ckpt

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from neuron_watch.cli import _command_word, main, parse_command_line
from neuron_watch.config import OPTIONS, load_config
from neuron_watch.errors import ConfigError, UsageError
from neuron_watch.job.coordinator import coordinator_settings

NW = [sys.executable, "-m", "neuron_watch.cli"]


def test_every_option_has_an_environment_variable() -> None:
    assert all(o.env == "NEURON_WATCH_" + o.flag[2:].replace("-", "_").upper() for o in OPTIONS)


def test_cli_beats_env_beats_default() -> None:
    assert load_config({}, {}).max_restarts == 3
    assert load_config({}, {"NEURON_WATCH_MAX_RESTARTS": "5"}).max_restarts == 5
    assert load_config({"max_restarts": "7"}, {"NEURON_WATCH_MAX_RESTARTS": "5"}).max_restarts == 7
    assert load_config({"hang_timeout": "15m"}, {}).hang_timeout == 900.0
    assert load_config({"prewarm_after": "0"}, {}).prewarm_after == 0.0  # 0 is a value here: at once


@pytest.mark.parametrize(
    ("cli", "env", "named"),
    [
        ({"hang_timeout": "soon"}, {}, "--hang-timeout"),
        ({}, {"NEURON_WATCH_MAX_RESTARTS": "-1"}, "NEURON_WATCH_MAX_RESTARTS"),
        ({"progress_regex": "(unclosed"}, {}, "--progress-regex"),
        ({"hang_timeout": "0"}, {}, "--hang-timeout"),
        ({}, {"NEURON_WATCH_PREWARM_AFTER": "-5"}, "NEURON_WATCH_PREWARM_AFTER"),
        ({}, {"NEURON_WATCH_HANG_TIMOUT": "5"}, "NEURON_WATCH_HANG_TIMOUT"),
        ({"coordinator": "host:99999"}, {}, "--coordinator"),  # five digits, no port
        ({"coordinator": "host:0"}, {}, "--coordinator"),
    ],
)
def test_bad_values_name_their_origin(cli: dict[str, str], env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        load_config(cli, env)


def test_command_word_skips_option_values() -> None:
    assert _command_word(["--run-dir", "torchrun", "torchrun", "x.py"]) == "torchrun"
    assert _command_word(["--dry-run", "torchrun"]) == "torchrun"
    assert _command_word(["--hang-timeout", "5"]) is None


@pytest.mark.parametrize(
    "argv", [["--bogus", "torchrun", "x.py"], ["--max-restarts", "many", "torchrun", "x.py"], ["nosuchcommand"],
             ["--coordinator", "node0:99999", "torchrun", "x.py"], ["coordinator", "--bind", "0.0.0.0:70000"]]
)
def test_wrong_flag_is_one_line_and_exit_2(argv: list[str]) -> None:
    r = subprocess.run([*NW, *argv], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("neuron-watch: error:")


def test_torchrun_arguments_pass_through_verbatim(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--dry-run", "--no-neuron-env", "torchrun", "--nproc_per_node=2", "--help-me", "x.py", "--lr", "1"])
    # torchrun's own parser refuses --help-me: we report it, we did not swallow or reinterpret it
    assert code == 2
    assert "--help-me" in capsys.readouterr().out


def test_absent_node_wait_reaches_the_coordinators_recovery_with_its_default_otherwise() -> None:
    assert coordinator_settings(load_config({}, {}), None).absent_grace == 60.0
    given = load_config({"absent_node_wait": "5"}, {})
    assert coordinator_settings(given, None).absent_grace == 5.0
    assert load_config({}, {"NEURON_WATCH_ABSENT_NODE_WAIT": "7.5"}).absent_node_wait == 7.5


@pytest.mark.parametrize(
    ("argv", "python", "passed"),
    [
        (["python", "-m", "torch.distributed.run", "--nproc_per_node", "2", "t.py"], "python",
         ["--nproc_per_node", "2", "t.py"]),
        (["--quiet", "/opt/venv/bin/python3.11", "-m", "torch.distributed.run", "t.py", "-m", "x"],
         "/opt/venv/bin/python3.11", ["t.py", "-m", "x"]),
        (["torchrun", "--nproc_per_node", "2", "t.py"], None, ["--nproc_per_node", "2", "t.py"]),
    ],
)
def test_torchrun_run_as_its_module_is_torchrun_run_by_that_interpreter(
        argv: list[str], python: str | None, passed: list[str]) -> None:
    args = parse_command_line(argv)
    assert args.command == "torchrun" and args.torchrun_python == python and args.launcher_args == passed


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["python3", "-m", "torch.distributed.launch", "t.py"], "deprecated by torch"),
        (["python", "train.py"], "invalid choice: 'python'"),  # a script, not a launcher: the choices named
        (["pythonista", "-m", "torch.distributed.run", "t.py"], "invalid choice: 'pythonista'"),
    ],
)
def test_other_python_commands_are_refused_saying_what_to_run(argv: list[str], says: str) -> None:
    with pytest.raises(UsageError, match=re.escape(says)):
        parse_command_line(argv)

"""``neuron-watch`` command line: one boundary where errors become messages and exit codes.

    neuron-watch [WATCH OPTIONS] torchrun [TORCHRUN ARGS ...]
    neuron-watch [WATCH OPTIONS] srun [SRUN ARGS ...] CMD ...
    neuron-watch diagnose [--json] PATH ...
    neuron-watch <tool> ...            (dump, coordinator, status, report, slurm)

Our options come before the launcher word; everything after it is passed on unchanged.
Each subcommand lives in its own module with ``add_arguments(parser)`` and
``run(args, config) -> int``; this file only dispatches.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from neuron_watch import __version__
from neuron_watch.config import OPTIONS, WatchConfig, add_watch_options, load_config
from neuron_watch.errors import ExitCode, NeuronWatchError, UsageError

log = logging.getLogger("neuron_watch")

#: subcommand -> (module, one-line help, takes the rest of argv verbatim)
SUBCOMMANDS: dict[str, tuple[str, str, bool]] = {
    "torchrun": ("neuron_watch.commands.supervisor", "run torchrun under the watchdog (in place of torchrun)", True),
    "srun": ("neuron_watch.commands.srun", "run srun under the watchdog (in place of srun)", True),
    "diagnose": ("neuron_watch.commands.diagnose", "diagnose saved logs offline", False),
    "dump": ("neuron_watch.commands.dump", "neuron-dump hook: save a runtime core dump and upload it", False),
    "coordinator": ("neuron_watch.commands.standalone", "run a job's coordinator standalone", False),
    "status": ("neuron_watch.outputs.status", "live table of a job's nodes and ranks", False),
    "report": ("neuron_watch.commands.report", "goodput report of a run directory", False),
    "slurm": ("neuron_watch.slurm.slurm_hooks", "Slurm prolog/epilog health checks", False),
    "agent": ("neuron_watch.commands.srun_agent", "internal: per-node agent started by `neuron-watch srun`", False),
}


class _Parser(argparse.ArgumentParser):
    """argparse that raises :class:`UsageError` instead of printing usage and exiting."""

    def error(self, message: str) -> Any:
        raise UsageError(message, f"run `{self.prog} --help`")


def _command_index(argv: Sequence[str]) -> int | None:
    """Where the command word is: the first token after our own options (their values skipped)."""
    takes_value = {o.flag for o in OPTIONS if not o.is_flag}
    i = 0
    while i < len(argv):
        tok = argv[i]
        if not tok.startswith("-"):
            return i
        i += 2 if tok in takes_value else 1
    return None


def _command_word(argv: Sequence[str]) -> str | None:
    """The first token after our own options (their values skipped), or None."""
    i = _command_index(argv)
    return None if i is None else argv[i]


def parse_command_line(argv: Sequence[str]) -> argparse.Namespace:
    """Our options and the command; for ``torchrun``/``srun`` everything after the word, untouched.

    Drop-in means drop-in: the tokens after a launcher word reach the launcher byte-for-byte and
    our parser never sees them (argparse would otherwise match ``--c`` in a training script's
    arguments against our ``--compile-timeout``). Our own options are never abbreviated either
    (``allow_abbrev=False``): an abbreviation that works today would change meaning, or break,
    the day an option with the same prefix is added.

    Raises:
        UsageError: a bad option of ours (the message names it).
    """
    i = _command_index(argv)
    _refuse_unknown_options(argv[: len(argv) if i is None else i])
    python = None if i is None else _torchrun_module(argv[i:])
    if python is not None:  # `PYTHON -m torch.distributed.run ARGS` is torchrun, run by that interpreter
        assert i is not None
        argv = [*argv[:i], "torchrun", *argv[i + 3:]]
    word = None if i is None else argv[i]
    parser = build_parser(word)
    if i is not None and word in SUBCOMMANDS and SUBCOMMANDS[word][2]:
        args = parser.parse_args(list(argv[: i + 1]))
        args.launcher_args = list(argv[i + 1 :])
        args.torchrun_python = python
        return args
    return parser.parse_args(list(argv))


_PYTHON = re.compile(r"python[0-9.]*")


def _torchrun_module(command: Sequence[str]) -> str | None:
    """The interpreter of a command that runs torchrun as a module (``python3 -m torch.distributed.run
    ...``, torchrun's own other form), else None.

    Raises:
        UsageError: ``-m torch.distributed.launch``, torchrun's deprecated predecessor (it hands
            ``--local-rank`` to the script unless ``--use-env``): not wrapped, torchrun's form named.
    """
    if len(command) < 3 or not _PYTHON.fullmatch(os.path.basename(command[0])) or command[1] != "-m":
        return None
    if command[2] == "torch.distributed.launch":
        raise UsageError(f"{command[0]} -m torch.distributed.launch is deprecated by torch and not wrapped",
                         "use torchrun's form, which reads LOCAL_RANK from the environment: neuron-watch torchrun "
                         "ARGS (or neuron-watch python -m torch.distributed.run ARGS)")
    return command[0] if command[2] == "torch.distributed.run" else None


def _refuse_unknown_options(ours: Sequence[str]) -> None:
    """An option of ours that is misspelt or abbreviated is named (argparse would blame the word after it)."""
    known = {o.flag for o in OPTIONS} | {"--version", "--help", "-h"}
    takes_value = {o.flag for o in OPTIONS if not o.is_flag}
    i = 0
    while i < len(ours):
        name = ours[i].split("=", 1)[0]
        if name not in known:
            like = sorted(f for f in known if f.startswith(name))
            raise UsageError(
                f"unrecognized option {name}" + (f" (did you mean {' or '.join(like)}? our options are never "
                                                  "abbreviated)" if like else ""),
                "run `neuron-watch --help`")
        i += 2 if ours[i] in takes_value else 1


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only ``command``'s module is imported (keeps start-up fast)."""
    parser = _Parser(
        prog="neuron-watch",
        allow_abbrev=False,
        description="Watch a torchrun/srun job: tell a slow compile from a hang, capture evidence, "
        "restart from the last complete checkpoint.",
        epilog="commands: " + "; ".join(f"{n}: {h}" for n, (_m, h, _v) in SUBCOMMANDS.items()),
    )
    parser.add_argument("--version", action="version", version=f"neuron-watch {__version__}")
    add_watch_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (_module, help_text, verbatim) in SUBCOMMANDS.items():
        if verbatim:
            p = sub.add_parser(name, help=help_text, add_help=False, prefix_chars="\0")
            p.add_argument("launcher_args", nargs=argparse.REMAINDER)
        elif name == command:
            _load(name).add_arguments(sub.add_parser(name, help=help_text, allow_abbrev=False))
        else:
            sub.add_parser(name, help=help_text, allow_abbrev=False)
    return parser


def _load(name: str) -> Any:
    module = SUBCOMMANDS[name][0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            raise UsageError(f"`neuron-watch {name}` is not available in this build") from exc
        raise


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script. Returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=logging.DEBUG if os.environ.get("NEURON_WATCH_DEBUG") else logging.INFO,
        format="[neuron-watch] %(message)s",
        stream=sys.stderr,
    )
    try:
        args = parse_command_line(argv)
        if args.command is None:
            build_parser().print_help()
            return int(ExitCode.USAGE)
        config = load_config(vars(args), os.environ)
        if not os.environ.get("NEURON_WATCH_DEBUG"):
            logging.getLogger().setLevel(logging.DEBUG if config.log_level == "debug" else logging.INFO)
        return int(_load(args.command).run(args, config))
    except NeuronWatchError as exc:
        print(f"neuron-watch: error: {exc}", file=sys.stderr)
        log.debug("traceback:\n%s", traceback.format_exc())
        return int(exc.exit_code)
    except KeyboardInterrupt:
        return int(ExitCode.SIGNAL_BASE) + 2


def config_for_tests(**overrides: Any) -> WatchConfig:
    """A :class:`WatchConfig` with overrides, for tests and embedding."""
    return WatchConfig(**overrides)


if __name__ == "__main__":
    sys.exit(main())

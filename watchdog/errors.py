"""One error root for everything neuron-watch raises on purpose, and the exit codes.

The CLI catches :class:`NeuronWatchError` once, prints ``message`` and ``hint`` and exits with
``exit_code``; anything else is a bug and gets a traceback in the debug log.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Exit codes of the ``neuron-watch`` command itself (a wrapped job's own code passes through)."""

    OK = 0
    JOB_FAILED = 1
    USAGE = 2
    #: The watchdog could not observe the job (agent lost, coordinator gone).
    UNOBSERVED = 3
    #: The job hit a failure that restarting cannot fix (config, numerical, crash loop).
    NOT_RESTARTABLE = 4
    #: ``--max-restarts`` was used up.
    RESTARTS_EXHAUSTED = 5
    #: 128 + signal number, as shells report it, is used for signal exits.
    SIGNAL_BASE = 128


class NeuronWatchError(Exception):
    """Base of every expected error. ``hint`` says what the user should do next."""

    exit_code: int = ExitCode.JOB_FAILED

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}; next step: {self.hint}" if self.hint else self.message


class UsageError(NeuronWatchError):
    """A wrong flag, value or combination on the command line or in the environment."""

    exit_code = ExitCode.USAGE


class LauncherArgsError(UsageError):
    """The wrapped launcher refuses its own arguments (torchrun's parser or its configuration check):
    the job cannot start as written, and a restart would only refuse them again."""


class ConfigError(UsageError):
    """A bad configuration file or ``NEURON_WATCH_*`` variable."""


class PlatformError(NeuronWatchError):
    """Something on the machine is missing or broken (torchrun not found, /proc unreadable, ...)."""


class TransportError(NeuronWatchError):
    """The coordinator/agent link failed (bad frame, lost peer, authentication refused)."""

    exit_code = ExitCode.UNOBSERVED


class StorageError(NeuronWatchError):
    """An artifact store (local or S3) refused or lost data."""

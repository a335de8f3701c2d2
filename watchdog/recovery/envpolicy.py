"""Which Neuron debugging variables to set for the ranks, and why. Pure: facts are passed in.

Rules:

* Never overwrite a variable the user set; report it as kept.
* NDET tracing (``NEURON_RT_DBG_NDET_*``) only where the installed runtime still has it: Neuron
  dropped NDET in release 2.22, so it is set only when a ``neuron-det`` binary exists.
* Runtime core dumps under the run dir with ``%d-%c`` (datetime, cluster id), so every rank of one
  failing collective writes into the same directory; an S3 prefix too when artifacts go to S3.
* ``FI_EFA_FORK_SAFE=1`` on kernels older than 5.15 (libfabric needs it there; harmless after).
* ``TORCH_LOGS=recompiles`` (unless ``TORCH_LOGS`` is set): torch.compile's recompiles, with reasons.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class HostFacts:
    """What the environment policy needs to know about the node."""

    kernel_release: str  # `uname -r`
    has_neuron_det: bool = False
    has_neuron_device: bool = False


@dataclass(frozen=True)
class EnvSetting:
    name: str
    value: str
    why: str
    kept_user_value: bool = False  # the user had set it; we left it alone


@dataclass(frozen=True)
class EnvPlan:
    """The variables to add to the ranks' environment, and the explanation for each."""

    settings: tuple[EnvSetting, ...] = field(default_factory=tuple)

    def to_set(self) -> dict[str, str]:
        return {s.name: s.value for s in self.settings if not s.kept_user_value}

    def describe(self) -> list[str]:
        """One short line per variable, for the start-up block."""
        lines = []
        for s in self.settings:
            verb = "kept (yours)" if s.kept_user_value else "set"
            lines.append(f"{verb:12} {s.name}={s.value}  # {s.why}")
        return lines


def kernel_version(release: str) -> tuple[int, int]:
    """``5.10.210-201.852.amzn2.x86_64`` -> (5, 10); unknown -> (0, 0)."""
    m = re.match(r"(\d+)\.(\d+)", release)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def plan_environment(
    user_env: Mapping[str, str],
    facts: HostFacts,
    core_dump_dir: str,
    s3_core_dump_prefix: str | None = None,
    ndet_dir: str | None = None,
) -> EnvPlan:
    """Decide the Neuron debugging variables for one node.

    Args:
        user_env: the environment the user launched us with (never overwritten).
        facts: kernel release, whether ``neuron-det`` exists.
        core_dump_dir: base directory for runtime core dumps (``%d-%c`` is appended).
        s3_core_dump_prefix: ``s3://bucket/prefix`` when artifacts go to S3.
        ndet_dir: where NDET logs go, if NDET is available.
    """
    wanted: list[tuple[str, str, str]] = [
        (
            "NEURON_RT_LOCAL_CORE_DUMP_DIRECTORY",
            core_dump_dir.rstrip("/") + "/%d-%c",
            "runtime core dumps of all ranks of one failure land in one directory (%d-%c)",
        ),
    ]
    if s3_core_dump_prefix:
        wanted.append(
            (
                "NEURON_RT_S3_CORE_DUMP_PREFIX",
                s3_core_dump_prefix.rstrip("/") + "/%d-%c",
                "the neuron-dump hook uploads core dumps here (the runtime never uploads itself)",
            )
        )
    if facts.has_neuron_det and ndet_dir:
        wanted += [
            ("NEURON_RT_DBG_NDET_FLUSH_USEC", "5000000", "NDET event tracing on (neuron-det is installed)"),
            ("NEURON_RT_DBG_NDET_LOG_LOCATION", ndet_dir, "NDET logs are collected into incident bundles"),
        ]
    if kernel_version(facts.kernel_release) < (5, 15):
        wanted.append(
            (
                "FI_EFA_FORK_SAFE",
                "1",
                f"kernel {facts.kernel_release} < 5.15: libfabric disables multi-node EFA without it",
            )
        )
    # dynamo prints each recompile and the guard that failed (torch/_dynamo/guards.py): a rank that
    # recompiles is told from a hung one by its own words (output only; nothing else changes)
    wanted.append(("TORCH_LOGS", "recompiles", "torch.compile says when a rank recompiles and why"))
    settings = []
    for name, value, why in wanted:
        if name in user_env:
            settings.append(EnvSetting(name, user_env[name], why, kept_user_value=True))
        else:
            settings.append(EnvSetting(name, value, why))
    return EnvPlan(tuple(settings))

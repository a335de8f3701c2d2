"""Pure modules do no I/O: their imports are parsed and os, subprocess, zmq, boto3, asyncio (and the
other I/O libraries) are forbidden (STYLE.md 1). Also: a pure module imports only pure siblings."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

WATCHDOG = Path(__file__).resolve().parents[2] / "watchdog"
PURE = [
    "events", "classify", "judge", "logtext", "checkpoints", "envpolicy", "policy", "protocol",
    "slurmtext", "goodput", "errors", "stacks", "srunplan", "flight_recorder", "lostlink", "redact", "recovery",
    "culprit", "errorclass", "failureforms", "metrics", "cloudwatch", "runview", "report_html",
]
#: I/O, processes, clocks (pure code takes ``now``), networking and threads
FORBIDDEN = {"os", "subprocess", "zmq", "boto3", "botocore", "asyncio", "socket", "shutil", "signal",
             "threading", "aiomqtt", "sh", "time", "tempfile", "select"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


PRESENT = [m for m in PURE if (WATCHDOG / f"{m}.py").exists()]


def test_the_diagnosis_modules_are_checked() -> None:
    assert {"events", "classify", "judge", "logtext"} <= set(PRESENT)


@pytest.mark.parametrize("module", PRESENT)
def test_pure_module_imports_no_io(module: str) -> None:
    imports = _imports(WATCHDOG / f"{module}.py")
    bad = sorted(n for n in imports if n.split(".")[0] in FORBIDDEN)
    assert not bad, f"neuron_watch.{module} is pure but imports {bad}"
    siblings = {n.split(".")[1] for n in imports if n.startswith("neuron_watch.") and n.count(".") >= 1}
    impure = sorted(s for s in siblings if s not in PURE)
    assert not impure, f"neuron_watch.{module} is pure but imports impure sibling(s) {impure}"


def _calls() -> dict[str, set[str]]:
    """Every name called in watchdog/ and launchers/ -> the ``module.function`` that call it."""
    called: dict[str, set[str]] = {}
    for path in [*WATCHDOG.glob("*.py"), *(WATCHDOG.parent / "launchers").glob("*.py")]:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                for call in ast.walk(node):
                    if isinstance(call, ast.Call) and isinstance(call.func, (ast.Name, ast.Attribute)):
                        name = call.func.id if isinstance(call.func, ast.Name) else call.func.attr
                        called.setdefault(name, set()).add(f"{path.stem}.{node.name}")
    return called


def test_one_composition_root_builds_every_entry_points_parts() -> None:
    """The coordinator, the agent, their settings, event sinks and artifact storage are built in
    runtime.py only, and every entry point -- ``neuron-watch torchrun`` (supervisor), ``neuron-watch
    srun`` (its batch side and its per-task agent), the standalone coordinator -- takes them from
    there: a feature added once reaches all of them (``--mqtt`` and ``--artifacts`` once reached only
    torchrun; the standalone coordinator once named its job differently from its agents)."""
    called = _calls()
    assert called["Coordinator"] == {"runtime.build_coordinator"}
    assert called["NodeAgent"] == {"runtime.build_agent"}
    # (and the Coordinator's own default, for callers that drive it by hand: tests, simulations)
    assert called["CoordinatorSettings"] == {"coordinator.coordinator_settings", "coordinator.__init__"}
    assert called["coordinator_settings"] == {"runtime.build_coordinator"}
    assert called["attach_console"] == {"runtime.attach_sinks"}
    assert called["MqttSink"] == {"runtime.attach_sinks"}
    assert called["open_storage"] >= {"runtime.artifact_storage"}
    # the node before the job's shape (a signal during start-up) records its end with the same sinks
    assert called["attach_sinks"] == {"runtime.build_coordinator", "supervisor._record_without_coordinator"}
    assert called["artifact_storage"] == {"runtime.build_agent"}
    assert called["build_coordinator"] == {"supervisor._run_supervised", "srun.run", "standalone.run"}
    assert called["build_agent"] == {"supervisor._run_supervised", "srun_agent.run"}
    assert {"supervisor._run_supervised", "srun.__init__", "standalone.run"} <= called["resolve_job_id"]
    assert called["rank_environment"] == {"supervisor._run_supervised", "srun_agent.run"}


def test_event_kinds_are_a_type_never_string_literals() -> None:
    """Every event written by watchdog/ and launchers/ names its kind as an ``EventKind`` (one list
    of kinds, README's contract): a string literal in a call of ``emit`` is a kind nobody declared."""
    literal: list[str] = []
    for path in [*WATCHDOG.glob("*.py"), *(WATCHDOG.parent / "launchers").glob("*.py")]:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for call in ast.walk(tree):
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "emit"
                    and call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)):
                literal.append(f"{path.name}:{call.lineno} {call.args[0].value}")
    assert literal == []

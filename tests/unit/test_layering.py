"""Pure modules do no I/O: their imports are parsed and os, subprocess, zmq, boto3, asyncio (and the
other I/O libraries) are forbidden (STYLE.md 1). Also: a pure module imports only pure siblings."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

WATCHDOG = Path(__file__).resolve().parents[2] / "watchdog"
PURE = [
    "events", "classify", "judge", "logtext", "checkpoints", "envpolicy", "policy", "protocol",
    "slurmtext", "goodput", "errors", "stacks", "srunplan", "flight_recorder", "lostlink", "redact",
    "errorclass",
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


def test_every_entry_point_takes_its_coordinator_settings_from_one_place() -> None:
    """The wrapper of torchrun, the srun launcher and the standalone coordinator build their
    coordinator's settings with ``coordinator.coordinator_settings`` (one config, one place): a
    setting added there reaches all of them (the srun launcher once missed the pause detection)."""
    built = {}
    for path in [*WATCHDOG.glob("*.py"), *(WATCHDOG.parent / "launchers").glob("*.py")]:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                for call in ast.walk(node):
                    if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
                        built.setdefault(call.func.id, set()).add(f"{path.stem}.{node.name}")
    # (and the Coordinator's own default, for callers that drive it by hand: tests, simulations)
    assert built["CoordinatorSettings"] == {"coordinator.coordinator_settings", "coordinator.__init__"}
    assert {"supervisor._coordinator", "srun.run", "coordinator.run"} <= built["coordinator_settings"], \
        built["coordinator_settings"]


def test_every_entry_point_attaches_its_event_sinks_and_storage_from_one_place() -> None:
    """The console and the MQTT broker (``wiring.attach_sinks``), the artifact storage
    (``wiring.artifact_storage``): ``neuron-watch srun`` once published nothing to ``--mqtt`` and its
    nodes uploaded nothing to ``--artifacts``, and nothing said so."""
    called: dict[str, set[str]] = {}
    for path in [*WATCHDOG.glob("*.py"), *(WATCHDOG.parent / "launchers").glob("*.py")]:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                for call in ast.walk(node):
                    if isinstance(call, ast.Call) and isinstance(call.func, (ast.Name, ast.Attribute)):
                        name = call.func.id if isinstance(call.func, ast.Name) else call.func.attr
                        called.setdefault(name, set()).add(f"{path.stem}.{node.name}")
    assert called["attach_console"] == {"wiring.attach_sinks"}
    assert called["MqttSink"] == {"wiring.attach_sinks"}
    assert called["open_storage"] >= {"wiring.artifact_storage"}
    assert {"supervisor._coordinator", "srun.run", "coordinator.run"} <= called["attach_sinks"]
    assert {"supervisor._run_supervised", "srun_agent.run"} <= called["artifact_storage"], called["artifact_storage"]

"""The architecture as rules on imports, parsed from the source (nothing is imported here).

- Pure modules do no I/O: os, subprocess, zmq, boto3, asyncio (and the other I/O libraries) are
  forbidden, and a pure module imports only pure modules.
- Direction by package: each sub-package of ``neuron_watch`` imports only the packages below it
  in the diagram (``LAYERS``): the node side and the job side never import each other, nothing
  below the composition root imports it, launchers never import commands, outputs never import
  recovery. A known exception is listed (``EXCEPTIONS``) and must still exist: a fixed one leaves
  the list.
- One composition root builds the coordinator and the agent.
- Event kinds are ``EventKind`` members, never strings, in constants and in expressions alike.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

WATCHDOG = Path(__file__).resolve().parents[2] / "watchdog"
LAUNCHERS = WATCHDOG.parent / "launchers"

def _dotted(p: Path) -> tuple[str, ...]:
    """A file's module under neuron_watch, as its parts: a package's ``__init__`` is the package
    (the package's own code: the held-out rounds' registry is ``diagnosis.heldout``)."""
    parts = p.relative_to(WATCHDOG).with_suffix("").parts
    return parts[:-1] if parts[-1] == "__init__" else parts


#: module (dotted, under neuron_watch) -> its file
MODULES: dict[str, Path] = {
    **{".".join(_dotted(p)): p for p in WATCHDOG.rglob("*.py") if _dotted(p) and "rank_bootstrap" not in p.parts},
    **{f"launchers.{p.stem}": p for p in LAUNCHERS.glob("*.py") if p.stem != "__init__"},
}

PURE = [
    "events", "errors", "redact",
    "diagnosis.classify", "diagnosis.keyfinder", "diagnosis.judge", "diagnosis.logtext", "diagnosis.envelopes",
    "diagnosis.stacks",
    "diagnosis.flight_recorder",
    "diagnosis.culprit", "diagnosis.errorclass", "diagnosis.failureforms", "diagnosis.exctaxonomy",
    "diagnosis.errorblock", "diagnosis.dumps", "diagnosis.firstfailure", "diagnosis.signature", "diagnosis.formkinds",
    "diagnosis.forms_severity", "diagnosis.forms_errors", "diagnosis.forms_metric", "diagnosis.forms_phase",
    "diagnosis.forms_conventions", "diagnosis.forms_exits", "diagnosis.forms_schedulers", "diagnosis.divergence",
    "diagnosis.forms_runtimes",
    "diagnosis.heldout",
    # every round of the held-out package (heldout/__init__.py registers them): forms, pure like the rest
    *sorted(m for m in MODULES if m.startswith("diagnosis.heldout.")),
    "diagnosis.interrupted",
    "diagnosis.offline", "diagnosis.blockcontext", "diagnosis.crashreading", "diagnosis.lastword", "diagnosis.startup",
    "diagnosis.interleaved",
    "diagnosis.offline_reading", "diagnosis.lastwords",
    "recovery.checkpoints", "recovery.envpolicy", "recovery.policy", "recovery.lostlink", "recovery.machine",
    "recovery.commands", "recovery.coordcrash", "recovery.turns", "recovery.incident_summary",
    "wire.protocol", "slurm.slurmtext", "slurm.srunplan", "outputs.goodput", "job.manifest",
    "outputs.metrics", "outputs.cloudwatch", "outputs.runview", "outputs.report_html",
    "job.judgelike", "job.statusdoc", "job.nodes", "job.pacing",
    "wire.outbox", "node.line_batches", "node.urgent", "node.progress_pace", "node.error_context", "node.proc_readings",
    "node.link_settings",
    "node.link_commands",
]
#: I/O, processes, clocks (pure code takes ``now``), networking and threads
FORBIDDEN = {"os", "subprocess", "zmq", "boto3", "botocore", "asyncio", "socket", "shutil", "signal",
             "threading", "aiomqtt", "sh", "time", "tempfile", "select"}

#: the flat modules every part may use: shared types, errors, configuration, masking, fault-tolerant files
BASE = {"events", "errors", "config", "redact", "iofaults"}

#: package -> the packages it may import (besides itself and BASE). The diagram, bottom up:
#: diagnosis; wire and recovery over it; outputs over those; the node side (node, launchers,
#: slurm) and the job side (job) over outputs, never each other; the composition root; commands.
LAYERS: dict[str, set[str]] = {
    "base": set(),
    "diagnosis": set(),
    "wire": {"diagnosis"},
    "recovery": {"diagnosis"},
    "outputs": {"diagnosis", "wire"},
    "node": {"diagnosis", "wire", "recovery", "outputs", "launchers"},
    "launchers": {"node", "slurm"},
    "slurm": {"diagnosis", "recovery", "outputs", "node"},
    "job": {"diagnosis", "wire", "recovery", "outputs"},
    "runtime": {"diagnosis", "wire", "recovery", "outputs", "node", "launchers", "job"},
    "commands": {"diagnosis", "wire", "recovery", "outputs", "node", "launchers", "slurm", "job", "runtime"},
    "cli": set(),
}

#: (importer, imported) that break LAYERS today, each with why it is still there. The test fails
#: when one of them no longer exists, so a fix removes its line.
EXCEPTIONS: dict[tuple[str, str], str] = {}


def _imports(path: Path) -> set[str]:
    """Every absolute module a file imports (``from a import b`` gives ``a`` and, when ``a.b`` is a
    module of ours, ``a.b``), lazy imports and TYPE_CHECKING blocks included."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            if node.module.startswith("neuron_watch"):
                base = node.module.removeprefix("neuron_watch").lstrip(".")
                for a in node.names:
                    sub = f"{base}.{a.name}" if base else a.name
                    if sub in MODULES:
                        names.add(f"neuron_watch.{sub}")
    return names


def _ours(path: Path) -> set[str]:
    """The modules of ours a file imports (dotted, without ``neuron_watch.``)."""
    found = set()
    for name in _imports(path):
        if name.startswith("neuron_watch."):
            mod = name.removeprefix("neuron_watch.")
            if mod in MODULES:
                found.add(mod)
    return found


def package_of(module: str) -> str:
    """``node.agent`` -> ``node``; a flat module: ``base``, or itself (``runtime``, ``cli``)."""
    if "." in module:
        return module.split(".")[0]
    return "base" if module in BASE else module


def breaks(importer: str, imported: str) -> bool:
    """Whether ``importer`` importing ``imported`` goes against the diagram."""
    src, dst = package_of(importer), package_of(imported)
    return dst not in (src, "base") and dst not in LAYERS[src]


def test_every_module_has_a_layer() -> None:
    assert {"node.agent", "job.coordinator", "diagnosis.judge", "launchers.torchrun"} <= set(MODULES)
    unplaced = sorted(m for m in MODULES if package_of(m) not in LAYERS)
    assert not unplaced, f"modules in no layer of LAYERS: {unplaced} (add their package to LAYERS)"


@pytest.mark.parametrize("module", PURE)
def test_pure_module_imports_no_io(module: str) -> None:
    imports = _imports(MODULES[module])
    bad = sorted(n for n in imports if n.split(".")[0] in FORBIDDEN)
    assert not bad, f"neuron_watch.{module} is pure but imports {bad}"
    impure = sorted(m for m in _ours(MODULES[module]) if m not in PURE)
    assert not impure, f"neuron_watch.{module} is pure but imports impure module(s) {impure}"


def test_the_rule_reads_the_diagram() -> None:
    """The rules themselves: each forbidden direction the diagram names is one ``breaks`` sees."""
    assert breaks("node.agent", "job.coordinator")
    assert breaks("job.coordinator", "node.tail")
    assert breaks("launchers.torchrun", "commands.supervisor")
    assert breaks("outputs.metrics", "recovery.policy")
    assert breaks("diagnosis.judge", "wire.protocol")
    assert breaks("iofaults", "outputs.eventlog")
    assert breaks("node.agent", "runtime")
    assert not breaks("job.coordinator", "diagnosis.judge")
    assert not breaks("commands.supervisor", "runtime")
    assert not breaks("node.agent", "events")


def test_imports_go_down_the_diagram() -> None:
    found = {(m, dep) for m, path in MODULES.items() for dep in _ours(path) if breaks(m, dep)}
    new = sorted(found - set(EXCEPTIONS))
    assert not new, "imports against the diagram (move the code, or the module): " + ", ".join(
        f"{a} -> {b}" for a, b in new)
    gone = sorted(set(EXCEPTIONS) - found)
    assert not gone, f"no longer imported, remove from EXCEPTIONS: {gone}"


def _cycles() -> list[tuple[str, ...]]:
    graph = {m: _ours(p) for m, p in MODULES.items()}
    found: set[tuple[str, ...]] = set()

    def walk(path: list[str]) -> Iterator[list[str]]:
        for nxt in sorted(graph.get(path[-1], ())):
            if nxt == path[0]:
                yield path
            elif nxt not in path and nxt > path[0] and len(path) < 6:
                yield from walk([*path, nxt])

    for start in graph:
        for cycle in walk([start]):
            found.add(tuple(cycle))
    return sorted(found)


#: import cycles between modules still there (each through a lazy or type-only import)
KNOWN_CYCLES: set[tuple[str, ...]] = set()


def test_no_import_cycles_between_modules() -> None:
    cycles = set(_cycles())
    assert cycles - KNOWN_CYCLES == set(), f"import cycles: {sorted(cycles - KNOWN_CYCLES)}"
    assert KNOWN_CYCLES - cycles == set(), f"fixed, remove from KNOWN_CYCLES: {sorted(KNOWN_CYCLES - cycles)}"


def _calls() -> dict[str, set[str]]:
    """Every name called in watchdog/ and launchers/ -> the ``module.function`` that call it."""
    called: dict[str, set[str]] = {}
    for path in MODULES.values():
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
    there: a feature added once reaches all of them."""
    called = _calls()
    assert called["Coordinator"] == {"runtime.build_coordinator"}
    assert called["NodeAgent"] == {"runtime.build_agent"}
    # (and the Coordinator's own default, for callers that drive it by hand: tests, simulations)
    assert called["CoordinatorSettings"] == {"settings.coordinator_settings", "coordinator.__init__"}
    assert called["coordinator_settings"] == {"runtime.build_coordinator"}
    assert called["attach_console"] == {"runtime.attach_sinks"}
    assert called["MqttSink"] == {"runtime.attach_sinks"}
    assert called["open_storage"] >= {"runtime.artifact_storage"}
    # the node before the job's shape (a signal during start-up) records its end with the same sinks
    assert called["attach_sinks"] == {"runtime.build_coordinator", "supervisor._record_without_coordinator"}
    assert called["artifact_storage"] == {"runtime.build_agent"}
    # a multi-node torchrun's node 0 and srun's batch step host theirs in a process of its own (hosted.py)
    assert called["build_coordinator"] == {"supervisor._run_supervised", "standalone.run", "hosted.serve"}
    assert called["hosted_coordinator"] == {"supervisor._run_supervised", "srun.run"}
    assert called["build_agent"] == {"supervisor._run_supervised", "srun_agent.run"}
    assert {"supervisor._run_supervised", "srun.__init__", "standalone.run"} <= called["resolve_job_id"]
    assert called["rank_environment"] == {"supervisor._run_supervised", "srun_agent.run"}


def string_kinds(source: str, name: str = "<source>") -> list[str]:
    """Every string an ``emit`` call's kind can be: a constant first argument (or ``event=``), and any
    string constant inside an expression there (``A if old is None else "node_rejoined"``,
    ``x or "kind"``, an f-string)."""
    found: list[str] = []
    for call in ast.walk(ast.parse(source, name)):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "emit"):
            continue
        kinds = [*call.args[:1], *(k.value for k in call.keywords if k.arg == "event")]
        todo = list(kinds)
        while todo:
            node = todo.pop(0)
            if isinstance(node, ast.JoinedStr):
                found.append(f"{name}:{call.lineno} f-string")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.append(f"{name}:{call.lineno} {node.value}")
            else:
                todo.extend(ast.iter_child_nodes(node))
    return found


@pytest.mark.parametrize(("source", "found"), [
    ('log.emit("node_joined", 0)', ["<source>:1 node_joined"]),
    ('log.emit(EventKind.NODE_JOINED if old is None else "node_rejoined", 0)', ["<source>:1 node_rejoined"]),
    ('log.emit(kind or "progress", 0)', ["<source>:1 progress"]),
    ('log.emit(event="finish", generation=0)', ["<source>:1 finish"]),
    ('log.emit(f"node_{what}", 0)', ["<source>:1 f-string"]),
    ('log.emit(EventKind.NODE_JOINED if old is None else EventKind.NODE_REJOINED, 0)', []),
    ('log.emit(EventKind(name), 0, node="n1")', []),
])
def test_a_string_kind_is_found_in_an_expression(source: str, found: list[str]) -> None:
    assert string_kinds(source) == found


def test_event_kinds_are_a_type_never_strings() -> None:
    """Every event written by watchdog/ and launchers/ names its kind as an ``EventKind`` (one list
    of kinds, README's contract): a string in the kind of an ``emit`` is a kind nobody declared."""
    found = list(itertools.chain.from_iterable(
        string_kinds(p.read_text(encoding="utf-8"), str(p.relative_to(WATCHDOG.parent))) for p in MODULES.values()))
    assert found == []


def test_the_knowledge_base_is_built_by_the_composition_root() -> None:
    """Every entry point, the offline ``diagnose`` and the timeline included, takes its table from
    ``runtime.knowledge_base``; only a capture outside any job (a Slurm epilog's) reads the packaged
    table itself."""
    assert _calls()["default_knowledge_base"] == {"runtime.knowledge_base", "evidence._collect_timeline"}

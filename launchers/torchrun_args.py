"""torchrun's own argument parser, built from torchrun's source without importing torch.

Run with ``python -c <this file's text> ARGS...`` by the Python that runs torchrun; prints
torchrun's parsed arguments as one JSON line, or exits 2 with argparse's message when torchrun's
parser refuses them, or with the error of torchrun's own configuration check (:func:`refusal`).
That check imports torch in full (4.4-4.6 CPU-s on a small machine), so it runs only where its
answer is needed: when the caller asks for it (:data:`CHECK` before ARGS), which it does only when
torchrun ended before any worker started, whatever the job's shape. torchrun runs the same check
first thing (``run`` calls ``config_from_args`` before ``elastic_launch``, so before the
rendezvous of a job of several nodes): a torchrun that refuses its arguments exits with no worker
and without waiting for the other nodes, and one that started a worker passed it.
torchrun's parser needs argparse and a few small definitions, not ``torch/__init__`` (~1.5 CPU-s):
this reads ``get_args_parser`` from ``torch/distributed/run.py`` and executes that definition, and
each definition it names, from torch's own source, leaving every module's top level unexecuted, so
a bad flag is refused before torch is imported. torchrun's parser stays the only source of truth:
nothing of it is copied here. Where a torch release makes that impossible (a name that is not a
definition or an import, a whole module needed), the parser comes from the full import, as
torchrun itself gets it. The configuration check that follows the parser needs torch itself.

Standard library only: the Python running this may not have neuron_watch installed.
"""

from __future__ import annotations
import __future__

import argparse
import ast
import builtins
import importlib
import importlib.util
import json
import os
import sys
from typing import Any, ClassVar

_TOP = "torch"
_RUN = "torch.distributed.run"
#: First argument: run torchrun's configuration check after its parser (torchrun has no such flag)
CHECK = "--neuron-watch-config-check"


class _Source:
    """One torch module read as source: its top-level definitions and imports, executed on demand."""

    _loaded: ClassVar[dict[str, _Source]] = {}

    def __init__(self, module: str) -> None:
        self.module = module
        self.path, is_package = _source_path(module)
        with open(self.path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), self.path)
        package = module if is_package else module.rpartition(".")[0]
        self.defs: dict[str, ast.stmt] = {}
        self.imports: dict[str, tuple[str, str | None]] = {}  # bound name -> (module, attribute)
        self.flags = 0
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defs[node.name] = node
            elif isinstance(node, ast.ImportFrom):
                source = _absolute(node.module or "", node.level, package)
                for alias in node.names:
                    if source == "__future__" and alias.name == "annotations":
                        self.flags |= __future__.annotations.compiler_flag
                    self.imports[alias.asname or alias.name] = (source, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    bound = alias.asname or alias.name.partition(".")[0]
                    self.imports[bound] = (alias.name if alias.asname else bound, None)
        self.namespace: dict[str, Any] = {"__name__": module, "__file__": self.path, "__builtins__": builtins}

    @classmethod
    def of(cls, module: str) -> _Source:
        if module not in cls._loaded:
            cls._loaded[module] = cls(module)
        return cls._loaded[module]

    def value(self, name: str) -> Any:
        """The module-level ``name``, executing only its definition and what that names in turn."""
        if name in self.namespace:
            return self.namespace[name]
        if name in self.defs:
            node = self.defs[name]
            self.namespace[name] = None  # a definition that names itself (recursion) needs nothing more
            for used in sorted({n.id for n in ast.walk(node) if isinstance(n, ast.Name)} - {name}):
                if used in self.defs or used in self.imports:
                    self.value(used)
            del self.namespace[name]
            code = compile(ast.Module(body=[node], type_ignores=[]), self.path, "exec",
                           flags=self.flags, dont_inherit=True)
            exec(code, self.namespace)
        elif name in self.imports:
            self.namespace[name] = _imported(*self.imports[name])
        else:
            raise LookupError(f"{self.module}.{name} is neither a definition nor an import")
        return self.namespace[name]


def _source_path(module: str) -> tuple[str, bool]:
    """(path of ``module``'s source, whether it is a package), found without importing torch."""
    spec = importlib.util.find_spec(_TOP)  # a top-level name: finding it runs nothing
    if spec is None or not spec.submodule_search_locations:
        raise LookupError("torch is not installed as a package of source files")
    base = os.path.join(next(iter(spec.submodule_search_locations)), *module.split(".")[1:])
    if os.path.isfile(base + ".py"):
        return base + ".py", False
    if os.path.isfile(os.path.join(base, "__init__.py")):
        return os.path.join(base, "__init__.py"), True
    raise LookupError(f"no source file for {module}")


def _absolute(module: str, level: int, package: str) -> str:
    if level == 0:
        return module
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{module}" if module else base


def _imported(module: str, attribute: str | None) -> Any:
    """An imported name: from torch's source for torch's own modules, by a plain import otherwise."""
    if module.partition(".")[0] != _TOP:
        loaded = importlib.import_module(module)
        return getattr(loaded, attribute) if attribute is not None else loaded
    if attribute is None:
        raise LookupError(f"the whole module {module} is named")
    return _Source.of(module).value(attribute)


def get_args_parser() -> argparse.ArgumentParser:
    """torchrun's parser: from its source when that works, else from the import torchrun does."""
    try:
        parser = _Source.of(_RUN).value("get_args_parser")()
        if isinstance(parser, argparse.ArgumentParser):
            return parser
        reason = f"get_args_parser returned {type(parser).__name__}"
    except Exception as e:  # any torch release may change run.py's shape: the full import still works
        reason = f"{type(e).__name__}: {e}"
    print(f"reading torchrun's parser by importing torch ({reason})", file=sys.stderr)
    from torch.distributed.run import get_args_parser as full  # type: ignore[import-not-found,unused-ignore]

    made: argparse.ArgumentParser = full()
    return made


def parsed(argv: list[str]) -> dict[str, Any]:
    """torchrun's arguments as its parser reads them, each value JSON-able (else its ``str``)."""
    args = get_args_parser().parse_args(argv)
    return {k: (v if isinstance(v, (int, float, str, bool, type(None))) else str(v)) for k, v in vars(args).items()}


def refusal(argv: list[str]) -> str | None:
    """Why torchrun's own configuration check (``config_from_args``) refuses arguments its parser
    took (``--nproc_per_node two``, a bad ``--nnodes`` range, ``--no-python`` with ``--module``:
    torchrun exits 1 there), or None. That check needs torch itself (device counts), so this
    import is paid where a refusal is possible: a refusal is a configuration error, never a crash
    to restart."""
    from torch.distributed.run import config_from_args  # type: ignore[import-not-found,unused-ignore]

    args = get_args_parser().parse_args(argv)
    # torchrun's default logs spec creates its log dir as it is built: a check must write nothing
    # (the run's own torchrun creates it when it starts); os.devnull is the spec's "no directory"
    args.log_dir = os.devnull
    try:
        config_from_args(args)
    except Exception as exc:  # whatever torchrun's check raises is its refusal
        return f"{type(exc).__name__}: {exc}"
    return None


if __name__ == "__main__":
    sys.argv[0] = "torchrun"  # argparse names the program in its errors
    check = sys.argv[1:2] == [CHECK]
    argv = sys.argv[2:] if check else sys.argv[1:]
    args = parsed(argv)  # exits 2 with argparse's message on a bad flag
    why = refusal(argv) if check else None
    if why is not None:
        print(why, file=sys.stderr)
        sys.exit(2)
    print(json.dumps(args))

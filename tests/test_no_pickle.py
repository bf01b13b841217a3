from __future__ import annotations

import ast
from pathlib import Path

import cogfabric

_FORBIDDEN_MODULES = {"pickle", "cPickle", "cloudpickle", "dill", "marshal", "shelve"}
_FORBIDDEN_CALLS = {"eval", "exec"}


def _package_sources() -> list[Path]:
    root = Path(cogfabric.__file__).resolve().parent
    files = sorted(root.rglob("*.py"))
    for link in ("events", "store", "actors"):
        files.extend(sorted((root / link).resolve().rglob("*.py")))
    return files


def test_the_package_never_imports_pickle_nor_calls_eval_or_exec() -> None:
    offenders: list[str] = []
    files = _package_sources()

    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                names = {(node.module or "").split(".")[0]}
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                names = {node.func.id} & _FORBIDDEN_CALLS
            else:
                continue
            if names & (_FORBIDDEN_MODULES | _FORBIDDEN_CALLS):
                offenders.append(f"{path}:{node.lineno}")

    assert len(files) > 10
    assert offenders == []

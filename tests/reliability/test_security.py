"""Security: no pickle/eval/exec in the package, owner-only files, keyed chains."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
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


def test_journal_files_and_directory_are_owner_only(tmp_path: Path) -> None:
    import stat  # noqa: PLC0415

    from cogfabric.actors import FakeClock, Runtime  # noqa: PLC0415

    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        rt.spawn("a").set_private("k", "v")

    assert stat.S_IMODE((tmp_path / "j").stat().st_mode) == 0o700
    for name in ("data.mdb", "lock.mdb", "writer.lock"):
        assert stat.S_IMODE((tmp_path / "j" / name).stat().st_mode) == 0o600


def test_parents_the_journal_creates_follow_the_umask_and_an_existing_directory_keeps_its_mode(
    tmp_path: Path,
) -> None:
    # README "How the tests prove it": the journal's directory, when the journal creates
    # it, is 0700, parents it creates follow the umask, one that exists keeps its mode.
    import os  # noqa: PLC0415
    import stat  # noqa: PLC0415

    from cogfabric.actors import FakeClock, Runtime  # noqa: PLC0415

    existing = tmp_path / "existing"
    existing.mkdir()
    existing.chmod(0o755)
    umask = os.umask(0o022)
    try:
        with Runtime.open(tmp_path / "a" / "b" / "j", clock=FakeClock()) as rt:
            rt.spawn("a")
        with Runtime.open(existing, clock=FakeClock()) as rt:
            rt.spawn("a")
    finally:
        os.umask(umask)

    modes = {p: stat.S_IMODE((tmp_path / p).stat().st_mode) for p in ("a", "a/b", "a/b/j", "existing")}
    assert modes == {"a": 0o755, "a/b": 0o755, "a/b/j": 0o700, "existing": 0o755}
    assert stat.S_IMODE((existing / "data.mdb").stat().st_mode) == 0o600


def test_a_keyed_runtime_journal_cannot_be_opened_or_rechained_without_the_key(tmp_path: Path) -> None:
    from cogfabric.store import Journal, JournalKeyError  # noqa: PLC0415
    from cogfabric.store.testing import make_events  # noqa: PLC0415

    with Journal.open(tmp_path / "j", key=b"k" * 32) as journal:
        journal.append(make_events(3))

    with pytest.raises(JournalKeyError):
        Journal.open(tmp_path / "j", readonly=True)
    with pytest.raises(JournalKeyError):
        Journal.open(tmp_path / "j", readonly=True, key=b"x" * 32)

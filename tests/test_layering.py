"""Imports point one way: events <- store <- actors <- cogfabric; the root stays light."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

import cogfabric
import cogfabric.events

if TYPE_CHECKING:
    from pathlib import Path

ROOT_EXPORTS_FROM_EVENTS = (
    "CognitiveState",
    "COGNITIVE_STATE_SCHEMA_VERSION",
    "decode_cognitive_state",
    "ContextLayer",
    "Message",
    "ToolCall",
    "ToolCallFunction",
    "CognitiveStateSchemaVersionError",
    "UnencodableValueError",  # README names it: a user catches it from the root
)


def modules_after(statement: str, cwd: Path) -> set[str]:
    """The names in ``sys.modules`` after running ``statement`` in a fresh interpreter."""
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=True,
        cwd=cwd,
    )
    loaded: list[str] = json.loads(result.stdout)
    return set(loaded)


def loaded_from(modules: set[str], *packages: str) -> set[str]:
    return {m for m in modules if any(m == p or m.startswith(p + ".") for p in packages)}


def test_importing_the_events_layer_loads_no_store_actors_lmdb_or_pykka(tmp_path: Path) -> None:
    modules = modules_after("import cogfabric.events", tmp_path)

    assert "cogfabric.events" in modules
    assert loaded_from(modules, "cogfabric.store", "cogfabric.actors", "lmdb", "pykka") == set()


def test_using_the_events_layer_loads_no_store_actors_lmdb_or_pykka(tmp_path: Path) -> None:
    statement = (
        "from cogfabric.events import PrivateSet, decode, encode\n"
        "decode(encode(PrivateSet(at=1.0, agent='a', key='k', value=[1])))"
    )

    modules = modules_after(statement, tmp_path)

    assert loaded_from(modules, "cogfabric.store", "cogfabric.actors", "lmdb", "pykka") == set()


def test_importing_the_store_layer_does_not_load_the_actors_layer(tmp_path: Path) -> None:
    modules = modules_after("import cogfabric.store", tmp_path)

    assert "cogfabric.store" in modules
    assert loaded_from(modules, "cogfabric.actors", "pykka") == set()


def test_importing_the_package_root_loads_neither_lmdb_nor_pykka(tmp_path: Path) -> None:
    modules = modules_after("import cogfabric", tmp_path)

    assert loaded_from(modules, "lmdb", "pykka", "cogfabric.store", "cogfabric.actors") == set()


def test_importing_the_package_root_does_not_load_the_events_layer_until_asked(tmp_path: Path) -> None:
    before = modules_after("import cogfabric", tmp_path)
    after = modules_after("import cogfabric\ncogfabric.CognitiveState", tmp_path)

    assert "cogfabric.events" not in before
    assert "cogfabric.events" in after
    assert loaded_from(after, "lmdb", "pykka", "cogfabric.store", "cogfabric.actors") == set()


def test_each_subpackage_resolves_as_an_attribute_after_a_bare_import_of_the_root(tmp_path: Path) -> None:
    statement = (
        "import cogfabric\n"
        "assert cogfabric.events.CognitiveState is cogfabric.CognitiveState\n"
        "assert cogfabric.store.Journal is cogfabric.Journal\n"
        "assert cogfabric.actors.Runtime is cogfabric.Runtime\n"
        "assert callable(cogfabric.config.parse_config)"
    )

    assert {"cogfabric.store", "cogfabric.actors", "cogfabric.config"} <= modules_after(statement, tmp_path)


def test_the_events_subpackage_as_an_attribute_loads_no_store_actors_lmdb_or_pykka(tmp_path: Path) -> None:
    modules = modules_after("import cogfabric\ncogfabric.events.PrivateSet", tmp_path)

    assert loaded_from(modules, "cogfabric.store", "cogfabric.actors", "lmdb", "pykka") == set()


@pytest.mark.parametrize("name", ROOT_EXPORTS_FROM_EVENTS)
def test_the_root_re_exports_the_events_object_itself(name: str) -> None:
    assert getattr(cogfabric, name) is getattr(cogfabric.events, name)


def test_every_root_export_from_the_events_layer_is_listed_in_all() -> None:
    assert set(ROOT_EXPORTS_FROM_EVENTS) <= set(cogfabric.__all__)
    assert "CogfabricError" in cogfabric.__all__


def test_every_name_in_all_resolves() -> None:
    for name in cogfabric.__all__:
        assert getattr(cogfabric, name) is not None
    assert set(cogfabric.__all__) <= set(dir(cogfabric))


def test_dir_shows_the_public_names_and_not_the_modules_own_imports() -> None:
    shown = set(dir(cogfabric))
    assert shown == {*cogfabric.__all__, "actors", "config", "events", "store"}
    # importlib.metadata's version() under the name cogfabric.version was a trap
    assert not hasattr(cogfabric, "version")
    assert isinstance(cogfabric.__version__, str)


def test_the_events_errors_derive_from_the_root_cogfabric_error() -> None:
    assert issubclass(cogfabric.CognitiveStateSchemaVersionError, cogfabric.CogfabricError)
    assert issubclass(cogfabric.events.EventError, cogfabric.CogfabricError)


def test_an_unknown_root_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = getattr(cogfabric, "no_such_name")  # noqa: B009 - a type checker refuses the plain access


def test_the_events_layer_exports_what_all_lists() -> None:
    missing = [name for name in cogfabric.events.__all__ if not hasattr(cogfabric.events, name)]

    assert missing == []


def test_every_name_the_package_root_exports_resolves() -> None:
    import cogfabric  # noqa: PLC0415

    missing = [name for name in cogfabric.__all__ if getattr(cogfabric, name, None) is None]

    assert missing == []
    assert {"Runtime", "Config", "FakeClock", "Agent", "ContextView", "JournalIntegrityError"} <= set(
        cogfabric.__all__
    )


@pytest.mark.parametrize(
    ("name", "module"),
    [
        ("PromptRejected", "cogfabric.events"),
        ("LlmOutputRecorded", "cogfabric.events"),
        ("IpcMessage", "cogfabric.events"),  # what a behavior's on_message gets
        ("IpcDeadLettered", "cogfabric.events"),  # what IpcBus.dead_letters() returns
        ("Journal", "cogfabric.store"),
        ("Record", "cogfabric.store"),
        ("JournalRecordError", "cogfabric.store"),
    ],
)
def test_the_names_the_issues_give_are_exported_from_the_root(name: str, module: str) -> None:
    assert getattr(cogfabric, name) is getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("module", ["cogfabric.events", "cogfabric.store", "cogfabric.actors"])
def test_every_error_of_a_layer_can_be_caught_by_its_root_name(module: str) -> None:
    # Runtime.open and the journal document store and event errors; a caller catches
    # them without knowing which layer raised them.
    layer = importlib.import_module(module)
    errors = [n for n in layer.__all__ if isinstance(getattr(layer, n), type) and n.endswith("Error")]

    assert errors
    assert [n for n in errors if getattr(cogfabric, n, None) is not getattr(layer, n)] == []

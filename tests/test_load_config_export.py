"""`cogfabric.load_config`: exported from the package root, and named by the error a YAML
file's path given as `config=` gets."""

from __future__ import annotations

from pathlib import Path

import pytest

import cogfabric as cf
import cogfabric.config


def test_load_config_is_exported_from_the_root() -> None:
    assert cf.load_config is cogfabric.config.load_config
    assert "load_config" in cf.__all__
    assert "load_config" in dir(cf)


@pytest.mark.parametrize("given", ["cogfabric.yaml", Path("cogfabric.yaml")])
def test_a_path_given_as_config_is_refused_naming_load_config(given: object) -> None:
    with pytest.raises(cf.InvalidConfigError) as raised:
        cf.Runtime.open(None, config=given)  # type: ignore[arg-type]

    assert str(raised.value) == (
        f"config must be a cogfabric.Config, a mapping or None, got {type(given).__name__} "
        "(a YAML file's path? read it with cogfabric.load_config(path))"
    )


def test_another_wrong_config_gets_no_hint() -> None:
    with pytest.raises(cf.InvalidConfigError, match=r"got int$"):
        cf.Runtime.open(None, config=3)  # type: ignore[arg-type]


def test_a_runtime_opens_with_the_config_load_config_read(tmp_path: Path) -> None:
    config_file = tmp_path / "cogfabric.yaml"
    config_file.write_text("memory:\n  max_sessions: 1\n", encoding="utf-8")

    with cf.Runtime.open(None, config=cf.load_config(config_file)) as rt:
        rt.memory.create_session("u")
        newer = rt.memory.create_session("u")
        assert rt.memory.sessions() == [newer]  # one session at most: the first was evicted


def test_bytes_given_as_config_are_refused_with_where_yaml_text_goes() -> None:
    with pytest.raises(
        cf.InvalidConfigError, match=r"got bytes \(YAML text\? read it with cogfabric\.config\.parse_config"
    ):
        cf.Runtime.open(None, config=b"journal: {}")  # type: ignore[arg-type]
    assert cogfabric.config.parse_config(b"journal: {}") == cf.Config()

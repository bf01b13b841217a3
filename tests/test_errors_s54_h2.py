"""Error messages say which object failed and what to do next (helper h2's audit, session 54).

Each message below named too little to act on: a misspelt config key got no list of
the keys, a wrong choice no choices, a value that cannot be journaled no place in it,
a journal that fails verification neither its path nor ``allow_unverified``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

import cogfabric as cf
from cogfabric.cli import main
from cogfabric.config import parse_config

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

_SMALL = {"journal": {"map_size": 1 << 20, "max_map_size": 8 << 20}}


def _config_error(config: dict[str, Any]) -> str:
    with pytest.raises(cf.InvalidConfigError) as raised:
        cf.Config.of(config)
    return str(raised.value)


def test_an_unknown_config_key_lists_its_sections_keys_and_the_nearest() -> None:
    message = _config_error({"journal": {"durabilty": "batch"}})
    assert message.startswith("Object contains unknown field `durabilty` - at `$.journal`")
    assert "(the keys of `journal`: durability, fsync," in message
    assert message.endswith("did you mean `durability`?)")

    nested = _config_error({"memory": {"clean": {"max_usr_len": 3}}})
    assert "the keys of `memory.clean`: max_user_len," in nested
    assert "did you mean `max_user_len`?" in nested


def test_an_unknown_section_lists_the_sections() -> None:
    message = _config_error({"jornal": {}})
    assert message == (
        "Object contains unknown field `jornal` (the keys of a configuration: journal, runtime, "
        "memory, llm; did you mean `journal`?)"
    )


def test_a_key_far_from_every_key_gets_the_list_without_a_guess() -> None:
    message = _config_error({"runtime": {"zzz": 1}})
    assert message == (
        "Object contains unknown field `zzz` - at `$.runtime` "
        "(the keys of `runtime`: mailbox_size, call_timeout)"
    )


def test_a_wrong_choice_names_the_choices() -> None:
    assert _config_error({"journal": {"durability": "fast"}}) == (
        "Invalid enum value 'fast' - at `$.journal.durability` (one of 'batch', 'sync')"
    )


def test_a_base_url_of_another_scheme_says_what_it_must_be() -> None:
    message = _config_error({"llm": {"base_url": "ftp://host", "model": "m"}})
    assert message.endswith("- at `$.llm.base_url` (an http:// or https:// URL, or empty for none)")


def test_a_config_file_that_is_no_mapping_names_the_sections() -> None:
    with pytest.raises(cf.InvalidConfigError) as raised:
        parse_config("- 1\n", source="c.yaml")
    assert str(raised.value) == (
        "c.yaml: Expected `object | null`, got `array` (a configuration is a mapping of sections: "
        "journal, runtime, memory, llm)"
    )


def test_the_cli_shows_the_choices_of_a_bad_config_value(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("journal:\n  durability: fast\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["simulate", "--journal", str(tmp_path / "j"), "--config", str(config)])
    assert result.exit_code == 2
    shown = "Invalid enum value 'fast' - at `$.journal.durability` (one of 'batch', 'sync')"
    assert result.stderr == f"error: {config}: {shown}\n"
    assert not (tmp_path / "j").exists()


class _Opaque:
    """A value msgspec cannot encode."""


def test_a_value_that_cannot_be_journaled_names_where_in_it() -> None:
    with cf.Runtime.open(None) as rt:
        agent = rt.spawn("a")
        with pytest.raises(cf.UnencodableValueError) as raised:
            agent.set_private("notes", {"draft": [1, "two", {"x": _Opaque()}]})
        assert str(raised.value) == (
            "value of type dict cannot cross a context layer: Encoding objects of type _Opaque is "
            "unsupported - at `$['draft'][2]['x']`"
        )
        with pytest.raises(cf.UnencodableValueError) as key:
            rt.bus.send("a", "a", "topic", {"ok": 1, (1, _Opaque()): 2})
        assert " - at `$[(1, <" in str(key.value)  # the key (1, _Opaque()), its repr bounded
        assert str(key.value).endswith("` (its key)")
        with pytest.raises(cf.UnencodableValueError) as whole:
            agent.set_private("notes", _Opaque())
        assert " - at " not in str(whole.value)  # the value itself: there is no part to name


def test_a_journal_that_fails_verification_names_its_path_and_the_ways_on(
    tmp_path: Path, break_link: Callable[[Path, int], None]
) -> None:
    path = tmp_path / "j"
    with cf.Runtime.open(path, config=_SMALL) as rt:
        rt.spawn("a").set_private("k", 1)
    break_link(path, 2)

    with pytest.raises(cf.JournalIntegrityError) as raised:
        cf.Runtime.open(path, config=_SMALL)

    message = str(raised.value)
    assert message.startswith("the journal failed verification at seq 2: ")
    assert f"; {path} is refused (`cogfabric verify {path}` reports it;" in message
    assert "allow_unverified=True opens it anyway" in message


def test_simulate_on_a_journal_that_fails_verification_says_how_to_see_it(
    tmp_path: Path, break_link: Callable[[Path, int], None]
) -> None:
    path = tmp_path / "j"
    run = ["simulate", "--journal", str(path), "--agents", "2", "--turns", "1"]
    assert CliRunner().invoke(main, run).exit_code == 0
    break_link(path, 2)

    result = CliRunner().invoke(main, run)

    assert result.exit_code == 1
    assert result.stderr.startswith(
        "error: the simulation did not start: the journal failed verification at seq 2"
    )
    assert result.stderr.endswith(f"; see where: cogfabric verify {path}\n")
    assert "allow_unverified" not in result.stderr  # no option of the command


def test_a_journal_directory_that_cannot_be_made_says_why_once(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    where = tmp_path / "file" / "j"
    with pytest.raises(cf.JournalUnavailableError) as raised:
        cf.Runtime.open(where, config=_SMALL)
    assert str(raised.value) == f"cannot create the journal directory {where}: Not a directory"


class _Blocking:
    started = threading.Event()
    release = threading.Event()

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:  # noqa: ARG002
        _Blocking.started.set()
        assert _Blocking.release.wait(10)


def test_retire_refused_while_the_agent_works_says_to_suspend_it_first() -> None:
    _Blocking.started.clear()
    _Blocking.release.clear()
    with cf.Runtime.open(None, behaviors={"block": _Blocking}) as rt:
        rt.spawn("app")
        rt.spawn("busy", behavior="block")
        rt.bus.send("app", "busy", "work")
        assert _Blocking.started.wait(10)
        try:
            with pytest.raises(cf.AgentRunningError) as raised:
                rt.retire("busy")
            with pytest.raises(cf.AgentRunningError) as recovering:
                rt.recover("busy", cf.CognitiveState())
        finally:
            _Blocking.release.set()
    assert str(raised.value) == (
        "agentfabric: agent running: 'busy' "
        "(its behavior is handling a message: suspend it first (the suspend waits for the "
        "messages ahead of it), then call retire)"
    )
    assert "then call recover" in str(recovering.value)


def test_spawn_many_names_the_id_two_specs_share() -> None:
    with cf.Runtime.open(None) as rt:
        with pytest.raises(cf.InvalidSpawnSpecError) as raised:
            rt.spawn_many([{"agent_id": "x"}, {"agent_id": "a"}, {"agent_id": "b"}, {"agent_id": "a"}])
        assert str(raised.value) == (
            "agentfabric: invalid spawn spec: two specs share an agent id: 'a' (specs[1] and specs[3])"
        )
        assert rt.agents() == []  # none of them spawned

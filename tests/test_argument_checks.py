# mypy: disable-error-code="arg-type,list-item"
"""Wrongly typed arguments are refused with a clear error before anything is created or journaled."""

from __future__ import annotations

import inspect
import math
import re
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric import (
    AgentNotFoundError,
    AgentState,
    CognitiveState,
    FakeClock,
    InvalidConfigError,
    InvalidSpawnSpecError,
    InvalidTextError,
    Journal,
    Runtime,
    SpawnSpecTypeError,
)
from cogfabric.actors import Config, JournalConfig, LLMClient, LLMConfig, RuntimeConfig, ScriptedProvider
from cogfabric.events import PrivateSet

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


@pytest.mark.parametrize(
    ("key", "error"), [(16, TypeError), (True, TypeError), (3.5, TypeError), (b"", ValueError)]
)
def test_a_chain_key_is_bytes_or_str_never_an_int_made_into_nul_bytes(
    tmp_path: Path, key: object, error: type[Exception]
) -> None:
    with pytest.raises(error):
        Journal.open(tmp_path / "j", key=key)
    with pytest.raises(error):
        Runtime.open(tmp_path / "r", key=key)
    assert not (tmp_path / "j" / "data.mdb").exists()


def test_an_empty_path_is_refused_rather_than_made_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="must not be empty"):
        Journal.open("")
    with pytest.raises(ValueError, match="must not be empty"):
        Runtime.open("")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("size", [-1, 0, 2**70])
def test_a_map_size_out_of_range_is_refused(tmp_path: Path, size: int) -> None:
    with pytest.raises(ValueError, match="map_size"):
        Journal.open(tmp_path / "j", map_size=size)
    with pytest.raises(InvalidConfigError, match="map_size"):
        Runtime.open(tmp_path / "r", config={"journal": {"map_size": size}})


@pytest.mark.parametrize(
    "spec",
    [
        {"agent_id": 0},
        {"agent_id": False},
        {"agent_id": []},
        {"agent_id": "x", "capabilities": 5},
        {"agent_id": "x", "priority": "2.5"},
        {"agent_id": "x", "priority": True},
        {"agent_id": "x", "priority": 10**400},
    ],
    ids=["id 0", "id False", "id []", "capabilities 5", "priority str", "priority bool", "priority huge"],
)
def test_a_spawn_argument_is_not_coerced(spec: dict[str, Any]) -> None:
    with Runtime.open(clock=FakeClock()) as rt:
        with pytest.raises(InvalidSpawnSpecError):
            rt.spawn(**spec)
        assert rt.agents() == []


def test_capabilities_must_be_strings_not_their_str() -> None:
    with Runtime.open(clock=FakeClock()) as rt:
        with pytest.raises(TypeError, match="capability"):
            rt.spawn("x", capabilities=["ok", None])
        assert rt.agents() == []
        assert rt.spawn("", capabilities=["a", "b"]).capabilities == ("a", "b")  # "" is auto-assigned


def test_a_config_may_be_a_mapping_and_anything_else_is_refused() -> None:
    with Runtime.open(config={"journal": {"durability": "batch"}, "runtime": {"call_timeout": 5}}) as rt:
        assert rt._core.sync is False
        assert rt._core.call_timeout == 5.0
    with pytest.raises(InvalidConfigError, match=r"\$\.journal\.durability"):
        Runtime.open(config={"journal": {"durability": "later"}})
    with pytest.raises(InvalidConfigError, match="got str"):
        Runtime.open(config="cogfabric.yaml")
    with pytest.raises(InvalidConfigError, match="cannot be written"):
        Runtime.open(config=Config(llm=LLMConfig(extra={"client": object()})))
    with pytest.raises(InvalidConfigError, match="rag_min_score"):
        Runtime.open(config={"memory": {"rag_min_score": math.nan}})


def test_open_checks_its_arguments_with_or_without_a_path() -> None:
    with pytest.raises(ValueError, match="verify must be"):
        Runtime.open(verify="ful")
    with pytest.raises(TypeError, match="behaviors"):
        Runtime.open(behaviors="abc")
    for flag in ("false", "no", 0, None):  # a string "false" would waive verification
        with pytest.raises(TypeError, match="allow_unverified is a bool"):
            Runtime.open(allow_unverified=flag)


@pytest.mark.parametrize("flag", ["readonly", "sync", "check_pages"])
def test_journal_open_refuses_a_flag_that_is_no_bool(tmp_path: Path, flag: str) -> None:
    with pytest.raises(TypeError, match=f"{flag} is a bool, got str"):
        Journal.open(tmp_path / "j", **{flag: "false"})
    assert not (tmp_path / "j").exists()  # refused before anything is made


@pytest.mark.parametrize(
    "config",
    [LLMConfig(max_prompt_length="100"), {"max_prompt_length": None}, {"bogus": 1}, 5],
    ids=["str limit", "None limit", "unknown key", "not a config"],
)
def test_an_llm_client_checks_its_config_when_made(config: object) -> None:
    with pytest.raises(InvalidConfigError):
        LLMClient(ScriptedProvider(["x"]), config)
    assert LLMClient(ScriptedProvider(["x"]), {"max_prompt_length": 10}).max_prompt_length == 10


def test_a_timeout_is_a_number_of_seconds(tmp_path: Path) -> None:
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        rt.spawn("a")
        rt.spawn("b")
        with pytest.raises(TypeError, match="number of seconds"):
            rt.bus.request("a", "b", "t", {}, timeout="5")
        with pytest.raises(TypeError, match="number of seconds"):
            rt.flush("1")
        with pytest.raises(TypeError, match="number of seconds"):
            rt.flush(True)
        rt.flush(1)


def test_an_agent_id_no_agent_can_have_is_named_as_such() -> None:
    with Runtime.open(clock=FakeClock()) as rt:
        rt.spawn("a")
        with pytest.raises(InvalidTextError, match="agent_id must be a string, got list"):
            rt.suspend(["a"])  # unhashable: no "unhashable type"
        for call in (rt.agent, rt.kill, rt.suspend, rt.resume, rt.retire, rt.children):
            with pytest.raises(InvalidTextError, match="agent_id must be a string, got int"):
                call(5)
            with pytest.raises(InvalidTextError, match="agent_id is not valid Unicode text"):
                call("\ud800")
        with pytest.raises(InvalidTextError, match="agent_id must be a string, got int"):
            rt.recover(5, CognitiveState())
        with pytest.raises(AgentNotFoundError):
            rt.agent("b")  # an id that could be one: not found
        assert rt.agent("a").lifecycle == AgentState.IDLE


def test_journal_reads_check_their_arguments(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j") as journal:
        journal.append([PrivateSet(at=1.0, agent="a", key="k", value=1)])
        for call in (
            lambda: list(journal.read(after=0.5)),
            lambda: list(journal.read(after=None)),
            lambda: list(journal.read(until="2")),
            lambda: list(journal.read(stream=5)),
            lambda: journal.load_snapshot(5),
            lambda: journal.verify(after="1"),
            lambda: journal.record_intact(True),
        ):
            with pytest.raises(TypeError):
                call()
        assert [r.seq for r in journal.read(after=-3)] == [1]  # before the first: from the start
        assert journal.verify(after=-1).ok
        assert not journal.verify(after=2**70).ok  # past the head, as for any seq past it
        assert journal.record_intact(2**70) is False
        assert journal.verify().ok  # nothing was changed


def test_a_config_mapping_holding_section_objects_is_range_checked() -> None:
    with pytest.raises(InvalidConfigError, match="call_timeout"):
        Runtime.open(config={"runtime": RuntimeConfig(call_timeout=-1.0)})
    with pytest.raises(InvalidConfigError, match="group_commit_max"):
        Runtime.open(config={"journal": JournalConfig(group_commit_max=0)})
    with pytest.raises(InvalidConfigError, match="max_prompt_length"):
        Runtime.open(config={"llm": LLMConfig(max_prompt_length="100")})


class _Seq:
    """An int-like seq (as a numpy integer is): it has ``__index__``."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


def test_real_numbers_of_other_types_are_taken(tmp_path: Path) -> None:
    with Runtime.open(tmp_path / "j", clock=FakeClock(start=Fraction(17, 10) * 10**9)) as rt:
        assert rt.spawn("a", priority=Fraction(1, 4)).priority == 0.25
        rt.flush(Fraction(5))
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        assert [r.seq for r in journal.read(after=_Seq(0), until=_Seq(1))] == [1]
        assert journal.record_intact(_Seq(1))


def test_a_spawn_argument_of_the_wrong_type_is_both_errors() -> None:
    with Runtime.open(clock=FakeClock()) as rt:
        for spec in (
            {"capabilities": [None]},
            {"capabilities": "ab"},
            {"capabilities": 5},
            {"task_id": 5},
            {"parent": 5},
            {"priority": "1"},
        ):
            with pytest.raises(InvalidSpawnSpecError) as caught:
                rt.spawn("x", **spec)
            assert isinstance(caught.value, TypeError)
        with pytest.raises(InvalidSpawnSpecError) as caught:
            rt.spawn(5)
        assert isinstance(caught.value, TypeError)
        with pytest.raises(InvalidSpawnSpecError) as caught:
            rt.spawn("a b")  # of the right type: not a TypeError
        assert not isinstance(caught.value, TypeError)
        assert rt.agents() == []


def test_ids_of_the_wrong_type_are_named_not_looked_up() -> None:
    with Runtime.open() as rt:
        agent = rt.spawn("a")
        session = rt.memory.create_session("u")
        refused: dict[str, Callable[[], object]] = {
            "private key must be a string, got int": lambda: agent.private(5),
            "private key must be a string, got list": lambda: agent.private([]),
            "correlation_id must be a string, got NoneType": lambda: rt.bus.reply(None),
            "correlation_id must be a string, got int": lambda: rt.bus.reply(5),
            "topic must be a string, got list": lambda: rt.bus.subscribers([]),
            "task_id must be a string, got int": lambda: rt.bus.handoff("x", "a", 5, timeout=1.0),
            "session_id must be a string, got int": lambda: rt.memory.get_messages(5),
            "session_id must be a string, got list": lambda: rt.memory.add_message([], "user", "hi"),
            "session_id must be a string, got NoneType": lambda: rt.memory.build_prompt_messages(None),
            "session_id must be a string, got float": lambda: rt.memory.build_context("q", 5.0),
            "session_id must be a string, got bytes": lambda: rt.memory.delete_session(b"s"),
            "retrievers is a sequence of retrievers, got str": lambda: rt.memory.set_retrievers("ab"),
            "a retriever has a retrieve": lambda: rt.memory.set_retrievers([object()]),
            "agent_id must be a string, got NoneType": lambda: rt.children(None),
        }
        for message, call in refused.items():
            with pytest.raises(TypeError, match=re.escape(message)):
                call()
        assert agent.private("missing") is None
        assert rt.memory.get_messages(session)  # the seed message: nothing above changed it


class _Key(str):  # noqa: PLW1641 - unhashable on purpose
    __slots__ = ()

    def __eq__(self, other: object) -> bool:  # defining __eq__ alone leaves it unhashable
        return str.__eq__(self, other)


class _SuspendsLead:
    runtime: Runtime

    def on_message(self, ctx: Any, message: Any) -> str:  # noqa: ARG002
        self.runtime.suspend(_Key("lead"))  # from a behavior: its wait is checked for a circle
        return "suspended"


def test_a_live_agent_is_found_by_an_id_of_a_str_subclass_python_cannot_hash() -> None:
    with Runtime.open(behaviors={"suspends": _SuspendsLead}) as rt:
        rt.spawn("lead")
        rt.suspend(_Key("lead"))

        assert rt.agent(_Key("lead")).lifecycle == AgentState.SUSPENDED
        with pytest.raises(AgentNotFoundError):
            rt.agent(_Key("rest"))
        rt.resume(_Key("lead"))
        rt.spawn("caller", behavior="suspends")
        _SuspendsLead.runtime = rt
        assert rt.bus.request("x", "caller", "go", None, timeout=5).payload == "suspended"
        assert rt.agent("lead").lifecycle == AgentState.SUSPENDED


def test_a_spawn_id_utf8_cannot_encode_is_of_the_wrong_type_as_any_spawn_id() -> None:
    with Runtime.open() as rt:
        for spec in ({"agent_id": "\ud800"}, {"agent_id": "a", "parent": "\ud800"}, {"agent_id": 5}):
            with pytest.raises(SpawnSpecTypeError):
                rt.spawn(**spec)
        assert rt.agents() == []


def test_a_spawn_spec_key_that_is_no_argument_of_spawn_is_named() -> None:
    with Runtime.open() as rt:
        for spec in ({"self": 1}, {1: "x"}, {"agent_id": "x", "bogus": 1}):
            with pytest.raises(InvalidSpawnSpecError, match="unknown spawn arguments"):
                rt.spawn_many([{"agent_id": "ok"}, spec])
        assert rt.agents() == []
        # every argument of spawn is a key a spec may hold (each at its default here)
        parameters = inspect.signature(Runtime.spawn).parameters.items()
        rt.spawn_many([{name: p.default for name, p in parameters if name != "self"} | {"agent_id": "x"}])
        assert rt.agents() == ["x"]


def test_a_config_value_no_file_could_hold_is_an_invalid_config() -> None:
    looped: list[object] = [1]
    looped.append(looped)
    for config in (
        Config(runtime=RuntimeConfig(mailbox_size=looped)),
        {"runtime": range(3)},
        {"llm": {"extra": {"a": looped}}, "journal": {"durability": "\ud800"}},
    ):
        with pytest.raises(InvalidConfigError):
            Runtime.open(None, config=config)


def test_a_flag_of_the_wrong_type_is_shown_briefly(tmp_path: Path) -> None:
    class Unshowable:
        def __repr__(self) -> str:
            raise RuntimeError

    for flag in (["x"] * 100_000, Unshowable()):
        with pytest.raises(TypeError, match="sync is a bool") as caught:
            Journal.open(tmp_path / "j", sync=flag)
        assert len(str(caught.value)) < 200
        with pytest.raises(TypeError, match="allow_unverified is a bool") as caught:
            Runtime.open(None, allow_unverified=flag)
        assert len(str(caught.value)) < 200


def test_a_private_key_no_value_can_have_is_refused_as_set_private_refuses_it() -> None:
    with Runtime.open() as rt:
        agent = rt.spawn("a")
        for key in (5, "\ud800"):
            with pytest.raises(InvalidTextError) as read:
                agent.private(key)
            with pytest.raises(InvalidTextError) as written:
                agent.set_private(key, 1)
            assert str(read.value) == str(written.value)


def test_llm_ids_and_configs_are_checked_when_given(tmp_path: Path) -> None:
    from cogfabric.actors import OpenAICompatibleProvider  # noqa: PLC0415

    with Runtime.open(llm_provider=ScriptedProvider(["ok"])) as rt:
        with pytest.raises(ValueError, match="must not be empty"):
            rt.llm(agent_id="")
        with pytest.raises(InvalidTextError, match="agent_id must be a string, got int"):
            rt.llm(agent_id=5)
        with pytest.raises(InvalidTextError, match="agent_id is not valid Unicode text"):
            rt.llm(agent_id="\ud800")
    with pytest.raises(InvalidConfigError):
        OpenAICompatibleProvider(5)
    with pytest.raises(ValueError, match="needs base_url"):
        OpenAICompatibleProvider({})  # a mapping of the fields, none of them given
    with pytest.raises(InvalidConfigError, match=r"\$\.base_url"):
        OpenAICompatibleProvider(LLMConfig(base_url="file:///etc/passwd"))
    with pytest.raises(InvalidConfigError, match=r"\$\.llm\.base_url"):
        Runtime.open(tmp_path / "r", config={"llm": {"base_url": "ftp://host/v1"}})
    assert not (tmp_path / "r").exists()


def test_a_fake_clock_names_what_it_was_given() -> None:
    from cogfabric import ClockError  # noqa: PLC0415

    with pytest.raises(ClockError, match="a FakeClock's start must be finite"):
        FakeClock(math.nan)
    clock = FakeClock()
    for seconds in (math.nan, math.inf, None):
        with pytest.raises(ClockError, match="a FakeClock advances by a finite number of seconds"):
            clock.advance(seconds)
    with pytest.raises(ClockError, match="past a float's range"):
        FakeClock(1e308).advance(1e308)
    assert clock.now() == FakeClock().now()  # nothing moved it


def test_journal_streams_and_config_text_check_their_types(tmp_path: Path) -> None:
    from cogfabric.config import parse_config  # noqa: PLC0415

    with Journal.open(tmp_path / "j") as journal:
        for prefix in (None, 5, b"agent/"):
            with pytest.raises(TypeError, match="prefix is a str"):
                journal.streams(prefix)
        assert journal.streams("agent/") == []
    with pytest.raises(TypeError, match="text is the YAML as str or bytes, got NoneType"):
        parse_config(None)
    assert parse_config(bytearray(b"memory:\n  max_history: 3\n")).memory.max_history == 3


def test_a_closed_runtime_refuses_a_broadcast() -> None:
    from cogfabric import RuntimeClosedError  # noqa: PLC0415

    rt = Runtime.open()
    rt.spawn("a")
    rt.close()
    with pytest.raises(RuntimeClosedError):
        rt.bus.broadcast("x", "topic")


def test_an_llm_provider_without_generate_is_refused_before_anything_opens(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="llm_provider has a generate"):
        Runtime.open(tmp_path / "r", llm_provider=5)
    assert not (tmp_path / "r").exists()
    with pytest.raises(TypeError, match="an LLM provider has a generate"):
        LLMClient(None)


class _Echo:
    def on_message(self, ctx: Any, message: Any) -> object:  # noqa: ARG002
        return "ok"


@pytest.mark.parametrize(
    ("behaviors", "match"),
    [
        ({5: _Echo}, "a behavior's name must be a string, got int"),
        ({"\ud800": _Echo}, "a behavior's name is not valid Unicode text"),
        ({"echo": 5}, "'echo' maps to a int, not callable"),
    ],
)
def test_behavior_names_are_strings_and_factories_callable_before_anything_opens(
    tmp_path: Path, behaviors: dict[Any, Any], match: str
) -> None:
    # The name is journaled with each agent that runs it: an int was written, and every
    # later open of the journal refused it as a record that does not decode.
    with pytest.raises(TypeError, match=re.escape(match)):
        Runtime.open(tmp_path / "r", behaviors=behaviors)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("trace", [5, 0, b"t", "\ud800"])
def test_a_trace_that_is_no_text_is_refused_before_anything_is_journaled(
    tmp_path: Path, trace: object
) -> None:
    # A trace_id of another type was journaled, and then refused by verify and every reopen.
    with Runtime.open(tmp_path / "r", clock=FakeClock(), behaviors={"echo": _Echo}) as runtime:
        runtime.spawn("a", behavior="echo")
        runtime.spawn("b", behavior="echo")
        runtime.bus.subscribe("b", "news")
        journal = runtime._journal
        assert journal is not None
        before = journal.last_seq
        calls: list[Callable[[], object]] = [
            lambda: runtime.bus.request("a", "b", "t", 1, timeout=5, trace=trace),
            lambda: runtime.bus.delegate("a", "b", "t", 1, timeout=5, trace=trace),
            lambda: runtime.bus.handoff("a", "b", "task", {}, timeout=5, trace=trace),
            lambda: runtime.bus.broadcast("a", "news", 1, trace=trace),
        ]
        for call in calls:
            with pytest.raises(TypeError, match="trace"):
                call()
        runtime.flush()
        assert journal.last_seq == before
        assert runtime.bus.request("a", "b", "t", 1, timeout=5, trace="").trace_id  # empty: a new trace
    with Runtime.open(tmp_path / "r", behaviors={"echo": _Echo}) as runtime:
        assert sorted(runtime.agents()) == ["a", "b"]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("journal: {durability: batch}\nruntime: {}\njournal: {fsync: false}\n", "$.journal (line 3)"),
        ("runtime:\n  call_timeout: 5\n  call_timeout: 0.001\n", "$.runtime.call_timeout (line 3)"),
        ("memory: {max_sessions: 3, max_sessions: 4}\n", "$.memory.max_sessions (line 1)"),
    ],
)
def test_a_key_given_twice_in_a_yaml_config_is_refused_not_dropped(text: str, where: str) -> None:
    # The decoder keeps the last value and dropped the first without a word: a whole
    # section, or a timeout, the user believed set.
    from cogfabric.config import load_llm_config, parse_config  # noqa: PLC0415

    with pytest.raises(
        InvalidConfigError,
        match=re.escape(f"is given twice in one mapping (the first value would be dropped) - at {where}"),
    ):
        parse_config(text)
    with pytest.raises(InvalidConfigError, match="is given twice"):
        load_llm_config("model: a\nmodel: b\n")


def test_the_same_key_in_two_mappings_is_no_repetition() -> None:
    from cogfabric.config import parse_config  # noqa: PLC0415

    config = parse_config("journal: {fsync: false}\nllm: {extra: {fsync: 1, items: [{a: 1}, {a: 2}]}}\n")

    assert config.journal.fsync is False


@pytest.mark.parametrize(
    ("config", "where"),
    [
        ({"journal": {"durability": "\ud800"}}, "$.journal.durability"),
        ({"journal": {"\ud800": 1}}, "$.journal.'\\ud800'"),
        ({"\ud800": {}}, "$.'\\ud800'"),
    ],
)
def test_a_config_mapping_with_text_utf8_cannot_encode_is_an_invalid_config_naming_it(
    config: dict[str, Any], where: str
) -> None:
    # msgspec raised a bare UnicodeEncodeError that named no field
    with pytest.raises(InvalidConfigError, match=re.escape(f"a lone surrogate) - at {where}")):
        Runtime.open(None, config=config)


@pytest.mark.parametrize(
    ("text", "repeated"),
    [
        ("llm: {extra: {yes: 5, true: 3}}\n", True),  # one key to the decoder (YAML 1.1 booleans)
        ("llm: {extra: {0x10: 1, 16: 2}}\n", True),
        ("llm: {extra: {a: 1, 'a': 2}}\n", True),
        ("llm: {extra: {<<: {a: 1}, <<: {b: 2}}}\n", False),  # merge keys may repeat
        ("llm: {extra: {'1': 1, '2': 2}}\n", False),
        ("llm: {extra: {m: {1: 1, '1': 2}}}\n", False),  # an int and a str
        ("llm: {extra: {m: {1: 1, 1.0: 2}}}\n", True),  # one key of a dict
        ("llm: {extra: {m: {!!int 7: 1, 7: 2}}}\n", True),
        ("llm: {extra: {m: {2020-01-01: 1, '2020-01-01': 2}}}\n", True),  # msgspec: the date's ISO text
        ("llm: {extra: {m: {null: 1, ~: 2}}}\n", True),
    ],
)
def test_keys_are_compared_as_the_decoder_reads_them(text: str, *, repeated: bool) -> None:
    from cogfabric.config import parse_config  # noqa: PLC0415

    if repeated:
        with pytest.raises(InvalidConfigError, match="is given twice"):
            parse_config(text)
    else:
        parse_config(text)


@pytest.mark.parametrize(
    ("config", "where"),
    [
        ({"llm": {"model": "\udcff"}}, "$.llm.model"),
        ({"llm": {"extra": {"k": ["a", {"b": "\udcff"}]}}}, "$.llm.extra.k[1].b"),
    ],
)
def test_a_config_value_utf8_cannot_encode_is_refused_where_msgspec_takes_it(
    config: dict[str, Any], where: str
) -> None:
    # msgspec converts a str field or an Any value without encoding it: a model name or
    # an extra parameter no provider request could send was accepted
    with pytest.raises(
        InvalidConfigError, match=re.escape(f"text UTF-8 cannot encode (a lone surrogate) - at {where}")
    ):
        Config.of(config)
    with pytest.raises(InvalidConfigError, match="a lone surrogate"):
        Config(llm=LLMConfig(model="\udcff")).validated()


@pytest.mark.parametrize("key", ["!!timestamp bad", "!!int abc", "!!bool maybe", "!!int ''", "!!float x"])
def test_a_tagged_key_its_tag_cannot_build_is_an_invalid_config(key: str) -> None:
    # The repeated-key check built each key with PyYAML's constructors, whose ValueError,
    # KeyError or AttributeError escaped parse_config
    from cogfabric.config import parse_config  # noqa: PLC0415

    with pytest.raises(InvalidConfigError):
        parse_config(f"llm: {{extra: {{m: {{{key}: 1}}}}}}\n")


def test_a_request_to_a_recipient_that_is_no_str_is_named_as_such() -> None:
    # It was looked up first: an unhashable one raised "unhashable type: 'list'"
    with Runtime.open(None, clock=FakeClock()) as runtime:
        runtime.spawn("a")
        with pytest.raises(InvalidTextError, match="recipient must be a string, got list"):
            runtime.bus.request("x", ["a"], "t", 1, timeout=1)


class _AsksAnOddRecipient:
    class Odd:
        __hash__ = None  # type: ignore[assignment]

        def __eq__(self, other: object) -> bool:
            raise RuntimeError

    def on_message(self, ctx: Any, message: Any) -> str:  # noqa: ARG002
        try:
            ctx.request(self.Odd(), "t", 1, timeout=1)
        except Exception as exc:  # noqa: BLE001 - what it raised is the answer
            return type(exc).__name__
        return "nothing"


def test_a_behavior_request_to_a_recipient_that_is_no_str_is_named_as_such() -> None:
    # Its own __eq__ ran first, when the context compared it with the agent's id
    with Runtime.open(None, clock=FakeClock(), behaviors={"odd": _AsksAnOddRecipient}) as runtime:
        runtime.spawn("a", behavior="odd")

        assert runtime.bus.request("x", "a", "go", None, timeout=5).payload == "InvalidTextError"


@pytest.mark.parametrize("text", ["runtime:\n  call_timeout: 1e3\n", "memory:\n  session_ttl: 1e9\n"])
def test_a_float_written_without_a_dot_is_refused_with_how_to_write_it(text: str) -> None:
    # YAML 1.1 reads 1e3 as text; "Expected `float`, got `str`" alone left the user puzzled
    from cogfabric.config import parse_config  # noqa: PLC0415

    with pytest.raises(InvalidConfigError, match=r"got `str`.* write 1\.0e\+3\)$"):
        parse_config(text)
    assert parse_config(text.replace("1e", "1.0e+")) is not None


def test_a_config_file_past_a_mebibyte_is_refused_before_it_fills_the_memory(tmp_path: Path) -> None:
    # /dev/zero or a pipe that never ends: read whole, it ended in a MemoryError traceback
    from cogfabric.config import MAX_CONFIG_BYTES, load_config  # noqa: PLC0415

    big = tmp_path / "big.yaml"
    big.write_bytes(b"# " + b"x" * MAX_CONFIG_BYTES + b"\n")
    just = tmp_path / "just.yaml"
    just.write_bytes(b"memory: {max_history: 3}\n".ljust(MAX_CONFIG_BYTES, b" "))

    for path in (big, "/dev/zero"):
        with pytest.raises(InvalidConfigError, match="holds at most 1,048,576 bytes"):
            load_config(path)
    assert load_config(just).memory.max_history == 3

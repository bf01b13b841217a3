"""The event model and the configuration at their edges: what a mutation test found no test held.

Each test failed under a small change of events/ or the configuration that survived the whole suite.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

import msgspec
import pytest

from cogfabric import Config
from cogfabric.actors import CleanOptions, InvalidConfigError, MemoryConfig
from cogfabric.config import load_llm_config, parse_config
from cogfabric.events import (
    DEFAULT_CODEC,
    MAX_SUBSCRIPTION_ORDER,
    MAX_VALUE_DEPTH,
    CognitiveState,
    CognitiveStateSet,
    Event,
    EventCodec,
    EventDecodeError,
    EventVersionError,
    IpcSubscribed,
    NewerCognitiveStateError,
    PrivateSet,
    UnencodableValueError,
    admit_value,
)


# forbid_unknown_fields dropped from Config / JournalConfig / RuntimeConfig / CleanOptions
@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("journl:\n  durability: batch\n", "journl"),  # a misspelt section
        ("journal:\n  snapshot_intervall: 5\n", "snapshot_intervall"),
        ("runtime:\n  call_timout: 5.0\n", "call_timout"),
        ("memory:\n  clean: {max_usr_len: 5}\n", "max_usr_len"),
    ],
)
def test_a_misspelt_key_in_any_section_is_refused_naming_it(text: str, key: str) -> None:
    with pytest.raises(InvalidConfigError, match=key):
        parse_config(text)
    with pytest.raises(InvalidConfigError, match=key):
        Config.of(msgspec.yaml.decode(text))


# call_timeout's bound gt=0 relaxed to ge=0
@pytest.mark.parametrize("value", ["0", "0.0", "-1.0"])
def test_a_call_timeout_of_zero_or_less_is_refused(value: str) -> None:
    with pytest.raises(InvalidConfigError, match=r"call_timeout"):
        parse_config(f"runtime: {{call_timeout: {value}}}\n")


# a cleaner limit dropped from MemoryConfig.validate
@pytest.mark.parametrize(
    ("clean", "field"),
    [
        ({"max_system_len": 0}, "clean.max_system_len"),
        ({"max_user_len": 0}, "clean.max_user_len"),
        ({"max_assistant_len": 0}, "clean.max_assistant_len"),
        ({"max_tool_len": 0}, "clean.max_tool_len"),
        ({"max_summarized_turns": -1}, "clean.max_summarized_turns"),
    ],
)
def test_every_cleaner_limit_is_checked(clean: dict[str, int], field: str) -> None:
    with pytest.raises(InvalidConfigError, match=rf"{field} must .* - at `\$\.memory\.{field}`"):
        Config.of({"memory": {"clean": clean}})
    with pytest.raises(InvalidConfigError, match=field):
        MemoryConfig(clean=CleanOptions(**clean))


# MemoryConfig's isinstance(clean, CleanOptions) check dropped (an AttributeError instead)
def test_a_memory_config_with_a_clean_that_is_no_clean_options_is_an_invalid_config() -> None:
    with pytest.raises(InvalidConfigError, match="clean must be a CleanOptions"):
        MemoryConfig(clean={"max_user_len": 5})  # type: ignore[arg-type]


# load_llm_config catches only ValidationError, so malformed YAML escapes as msgspec.DecodeError
def test_malformed_llm_yaml_is_an_invalid_config() -> None:
    with pytest.raises(InvalidConfigError, match="<llm config>"):
        load_llm_config("model: [\n")


# MAX_VALUE_DEPTH is 512 (README: "at most cogfabric.events.MAX_VALUE_DEPTH (512) levels")
def _nested(levels: int) -> object:
    value: object = 1
    for _ in range(levels):
        value = [value]
    return value


def test_values_nest_exactly_512_levels() -> None:
    assert MAX_VALUE_DEPTH == 512
    admit_value(_nested(512))
    with pytest.raises(UnencodableValueError, match="512 levels"):
        admit_value(_nested(513))


# encode_many catches only TypeError before naming the bad event: an OverflowError escaped raw
def test_encode_many_refuses_an_int_past_64_bits_with_unencodable_value_error() -> None:
    events = [PrivateSet(at=0.0, agent="a", key="k", value=2**70)]
    with pytest.raises(UnencodableValueError, match="PrivateSet"):
        DEFAULT_CODEC.encode_many(events)  # type: ignore[arg-type]


def _forged(state_version: int, agent: object = "a") -> bytes:
    raw = msgspec.to_builtins(CognitiveStateSet(at=0.0, agent="a", state=CognitiveState(schema_version=1)))
    raw["state"]["schema_version"] = state_version
    raw["agent"] = agent
    return msgspec.msgpack.encode(raw)


# NewerCognitiveStateError.record_type / .field (documented attributes) not set
def test_a_newer_cognitive_state_error_names_the_record_type_and_field() -> None:
    with pytest.raises(NewerCognitiveStateError) as caught:
        DEFAULT_CODEC.decode(_forged(2))
    err = caught.value
    assert (err.record_type, err.field, err.type_name, err.stored, err.known) == (
        "CognitiveStateSet",
        "state",
        "CognitiveState",
        2,
        1,
    )


# `version > CURRENT` made `>=`: a broken record holding a current state was called a newer one
def test_a_broken_record_holding_a_current_state_is_no_version_error() -> None:
    with pytest.raises(EventDecodeError) as caught:
        DEFAULT_CODEC.decode(_forged(1, agent=5))
    assert not isinstance(caught.value, EventVersionError)


# the built-in upcasters given to a codec whose type of that name is the user's own class
class IpcSubscribedV2(
    Event, frozen=True, kw_only=True, tag="IpcSubscribed"
):  # the user's own type of that name
    topic: str
    v: Annotated[int, msgspec.Meta(ge=2, le=2)] = 2
    stream: ClassVar[str] = "user"


def test_a_codec_of_the_users_own_type_gets_no_builtin_upcaster() -> None:
    codec = EventCodec([IpcSubscribedV2])
    codec.register_upcaster("IpcSubscribed", 1, lambda raw: {**raw, "topic": raw["topic"].upper()})
    old = msgspec.msgpack.encode({"type": "IpcSubscribed", "at": 0.0, "id": "x", "topic": "t", "v": 1})
    assert codec.decode(old) == IpcSubscribedV2(at=0.0, id="x", topic="T")


# MAX_SUBSCRIPTION_ORDER is 2**62 (docstring): an order past it does not decode
def test_a_subscription_order_past_2_62_does_not_decode() -> None:
    assert MAX_SUBSCRIPTION_ORDER == 2**62
    raw = msgspec.to_builtins(IpcSubscribed(at=0.0, agent="a", topic="t"))
    raw["order"] = 2**62
    DEFAULT_CODEC.decode(msgspec.msgpack.encode(raw))
    raw["order"] = 2**62 + 1
    with pytest.raises(EventDecodeError, match="order"):
        DEFAULT_CODEC.decode(msgspec.msgpack.encode(raw))


def test_config_text_with_a_lone_surrogate_is_an_invalid_config() -> None:
    # libyaml encoded the text first and raised a bare UnicodeEncodeError
    with pytest.raises(InvalidConfigError, match="UTF-8 cannot encode"):
        parse_config("llm: {model: x\udc80y}")
    with pytest.raises(InvalidConfigError, match="UTF-8 cannot encode"):
        load_llm_config("model: x\udc80y")

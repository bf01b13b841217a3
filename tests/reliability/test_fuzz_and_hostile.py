"""Arbitrary input into the public API and crafted journals: only documented errors come out."""

from __future__ import annotations

import tracemalloc
from typing import TYPE_CHECKING, Any

import lmdb
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cogfabric import CogfabricError
from cogfabric.actors import FakeClock, LLMClient, LLMConfig, Runtime, ScriptedProvider
from cogfabric.events import EventDecodeError, decode
from cogfabric.store import Journal, JournalRecordError
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

# What the API documents it raises for bad input: our own errors (which include
# TypeError and ValueError mix-ins for unencodable values and bad arguments).
DOCUMENTED = (CogfabricError,)

values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text()
    | st.binary(max_size=64),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8) | st.integers(), inner, max_size=4)
    ),
    max_leaves=20,
)


@pytest.fixture
def runtime() -> Iterator[Runtime]:  # function scope: conftest stops every actor after each test
    with Runtime.open(clock=FakeClock()) as rt:
        yield rt


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.text(), value=values)
def test_arbitrary_keys_and_values_give_a_copy_or_a_documented_error(
    runtime: Runtime, key: str, value: Any
) -> None:
    agent = runtime.agent("fuzz") if "fuzz" in runtime.agents() else runtime.spawn("fuzz")

    try:
        agent.set_private(key, value)
    except DOCUMENTED:
        return
    stored = agent.private(key)
    assert msgspec.msgpack.encode(stored) == msgspec.msgpack.encode(
        msgspec.msgpack.decode(msgspec.msgpack.encode(value))
    )


@settings(max_examples=200, deadline=None)
@given(prompt=st.text(alphabet=st.characters(), max_size=300))
def test_arbitrary_prompts_pass_the_gate_or_are_refused_with_documented_errors(prompt: str) -> None:
    provider = ScriptedProvider(["ok"])
    client = LLMClient(provider, LLMConfig(max_prompt_length=100))

    try:
        assert client.generate(prompt) == "ok"
    except DOCUMENTED:
        assert provider.calls == []
    else:
        assert 0 < len(prompt) <= 100


def test_a_ten_megabyte_prompt_is_refused_before_the_provider(runtime: Runtime) -> None:
    provider = ScriptedProvider(["ok"])

    with pytest.raises(CogfabricError, match="maximum length of 8192"):
        runtime.llm(provider).generate("😀" * 10_000_000)

    assert provider.calls == []


def test_deep_nesting_is_refused_as_unencodable(runtime: Runtime) -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    agent = runtime.agent("fuzz") if "fuzz" in runtime.agents() else runtime.spawn("fuzz")

    with pytest.raises(TypeError):
        agent.set_private("deep", deep)


@pytest.mark.parametrize(
    "payload",
    [
        b"\x91" * 200_000 + b"\xc0",  # deep nesting
        b"\xdd\xff\xff\xff\xff",  # an array claiming 4 G elements
        b"\xdb\xff\xff\xff\xff",  # a string claiming 4 GiB
        b"\x81\xa4type\xa8__reduce",  # a tag that is no event
        b"\xc1",  # a never-used byte
        b"",
    ],
)
def test_hostile_payloads_give_a_typed_error_and_no_large_allocation(payload: bytes) -> None:
    tracemalloc.start()

    with pytest.raises(EventDecodeError):
        decode(payload)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    assert peak < 32 * 2**20


def test_a_crafted_record_with_a_valid_chain_is_refused_by_name_on_read(tmp_path: Path) -> None:
    import hashlib  # noqa: PLC0415

    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(3))
    env = lmdb.open(str(path), max_dbs=8)
    events = env.open_db(b"events")
    with env.begin(write=True, db=events) as txn:
        prev = bytes(txn.get((3).to_bytes(8, "big")) or b"")[-16:]
        # format 3: [seq, event, bin16(stream | len(stream) | link | chain)]
        trailer = b"agent/x" + b"\x07" + bytes(8)
        body = (
            b"\x93\xcf"
            + (4).to_bytes(8, "big")
            + b"\x82\xa4type\xa6Hostil\xa1v\x01"
            + b"\xc5"
            + (len(trailer) + 16).to_bytes(2, "big")
            + trailer
        )
        chain = hashlib.blake2b(prev + body, digest_size=16).digest()
        txn.put((4).to_bytes(8, "big"), body + chain)
    env.close()

    with Journal.open(path, readonly=True) as journal:
        with pytest.raises(JournalRecordError, match="unknown event type 'Hostil'") as info:
            list(journal.read())
        report = journal.verify(decode=True)

    assert info.value.seq == 4
    assert not report.ok


@pytest.mark.slow
@settings(max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.text(), value=values, prompt=st.text(alphabet=st.characters(), max_size=3000))
def test_a_long_fuzz_of_values_and_prompts(runtime: Runtime, key: str, value: Any, prompt: str) -> None:
    values_test: Any = test_arbitrary_keys_and_values_give_a_copy_or_a_documented_error
    prompts_test: Any = test_arbitrary_prompts_pass_the_gate_or_are_refused_with_documented_errors
    values_test.hypothesis.inner_test(runtime, key, value)
    prompts_test.hypothesis.inner_test(prompt)

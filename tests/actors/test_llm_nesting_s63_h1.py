"""Calls made within a call (session 63, helper h1): a script that asks its provider again, a nested turn.

A ``ScriptedProvider`` held its lock while a function script ran, so a script that
asked the provider again (itself, a client of it, another thread it waited for) waited
for that lock for good. A ``JournaledLLM`` kept one turn's state per thread, so a turn
made within a provider's answer (the provider asking the same client) cleared the outer
turn's session: its output's record named no session. The deadlocks are shown by a
thread's ``join`` timing out, never by a hang.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from cogfabric import (
    ActorTimeoutError,
    FakeClock,
    InvalidArgumentError,
    JournaledLLM,
    LLMConfig,
    ProviderError,
    Runtime,
    ScriptedProvider,
)
from cogfabric.events import LlmCallFailed, LlmOutputRecorded, PromptRejected

from .test_llm_pins import _events

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

    from cogfabric import AgentContext, IpcMessage
    from cogfabric.events import Event

_STUCK = 5.0
"""Seconds a call is given before it counts as stuck (it takes milliseconds)."""


def _in_thread(call: Callable[[], object]) -> list[object]:
    """``call()``'s result (or error) from a thread of its own, failing the test if it is stuck."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            outcome.append(exc)

    thread = threading.Thread(target=run, name="nesting-test-call", daemon=True)
    thread.start()
    thread.join(_STUCK)
    assert not thread.is_alive(), f"the call is stuck after {_STUCK} s (a deadlock)"
    return outcome


# ---------------------------------------------------------------- ScriptedProvider


def test_a_script_that_asks_its_own_provider_again_is_answered() -> None:
    # Before: the nested generate waited for the lock its caller held, for good.
    holder: list[ScriptedProvider] = []

    def script(prompt: str) -> str:
        if prompt == "outer":
            return "out:" + holder[0].generate("inner")
        return "in"

    provider = ScriptedProvider(script)
    holder.append(provider)

    assert _in_thread(lambda: provider.generate("outer")) == ["out:in"]
    assert provider.calls == ["outer", "inner"]  # in the order they came in


def test_a_script_that_waits_for_another_thread_asking_its_provider_is_answered() -> None:
    # "or on another it waits for": the other thread's call is not held behind the script.
    holder: list[ScriptedProvider] = []
    inner: list[str] = []

    def script(prompt: str) -> str:
        if prompt != "outer":
            return "in"
        helper = threading.Thread(target=lambda: inner.append(holder[0].generate("inner")), daemon=True)
        helper.start()
        helper.join(_STUCK)
        return "out:" + ",".join(inner)

    provider = ScriptedProvider(script)
    holder.append(provider)

    assert _in_thread(lambda: provider.generate("outer")) == ["out:in"]
    assert provider.calls == ["outer", "inner"]


def test_a_behaviors_script_that_asks_the_runtimes_client_again_is_answered(tmp_path: Path) -> None:
    # The runtime's provider asked, from within its script, through a client of the runtime.
    holder: list[JournaledLLM] = []

    def script(prompt: str) -> str:
        if prompt == "outer":
            return "out:" + holder[0].generate("inner")
        return "in"

    provider = ScriptedProvider(script)
    with Runtime.open(tmp_path / "j", clock=FakeClock(), llm_provider=provider) as rt:
        holder.append(rt.llm())
        assert _in_thread(lambda: holder[0].generate("outer")) == ["out:in"]

    outputs = [e.output for e in _events(tmp_path / "j") if isinstance(e, LlmOutputRecorded)]
    assert outputs == ["in", "out:in"]
    assert provider.calls == ["outer", "inner"]


def test_concurrent_nested_scripts_all_finish_each_prompt_kept_once_after_its_caller() -> None:
    # Many threads at once, each script asking the provider again: no deadlock, every
    # prompt in calls once, each inner prompt after the outer one it was asked within.
    threads, rounds = 4, 25
    holder: list[ScriptedProvider] = []
    start = threading.Barrier(threads)

    def script(prompt: str) -> str:
        if prompt.startswith("outer"):
            return holder[0].generate("inner" + prompt.removeprefix("outer"))
        return prompt.upper()

    provider = ScriptedProvider(script)
    holder.append(provider)

    def caller(index: int) -> list[str]:
        start.wait(_STUCK)
        return [provider.generate(f"outer {index}.{r}") for r in range(rounds)]

    answers: list[str] = []
    workers = [
        threading.Thread(target=lambda i=i: answers.extend(caller(i)), daemon=True) for i in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(_STUCK)
        assert not worker.is_alive(), "a caller is stuck (a deadlock)"

    assert sorted(answers) == sorted(f"INNER {i}.{r}" for i in range(threads) for r in range(rounds))
    assert len(provider.calls) == 2 * threads * rounds == len(set(provider.calls))
    place = {prompt: at for at, prompt in enumerate(provider.calls)}
    assert all(
        place[f"outer {i}.{r}"] < place[f"inner {i}.{r}"] for i in range(threads) for r in range(rounds)
    )


def test_a_sequence_hands_out_each_output_once_in_turn_to_concurrent_callers() -> None:
    # The contract the lock keeps (passes before the change too): the k-th prompt in
    # calls got the k-th output of the cycle, whatever the threads' interleaving.
    outputs = ["a", "b", "c", "d", "e"]
    threads, rounds = 4, 50
    provider = ScriptedProvider(outputs)
    start = threading.Barrier(threads)
    got: dict[str, str] = {}

    def caller(index: int) -> None:
        start.wait(_STUCK)
        for r in range(rounds):
            prompt = f"p {index}.{r}"
            got[prompt] = provider.generate(prompt)

    workers = [threading.Thread(target=caller, args=(i,), daemon=True) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(_STUCK)
        assert not worker.is_alive()

    assert len(provider.calls) == threads * rounds == len(got)
    assert [got[prompt] for prompt in provider.calls] == [
        outputs[k % len(outputs)] for k in range(threads * rounds)
    ]


# ---------------------------------------------------------------- JournaledLLM: a call within a call


class _AsksWithin:
    """A provider that, asked within a turn ('outer q' in its window), asks its own client first.

    ``inner`` is what it does with the client: a turn of the side session, a bare
    generate, a blank prompt refused by ``validate`` or a turn. ``fail`` makes the outer answer fail
    after the inner call.
    """

    name = "nested"

    def __init__(self, inner: str, *, fail: bool = False) -> None:
        self.inner = inner
        self.fail = fail
        self.client: JournaledLLM | None = None
        self.side = ""

    def generate(self, prompt: str, **params: Any) -> str:  # noqa: ARG002
        if "outer q" not in prompt:
            return "inner answer"
        assert self.client is not None
        if self.inner == "turn":
            said = self.client.turn(self.side, "inner q")
        elif self.inner == "continue":
            said = self.client.continue_turn(self.side)
        elif self.inner == "generate":
            said = self.client.generate("a sub-question")
        elif self.inner == "validate":
            with pytest.raises(InvalidArgumentError):
                self.client.validate("   ")
            said = "refused"
        else:
            with pytest.raises(InvalidArgumentError):
                self.client.turn(self.side, "   ")
            said = "refused"
        if self.fail:
            msg = "the outer answer fails"
            raise RuntimeError(msg)
        return "outer answer after " + said


def _records(path: Path, names: Mapping[str | None, str]) -> list[tuple[str, str | None, str]]:
    """The LLM records: (type, output or reason, the session's name in ``names``)."""
    kept = (LlmOutputRecorded, LlmCallFailed, PromptRejected)
    rows: list[tuple[str, str | None, str]] = []
    for event in _events(path):
        if isinstance(event, kept):
            said = event.reason if isinstance(event, PromptRejected) else getattr(event, "output", None)
            rows.append((type(event).__name__, said, names.get(event.session, str(event.session))))
    return rows


@pytest.mark.parametrize(
    ("inner", "inner_record"),
    [
        ("turn", ("LlmOutputRecorded", "inner answer", "side")),
        ("continue", ("LlmOutputRecorded", "inner answer", "side")),
        ("generate", ("LlmOutputRecorded", "inner answer", "none")),
        ("blank", ("PromptRejected", "blank", "none")),
        ("validate", ("PromptRejected", "blank", "none")),
    ],
)
def test_a_call_within_a_turn_leaves_the_outer_turns_session_to_its_record(
    tmp_path: Path, inner: str, inner_record: tuple[str, str, str]
) -> None:
    # Before: a nested turn (or continue_turn) cleared the thread's session, so the outer
    # output's record named none; a nested bare generate, or a nested turn's refused user
    # message, named the outer session (a bare call and that refusal name none), as did
    # a validate() of the client's.
    provider = _AsksWithin(inner)
    with Runtime.open(tmp_path / "j", clock=FakeClock(), llm_provider=provider) as rt:
        main = rt.memory.create_session("u")
        provider.side = rt.memory.create_session("side")
        rt.memory.add_message(provider.side, "user", "a side question")
        provider.client = rt.llm()
        answer = provider.client.turn(main, "outer q")
        said = [(m.role, m.content) for m in rt.memory.get_messages(main)]

    expected = "outer answer after " + ("refused" if inner in {"blank", "validate"} else "inner answer")
    assert answer == expected
    assert said[-2:] == [("user", "outer q"), ("assistant", expected)]
    names = {main: "main", provider.side: "side", None: "none"}
    assert _records(tmp_path / "j", names) == [inner_record, ("LlmOutputRecorded", expected, "main")]


def test_a_provider_failure_after_a_nested_turn_names_the_outer_session(tmp_path: Path) -> None:
    # Before: LlmCallFailed of the outer call named no session.
    provider = _AsksWithin("turn", fail=True)
    with Runtime.open(tmp_path / "j", clock=FakeClock(), llm_provider=provider) as rt:
        main = rt.memory.create_session("u")
        provider.side = rt.memory.create_session("side")
        provider.client = rt.llm()
        with pytest.raises(ProviderError, match="the outer answer fails"):
            provider.client.turn(main, "outer q")

    rows = _records(tmp_path / "j", {main: "main", provider.side: "side"})
    assert rows == [("LlmOutputRecorded", "inner answer", "side"), ("LlmCallFailed", None, "main")]


def test_an_outer_turn_whose_record_times_out_after_a_nested_turn_still_answers_its_session() -> None:
    # Before: the nested turn cleared the thread's output slot with its session, so the
    # outer turn, whose output record outlasted call_timeout, had no answer to queue.
    provider = _AsksWithin("turn")
    clock = FakeClock()
    with Runtime.open(None, clock=clock, llm_provider=provider) as rt:
        main = rt.memory.create_session("u")
        provider.side = rt.memory.create_session("side")

        def journal(event: Event) -> None:
            if isinstance(event, LlmOutputRecorded) and event.output.startswith("outer"):
                msg = "the output's record outlasted call_timeout"
                raise ActorTimeoutError(msg)

        provider.client = JournaledLLM(
            provider,
            LLMConfig(),
            clock=clock,
            journal=journal,
            memory=rt.memory,
        )
        with pytest.raises(ActorTimeoutError):
            provider.client.turn(main, "outer q")
        rt.flush()
        said = [(m.role, m.content) for m in rt.memory.get_messages(main)]

    assert said[-2:] == [("user", "outer q"), ("assistant", "outer answer after inner answer")]


class _Turns:
    """A behavior that runs a turn of its payload's session through a ``ctx.llm`` it keeps."""

    kept: ClassVar[list[JournaledLLM]] = []

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> str:
        llm = ctx.llm
        _Turns.kept[:] = [llm]
        return llm.turn(message.payload["session"], "outer q")


def test_a_behaviors_turn_within_its_own_turn_keeps_each_records_session(tmp_path: Path) -> None:
    # The provider asks the behavior's client (the one the outer turn runs on) for a
    # turn of another session: each record on the agent's stream names its own.
    provider = _AsksWithin("turn")

    class Kept:
        def generate(self, prompt: str, **params: Any) -> str:
            provider.client = _Turns.kept[0]
            return provider.generate(prompt, **params)

    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"t": _Turns}, llm_provider=Kept()) as rt:
        main = rt.memory.create_session("u")
        provider.side = rt.memory.create_session("side")
        rt.spawn("a", behavior="t")
        reply = rt.bus.request("x", "a", "go", {"session": main}, timeout=_STUCK)
        assert reply.payload == "outer answer after inner answer"
        rt.settle(_STUCK)
        said = [(m.role, m.content) for m in rt.memory.get_messages(main)]

    assert said[-1] == ("assistant", "outer answer after inner answer")
    names: dict[str | None, str] = {main: "main", provider.side: "side"}
    assert _records(tmp_path / "j", names) == [
        ("LlmOutputRecorded", "inner answer", "side"),
        ("LlmOutputRecorded", "outer answer after inner answer", "main"),
    ]

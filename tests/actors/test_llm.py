"""The prompt gate (spec §6 and §10) and the LLM client, scripted and over HTTP."""

from __future__ import annotations

import contextlib
import http.server
import json
import math
import threading
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from cogfabric.actors import (
    AgentContext,
    Config,
    FakeClock,
    InvalidArgumentError,
    InvalidConfigError,
    IpcHandlerError,
    JournalConfig,
    LLMClient,
    LLMConfig,
    NoLLMProviderError,
    OpenAICompatibleProvider,
    PromptTooLongError,
    ProviderError,
    Runtime,
    RuntimeClosedError,
    ScriptedProvider,
    render_messages,
)
from cogfabric.actors._llm import prompt_hash
from cogfabric.config import load_llm_config, parse_config
from cogfabric.events import (
    IpcMessage,
    LlmCallFailed,
    LlmOutputRecorded,
    Message,
    PromptRejected,
    ToolCall,
    ToolCallFunction,
)
from cogfabric.store import JournalFullError, JournalStillFullError

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


@pytest.fixture
def provider() -> ScriptedProvider:
    return ScriptedProvider(["first", "second"])


def test_a_scripted_provider_keeps_its_prompts_unless_told_not_to() -> None:
    # cogfabric simulate's provider kept every prompt of a run: memory grew with each call
    kept, dropped = ScriptedProvider(["a"]), ScriptedProvider(["a"], keep_calls=False)

    for provider in (kept, dropped):
        assert [provider.generate(f"p{n}") for n in range(3)] == ["a", "a", "a"]

    assert (kept.calls, dropped.calls) == (["p0", "p1", "p2"], [])


@pytest.mark.parametrize(
    ("script", "error", "match"),
    [
        ("hello", TypeError, r"got str \(it would answer one character at a time\): pass \[text\]"),
        (b"hello", TypeError, "a sequence of outputs or a function of the prompt, got bytes"),
        (None, TypeError, "a sequence of outputs or a function of the prompt, got NoneType"),
        (["ok", 2], TypeError, "a scripted output is a str, got int"),
        ([], ValueError, "at least one output"),
        ({"b", "a"}, TypeError, "got set"),  # an order that changes from process to process
        ({"prompt": "answer"}, TypeError, "got dict"),  # it would answer with its keys
    ],
    ids=["str", "bytes", "none", "non-str-output", "empty", "set", "dict"],
)
def test_a_script_that_is_no_sequence_of_outputs_is_refused(
    script: object, error: type[Exception], match: str
) -> None:
    # ScriptedProvider("hello") answered "h", "e", "l", ... one character a call
    with pytest.raises(error, match=match):
        ScriptedProvider(script)  # type: ignore[arg-type]


def test_a_scripted_provider_takes_any_iterable_of_outputs_or_a_function() -> None:
    assert [ScriptedProvider(("a", "b")).generate("q") for _ in range(2)] == ["a", "a"]
    cycling = ScriptedProvider(iter(["x", "y"]))
    assert [cycling.generate("q") for _ in range(3)] == ["x", "y", "x"]
    assert ScriptedProvider(str.upper).generate("q") == "Q"


class TestGate:
    def test_an_empty_prompt_is_an_invalid_argument(self, provider: ScriptedProvider) -> None:
        # the original returns its sentinel errors.ErrInvalidArgument, "invalid argument provided"
        with pytest.raises(InvalidArgumentError, match=r"^invalid argument provided: empty prompt$"):
            LLMClient(provider).generate("")

        assert provider.calls == []

    def test_a_white_space_prompt_is_an_invalid_argument(self, provider: ScriptedProvider) -> None:
        with pytest.raises(InvalidArgumentError, match=r"^invalid argument provided: prompt is only white"):
            LLMClient(provider).generate(" \n\t\u3000")

        assert provider.calls == []

    @pytest.mark.parametrize(
        ("prompt", "says"),
        [(b"hi", "a prompt is a str, got bytes"), ("hi \ud800", "the prompt is not valid UTF-8 text")],
    )
    def test_every_refused_prompt_reads_as_the_originals_invalid_argument(
        self, provider: ScriptedProvider, prompt: Any, says: str
    ) -> None:
        # a caller matching the original's "invalid argument provided" finds each refusal
        with pytest.raises(InvalidArgumentError, match=rf"^invalid argument provided: {says}"):
            LLMClient(provider).generate(prompt)

        assert provider.calls == []

    def test_white_space_is_what_go_trims_so_information_separators_pass(
        self, provider: ScriptedProvider
    ) -> None:
        client = LLMClient(provider)

        with pytest.raises(InvalidArgumentError):
            client.generate("\x85\xa0\u2028\u202f")  # all white space to Go's unicode.IsSpace
        assert client.generate("\x1c\x1f") == "first"  # Python's str.strip() would trim these

    def test_8192_cjk_characters_pass_and_8193_are_refused(self, provider: ScriptedProvider) -> None:
        client = LLMClient(provider)

        assert client.generate("字" * 8192) == "first"
        with pytest.raises(PromptTooLongError) as info:
            client.generate("字" * 8193)

        assert str(info.value) == "prompt exceeds maximum length of 8192 characters"
        assert len(provider.calls) == 1

    def test_astral_code_points_count_one_each(self, provider: ScriptedProvider) -> None:
        client = LLMClient(provider, LLMConfig(max_prompt_length=4))

        assert client.generate("😀😀😀😀") == "first"
        with pytest.raises(PromptTooLongError, match="maximum length of 4 characters"):
            client.generate("😀😀😀😀😀")

    def test_zero_means_the_default_limit(self, provider: ScriptedProvider) -> None:
        assert LLMClient(provider, LLMConfig(max_prompt_length=0)).max_prompt_length == 8192
        assert LLMClient(provider, LLMConfig(max_prompt_length=10)).max_prompt_length == 10

    def test_the_empty_check_comes_before_the_length_check(self, provider: ScriptedProvider) -> None:
        with pytest.raises(InvalidArgumentError):
            LLMClient(provider, LLMConfig(max_prompt_length=1)).generate("   ")


class TestConfig:
    def test_llm_config_loads_the_original_keys_from_yaml(self) -> None:
        config = load_llm_config(
            "provider: openai\napi_key: sk-secret\nbase_url: http://127.0.0.1:1/v1\nmodel: m\n"
            "timeout: 5\nmax_tokens: 10\nmax_prompt_length: 0\nextra: {temperature: 0.2}\n"
        )

        assert (config.provider, config.model, config.prompt_limit) == ("openai", "m", 8192)
        assert config.extra == {"temperature": 0.2}
        assert "sk-secret" not in repr(config)

    def test_an_empty_llm_config_is_the_defaults_and_errors_name_their_source(self) -> None:
        assert load_llm_config("") == load_llm_config("# nothing set\n") == LLMConfig()
        with pytest.raises(InvalidConfigError, match=r"^llm\.yaml: .*\$\.base_url"):
            load_llm_config("base_url: file:///etc/passwd\n", source="llm.yaml")

    def test_an_llm_config_with_yaml_aliases_is_refused_before_they_expand(self) -> None:
        text = "extra:\n  a0: &a0 [x, x]\n  a1: [*a0, *a0]\n"
        with pytest.raises(InvalidConfigError, match=r"^llm\.yaml: YAML aliases \(\*a0\) are not accepted"):
            load_llm_config(text, source="llm.yaml")

    def test_an_unknown_key_is_an_error_naming_it(self) -> None:
        with pytest.raises(InvalidConfigError, match="max_prompt_lenght"):
            load_llm_config("max_prompt_lenght: 5\n")
        with pytest.raises(InvalidConfigError, match=r"\$\.memory"):
            parse_config("memory:\n  max_histroy: 3\n")

    def test_a_wrong_type_or_range_is_an_error_naming_it(self) -> None:
        with pytest.raises(InvalidConfigError, match=r"\$\.llm\.timeout"):
            parse_config("llm:\n  timeout: soon\n")
        with pytest.raises(
            InvalidConfigError, match=r"^<config>: max_history must be positive.*\$\.memory\.max_history"
        ):
            parse_config("memory:\n  max_history: 0\n")

    @pytest.mark.parametrize("text", ["", "\n", "# every default\n", "---\n# still nothing\n"])
    def test_a_file_of_comments_only_means_every_default(self, text: str) -> None:
        assert parse_config(text) == Config()

    def test_a_full_config_file_decodes(self) -> None:
        config = parse_config("journal:\n  durability: batch\nmemory:\n  max_history: 3\nllm:\n  model: x\n")

        assert (config.journal.durability, config.memory.max_history, config.llm.model) == ("batch", 3, "x")


class TestJournaled:
    def test_refusals_and_outputs_are_journaled_and_the_provider_is_not_called_on_refusal(
        self, tmp_path: Path, provider: ScriptedProvider
    ) -> None:
        config = Config(llm=LLMConfig(max_prompt_length=5))
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as runtime:
            llm = runtime.llm(provider)
            assert llm.generate("hello") == "first"
            with pytest.raises(PromptTooLongError):
                llm.generate("hello!")
            with pytest.raises(InvalidArgumentError):
                llm.generate("")
            assert runtime._journal is not None
            events = [r.event for r in runtime._journal.read()]

        assert provider.calls == ["hello"]
        rejected = [e for e in events if isinstance(e, PromptRejected)]
        assert [(e.agent, e.length, e.limit, e.reason) for e in rejected] == [
            (None, 6, 5, "too_long"),
            (None, 0, 5, "empty"),
        ]
        (output,) = [e for e in events if isinstance(e, LlmOutputRecorded)]
        assert (output.provider, output.output, len(output.prompt_hash)) == ("scripted", "first", 32)

    def test_a_provider_that_is_false_as_a_bool_is_still_the_one_used(self, tmp_path: Path) -> None:
        class Counting(ScriptedProvider):
            def __len__(self) -> int:  # a fresh one is "empty", so bool() is False
                return len(self.calls)

        mine = Counting(["mine"])
        default = ScriptedProvider(["the runtime's"])
        with Runtime.open(tmp_path / "j", clock=FakeClock(), llm_provider=default) as runtime:
            assert runtime.llm(mine).generate("hello") == "mine"
        with Runtime.open(clock=FakeClock()) as runtime:
            assert runtime.llm(Counting(["also mine"])).generate("hello") == "also mine"

        assert (mine.calls, default.calls) == (["hello"], [])

    def test_a_client_used_after_close_calls_no_provider(
        self, tmp_path: Path, provider: ScriptedProvider
    ) -> None:
        # nothing could journal the output: the model is not called (nor paid for)
        with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
            llm = runtime.llm(provider)

        for prompt in ("hello", ""):
            with pytest.raises(RuntimeClosedError):
                llm.generate(prompt)
        assert provider.calls == []

    def test_a_client_calls_no_provider_once_the_journal_is_fail_stop(
        self, tmp_path: Path, provider: ScriptedProvider
    ) -> None:
        # the provider was called (and paid for), then its output could not be journaled
        # and was lost; the gate's refusals raised the journal's error after the fact
        kept: list[AgentContext] = []

        class Keeper:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> str:  # noqa: ARG002
                kept.append(ctx)
                return "kept"

        config = Config(journal=JournalConfig(map_size=1 << 20, max_map_size=1 << 20))
        opened = Runtime.open(
            tmp_path / "j", config=config, clock=FakeClock(), behaviors={"k": Keeper}, llm_provider=provider
        )
        with opened as runtime:
            agent = runtime.spawn("a", behavior="k")
            runtime.bus.request("x", "a", "keep", timeout=10)

            def fill() -> None:
                for i in range(100):
                    agent.set_private(f"k{i}", "x" * 200_000)

            with pytest.raises(JournalFullError):
                fill()
            clients = [runtime.llm(), kept[0].llm]
            for llm in clients:
                for prompt in ("hello", "", "x" * 9000):
                    with pytest.raises(JournalStillFullError):
                        llm.generate(prompt)

        assert provider.calls == []

    def test_a_turn_builds_the_prompt_from_the_session_and_adds_the_answer(
        self, tmp_path: Path, provider: ScriptedProvider
    ) -> None:
        with Runtime.open(tmp_path / "j", clock=FakeClock(), llm_provider=provider) as runtime:
            session = runtime.memory.create_session("u")

            answer = runtime.llm().turn(session, "what is X?")

            assert answer == "first"
            assert provider.calls == ["system: New session started\nuser: what is X?"]
            assert [m.role for m in runtime.memory.get_messages(session)] == ["system", "user", "assistant"]

    def test_a_turn_shows_the_model_the_tool_calls_and_which_call_a_result_answers(
        self, tmp_path: Path, provider: ScriptedProvider
    ) -> None:
        # Rendered as role: content alone, an assistant's tool calls were dropped: the
        # model never saw which tool it had called, nor which call a result answered.
        # A turn's prompt starts a new turn, so earlier turns' calls are shown in the
        # cleaner's summary (a long argument value is not sent again with every prompt).
        search = ToolCall(id="call_1", function=ToolCallFunction(name="search", arguments='{"q": "x"}'))
        code = json.dumps({"code": "print(1)\n" * 2000})
        old_run = ToolCall(id="call_0", function=ToolCallFunction(name="code_runner", arguments=code))
        short = '{"code": "f()"}'
        run = ToolCall(id="call_2", function=ToolCallFunction(name="code_runner", arguments=short))
        clock = ToolCall(id="", function=ToolCallFunction(name="now"))
        with Runtime.open(tmp_path / "j", clock=FakeClock(), llm_provider=provider) as runtime:
            session = runtime.memory.create_session("u")
            for message in (
                Message(role="user", content="find rows", turn_id="t1"),
                Message(role="assistant", content="ok", tool_calls=[search, old_run], turn_id="t1"),
                Message(role="tool_result", content="row", tool_call_id="call_1", turn_id="t1"),
                Message(role="tool_call", content="", tool_calls=[search], turn_id="t1"),
                Message(role="user", content="run it", turn_id="t2"),
                Message(role="assistant", content="", tool_calls=[run, clock], turn_id="t2"),
                Message(role="tool_result", content="exit code: 0", tool_call_id="call_2", turn_id="t2"),
            ):
                runtime.memory.add_structured_message(session, message)
            window = runtime.memory.build_prompt_messages(session)

            runtime.llm().turn(session, "next question")

        earlier = [
            "system: New session started",
            "user: find rows",
            "assistant: ok",
            'assistant tool calls: call_1: call search(q="x"); call_0: call code_runner(code)',
            "tool_result for call_1: row",
            'tool_call: call_1: call search(q="x")',
            "user: run it",
        ]
        assert provider.calls == [
            "\n".join(
                [
                    *earlier,
                    'assistant tool calls: call_2: call code_runner(code="f()"); call now()',
                    "tool_result for call_2: Exec `f()` exit=0 (12 bytes)",
                    "user: next question",
                ]
            )
        ]
        # the last turn of a window, whose tool traffic the cleaner keeps exactly, whole
        assert render_messages(window) == "\n".join(
            [
                *earlier,
                'assistant tool call call_2: code_runner({"code": "f()"})',
                "assistant tool call: now()",
                "tool_result for call_2: exit code: 0",
            ]
        )

    def test_a_turn_starts_a_new_turn_in_a_session_of_turn_ids(self, tmp_path: Path) -> None:
        # Untagged, a turn's messages joined the last tagged turn, whose tool traffic the
        # window keeps whole: a large call was sent again with every later prompt, and
        # past the gate, every later turn was refused.
        big = ToolCall(id="c1", function=ToolCallFunction(name="code_runner", arguments="x" * 9000))
        provider = ScriptedProvider(["first", "second", "third"])
        with Runtime.open(tmp_path / "j", clock=FakeClock(), llm_provider=provider) as runtime:
            tagged = runtime.memory.create_session("u")
            for message in (
                Message(role="user", content="run it", turn_id="t1"),
                Message(role="assistant", content="", tool_calls=[big], turn_id="t1"),
                Message(role="tool_result", content="exit code: 0", tool_call_id="c1", turn_id="t1"),
            ):
                runtime.memory.add_structured_message(tagged, message)
            plain = runtime.memory.create_session("v")

            answers = [runtime.llm().turn(tagged, "next"), runtime.llm().turn(tagged, "and next")]
            runtime.llm().turn(plain, "hello")
            stored = runtime.memory.get_messages(tagged)[-4:]
            untagged = runtime.memory.get_messages(plain)

        assert answers == ["first", "second"]
        assert all(len(p) < 500 for p in provider.calls)
        ids = [m.turn_id for m in stored]
        assert ids[0] == ids[1] != ids[2] == ids[3]
        assert all(i.startswith("turn-") and len(i) == 21 for i in ids)
        assert [m.turn_id for m in untagged] == ["", "", ""]  # a session without turn ids stays so

    def test_render_messages_shows_an_uncleaned_earlier_tool_call_message_by_its_calls(self) -> None:
        search = ToolCall(id="c1", function=ToolCallFunction(name="search", arguments='{"q": "x"}'))
        window = [
            Message(role="user", content="a"),
            Message(role="tool_call", content="", tool_calls=[search]),
            Message(role="user", content="b"),
        ]

        assert render_messages(window) == 'user: a\ntool_call tool calls: c1: call search(q="x")\nuser: b'

    def test_a_prompt_with_a_lone_surrogate_is_refused_and_journaled_before_the_provider(
        self, tmp_path: Path, provider: ScriptedProvider
    ) -> None:
        with Runtime.open(tmp_path / "j", clock=FakeClock(), llm_provider=provider) as runtime:
            session = runtime.memory.create_session("u")
            with pytest.raises(InvalidArgumentError, match="not valid UTF-8"):
                runtime.llm().generate("hi \ud800")
            with pytest.raises(InvalidArgumentError, match="not valid UTF-8"):
                runtime.llm().turn(session, "hi \ud800")
            with pytest.raises(InvalidArgumentError, match="empty prompt"):
                runtime.llm().turn(session, "")
            assert runtime._journal is not None
            reasons = [r.event.reason for r in runtime._journal.read() if isinstance(r.event, PromptRejected)]
            messages = runtime.memory.get_messages(session)

        assert provider.calls == []
        assert reasons == ["not_utf8", "not_utf8", "empty"]
        assert [m.role for m in messages] == ["system"]  # a refused user message is not added

    def test_a_provider_that_raises_is_a_provider_error_with_its_cause(self, tmp_path: Path) -> None:
        def down(prompt: str) -> str:  # noqa: ARG001 - a provider's signature
            msg = "down"
            raise ConnectionError(msg)

        with (
            Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime,
            pytest.raises(ProviderError, match="failed: ConnectionError") as info,
        ):
            runtime.llm(ScriptedProvider(down)).generate("hello")

        assert isinstance(info.value.__cause__, ConnectionError)

    def test_a_provider_failure_is_journaled_with_its_error_and_nothing_of_the_prompt(
        self, tmp_path: Path
    ) -> None:
        answers = iter([ConnectionError("down"), 42, "fine"])

        def flaky(prompt: str) -> Any:  # noqa: ARG001 - a provider's signature
            answer = next(answers)
            if isinstance(answer, Exception):
                raise answer
            return answer

        with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
            llm = runtime.llm(ScriptedProvider(flaky))
            with pytest.raises(ProviderError, match="failed: ConnectionError"):
                llm.generate("secret prompt")
            with pytest.raises(ProviderError, match="returned int, not str"):
                llm.generate("secret prompt")
            assert llm.generate("secret prompt") == "fine"
            assert runtime._journal is not None
            events = [r.event for r in runtime._journal.read() if r.stream == "runtime"]

        kinds = [type(e).__name__ for e in events if isinstance(e, LlmCallFailed | LlmOutputRecorded)]
        assert kinds == ["LlmCallFailed", "LlmCallFailed", "LlmOutputRecorded"]
        first, second = (e for e in events if isinstance(e, LlmCallFailed))
        assert (first.agent, first.provider, first.session) == (None, "scripted", None)
        assert "ConnectionError('down')" in first.error
        assert "returned int" in second.error
        assert first.prompt_hash == second.prompt_hash == prompt_hash("secret prompt")
        assert all("secret" not in e.error for e in (first, second))

    def test_a_provider_without_a_readable_name_or_model_is_journaled_under_its_class_name(
        self, tmp_path: Path
    ) -> None:
        NOT_CONNECTED, DOWN = "not connected", "backend down"  # noqa: N806 - the messages

        class Opaque:  # no name or model at all
            def generate(self, prompt: str, **params: Any) -> str:  # noqa: ARG002 - a provider's signature
                return "plain " + prompt

        class Lazy:  # both are properties that fail, as a lazily connected client's may
            down = False

            @property
            def name(self) -> str:
                raise RuntimeError(NOT_CONNECTED)

            @property
            def model(self) -> str:
                raise RuntimeError(NOT_CONNECTED)

            def generate(self, prompt: str, **params: Any) -> str:  # noqa: ARG002 - a provider's signature
                if self.down:
                    raise ConnectionError(DOWN)
                return "lazy " + prompt

        lazy = Lazy()
        with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
            assert runtime.llm(Opaque()).generate("a") == "plain a"
            assert runtime.llm(lazy).generate("b") == "lazy b"
            lazy.down = True
            with pytest.raises(ProviderError, match="provider Lazy failed: ConnectionError"):
                runtime.llm(lazy).generate("c")
            assert runtime._journal is not None
            events = [r.event for r in runtime._journal.read() if r.stream == "runtime"]

        calls = [e for e in events if isinstance(e, LlmCallFailed | LlmOutputRecorded)]
        assert [(type(e).__name__, e.provider, e.model) for e in calls] == [
            ("LlmOutputRecorded", "Opaque", ""),
            ("LlmOutputRecorded", "Lazy", ""),
            ("LlmCallFailed", "Lazy", ""),
        ]

    def test_a_provider_failure_that_cannot_be_journaled_still_reaches_the_caller_as_such(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        runtime = Runtime.open(tmp_path / "j", clock=FakeClock())

        def closing(prompt: str) -> str:  # noqa: ARG001 - a provider's signature
            runtime.close()  # the runtime goes away while the call is out
            msg = "down"
            raise ConnectionError(msg)

        try:
            with pytest.raises(ProviderError, match="failed: ConnectionError"):
                runtime.llm(ScriptedProvider(closing)).generate("hello")
        finally:
            runtime.close()
        assert "a provider's failure could not be journaled" in caplog.text

    def test_a_failed_turn_is_journaled_under_its_session_and_adds_no_answer(self, tmp_path: Path) -> None:
        def down(prompt: str) -> str:  # noqa: ARG001 - a provider's signature
            msg = "down"
            raise TimeoutError(msg)

        with Runtime.open(tmp_path / "j", clock=FakeClock(), llm_provider=ScriptedProvider(down)) as runtime:
            session = runtime.memory.create_session("u")
            with pytest.raises(ProviderError, match="TimeoutError"):
                runtime.llm().turn(session, "what is X?")
            assert runtime._journal is not None
            (failed,) = [r.event for r in runtime._journal.read() if isinstance(r.event, LlmCallFailed)]
            roles = [m.role for m in runtime.memory.get_messages(session)]

        assert failed.session == session
        assert roles == ["system", "user"]  # the user's message stays, as after a refusal

    def test_a_refused_turn_is_journaled_under_its_session(self, tmp_path: Path) -> None:
        # The gate refuses the rendered window (over 20 code points with the seed): the
        # user's message stays in the session with no answer, and the record says why.
        provider = ScriptedProvider(lambda prompt: "never")  # noqa: ARG005 - a provider's signature
        config = Config(llm=LLMConfig(max_prompt_length=20))
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), llm_provider=provider) as runtime:
            session = runtime.memory.create_session("u")
            with pytest.raises(PromptTooLongError):
                runtime.llm().turn(session, "hi")
            with pytest.raises(PromptTooLongError):
                runtime.llm().generate("x" * 21)  # outside a turn
            assert runtime._journal is not None
            rejected = [r.event for r in runtime._journal.read() if isinstance(r.event, PromptRejected)]

        assert [(e.session, e.reason) for e in rejected] == [(session, "too_long"), (None, "too_long")]
        assert provider.calls == []


class Thinker:
    """Answers each message with an LLM turn in its own session."""

    sessions: ClassVar[dict[str, str]] = {}

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:
        session = Thinker.sessions[ctx.agent_id]
        return ctx.llm.turn(session, str(message.payload))


class AsksForLLM:
    """Answers a request with the type of the error ``ctx.llm`` raises (none: 'none')."""

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> str:  # noqa: ARG002
        try:
            ctx.llm  # noqa: B018 - the property is the call under test
        except Exception as exc:  # noqa: BLE001 - the test looks at its type
            return type(exc).__name__
        return "none"


def test_an_llm_client_of_a_runtime_with_no_provider_is_a_typed_error() -> None:
    with Runtime.open(None, clock=FakeClock(), behaviors={"asks": AsksForLLM}) as runtime:
        with pytest.raises(NoLLMProviderError, match="no LLM provider") as raised:
            runtime.llm()
        runtime.spawn("a", behavior="asks")
        answer = runtime.bus.request("x", "a", "ask", None, timeout=10)

    assert isinstance(raised.value, ValueError)  # as it was before it had a type of its own
    assert answer.payload == "NoLLMProviderError"


def test_a_behavior_turn_is_journaled_on_its_agent_stream(tmp_path: Path) -> None:
    provider = ScriptedProvider(lambda prompt: f"echo {prompt.splitlines()[-1]}")
    with Runtime.open(
        tmp_path / "j", clock=FakeClock(), behaviors={"thinker": Thinker}, llm_provider=provider
    ) as runtime:
        runtime.spawn("a", behavior="thinker")
        Thinker.sessions = {"a": runtime.memory.create_session("u", agent_id="a")}

        reply = runtime.bus.request("x", "a", "ask", "why?", timeout=10)
        runtime.flush()
        assert runtime._journal is not None
        outputs = [
            r.event for r in runtime._journal.read(stream="agent/a") if isinstance(r.event, LlmOutputRecorded)
        ]

    assert reply.payload == "echo user: why?"
    assert [(o.agent, o.output, o.session) for o in outputs] == [
        ("a", "echo user: why?", Thinker.sessions["a"])
    ]


def test_a_behaviors_failed_llm_call_is_journaled_on_its_agent_stream_naming_the_message(
    tmp_path: Path,
) -> None:
    def down(prompt: str) -> str:  # noqa: ARG001 - a provider's signature
        msg = "no model"
        raise RuntimeError(msg)

    with Runtime.open(
        tmp_path / "j", clock=FakeClock(), behaviors={"thinker": Thinker}, llm_provider=ScriptedProvider(down)
    ) as runtime:
        runtime.spawn("a", behavior="thinker")
        Thinker.sessions = {"a": runtime.memory.create_session("u", agent_id="a")}

        with pytest.raises(IpcHandlerError):
            runtime.bus.request("x", "a", "ask", "why?", timeout=10)
        runtime.flush()
        assert runtime._journal is not None
        records = list(runtime._journal.read())

    (failed,) = [r.event for r in records if isinstance(r.event, LlmCallFailed)]
    (request,) = [r.event for r in records if isinstance(r.event, IpcMessage) and r.event.topic == "ask"]
    assert failed.stream == "agent/a"
    assert (failed.agent, failed.session, failed.cause) == ("a", Thinker.sessions["a"], request.id)
    assert "RuntimeError('no model')" in failed.error


class _Completions(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[dict[str, Any]]] = []
    body_comes: ClassVar[threading.Event] = threading.Event()

    def do_GET(self) -> None:
        _Completions.received.append({"path": self.path, "auth": self.headers.get("Authorization")})
        self.send_response(404)
        self.end_headers()

    def do_POST(self) -> None:  # noqa: PLR0911, PLR0915 - one answer per test prompt
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Completions.received.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        content = body["messages"][0]["content"] if body.get("messages") else ""
        if content == "fail":
            self.send_response(500)
            self.end_headers()
            return
        if content == "redirect":  # to another host name of this server
            self.send_response(302)
            port = self.server.server_address[1]  # type: ignore[index]
            self.send_header("Location", f"http://localhost:{port}/elsewhere")
            self.end_headers()
            return
        if content == "hang up":
            self.close_connection = True
            return
        if content == "slow reason":  # an error whose body comes only once the test lets it
            self.send_response(503)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.flush()
            _Completions.body_comes.wait(10)
            with contextlib.suppress(OSError):
                self.wfile.write(b"{}")
            return
        if content.startswith("explain"):  # an error with the server's reason, echoing the key it was sent
            padding = "x" * 250 if content == "explain at the cut" else ""  # the key straddles the cut
            echoed = f"{padding} bad key {self.headers.get('Authorization')}"
            reason = {"error": {"message": echoed, "code": "401"}}
            data = json.dumps(reason).encode()
            self.send_response(401)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if content == "big":  # 2 MiB of answer
            self.send_response(200)
            self.send_header("Content-Length", str(2 << 20))
            self.end_headers()
            with contextlib.suppress(OSError):
                self.wfile.write(b" " * (2 << 20))
            return
        if content in ("trickle", "long trickle"):  # a byte at a time, slower than the timeout
            length = 30 if content == "trickle" else 400
            self.send_response(200)
            self.send_header("Content-Length", str(length))
            self.end_headers()
            for _ in range(length):
                try:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                except OSError:
                    return
                threading.Event().wait(0.05)
            return
        answer = {
            "choices": [
                {"message": {"role": "assistant", "content": "ok: " + body["messages"][0]["content"]}}
            ]
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Quiet."""


@pytest.fixture
def server(serve_http: Callable[..., str]) -> str:
    _Completions.received = []
    return serve_http(_Completions)


def test_the_openai_compatible_provider_talks_to_a_real_http_server(server: str) -> None:
    provider = OpenAICompatibleProvider(
        LLMConfig(base_url=server, api_key="sk", model="m", max_tokens=7, timeout=5)
    )

    assert LLMClient(provider).generate("hi") == "ok: hi"
    with pytest.raises(ProviderError):
        provider.generate("fail")

    first = _Completions.received[0]
    assert (first["path"], first["auth"], first["model"], first["max_tokens"]) == (
        "/v1/chat/completions",
        "Bearer sk",
        "m",
        7,
    )


def test_the_http_provider_bounds_the_whole_exchange_by_its_timeout(server: str) -> None:
    # a socket timeout bounds each read: a server that trickles its answer held the call
    provider = OpenAICompatibleProvider(LLMConfig(model="m", base_url=server, timeout=0.5))
    done = threading.Event()
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            provider.generate("trickle")
        except ProviderError as exc:
            outcome.append(exc)
        finally:
            done.set()

    threading.Thread(target=call, daemon=True).start()

    assert done.wait(1.2)  # 0.5 s and some, not the 1.5 s the answer takes
    assert "no whole answer within 0.5 s" in str(outcome[0])


def test_a_timed_out_exchange_stops_reading_a_trickling_answer(server: str) -> None:
    # The caller's timeout was kept, but the exchange read on: a thread and a socket for
    # as long as the server trickled (here 20 s), after each timed-out call.
    provider = OpenAICompatibleProvider(LLMConfig(model="m", base_url=server, timeout=0.5))

    with pytest.raises(ProviderError, match=r"no whole answer within 0\.5 s"):
        provider.generate("long trickle")
    exchanges = [t for t in threading.enumerate() if t.name.startswith("cogfabric-llm-http")]
    for exchange in exchanges:
        exchange.join(5)

    assert exchanges
    assert not [t for t in exchanges if t.is_alive()]


def test_an_http_error_keeps_the_servers_reason_and_never_the_key(server: str) -> None:
    provider = OpenAICompatibleProvider(
        LLMConfig(model="m", base_url=server, api_key="sk-secret-42", timeout=5)
    )

    with pytest.raises(ProviderError) as caught:
        provider.generate("explain")

    message = str(caught.value)
    assert "HTTP Error 401" in message
    assert "bad key Bearer ***" in message  # the server's reason, the key it echoed masked
    assert "sk-secret-42" not in message


def test_a_key_echoed_across_the_cut_of_an_errors_reason_is_masked_before_the_cut(server: str) -> None:
    provider = OpenAICompatibleProvider(
        LLMConfig(model="m", base_url=server, api_key="sk-secret-4242", timeout=5)
    )

    with pytest.raises(ProviderError) as caught:
        provider.generate("explain at the cut")

    assert "sk-" not in str(caught.value)


def test_an_http_error_whose_body_is_slow_is_still_its_status(server: str) -> None:
    # Reading the server's reason waited for a body that was slow to come, up to the
    # whole timeout: a 503 became "no whole answer within 5 s".
    _Completions.body_comes.clear()
    provider = OpenAICompatibleProvider(LLMConfig(model="m", base_url=server, timeout=5))
    try:
        with pytest.raises(ProviderError, match="HTTP Error 503"):
            provider.generate("slow reason")
    finally:
        _Completions.body_comes.set()


def test_an_answer_longer_than_max_answer_bytes_is_refused(server: str) -> None:
    provider = OpenAICompatibleProvider(
        LLMConfig(model="m", base_url=server, timeout=5), max_answer_bytes=1 << 20
    )

    with pytest.raises(ProviderError, match=r"longer than 1048576 bytes \(max_answer_bytes\)"):
        provider.generate("big")
    assert provider.generate("hi") == "ok: hi"
    with pytest.raises(ValueError, match="max_answer_bytes"):
        OpenAICompatibleProvider(LLMConfig(model="m", base_url=server), max_answer_bytes=0)


@pytest.mark.parametrize(
    "key", ["sk-secret\n", "sk secret", "sk-\x00secret", "\tsk-secret", "sk\u2013secret"]
)
def test_an_api_key_with_white_space_or_control_characters_is_refused_unseen(key: str) -> None:
    # A key read from a file keeps its newline: the HTTP library refused the header in
    # an error that quoted the key, which the journal kept for good. A pasted en dash
    # cannot go in a header at all: every call failed.
    with pytest.raises(InvalidConfigError, match="api_key") as caught:
        OpenAICompatibleProvider(LLMConfig(model="m", base_url="http://127.0.0.1:9/v1", api_key=key))

    assert "secret" not in str(caught.value)


@pytest.mark.parametrize(
    "url",
    [
        "http://user:secret@127.0.0.1:9/v1",
        "https://secret@example.invalid/v1",
        "http://:secret@h/v1",
        "http://user:1234/secret@127.0.0.1:9/v1",  # urlsplit: host "user", port 1234
        "http://user:sec?ret@127.0.0.1/v1",
        "http:///user:secret@api.example.invalid/v1",
    ],
)
def test_a_base_url_with_a_user_or_password_is_refused_unseen(url: str) -> None:
    # urllib sends no credentials from a URL, and every ProviderError names the URL:
    # the password went into the journal's LlmCallFailed.
    with pytest.raises(InvalidConfigError, match="user name or password") as caught:
        OpenAICompatibleProvider(LLMConfig(model="m", base_url=url))

    assert "secret" not in str(caught.value)


def test_a_provider_without_a_model_is_refused_and_runtime_open_leaves_nothing_open(tmp_path: Path) -> None:
    # The original's NewClient refuses it ("invalid argument provided: model is required");
    # sent on, every request asked a server for model "" and failed only at the first call.
    with pytest.raises(InvalidConfigError, match=r"^invalid argument provided: model is required"):
        OpenAICompatibleProvider(LLMConfig(base_url="http://127.0.0.1:9/v1"))
    refused = [
        {"base_url": "http://127.0.0.1:9/v1"},
        {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key": "sk-from-a-file\n"},
        {"base_url": "http://u:secret@127.0.0.1:9/v1", "model": "m"},
    ]
    for llm in refused:
        with pytest.raises(InvalidConfigError):
            Runtime.open(tmp_path / "r", config={"llm": llm})
        # before, the provider was built once the journal and its writer had started: the
        # refusal left both behind, and the path stayed locked for the rest of the process
        assert not (tmp_path / "r").exists()
        assert not [t.name for t in threading.enumerate() if t.name.startswith("JournalWriter")]
    with Runtime.open(
        tmp_path / "r", config={"llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}
    ) as rt:
        assert rt.agents() == []


def test_a_parameter_that_is_the_providers_own_reads_as_the_originals_invalid_argument() -> None:
    provider = OpenAICompatibleProvider(LLMConfig(model="m", base_url="http://127.0.0.1:9/v1"))

    # refused before anything is sent: no server listens there
    with pytest.raises(
        InvalidArgumentError, match=r"^invalid argument provided: model is the provider's own"
    ):
        provider.generate("hi", model="other")


def test_a_provider_given_to_runtime_open_is_used_though_config_llm_names_a_server(tmp_path: Path) -> None:
    # config.llm makes a provider only when none is given: a scripted one stays in use beside
    # a configuration that names a server, even one without its model yet
    config = {"llm": {"base_url": "http://127.0.0.1:9/v1"}}
    with Runtime.open(tmp_path / "j", config=config, llm_provider=ScriptedProvider(["scripted"])) as runtime:
        assert runtime.llm().generate("hi") == "scripted"


@pytest.mark.parametrize("url", ["http://", "https:///v1", "http://127.0.0.1:port/v1"])
def test_a_base_url_without_a_host_or_with_a_bad_port_is_refused(url: str) -> None:
    with pytest.raises(InvalidConfigError, match="base_url"):
        OpenAICompatibleProvider(LLMConfig(model="m", base_url=url))


def test_a_query_in_base_url_stays_after_the_path(server: str) -> None:
    provider = OpenAICompatibleProvider(
        LLMConfig(model="m", base_url=server + "/?api-version=2024-01", timeout=5)
    )

    assert provider.generate("hi") == "ok: hi"
    assert _Completions.received[-1]["path"] == "/v1/chat/completions?api-version=2024-01"


def test_the_http_provider_follows_no_redirect_and_sends_its_key_nowhere_else(server: str) -> None:
    provider = OpenAICompatibleProvider(LLMConfig(model="m", base_url=server, api_key="sk-secret", timeout=5))

    with pytest.raises(ProviderError, match="302"):
        provider.generate("redirect")

    assert [r["path"] for r in _Completions.received] == ["/v1/chat/completions"]


def test_the_http_provider_raises_provider_error_for_a_dropped_connection(server: str) -> None:
    with pytest.raises(ProviderError, match="failed"):
        OpenAICompatibleProvider(LLMConfig(model="m", base_url=server, timeout=5)).generate("hang up")


@pytest.mark.parametrize("field", ["model", "messages"])
def test_parameters_cannot_replace_the_model_or_the_gated_prompt(server: str, field: str) -> None:
    provider = OpenAICompatibleProvider(LLMConfig(base_url=server, model="m", timeout=5))
    with_extra = OpenAICompatibleProvider(
        LLMConfig(model="m", base_url=server, timeout=5, extra={field: "x"})
    )

    with pytest.raises(InvalidArgumentError, match=field):
        provider.generate("hi", **{field: [{"role": "user", "content": "x" * 50_000}]})
    with pytest.raises(InvalidArgumentError, match=field):
        with_extra.generate("hi")

    assert _Completions.received == []  # nothing was sent
    assert provider.generate("hi", temperature=0.2) == "ok: hi"
    assert _Completions.received[-1]["temperature"] == 0.2


def test_a_refused_prompt_never_reaches_the_http_server(server: str) -> None:
    provider = OpenAICompatibleProvider(LLMConfig(model="m", base_url=server, max_prompt_length=3, timeout=5))

    with pytest.raises(PromptTooLongError):
        LLMClient(provider, LLMConfig(max_prompt_length=3)).generate("four")

    assert _Completions.received == []


@pytest.mark.parametrize(("timeout", "effective"), [(5.0, 5.0), (0.0, 60.0), (-1.0, 60.0), (math.inf, 1e9)])
def test_a_timeout_of_zero_or_less_means_sixty_seconds_and_a_huge_one_is_capped(
    server: str, timeout: float, effective: float
) -> None:
    config = LLMConfig(model="m", base_url=server, timeout=timeout)

    assert config.request_timeout == effective
    # 0 made the socket non-blocking, a negative one a ValueError, inf an OverflowError: each failed the call
    assert OpenAICompatibleProvider(config).generate("hi") == "ok: hi"


@pytest.mark.parametrize(("max_tokens", "sent"), [(7, 7), (0, 4096), (-5, 4096)])
def test_max_tokens_of_zero_or_less_asks_for_the_default_4096(
    server: str, max_tokens: int, sent: int
) -> None:
    config = LLMConfig(model="m", base_url=server, max_tokens=max_tokens, timeout=5)

    assert OpenAICompatibleProvider(config).generate("hi") == "ok: hi"

    assert config.completion_tokens == sent
    assert _Completions.received[-1]["max_tokens"] == sent


def test_a_shared_client_journals_each_turn_under_its_own_session(tmp_path: Path) -> None:
    class Echo:
        name = "echo"
        model = "echo-1"

        def generate(self, prompt: str, **params: Any) -> str:  # noqa: ARG002
            threading.Event().wait(0.01)  # a model's latency: the other threads' turns go on
            return prompt.rsplit("user: ", 1)[-1].strip()  # the turn's own message

    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        llm = rt.llm(Echo())
        sessions = [rt.memory.create_session(f"u{i}") for i in range(6)]
        start = threading.Barrier(len(sessions))

        def turns(session: str) -> None:
            start.wait(10)
            for _ in range(5):
                llm.turn(session, session)  # the message is the session's id

        threads = [threading.Thread(target=turns, args=(s,)) for s in sessions]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert not any(thread.is_alive() for thread in threads)
        journal = rt._journal
        assert journal is not None
        outputs = [r.event for r in journal.read() if isinstance(r.event, LlmOutputRecorded)]
    assert len(outputs) == 30
    assert all(event.session == event.output for event in outputs)


def test_a_limit_a_refusal_could_not_journal_is_refused_in_the_config() -> None:
    with pytest.raises(InvalidConfigError, match="max_prompt_length"):
        Runtime.open(config={"llm": {"max_prompt_length": 2**64}})

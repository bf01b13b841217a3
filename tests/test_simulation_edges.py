"""The simulate command at its edges: a default run, a foreign journal, a path that cannot be opened."""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any, ClassVar

import msgspec
import pytest
from click.testing import CliRunner

import cogfabric._simulation
from cogfabric._errors import CogfabricError
from cogfabric._simulation import SimulationReport, run_simulation
from cogfabric.actors import Config, InvalidConfigError, MemoryConfig, Runtime, RuntimeConfig, replay_agent
from cogfabric.cli import main
from cogfabric.events import LlmOutputRecorded, PrivateSet
from cogfabric.store import Journal, JournalUnavailableError
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from pathlib import Path

    from click.testing import Result


def _figure(output: str, name: str) -> int:
    found = re.search(rf"{name} (\d+)", output)
    assert found is not None, output
    return int(found.group(1))


def _claims(path: Path) -> dict[str, list[str]]:
    """Each agent's hypotheses, in the order it formed them."""
    claims: dict[str, list[str]] = {}
    with Journal.open(path, readonly=True) as journal:
        for record in journal.read():
            event = record.event
            if isinstance(event, PrivateSet) and event.key == "hypothesis":
                claims.setdefault(event.agent, []).append(event.value["claim"])
    return claims


def _outputs(path: Path) -> dict[str, list[str]]:
    """Each agent's model answers: a researcher's in order, a reviewer's sorted.

    Reviews reach a reviewer in whatever order the researchers' requests arrive.
    """
    outputs: dict[str, list[str]] = {}
    with Journal.open(path, readonly=True) as journal:
        for record in journal.read():
            if isinstance(record.event, LlmOutputRecorded):
                outputs.setdefault(str(record.event.agent), []).append(record.event.output)
    return {a: sorted(o) if a.startswith("reviewer-") else o for a, o in outputs.items()}


def _assert_one_line_error(result: Result, *, naming: str) -> None:
    assert result.exit_code in (1, 2), result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].lower().startswith("error: "), result.output
    assert naming in lines[0]
    assert "Traceback" not in result.output


# ---------------------------------------------------------------- 1: a default run


def test_a_default_run_in_a_fresh_directory_has_distinct_hypotheses_and_broadcasts_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    result = CliRunner().invoke(main, ["simulate"])  # every flag at its default

    claims = _claims(tmp_path / "cogfabric-journal")

    assert result.exit_code == 0, result.output
    assert result.output.startswith("ran 200 turns of 50 agents")
    assert _figure(result.output, "findings broadcast") > 0
    assert _figure(result.output, "prompts refused") > 0  # the gate still refuses an evidence dump
    first_claims = {agent_claims[0] for agent_claims in claims.values()}
    assert len(claims) == 40
    assert len(first_claims) == 40  # each researcher starts from a hypothesis of its own


def test_the_same_seed_gives_the_same_answers_and_another_seed_other_ones(tmp_path: Path) -> None:
    runs = {
        name: cogfabric._simulation.run_simulation(tmp_path / name, agents=6, turns=30, seed=seed)
        for name, seed in (("a", 7), ("b", 7), ("c", 8))
    }

    a, b, c = (_outputs(tmp_path / name) for name in ("a", "b", "c"))
    assert a == b
    assert a != c
    assert len({answers[0] for answers in a.values()}) == len(a) == 6  # researchers and the reviewer
    figures = ("refusals", "reviews", "broadcasts", "checkpoints", "events", "sessions")
    assert [getattr(runs["a"], f) for f in figures] == [getattr(runs["b"], f) for f in figures]


def _final_private_layers(path: Path) -> dict[str, dict[str, Any]]:
    """Each agent's private layer at the end of the journal, as replay rebuilds it.

    But for the id of its session, which is random (ids differ from run to run).
    """
    with Journal.open(path, readonly=True) as journal:
        agents = [stream.removeprefix("agent/") for stream in journal.streams("agent/")]
        states = {agent: replay_agent(journal, agent) for agent in agents}
    return {
        agent: {key: value for key, value in state.private.items() if key != "session"}
        for agent, state in states.items()
        if state is not None
    }


def test_the_same_seed_leaves_every_agent_in_the_same_state(tmp_path: Path) -> None:
    # A reviewer's verdict carried its count of reviews so far, which follows the order
    # the requests arrive in: the researchers' last reviews differed between same-seed runs.
    for name in ("a", "b", "c"):
        cogfabric._simulation.run_simulation(tmp_path / name, agents=6, turns=40, seed=7)

    a, b, c = (_final_private_layers(tmp_path / name) for name in ("a", "b", "c"))

    assert len(a) == 6
    assert any("last_review" in layer for layer in a.values())
    assert a == b == c


def test_a_run_stopped_after_its_spawns_is_set_up_in_full_by_the_run_that_continues_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the first run stops after its spawns are journaled, before the goal is published
    # and the researchers subscribed: the next run finishes the set-up, not skips it
    def stop(*args: Any, **kwargs: Any) -> list[str]:  # noqa: ARG001
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(Runtime, "publish_task_context", stop)
        with pytest.raises(KeyboardInterrupt):
            run_simulation(tmp_path / "j", agents=6, turns=10)

    run_simulation(tmp_path / "j", agents=6, turns=10)
    run_simulation(tmp_path / "j", agents=6, turns=10)  # nothing left to do: nothing redone

    with Runtime.open(tmp_path / "j") as rt:
        researchers = [a for a in rt.agents() if a.startswith("researcher-")]
        assert len(researchers) == 5
        assert all(rt.agent(a).task_context() == cogfabric._simulation.GOAL for a in researchers)
        assert sorted(rt.bus.subscribers(cogfabric._simulation.FINDINGS)) == researchers
    types = _types(tmp_path / "j")
    assert types["TaskContextPublished"] == 1
    assert types["IpcSubscribed"] == 5


# ---------------------------------------------------------------- 2: a journal the simulation did not write


def test_simulate_refuses_a_journal_whose_agents_it_did_not_spawn(tmp_path: Path) -> None:
    path = tmp_path / "foreign"
    with Runtime.open(path) as rt:
        rt.spawn("x")

    result = CliRunner().invoke(main, ["simulate", "--journal", str(path), "--turns", "5"])

    _assert_one_line_error(result, naming=str(path))
    assert "not written by the simulation" in result.output
    with Journal.open(path, readonly=True) as journal:
        assert journal.last_seq == 1  # refused before a byte was written to it
    with Runtime.open(path) as rt:
        assert rt.agents() == ["x"]


def test_simulate_refuses_a_journal_with_records_but_no_simulation_agents(tmp_path: Path) -> None:
    path = tmp_path / "raw"
    with Journal.open(path) as journal:
        journal.append(make_events(10))

    result = CliRunner().invoke(main, ["simulate", "--journal", str(path), "--turns", "5"])

    _assert_one_line_error(result, naming=str(path))
    with Journal.open(path, readonly=True) as journal:
        assert journal.last_seq == 10


def test_simulate_runs_in_an_existing_empty_directory(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    path.mkdir()

    result = CliRunner().invoke(main, ["simulate", "--journal", str(path), "--agents", "4", "--turns", "4"])

    assert result.exit_code == 0, result.output
    assert result.output.startswith("ran 4 turns of 4 agents")


# ---------------------------------------------------------------- 3: a journal that cannot be opened


def test_simulate_on_a_plain_file_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "plain"
    path.write_text("not a journal\n", encoding="utf-8")

    result = CliRunner().invoke(main, ["simulate", "--journal", str(path), "--turns", "5"])

    _assert_one_line_error(result, naming=str(path))
    assert path.read_text(encoding="utf-8") == "not a journal\n"


class _SomeOtherCogfabricError(CogfabricError):
    """Neither a journal error nor any other type the command knows."""


@pytest.mark.parametrize(
    "error",
    [
        _SomeOtherCogfabricError("the journal could not be opened for some new reason"),
        FileExistsError(17, "File exists"),  # what the store raised for a plain file before
    ],
    ids=["a-cogfabric-error-of-any-type", "an-os-error"],
)
def test_any_error_opening_the_journal_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    def fail(*args: Any, **kwargs: Any) -> Runtime:  # noqa: ARG001
        raise error

    monkeypatch.setattr(Runtime, "open", fail)
    path = tmp_path / "j"

    result = CliRunner().invoke(main, ["simulate", "--journal", str(path), "--turns", "5"])

    _assert_one_line_error(result, naming=str(path))


def test_a_bad_config_is_reported_as_the_config_not_as_the_journal(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("memory:\n  max_history: 0\n", encoding="utf-8")

    result = CliRunner().invoke(
        main, ["simulate", "--journal", str(tmp_path / "j"), "--turns", "5", "--config", str(config)]
    )
    with pytest.raises(InvalidConfigError, match="max_history"):
        run_simulation(tmp_path / "j2", turns=5, config=Config(memory=MemoryConfig(max_history=0)))

    _assert_one_line_error(result, naming="max_history")
    assert "cannot open the journal" not in result.output


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_researcher_never_loses_its_own_findings_to_a_mailbox_full_of_ticks(
    tmp_path: Path, durability: str
) -> None:
    # The driver sent every tick at once: a researcher's mailbox filled with them, its
    # finding broadcast to itself was dead-lettered (only its behavior empties it), and
    # which findings were lost followed the threads' timing (a default run met it past
    # 10,000 ticks a researcher).
    config = Config(runtime=RuntimeConfig(mailbox_size=50))
    report = run_simulation(tmp_path / "j", agents=2, turns=400, durability=durability, config=config)
    with Runtime.open(tmp_path / "j", config=config) as runtime:
        seen = runtime.agent("researcher-000").private("findings_seen")

    assert report.broadcasts > 0
    assert (report.dead_letters, _types(tmp_path / "j").get("IpcDeadLettered", 0)) == (0, 0)
    assert seen == report.broadcasts


def test_a_run_with_undelivered_messages_warns_that_a_seed_may_not_reproduce(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = run_simulation

    def with_dead_letters(*args: Any, **kwargs: Any) -> SimulationReport:
        reasons = {"mailbox full": 2, "timeout": 1}
        return dataclasses.replace(real(*args, **kwargs), dead_letters=3, dead_letter_reasons=reasons)

    monkeypatch.setattr(cogfabric._simulation, "run_simulation", with_dead_letters)
    path = tmp_path / "j"

    result = CliRunner().invoke(main, ["simulate", "--journal", str(path), "--agents", "3", "--turns", "3"])

    assert result.exit_code == 0, result.output
    assert "warning: 3 messages were not delivered (2 mailbox full, 1 timeout; mailbox full: a smaller " in (
        result.output
    )
    assert f"cogfabric export {path} --type IpcDeadLettered --after " in result.output


def test_dead_letters_of_failed_behaviors_are_named_so_not_blamed_on_full_mailboxes(tmp_path: Path) -> None:
    # Every turn's prompt is refused, so each behavior raises and its message is
    # dead-lettered as a handler error: the warning said "full mailboxes" and
    # suggested a larger mailbox_size, which changes nothing.
    config = Config(llm=msgspec.structs.replace(Config().llm, max_prompt_length=5))
    report = run_simulation(tmp_path / "j", agents=3, turns=5, config=config)
    (tmp_path / "c.yaml").write_text("llm:\n  max_prompt_length: 5\n", encoding="utf-8")

    result = CliRunner().invoke(
        main,
        [
            "simulate",
            "--journal",
            str(tmp_path / "k"),
            "--agents",
            "3",
            "--turns",
            "5",
            "--config",
            str(tmp_path / "c.yaml"),
        ],
    )

    assert report.dead_letters > 0
    assert report.dead_letter_reasons == {"handler error": report.dead_letters}
    assert report.dead_letters == _types(tmp_path / "j")["IpcDeadLettered"]
    assert result.exit_code == 1  # the behaviors raised
    assert f"messages were not delivered ({report.dead_letters} handler error)" in result.output
    assert "mailbox" not in result.output


def test_a_journal_that_fails_during_the_run_exits_1_whatever_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a full disk (JournalUnavailableError) exited 2, the exit of a usage error
    def fail(*args: Any, **kwargs: Any) -> None:  # noqa: ARG001
        msg = "j: mdb_txn_commit: No space left on device"
        raise JournalUnavailableError(msg)

    monkeypatch.setattr(cogfabric._simulation, "_drive", fail)
    path = tmp_path / "j"

    result = CliRunner().invoke(main, ["simulate", "--journal", str(path), "--turns", "3"])

    _assert_one_line_error(result, naming="No space left on device")
    assert result.exit_code == 1
    assert result.output.startswith("error: the simulation stopped: ")


def _types(path: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    with Journal.open(path, readonly=True) as journal:
        for record in journal.read():
            name = type(record.event).__name__
            counts[name] = counts.get(name, 0) + 1
    return counts


@pytest.mark.parametrize(("agents", "turns"), [(3, 4), (4, 20), (10, 30)])
def test_even_a_small_run_has_a_session_per_agent_a_refusal_and_a_checkpoint(
    tmp_path: Path, agents: int, turns: int
) -> None:
    report = run_simulation(tmp_path / "j", agents=agents, turns=turns)

    counts = _types(tmp_path / "j")
    assert report.sessions == agents == counts["SessionCreated"]
    assert report.refusals >= 1
    assert report.refusals == counts["PromptRejected"]
    assert report.checkpoints >= 1
    assert report.checkpoints == counts["CheckpointTaken"]
    assert "AgentFailed" not in counts


def test_more_agents_than_the_session_limit_keep_their_sessions(tmp_path: Path) -> None:
    config = Config(memory=MemoryConfig(max_sessions=5))

    report = run_simulation(tmp_path / "j", agents=12, turns=24, config=config)

    counts = _types(tmp_path / "j")
    assert report.sessions == 12
    assert "SessionEvicted" not in counts
    assert "AgentFailed" not in counts
    assert counts["LlmOutputRecorded"] == 24 + report.reviews


def test_a_session_that_expired_before_a_run_is_replaced_at_its_start(tmp_path: Path) -> None:
    from cogfabric.actors import FakeClock  # noqa: PLC0415

    run_simulation(tmp_path / "j", agents=4, turns=6)
    clock = FakeClock(start=10**10)  # far past every session's TTL
    with Runtime.open(tmp_path / "j", clock=clock) as runtime:
        assert runtime.memory.size() == 0  # all expired while closed

    report = run_simulation(tmp_path / "j", turns=6)

    assert report.sessions == 4
    assert "AgentFailed" not in _types(tmp_path / "j")


def test_a_session_that_expires_in_the_middle_of_a_run_is_replaced_by_the_agent() -> None:
    from cogfabric.actors import SessionNotFoundError  # noqa: PLC0415

    class Memory:
        def create_session(self, user_id: str, *, agent_id: str | None = None) -> str:
            assert user_id == agent_id == "researcher-001"
            return "fresh"

    class Ctx:
        agent_id = "researcher-001"
        memory = Memory()
        privates: ClassVar[dict[str, Any]] = {"session": "expired"}

        def private(self, key: str) -> Any:
            return self.privates.get(key)

        def set_private(self, key: str, value: object) -> None:
            self.privates[key] = value

    def step(session: str) -> str:
        if session == "expired":
            raise SessionNotFoundError(session)
        return f"answered in {session}"

    assert cogfabric._simulation._in_session(Ctx(), step) == "answered in fresh"  # type: ignore[arg-type]
    assert Ctx.privates["session"] == "fresh"


def test_a_continued_run_keeps_a_session_for_every_agent_of_its_journal(tmp_path: Path) -> None:
    from cogfabric.actors import FakeClock  # noqa: PLC0415

    config = Config(memory=MemoryConfig(max_sessions=5))
    run_simulation(tmp_path / "j", agents=12, turns=12, config=config)
    with Runtime.open(tmp_path / "j", clock=FakeClock(start=10**10)):
        pass  # every session expires: the next run makes 12 new ones

    report = run_simulation(tmp_path / "j", agents=3, turns=24, config=config)  # its own 12 agents go on

    assert report.agents == report.sessions == 12
    assert "SessionEvicted" not in _types(tmp_path / "j")


def _simulate_with(tmp_path: Path, settings: str) -> Result:
    """``simulate`` of 4 agents and 6 turns with ``settings`` as its YAML config file."""
    config = tmp_path / "settings.yaml"
    config.write_text(settings, encoding="utf-8")
    arguments = ["--agents", "4", "--turns", "6", "--journal", str(tmp_path / "j"), "--config", str(config)]
    return CliRunner().invoke(main, ["simulate", *arguments])


@pytest.mark.parametrize(
    ("settings", "naming"),
    [("memory:\n\tmax_history: 3\n", "line 2, column 1"), ("journal: {durability: batch\n", "line 2")],
)
def test_a_config_that_is_no_yaml_is_a_one_line_error(tmp_path: Path, settings: str, naming: str) -> None:
    result = _simulate_with(tmp_path, settings)

    _assert_one_line_error(result, naming=naming)
    assert "<byte string>" not in result.output


def test_turns_that_fail_are_counted_from_the_journal_and_make_the_command_fail(tmp_path: Path) -> None:
    result = _simulate_with(tmp_path, "llm:\n  max_prompt_length: 50\n")  # every turn's prompt is longer

    counts = _types(tmp_path / "j")
    assert result.exit_code == 1
    assert f"error: agents raised {counts['AgentFailed']} times" in result.output
    assert f"prompts refused {counts['PromptRejected']}," in result.output
    assert counts["AgentFailed"] == 6


def test_a_run_that_cannot_go_on_is_a_one_line_error(tmp_path: Path) -> None:
    result = _simulate_with(tmp_path, "runtime:\n  call_timeout: 0.000001\n")

    _assert_one_line_error(result, naming="the simulation stopped")


def test_a_run_that_could_not_create_its_journal_leaves_a_directory_the_next_run_takes(
    tmp_path: Path,
) -> None:
    # A map too small for a new journal's databases fails the first run; the LMDB file it
    # leaves holds nothing committed, which the foreign-journal check took for "not a
    # cogfabric journal" for good, while a writer takes it as new.
    first = _simulate_with(tmp_path, "journal:\n  max_map_size: 16384\n")
    assert first.exit_code == 1, first.output
    assert "cannot hold a new journal" in first.output
    assert (tmp_path / "j" / "data.mdb").exists()

    arguments = ["--agents", "4", "--turns", "6", "--journal", str(tmp_path / "j")]
    again = CliRunner().invoke(main, ["simulate", *arguments])

    assert again.exit_code == 0, again.output
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        assert journal.verify().ok
        assert journal.last_seq > 0


def test_a_run_that_fills_max_map_size_stops_with_exit_one(tmp_path: Path) -> None:
    config = tmp_path / "small.yaml"
    config.write_text("journal:\n  map_size: 1048576\n  max_map_size: 2097152\n", encoding="utf-8")

    result = CliRunner().invoke(
        main,
        [
            "simulate",
            "--agents",
            "4",
            "--turns",
            "2000",
            "--journal",
            str(tmp_path / "j"),
            "--config",
            str(config),
        ],
    )

    assert result.exit_code == 1, result.output
    assert "error: the simulation stopped:" in result.output
    assert "reached max_map_size (2097152 bytes)" in result.output
    with Journal.open(tmp_path / "j", readonly=True) as journal:  # what was committed is intact
        assert journal.verify().ok


@pytest.mark.parametrize(("given", "used"), [(0, 4000), (-1, 4000), (50, 50), (9000, 9000)])
def test_simulate_gates_prompts_at_4000_code_points_unless_a_limit_is_set(given: int, used: int) -> None:
    config = Config(llm=msgspec.structs.replace(Config().llm, max_prompt_length=given))

    assert cogfabric._simulation._settings(config, None).llm.prompt_limit == used

"""The main job: a deterministic multi-agent research simulation on the embedded journal.

Researchers share a task context, keep private hypotheses and a cognitive state, take
LLM turns in their own sessions through the prompt gate (a scripted provider, so a
seed gives the same answers, the same records and the same agents' states at the end;
seqs, times and ids, and the order of a reviewer's session, follow the threads' timing
(README: "Reproducing a run"); every twentieth
round of a researcher also tries a raw evidence dump that the gate refuses), ask
reviewers for reviews (IPC request/reply),
broadcast findings, and checkpoint (in their first round, then every fifth). Reviewers
only answer, each review an LLM call noted in the reviewer's own session, so no two agents
ever wait on each other. Every agent has a session (``max_sessions`` is raised to the
number of agents); one that expires is replaced. Running it again on the same journal
continues from the recovered state; a journal the simulation did not write is refused,
untouched.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import os
import random
import re
import stat
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import msgspec

from cogfabric._errors import CogfabricError
from cogfabric.actors import (
    AgentContext,
    Config,
    InvalidArgumentError,
    InvalidConfigError,
    PromptTooLongError,
    Runtime,
    ScriptedProvider,
    SessionNotFoundError,
)
from cogfabric.events import (
    CognitiveState,
    IpcDeadLettered,
    IpcMessage,
    LlmOutputRecorded,
    SessionCreated,
    SessionMessageAdded,
)
from cogfabric.store import Journal, JournalError, JournalFailedError, JournalFullError, JournalNotFoundError

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from cogfabric.actors import Behavior

__all__ = ["SimulationError", "SimulationReport", "run_simulation"]

TASK = "research"
GOAL = {"goal": "explain the anomaly in dataset D", "constraints": ["cite evidence", "stay under budget"]}
FINDINGS = "findings"
REVIEWER_SHARE = 5  # one agent in five reviews
_AGENT_ID = re.compile(r"(researcher|reviewer)-[0-9]+")
"""The ids the simulation spawns its agents with (``_set_up``)."""


class SimulationError(CogfabricError):
    """The simulation cannot run on that journal (``cogfabric simulate`` shows it as one line)."""


class SimulationStoppedError(CogfabricError):
    """The journal failed while the simulation ran (a full disk, say); ``__cause__`` is its error."""


@dataclass
class SimulationReport:
    """What a run did."""

    agents: int
    turns: int
    events: int
    total_events: int
    seconds: float
    sessions: int
    refusals: int
    failures: int
    reviews: int
    broadcasts: int
    checkpoints: int
    journal_bytes: int
    path: Path
    resumed: bool
    dead_letters: int = 0
    """Messages of this run that were not delivered (``IpcDeadLettered``): none in a run that
    reproduces its seed's states."""
    dead_letter_reasons: dict[str, int] = field(default_factory=dict)
    """How many of ``dead_letters`` each reason left (``"mailbox full"``, ``"handler error"``...)."""
    sessions_replaced: int = 0
    """Sessions of this run that replaced one its agent had that held messages (the old one
    expired, or was evicted or deleted): its later turns lost those earlier messages from their
    windows, so none in a run that reproduces its seed's states (the session TTL is wall-clock
    time). A session that held none (an agent that had not taken a turn) loses nothing."""
    journal_seed: int | None = None
    """For a continued run, the seed whose model answered the journal's last turn before it
    (``LlmOutputRecorded``'s model, ``seed-<n>``); None for a new journal, or one no model
    answered yet. Another seed than this run's makes a journal that follows neither alone."""
    journal_mixed: bool = False
    """For a continued run, whether its researchers' last answers before it name more than one
    seed (an earlier run changed it): no seed then continues the journal as one run of it."""

    @property
    def events_per_second(self) -> float:
        """Journaled events per second of this run."""
        return self.events / self.seconds if self.seconds > 0 else 0.0


class _Tally:
    """What the behaviors report back to the driver (in this process only)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = threading.Semaphore(0)
        self.reviews = 0
        self.broadcasts = 0


def _answer(seed: int) -> Callable[[str], str]:
    """A deterministic 'model': its answer depends only on the seed and the prompt.

    The prompt names the researcher (``Researcher._turn``), so researchers given the same
    goal still form hypotheses of their own.
    """

    def answer(prompt: str) -> str:
        digest = hashlib.blake2b(f"{seed}|{prompt}".encode(), digest_size=8).hexdigest()
        confidence = int(digest[:2], 16) / 255
        return f"hypothesis h-{digest[2:8]} with confidence {confidence:.2f}"

    return answer


class Researcher:
    """Takes a turn on 'tick': an LLM turn, a new hypothesis, sometimes a review or a finding."""

    def __init__(self, tally: _Tally, seed: int, reviewers: list[str]) -> None:
        self._tally = tally
        self._seed = seed
        self._reviewers = reviewers

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ANN401 - a reply or None
        if message.topic == FINDINGS:
            seen = ctx.private("findings_seen") or 0
            ctx.set_private("findings_seen", seen + 1)
            return None
        if message.topic != "tick":
            return None
        try:
            self._turn(ctx, int(message.payload["round"]))
        finally:
            self._tally.done.release()
        return None

    def _turn(self, ctx: AgentContext, round_no: int) -> None:
        rng = random.Random(f"{self._seed}:{ctx.agent_id}:{round_no}")  # noqa: S311 - a simulation
        ctx.set_private("rounds", round_no)
        task = ctx.task_context()
        prompt = (
            f"You are {ctx.agent_id}. Round {round_no}. Goal: {task.get('goal')}. "
            f"Previous: {ctx.private('hypothesis')}"
        )
        index = int(ctx.agent_id.rsplit("-", 1)[1])
        if (round_no + index) % 20 == 3:  # noqa: PLR2004 - staggered: a few refusals in any run
            with contextlib.suppress(PromptTooLongError, InvalidArgumentError):  # journaled as refused
                ctx.llm.generate(prompt + " evidence" * 1200)  # a raw evidence dump, far too long
        output = _session_turn(ctx, prompt)
        claim = output.split(" with ")[0]
        confidence = float(output.rsplit(" ", 1)[1])
        ctx.set_private("hypothesis", {"claim": claim, "confidence": confidence, "round": round_no})
        previous = ctx.cognitive_state()
        memory = [*list(previous.working_memory or [])[-4:], claim]
        ctx.set_cognitive_state(
            CognitiveState(
                context=task.get("goal"),
                observation=output,
                working_memory=memory,
                decision=claim if confidence > 0.5 else None,  # noqa: PLR2004
            )
        )
        if self._reviewers and rng.random() < 0.3:  # noqa: PLR2004
            verdict = ctx.request(
                rng.choice(self._reviewers), "review", {"claim": claim, "confidence": confidence}
            )
            ctx.set_private("last_review", verdict.payload)
            with self._tally.lock:
                self._tally.reviews += 1
        if confidence > 0.8:  # noqa: PLR2004
            ctx.broadcast(FINDINGS, {"claim": claim, "by": ctx.agent_id})
            with self._tally.lock:
                self._tally.broadcasts += 1
        if round_no % 5 == 1:  # its first round, then every fifth
            ctx.checkpoint_cognitive()


class Reviewer:
    """Answers review requests, each after an LLM turn in its session.

    It never asks anyone, so requests cannot wait in a cycle.
    """

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ANN401 - a reply
        if message.topic != "review":
            return None
        claim = message.payload
        reviewed = (ctx.private("reviewed") or 0) + 1
        ctx.set_private("reviewed", reviewed)
        prompt = f"You are {ctx.agent_id}. Review the claim: {claim['claim']}"
        # The answer depends on the claim alone (reviews arrive in any order), then both
        # go to the reviewer's session, which a turn() would feed back into the prompt.
        opinion = ctx.llm.generate(prompt)
        _in_session(ctx, lambda session: _note_exchange(ctx, session, prompt, opinion))
        verdict = "plausible" if claim["confidence"] >= 0.4 else "weak"  # noqa: PLR2004
        # nothing of the arrival order (reviewed counts it) in the verdict: a seed's runs
        # must leave every researcher the same last review
        return {"verdict": verdict, "reviewer": ctx.agent_id, "note": opinion}


def _note_exchange(ctx: AgentContext, session: str, prompt: str, answer: str) -> str:
    """``prompt`` and the model's ``answer`` added to ``session``, as a turn would add them."""
    ctx.memory.add_message(session, "user", prompt)
    ctx.memory.add_message(session, "assistant", answer)
    return answer


def _session_turn(ctx: AgentContext, prompt: str) -> str:
    """An LLM turn in the agent's session.

    A session that ended while the model answered (its TTL passed, or it was evicted)
    is replaced, and the answer, journaled and paid for, goes into the new one beside
    its prompt: the model is not asked twice.
    """
    try:
        return _in_session(ctx, lambda session: ctx.llm.turn(session, prompt))
    except SessionNotFoundError as exc:
        if exc.output is None:
            raise
        answer = exc.output
        return _in_session(ctx, lambda session: _note_exchange(ctx, session, prompt, answer))


def _in_session(ctx: AgentContext, step: Callable[[str], str]) -> str:
    """``step`` on the agent's session; a session that expired is replaced first.

    A ``SessionNotFoundError`` that carries a model's answer (``output``) is raised, not
    retried: the model answered, and asking it again would pay twice.
    """
    session = ctx.private("session")
    if session is not None:
        try:
            return step(session)
        except SessionNotFoundError as exc:
            if exc.output is not None:
                raise
            # its TTL passed (or it was evicted): a new one, as at start-up
    session = ctx.memory.create_session(ctx.agent_id, agent_id=ctx.agent_id)
    ctx.set_private("session", session)
    return step(session)


def _head(path: Path, counted: int) -> int:
    """The journal's last seq once the runtime closed; ``counted`` if it cannot be read.

    The session memory's ticker may journal the expiry of sessions past their TTL after
    the run's events were counted, up to the runtime's close: the report's figures of
    the journal are its own, not those of the moment the count began.
    """
    try:
        with Journal.open(path, readonly=True, check_pages=False) as journal:  # just written: trusted
            return max(journal.last_seq, counted)
    except (JournalError, OSError):
        return counted


def _journal_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.glob("*.mdb"))


def run_simulation(
    path: Path,
    *,
    agents: int = 50,
    turns: int = 200,
    seed: int = 0,
    durability: str | None = None,
    config: Config | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SimulationReport:
    """Run (or continue) the simulation on the journal at ``path``.

    ``turns`` is the number of researchers' LLM turns taken in this run, spread
    round-robin over them (a continued run takes the round-robin up where the last
    one left it: runs of 7 turns and 8 take the rounds one of 15 takes); the
    reviewers' answers to review requests are LLM turns of their own, beside those,
    and so are the raw dumps the gate refuses. ``agents``
    is used when the journal is new; a journal that holds a simulation already
    continues with its own agents.

    The driver keeps at most two ticks a researcher in flight: sent all at once, they
    filled the mailboxes, and a researcher's finding broadcast to its own full mailbox
    was dead-lettered (which findings were lost followed the threads' timing).

    Raises:
        SimulationError: the journal holds records the simulation did not write, or
            ``path`` is a directory of other files with no journal (either is left
            untouched), or opening it failed with an error that is not a
            ``JournalError`` (those propagate as they are).
        SimulationStoppedError: the journal failed during the run (a full disk, say),
            with any ``JournalError`` but the two below; ``__cause__`` is its error.
        JournalFullError, JournalFailedError: the journal reached ``max_map_size``, or
            is fail-stop after an earlier failure, during the run (as they are).

    """
    config = _settings(config or Config(), durability)
    tally = _Tally()
    reviewers = [f"reviewer-{i:03d}" for i in range(max(1, agents // REVIEWER_SHARE))]
    researchers = [f"researcher-{i:03d}" for i in range(max(1, agents - len(reviewers)))]
    behaviors: dict[str, Callable[[], Behavior]] = {
        "researcher": lambda: Researcher(tally, seed, reviewers),
        "reviewer": Reviewer,
    }
    provider = ScriptedProvider(_answer(seed), name="scripted", model=f"seed-{seed}", keep_calls=False)
    try:
        stored = _refuse_a_foreign_journal(path)  # a journal it continues keeps its own agents
        config = _room_for_sessions(config, stored or len(reviewers) + len(researchers))
        opened = Runtime.open(path, config=config, behaviors=behaviors, llm_provider=provider)
    except (JournalError, SimulationError, InvalidConfigError):
        raise  # the command reports these itself
    except (CogfabricError, OSError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__  # one line, whatever it says
        msg = f"cannot open the journal {path}: {reason}"
        raise SimulationError(msg) from exc
    try:
        with opened as rt:
            ran = _drive(rt, path, researchers, reviewers, tally=tally, turns=turns, progress=progress)
    except JournalError as exc:  # after the open: the run could not go on, whatever the error
        if isinstance(exc, JournalFullError | JournalFailedError):
            raise  # the command names these as they are
        raise SimulationStoppedError(" ".join(str(exc).split()) or type(exc).__name__) from exc
    counts = ran.counts
    after = _head(path, ran.after)
    return SimulationReport(
        agents=ran.agents,
        turns=turns,
        events=after - ran.before,
        total_events=after,
        seconds=ran.seconds,
        sessions=ran.sessions,
        refusals=counts["PromptRejected"],
        failures=counts["AgentFailed"],
        reviews=tally.reviews,
        broadcasts=tally.broadcasts,
        checkpoints=counts["CheckpointTaken"],
        journal_bytes=_journal_bytes(path),
        path=path,
        resumed=ran.resumed,
        dead_letters=counts["IpcDeadLettered"],
        dead_letter_reasons=dict(ran.dead_letter_reasons),
        sessions_replaced=ran.sessions_replaced,
        journal_seed=ran.journal_seed,
        journal_mixed=ran.journal_mixed,
    )


class _Ran(NamedTuple):
    """What the open runtime tells of a run, for its report."""

    agents: int
    before: int
    after: int
    seconds: float
    sessions: int
    counts: collections.Counter[str]
    dead_letter_reasons: collections.Counter[str]
    resumed: bool
    sessions_replaced: int
    journal_seed: int | None
    journal_mixed: bool


_TICKS_IN_FLIGHT: Final = 2
"""Ticks the driver keeps in flight for each researcher."""


def _drive(
    rt: Runtime,
    path: Path,
    researchers: list[str],
    reviewers: list[str],
    *,
    tally: _Tally,
    turns: int,
    progress: Callable[[int, int], None] | None,
) -> _Ran:
    """Set up (or take up) the agents and run ``turns`` researchers' turns on ``rt``."""
    journal = rt._journal  # noqa: SLF001 - the simulation reports journal figures
    assert journal is not None
    before = journal.last_seq
    resumed = bool(rt.agents())
    journal_seed, journal_mixed = None, False
    if resumed:
        researchers = sorted(a for a in rt.agents() if a.startswith("researcher-"))
        reviewers[:] = sorted(a for a in rt.agents() if a.startswith("reviewer-"))
        foreign = [a for a in rt.agents() if rt.agent(a).task_id != TASK]
        if foreign or not researchers or not reviewers:
            raise SimulationError(_foreign_message(path, foreign))
        _finish_set_up(rt, researchers)  # a run stopped after its spawns left it undone
        journal_seed, journal_mixed = _journal_seed(journal, researchers)
    else:
        _set_up(rt, researchers, reviewers)
    # each agent's session before this run: what its first session made in this run replaces
    had = _ensure_sessions(rt, [*reviewers, *researchers])
    started = time.perf_counter()
    taken = [rt.agent(a).private("rounds") or 0 for a in researchers]
    # the round-robin goes on from the first researcher of the fewest rounds, as one run
    # of all the turns would have: a continued run began again at the first researcher
    start = taken.index(min(taken))
    window = _TICKS_IN_FLIGHT * len(researchers)
    finished = 0

    def one_done() -> None:
        if not tally.done.acquire(timeout=120):
            msg = "the simulation stalled: a turn did not finish within 120 s"
            raise TimeoutError(msg)

    for n in range(turns):
        if n >= window:  # at most ``window`` in flight: one more turn done first
            one_done()
            finished += 1
        index = (start + n) % len(researchers)
        taken[index] += 1
        agent_id, round_no = researchers[index], taken[index]
        rt.bus.send("driver", agent_id, "tick", {"round": round_no})
        if progress is not None:
            progress(n, turns)
    for _ in range(turns - finished):
        one_done()
    rt.flush()
    seconds = time.perf_counter() - started
    counts, reasons, created, messaged = _event_counts(journal, after=before)
    replaced = _replaced(journal, had, created, messaged)
    return _Ran(
        agents=len(researchers) + len(reviewers),
        before=before,
        after=journal.last_seq,
        seconds=seconds,
        sessions=rt.memory.size(),
        counts=counts,
        dead_letter_reasons=reasons,
        resumed=resumed,
        sessions_replaced=replaced,
        journal_seed=journal_seed,
        journal_mixed=journal_mixed,
    )


_SEED_MODEL: Final = re.compile(r"seed-(-?[0-9]+)")
"""The model name ``run_simulation`` gives its scripted provider: ``seed-<seed>``."""


def _journal_seed(journal: Journal, researchers: list[str]) -> tuple[int | None, bool]:
    """The seed of the model that answered the journal's last researcher's turn; whether there were more.

    Each researcher's stream is read back to its newest model answer (a few records:
    one a turn); the newest of those names the model (None: no model answered yet),
    and the others may name other seeds (an earlier run changed it).
    """
    newest: tuple[int, int] | None = None
    seeds: set[int] = set()
    for agent in researchers:
        for record in journal.read_back("agent/" + agent):
            event = record.event
            if isinstance(event, LlmOutputRecorded):
                found = _SEED_MODEL.fullmatch(event.model) if event.provider == "scripted" else None
                if found is not None:
                    seeds.add(int(found.group(1)))
                    if newest is None or record.seq > newest[0]:
                        newest = (record.seq, int(found.group(1)))
                break
    return (None if newest is None else newest[1]), len(seeds) > 1


def _replaced(
    journal: Journal, had: dict[str, str | None], created: dict[str, list[str]], messaged: set[str]
) -> int:
    """How many of the sessions made in the run replaced one of its agent's that held messages.

    ``had`` is each agent's session before the run (None: it had none, so its first one
    replaces nothing), ``created`` the sessions made in the run by agent, in order, and
    ``messaged`` those of them a message was added to. A session of an earlier run is
    looked up in the journal (its stream, newest first, up to a message).
    """
    replaced = 0
    for agent, sessions in created.items():
        previous = had.get(agent)
        for session in sessions:
            if previous is not None and (previous in messaged or _held_messages(journal, previous)):
                replaced += 1
            previous = session
    return replaced


def _held_messages(journal: Journal, session: str) -> bool:
    """Whether a message was ever added to ``session`` (its seed message is its ``SessionCreated``'s)."""
    return any(isinstance(r.event, SessionMessageAdded) for r in journal.read_back("session/" + session))


def _event_counts(
    journal: Journal, *, after: int
) -> tuple[collections.Counter[str], collections.Counter[str], dict[str, list[str]], set[str]]:
    """Count the events after ``after`` by type, the dead letters by reason; the sessions made by agent.

    The sessions made are each agent's, in order; with them the sessions of the run a
    message was added to.

    From the journal rather than from the behaviors: a prompt the gate refused in the
    middle of a turn fails that turn (its agent is restarted) and counts as both a
    refusal and a failure.
    """
    counts: collections.Counter[str] = collections.Counter()
    reasons: collections.Counter[str] = collections.Counter()
    created: dict[str, list[str]] = collections.defaultdict(list)
    messaged: set[str] = set()
    for record in journal.read(after=after):
        event = record.event
        counts[type(event).__name__] += 1
        if isinstance(event, IpcDeadLettered):
            reasons[event.reason] += 1
        elif isinstance(event, SessionMessageAdded):
            messaged.add(event.session)
        elif isinstance(event, SessionCreated) and event.agent_id is not None:
            created[event.agent_id].append(event.session)
    return counts, reasons, created, messaged


def _refuse_a_foreign_journal(path: Path) -> int:
    """Refuse, before writing anything to it, a journal the simulation did not write.

    A journal is the simulation's when it is new or empty, or when its agents are all
    researchers and reviewers (and it has both). Continuing any other one would run the
    simulation beside another program's agents and count their sessions and records as
    its own. Returns how many agents the journal holds (0 for a new one).
    A data file of zero bytes (LMDB leaves one when a crash interrupts the creation of
    a journal) is a new journal's, as ``Runtime.open`` takes it; read-only it is refused.
    """
    with contextlib.suppress(OSError):
        data = (path / "data.mdb").lstat()
        if stat.S_ISREG(data.st_mode) and data.st_size == 0:
            _refuse_other_files(path)
            return 0
    try:
        with Journal.open(path, readonly=True) as journal:
            records = journal.last_seq
            agents = [s.removeprefix("agent/") for s in journal.streams("agent/")]
    except JournalNotFoundError:
        _refuse_other_files(path)
        return 0  # a new journal (or no directory at all: opening it for writing says why)
    if records == 0:
        return 0
    foreign = [a for a in agents if not _AGENT_ID.fullmatch(a)]
    kinds = {a.split("-", 1)[0] for a in agents}
    if foreign or kinds != {"researcher", "reviewer"}:
        raise SimulationError(_foreign_message(path, foreign, records))
    return len(agents)


_JOURNAL_FILES: Final = frozenset({"data.mdb", "lock.mdb", "writer.lock", "lost+found"})
"""The files a journal's directory holds (a creation cut short may leave some of them), and
the ``lost+found`` of a file system mounted there for it, which is empty of the user's files."""


def _refuse_other_files(path: Path) -> None:
    """Refuse a directory that holds no journal but other files (``--journal .`` in a project).

    The journal's files would land among them (as ``--journal ""``, the working
    directory, is refused for); an empty directory, or one a creation cut short left
    some of a journal's own files in, is a new journal's.

    Raises:
        SimulationError: naming a few of the other files; the directory is left as it is.

    """
    try:
        with os.scandir(path) as entries:
            others = sorted(e.name for e in entries if e.name not in _JOURNAL_FILES)
    except OSError:
        return  # no directory (or none to read): opening the journal for writing says why
    if others:
        shown = ", ".join(n if n.isprintable() else repr(n) for n in others[:3])
        more = f" and {len(others) - 3} more" if len(others) > 3 else ""  # noqa: PLR2004
        msg = (
            f"{path} holds other files ({shown}{more}) and no journal; "
            "give --journal a new or empty directory, or a simulation's journal to continue it"
        )
        raise SimulationError(msg)


def _foreign_message(path: Path, foreign: list[str], records: int | None = None) -> str:
    if foreign:
        shown, more = foreign[:3], len(foreign[3:])
        what = f"agents it did not spawn ({', '.join(shown)}{f' and {more} more' if more else ''})"
    elif records is not None:
        held = "1 record" if records == 1 else f"{records:,} records"
        what = f"{held} but not its researchers and reviewers"
    else:
        what = "no researchers and reviewers of its own"
    return (
        f"{path} holds a journal not written by the simulation: {what}; "
        "give --journal a new directory, or a simulation's journal to continue it"
    )


def _set_up(rt: Runtime, researchers: list[str], reviewers: list[str]) -> None:
    specs: list[dict[str, Any]] = [
        {"agent_id": a, "task_id": TASK, "behavior": "reviewer", "capabilities": ["review"]}
        for a in reviewers
    ]
    specs += [
        {
            "agent_id": a,
            "task_id": TASK,
            "behavior": "researcher",
            "capabilities": ["search", "reason"],
            "parent": reviewers[0],
            "experience_prior": {"field": "anomaly detection"},
        }
        for a in researchers
    ]
    rt.spawn_many(specs)
    _finish_set_up(rt, researchers)


def _finish_set_up(rt: Runtime, researchers: list[str]) -> None:
    """Publish the goal and subscribe the researchers to findings, where not done yet.

    A run stopped (an error, Ctrl-C) after its spawns were journaled may have left this
    undone; the run that continues the journal finishes it.
    """
    if not rt.agent(researchers[0]).task_context():  # one event publishes it to all
        rt.publish_task_context(TASK, GOAL)
    subscribed = set(rt.bus.subscribers(FINDINGS))
    for a in researchers:
        if a not in subscribed:
            rt.bus.subscribe(a, FINDINGS)


def _settings(config: Config, durability: str | None) -> Config:
    """``config`` with ``durability`` if given, and a 4,000-code-point gate unless one is set."""
    if durability is not None:
        config = msgspec.structs.replace(
            config, journal=msgspec.structs.replace(config.journal, durability=durability)
        )
    if config.llm.max_prompt_length <= 0:  # unset (0 or less)
        config = msgspec.structs.replace(
            config, llm=msgspec.structs.replace(config.llm, max_prompt_length=4000)
        )
    return config


def _room_for_sessions(config: Config, agents: int) -> Config:
    """``config`` with room for one live session per agent (a smaller limit would evict them)."""
    if config.memory.max_sessions >= agents:
        return config
    memory = msgspec.structs.replace(config.memory, max_sessions=agents)
    return msgspec.structs.replace(config, memory=memory)


def _ensure_sessions(rt: Runtime, agents: list[str]) -> dict[str, str | None]:
    """Give each agent a live session (its noted one, else its latest, else a new one).

    Returns each agent's session before: its noted one (live or ended), else the latest
    it is given, else None (a session made for it is its first).
    """
    had: dict[str, str | None] = {}
    for a in agents:
        agent = rt.agent(a)
        session = agent.private("session")
        had[a] = session
        try:
            if session is not None:
                rt.memory.get_messages(session)
                continue
        except LookupError:
            pass  # expired while the simulation was closed: start a new one
        # one a run created and was stopped before it could note it (a kill, a crash)
        latest = rt.memory.get_latest_session_for_agent(a)
        if latest is None:
            latest = rt.memory.create_session(a, agent_id=a)
        else:  # what a session made in this run replaces
            had[a] = latest
        agent.set_private("session", latest)
    return had

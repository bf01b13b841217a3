"""Issue 7, items 3 and 7: a hostile journal of crafted records, drawn by hypothesis.

A forger of an unkeyed journal changes, adds or drops fields of one stored event (values
of the field's own kind, names and states the journal holds, and arbitrary ones) and
re-chains everything after it, head included, so that only decoding can tell. Reading,
verifying and opening such a journal gives a report or a documented error naming that
seq, never another exception, and never a large allocation; the audit commands (in the
long version) exit 0, 1 or 2 without a traceback.
"""

from __future__ import annotations

import shutil
import tracemalloc
from typing import TYPE_CHECKING, Any

import lmdb
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cogfabric as cf
from cogfabric.actors import FakeClock
from cogfabric.cli import main
from cogfabric.store import Journal, JournalError
from tests.reliability.test_corruption_corpus import _rechain, _with_event

if TYPE_CHECKING:
    from pathlib import Path

FIELDS = ["type", "v", "at", "id", "cause", "agent", "key", "value", "state", "session", "sender"]
NAMES = ["a", "b", "", "top", "t", "IDLE", "RUNNING", "SUSPENDED", "RETIRED", "user", "request", "reply"]
plausible = (
    st.sampled_from(NAMES)
    | st.integers(-3, 40)
    | st.sampled_from([2**63, -(2**63), 0.5, float("nan"), True, None, [], {}, {"x": 1}, ["a"]])
)
arbitrary = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
forgeries = st.tuples(
    st.integers(min_value=2, max_value=10_000),  # taken modulo the journal's records, seq 1 excluded
    st.dictionaries(
        st.sampled_from(FIELDS) | st.text(max_size=5), plausible | arbitrary, min_size=1, max_size=3
    ),
    st.lists(st.sampled_from(FIELDS), max_size=2),
)


def _write(path: Path) -> str:
    """A journal of every kind of record the runtime writes; returns its session's id."""
    with cf.Runtime.open(path, clock=FakeClock()) as rt:
        agent = rt.spawn("a", task_id="t")
        agent.set_private("k", {"x": [1, 2]})
        agent.set_task_context({"g": 1})
        agent.set_cognitive_state(cf.CognitiveState(schema_version=1, context={"c": 1}))
        agent.checkpoint_cognitive()
        session = rt.memory.create_session("u", agent_id="a")
        rt.memory.add_message(session, "user", "hi")
        rt.bus.subscribe("a", "top")
        rt.bus.send("a", "a", "t", {"p": 1})
        rt.suspend("a")
        rt.resume("a")
        rt.spawn("b", parent="a")
        rt.kill("b")
    return session


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, int]:
    path = tmp_path_factory.mktemp("template") / "j"
    session = _write(path)
    with Journal.open(path, readonly=True) as journal:
        last = journal.last_seq
    return path, session, last


def _forge(source: Path, target: Path, seq: int, changes: dict[str, Any], drop: list[str]) -> None:
    shutil.copytree(source, target)

    def change(event: dict[str, Any]) -> None:
        for name in drop:
            event.pop(name, None)
        event.update(changes)

    env = lmdb.open(str(target), max_dbs=8)
    with env.begin(write=True) as txn:
        events, meta = env.open_db(b"events", txn=txn), env.open_db(b"meta", txn=txn)
        value = bytes(txn.get(seq.to_bytes(8, "big"), db=events) or b"")
        _rechain(txn, events, meta, seq, _with_event(value, change))
    env.close()


def _open_and_read(path: Path, seq: int) -> None:
    with Journal.open(path, readonly=True) as journal:
        report = journal.verify(decode=True)
        assert report.first_bad_seq in {None, seq}, report
        named = seq
        try:
            for _ in journal.read():
                pass
        except JournalError as error:  # documented; anything else fails the test
            named = getattr(error, "seq", seq)
        assert named == seq
    for unverified in (False, True):
        try:
            with cf.Runtime.open(path, clock=FakeClock(), allow_unverified=unverified) as rt:
                for agent_id in rt.agents():
                    rt.agent(agent_id).context_view()
                    rt.agent(agent_id).cognitive_state()
        except cf.CogfabricError:  # documented; anything else fails the test
            pass


def _audit(path: Path, seq: int, session: str) -> None:
    journal = str(path)
    for args in (
        ["verify", journal],
        ["inspect", "--json", journal],
        ["inspect", "--skip-newer", journal],
        ["export", "--no-verify", journal],
        ["replay", "--no-verify", journal],
        ["replay", "--no-verify", "--at", str(seq), journal],
        ["replay", "--no-verify", "--agent", "a", "--json", journal],
        ["replay", "--no-verify", "--agent", "b", journal],
        ["replay", "--no-verify", "--session", session, journal],
        ["trace", "--no-verify", "--seq", str(seq), journal],
    ):
        result = CliRunner().invoke(main, args)
        assert result.exit_code in {0, 1, 2}, (args, result.output[-800:])
        assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exception)


def _check(tmp_path: Path, template: tuple[Path, str, int], forgery: tuple[Any, ...], *, audit: bool) -> None:
    source, session, last = template
    where, changes, drop = forgery
    seq = 2 + where % (last - 1)
    target = tmp_path / f"forged-{seq}-{len(list(tmp_path.iterdir()))}"
    _forge(source, target, seq, changes, drop)

    tracemalloc.start()
    try:
        _open_and_read(target, seq)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < 64 * 2**20
    if audit:
        _audit(target, seq, session)
    shutil.rmtree(target)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(forgery=forgeries)
def test_a_forged_record_gives_a_report_or_a_documented_error_naming_its_seq(
    tmp_path: Path, template: tuple[Path, str, int], forgery: tuple[Any, ...]
) -> None:
    _check(tmp_path, template, forgery, audit=False)


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(forgery=forgeries)
def test_a_long_run_of_forged_records_through_the_runtime_and_the_audit_commands(
    tmp_path: Path, template: tuple[Path, str, int], forgery: tuple[Any, ...]
) -> None:
    _check(tmp_path, template, forgery, audit=True)


def test_the_forger_changes_what_it_is_given(tmp_path: Path, template: tuple[Path, str, int]) -> None:
    source, _, _ = template
    _forge(source, tmp_path / "j", 3, {"type": "Teleported"}, [])

    with Journal.open(tmp_path / "j", readonly=True) as journal:
        report = journal.verify(decode=True)

    assert (report.ok, report.first_bad_seq) == (False, 3)
    assert "Teleported" in report.reason

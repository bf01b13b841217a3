"""Every error cogfabric raises survives pickle and copy: a worker process raises it to its parent."""

from __future__ import annotations

import copy
import pickle

import pytest

from cogfabric import PromptTooLongError
from cogfabric.actors import (
    AgentCapacityError,
    AgentCheckpointNotSupportedError,
    AgentExistsError,
    AgentNotFoundError,
    AgentNotRegisteredError,
    AgentNotSuspendedError,
    AgentRetiredError,
    AgentRunningError,
    InvalidSpawnSpecError,
    SessionNotFoundError,
)
from cogfabric.events import EventVersionError, UnknownEventTypeError
from cogfabric.store import (
    JournalConflictError,
    JournalIntegrityError,
    JournalNotFoundError,
    JournalRecordError,
    JournalRecordTypeError,
    JournalRecordVersionError,
)

ERRORS = [
    AgentNotFoundError("a1"),
    AgentExistsError("a1"),
    AgentRetiredError("a1"),
    AgentNotSuspendedError("a1"),
    AgentRunningError("a1", "it handles a message"),
    InvalidSpawnSpecError("agent_id must not be blank"),
    AgentCapacityError("a1", 22_000),
    AgentNotRegisteredError("a1"),
    SessionNotFoundError("s1"),
    AgentCheckpointNotSupportedError(),
    PromptTooLongError(9000, 8192),
    UnknownEventTypeError("Teleported"),
    EventVersionError("PrivateSet", 3, 1, "newer than this code"),
    JournalConflictError("e1", 7),
    JournalIntegrityError("the chain breaks at seq 4"),
    JournalRecordError(5, "the record is malformed"),
    JournalRecordTypeError(6, UnknownEventTypeError("Teleported")),
    JournalRecordVersionError(8, EventVersionError("PrivateSet", 3, 1)),
    JournalNotFoundError("no journal at /nowhere"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda error: type(error).__name__)
@pytest.mark.parametrize("how", ["pickle", "copy"])
def test_an_error_survives_pickle_and_copy_whole(error: Exception, how: str) -> None:
    again = pickle.loads(pickle.dumps(error)) if how == "pickle" else copy.copy(error)  # noqa: S301 - our own bytes

    assert type(again) is type(error)
    assert str(again) == str(error)
    assert again.args == error.args
    assert {k: str(v) for k, v in vars(again).items()} == {k: str(v) for k, v in vars(error).items()}

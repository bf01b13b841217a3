"""Every error cogfabric raises survives the reduce protocol and copy: a worker process raises it
to its parent (pickled there; the test takes the reduce protocol pickle uses, and a real pool)."""

from __future__ import annotations

import concurrent.futures
import copy
from typing import TYPE_CHECKING

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
    RuntimeCapacityError,
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

if TYPE_CHECKING:
    from collections.abc import Callable

ERRORS = [
    AgentNotFoundError("a1"),
    AgentExistsError("a1"),
    AgentRetiredError("a1"),
    AgentNotSuspendedError("a1"),
    AgentRunningError("a1", "it handles a message"),
    InvalidSpawnSpecError("agent_id must not be blank"),
    AgentCapacityError("a1", 22_000),
    RuntimeCapacityError("journal writer", 22_000),
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


def _rebuilt(error: Exception) -> Exception:
    """``error`` as pickle rebuilds it: from what its ``__reduce__`` gives."""
    reduced = error.__reduce__()
    assert isinstance(reduced, tuple)
    rebuild, args, *_ = reduced
    again: Exception = rebuild(*args)
    return again


COPIES: dict[str, Callable[[Exception], Exception]] = {
    "reduce": _rebuilt,
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
}


@pytest.mark.parametrize("error", ERRORS, ids=lambda error: type(error).__name__)
@pytest.mark.parametrize("how", COPIES)
def test_an_error_survives_pickle_and_copy_whole(error: Exception, how: str) -> None:
    again = COPIES[how](error)

    assert type(again) is type(error)
    assert str(again) == str(error)
    assert again.args == error.args
    assert {k: str(v) for k, v in vars(again).items()} == {k: str(v) for k, v in vars(error).items()}


def _refuse_a_long_prompt() -> None:
    raise PromptTooLongError(9000, 8192)


def test_an_error_raised_in_a_worker_process_reaches_its_parent_whole() -> None:
    with concurrent.futures.ProcessPoolExecutor(max_workers=1) as pool:
        future = pool.submit(_refuse_a_long_prompt)
        with pytest.raises(
            PromptTooLongError, match="prompt exceeds maximum length of 8192 characters"
        ) as raised:
            future.result(timeout=60)

    assert (raised.value.length, raised.value.limit) == (9000, 8192)

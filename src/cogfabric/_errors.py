"""The root of cogfabric's error tree, and the commands' SIGTERM; a leaf module every layer may import."""

from __future__ import annotations

from typing import Any

__all__ = ["CogfabricError", "Terminated"]


class CogfabricError(Exception):
    """Base class of every error cogfabric raises on purpose.

    Each layer derives its own base from it (``EventError``, ``JournalError``,
    ``ActorError``), so ``except cogfabric.CogfabricError`` catches what the library
    reports about the state of the runtime, its agents, sessions and journal, and about
    the values that cross into them, and nothing that is a bug in it. Some misuses of an
    argument are the built-in ``TypeError`` or ``ValueError`` alone, as the methods'
    docstrings say: a timeout that is no number, a state that is no ``CognitiveState``,
    an option that is none of its choices (``verify="x"``), an ``agent_id`` that
    cannot name a stream given to ``runtime.llm``, a second upcaster for one step.

    Every one survives ``pickle`` and ``copy`` (a worker process of a
    ``ProcessPoolExecutor`` raises it to its parent) with its message and attributes,
    whatever its constructor takes: it is rebuilt from its state, not by calling
    its constructor again with its message.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuilt, (type(self), self.args, self.__dict__)


def _rebuilt(cls: type[CogfabricError], args: tuple[Any, ...], state: dict[str, Any]) -> CogfabricError:
    """An error of ``cls`` with ``args`` and attributes ``state``, its constructor not called."""
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class Terminated(KeyboardInterrupt):
    """SIGTERM, as the command line's handler raises it in the main thread: it unwinds as Ctrl-C does.

    Here, not in the command line, so that the runtime tells it from a Ctrl-C (a request it
    stopped leaves a dead letter saying "SIGTERM") without importing the command line.
    """

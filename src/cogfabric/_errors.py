"""The root of cogfabric's error tree; a leaf module every layer may import."""

from __future__ import annotations

__all__ = ["CogfabricError"]


class CogfabricError(Exception):
    """Base class of every error cogfabric raises on purpose.

    Each layer derives its own base from it (``EventError``, ``JournalError``,
    ``ActorError``), so ``except cogfabric.CogfabricError`` catches everything the
    library reports and nothing that is a bug in it.
    """

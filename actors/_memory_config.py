"""``MemoryConfig``: the ``memory`` section of ``Config`` (spec §5.2)."""

from __future__ import annotations

import math

import msgspec

from ._cleaner import CleanOptions
from ._errors import InvalidConfigError

__all__ = ["DEFAULT_RAG_MIN_SCORE", "CleanOptions", "MemoryConfig", "default_memory_config"]

DEFAULT_RAG_MIN_SCORE = 0.4
"""The original's ``RAGMinScore``; a minimum score of 0 means it."""


class MemoryConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``memory`` section of ``Config`` (spec §5.2 defaults)."""

    max_history: int = 10
    """Messages (not turns) kept in a prompt window."""
    max_sessions: int = 100
    """Live sessions kept; a new one beyond it evicts the least recently used."""
    session_ttl: float = 86400.0
    """Seconds a session lives after its last access."""
    clean: CleanOptions = CleanOptions()
    rag_top_k: int = 5
    rag_min_score: float = DEFAULT_RAG_MIN_SCORE
    """Snippets scoring below it are dropped; 0 means the default (0.4), as in the original."""

    @property
    def clean_options(self) -> CleanOptions:
        """The original's name (``MemoryConfig.CleanOptions``) for ``clean``, read-only."""
        return self.clean

    def __post_init__(self) -> None:
        """Check the limits as the config is made (spec §5.2: each must be positive).

        Raises:
            InvalidConfigError: a limit is out of range; the message names the field,
                its value and its path in a ``Config`` (``$.memory.<field>``).

        """
        self.validate(at="$.memory")

    def validate(self, *, at: str = "$") -> MemoryConfig:
        """Return this config, or raise ``InvalidConfigError`` naming the field and value.

        ``at`` is where this section sits in a whole configuration (``$.memory`` in a
        ``Config``): the message ends with the field's path, as msgspec's own do.
        """
        if not isinstance(self.clean, CleanOptions):
            msg = f"clean must be a CleanOptions, got {type(self.clean).__name__} - at `{at}.clean`"
            raise InvalidConfigError(msg)
        positive: list[tuple[str, float]] = [
            ("max_history", self.max_history),
            ("max_sessions", self.max_sessions),
            ("session_ttl", self.session_ttl),
            ("clean.max_user_len", self.clean.max_user_len),
            ("clean.max_assistant_len", self.clean.max_assistant_len),
            ("clean.max_tool_len", self.clean.max_tool_len),
            ("clean.max_system_len", self.clean.max_system_len),
            ("rag_top_k", self.rag_top_k),
        ]
        for name, value in positive:
            _check_number(name, value, at)
            if not value > 0:
                msg = f"{_rag(name)}{name} must be positive, got {value!r} - at `{at}.{name}`"
                raise InvalidConfigError(msg)
        for name, value in (
            ("clean.max_summarized_turns", self.clean.max_summarized_turns),
            ("rag_min_score", self.rag_min_score),
        ):
            _check_number(name, value, at)
            if not value >= 0:  # NaN too
                what = "must be a number" if math.isnan(value) else "must not be negative"
                msg = f"{_rag(name)}{name} {what}, got {value!r} - at `{at}.{name}`"
                raise InvalidConfigError(msg)
        return self


def _rag(name: str) -> str:
    """The original's ``ErrInvalidRAGConfig`` text before a RAG limit's error."""
    return "invalid RAG configuration: " if name.startswith("rag_") else ""


def _check_number(name: str, value: object, at: str) -> None:
    """Refuse a limit that is not a number (a string from a hand-built config, say).

    Which kind of number a field takes (``int`` or ``float``) is checked where the
    whole ``Config`` is (``Config.validated``), as msgspec checks it.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"{_rag(name)}{name} must be a number, got {value!r} - at `{at}.{name}`"
        raise InvalidConfigError(msg)


def default_memory_config() -> MemoryConfig:
    """The defaults of spec §5.2: history 10, 100 sessions, a 24 h TTL, the cleaner's limits."""
    return MemoryConfig()

"""``RuntimeStats``: what ``Runtime.stats()`` reports of a running runtime."""

from __future__ import annotations

import msgspec

__all__ = ["RuntimeStats"]


class RuntimeStats(msgspec.Struct, frozen=True, kw_only=True):
    """Figures of a running runtime, for an operator to watch (``Runtime.stats()``).

    Read from what the runtime keeps anyway, without asking any agent's actor, so
    taking them neither stops nor slows the agents. Each field says its unit and
    whether it is *exact* (a count the runtime keeps under a lock, read in one piece)
    or a *snapshot* (read agent by agent, or from a value other threads move
    meanwhile: right at some moment of the call, not one moment for every field).
    "Since open" counts from this ``Runtime.open``: a reopened runtime starts from
    zero. The journal's fields are None for a memory-only runtime.
    """

    agents: int
    """Live agents (spawned or recovered, not killed): a snapshot, as ``len(agents())``."""
    idle: int
    """Live agents whose lifecycle is IDLE: a snapshot (``Agent.state``)."""
    running: int
    """Live agents whose behavior is handling a message now (RUNNING): a snapshot."""
    suspended: int
    """Live agents SUSPENDED: a snapshot."""
    retired: int
    """Live agents RETIRED (they handle no more messages; a kill removes them): a snapshot."""
    queued: int
    """Messages waiting in all live agents' mailboxes, not yet taken up: the sum of
    ``Agent.queued``, a snapshot. Growing from one call to the next: the agents handle
    messages slower than they come."""
    in_flight: int
    """Messages the agents hold: admitted to a mailbox (``queued``, and a send whose commit
    is under way) or in hand (a behavior handling one, waiting for a reply included, or a
    handle's or lifecycle call being run): the count ``Runtime.settle`` waits to see at
    zero. A snapshot; 0 right after ``settle()`` returns, unless other threads sent
    meanwhile."""
    queued_max: int
    """The most messages waiting in one mailbox (0 with no agents): a snapshot."""
    mailboxes_full: int
    """Live agents whose mailbox holds ``runtime.mailbox_size`` messages or more: a
    sender to one waits (``call_timeout`` at most, then ``MailboxFullError``). A snapshot."""
    dead_letters: dict[str, int]
    """Dead letters since open, by reason (``"mailbox full"``, ``"handler error"``,
    ``"timeout"``, ``"closed"``, ...): exact, a copy of ``bus.dead_letter_counts()``."""
    behavior_failures: int
    """Times a behavior raised on a message since open (each journaled as
    ``AgentFailed``, logged, and its agent restarted): exact."""
    writer_backlog: int | None
    """Events handed to the journal writer and not yet taken into a commit: a snapshot.
    At ``writer_backlog_max`` producers wait for room: the journal is the bottleneck."""
    writer_backlog_max: int | None
    """The backlog at which producers wait (four times ``journal.group_commit_max``):
    fixed for the runtime's life."""
    commits: int | None
    """Write transactions (group commits) the writer finished since open, a refused one
    too: exact, as of the call. A flush with nothing to commit (an idle ``flush()`` or
    ``settle()``) writes nothing and is none. Sampled twice, with ``journal_last_seq``,
    it gives events per commit."""
    commit_seconds: float | None
    """How long the commit under way has been running, in seconds (monotonic clock);
    0.0 between commits: a snapshot. A large figure on calls in a row is a stalled disk."""
    journal_last_seq: int | None
    """The seq of the journal's newest committed record: exact, as of the call.
    Sampled twice, its difference over the time between is the commit rate in events/s."""
    journal_bytes: int | None
    """The size of the journal's data file (``data.mdb``) in bytes: a snapshot (it
    grows as commits write new pages; LMDB reuses freed ones first)."""
    journal_max_map_size: int | None
    """``journal.max_map_size`` in bytes, the most the file may grow to: past it every
    change is refused (``JournalFullError``, fail-stop). None without a limit (the
    disk's) or without a journal."""
    journal_failure: str | None
    """Why the journal is fail-stop (every change refused until it is reopened), as the
    error's type and text; None while it takes changes, or without a journal. Exact."""

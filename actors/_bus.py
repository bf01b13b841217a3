"""The IPC bus: messages are journaled events delivered into agents' mailboxes (spec §3)."""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Final

import msgspec

from cogfabric._errors import CogfabricError, Terminated
from cogfabric.events import (
    MAX_SUBSCRIPTION_ORDER,
    IpcDeadLettered,
    IpcDelivered,
    IpcMessage,
    admit_value,
    copy_value,
    new_event_id,
)
from cogfabric.events._codec import journal_repr, journal_text, require_str
from cogfabric.store import JournalError

from . import _interrupt
from ._agent import IPC, FanOut, agent_of_thread
from ._clock import bounded_wait
from ._errors import (
    ActorTimeoutError,
    AgentNotFoundError,
    AgentNotRegisteredError,
    ClockError,
    IpcError,
    IpcHandlerError,
    IpcInvalidMessageError,
    IpcTimeoutError,
    MailboxFullError,
    RuntimeClosedError,
)
from ._writer import INTERRUPTS, STOPPED_WAITING, unacknowledged

if TYPE_CHECKING:
    from collections.abc import Callable

    from cogfabric.events import Event

    from ._agent import AgentActor
    from ._runtime import Runtime, _Entry

__all__ = ["DEAD_LETTER_CAPACITY", "DEFAULT_REQUEST_TIMEOUT", "IpcBus"]

log = logging.getLogger(__name__)


DEAD_LETTER_CAPACITY: Final = 1024
DEFAULT_REQUEST_TIMEOUT: Final = 30.0
HANDOFF_TOPIC: Final = "handoff-task"


def _said(error: BaseException) -> str:
    """An error as a dead letter keeps it.

    The runtime's own by its text, which begins with the original's string
    (``agentipc: no handler: ...``); any other by its repr.
    """
    return str(error) if isinstance(error, CogfabricError) else journal_repr(error)


def _panicked(message: IpcMessage, error: BaseException) -> str:
    """What a requester is told when the behavior handling its request failed (``IpcHandlerError``).

    The error by its repr, but the bus's own (a request the behavior made failed, and it
    let that propagate) by its text, which begins with ``agentipc:`` and says what it is:
    by their reprs, each request of a chain that failed through escaped the quotes of the
    one below once more, its backslashes doubling at each step up.
    """
    to, topic = message.recipient, message.topic
    said = journal_text(error, 1000) if isinstance(error, IpcError) else journal_repr(error)
    return f"agentipc: handler panicked: {to!r} failed on {topic!r}: {said}"


def _trace_of(trace: object) -> str:
    """The trace a message continues: ``trace``, or a new one when it is None or empty.

    Raises:
        InvalidTextError: ``trace`` is not None and not a str UTF-8 can encode (a journaled
            ``trace_id`` of another type would be written and then refuse to decode).

    """
    if trace is None:
        return new_event_id()
    return require_str(trace, "trace") or new_event_id()


_HINTED: Final = 5
"""Agents of a chain of waits an error's text names at most (``IpcBus._waiting_for``), the last too."""


class _Pending:
    __slots__ = ("as_is", "deferred", "done", "error", "reply", "request")

    def __init__(self, request: IpcMessage) -> None:
        self.request = request
        self.done: threading.Event = _interrupt.Event()  # waited for held: a Ctrl-C leaves it sane
        self.reply: IpcMessage | None = None
        self.error: BaseException | None = None
        self.as_is = False
        """Raise ``error`` to the requester as it is (the bus refused the request), not
        as the ``__cause__`` of an ``IpcHandlerError`` (the recipient's behavior raised it)."""
        self.deferred = False
        """The recipient's behavior returned None: someone answers it later with ``reply``,
        and the recipient is free meanwhile (its wait no longer closes a circle)."""


class IpcBus:
    """Send, request/reply, delegate, handoff, subscribe and broadcast between agents.

    Unlike the original's synchronous in-process calls, delivery is asynchronous: a
    message is journaled when sent (and, in sync durability, durable before it is
    delivered), then put into the recipient's mailbox; its delivery is journaled
    too. IPC never touches the context layers.

    ``send_from``, ``answer``, ``deferred``, ``handler_failed``, ``refuse`` and ``dead_letter`` are
    the agents' own plumbing (a behavior's ``ctx`` and the agent actors call them), not
    for user code: a dead letter or a refusal made by hand is journaled as real.

    Once the runtime is closed, every method that would send, journal or change a
    subscription (``send``, ``request``, ``delegate``, ``handoff``, ``broadcast``,
    ``subscribe``, ``unsubscribe``) raises ``RuntimeClosedError``; the reads
    (``subscribers``, ``dead_letters``, ``dead_letter_counts``) still answer, and ``reply``
    to a request that is no longer pending is ignored, as ever. The methods' Raises: sections leave it out.
    """

    def __init__(self, runtime: Runtime) -> None:
        """Bind the bus to its runtime."""
        self._runtime = runtime
        self._core = runtime._core  # noqa: SLF001 - the bus is part of the runtime
        self._lock = threading.Lock()
        self._pending: dict[str, _Pending] = {}
        self._dead: collections.deque[IpcDeadLettered] = collections.deque(maxlen=DEAD_LETTER_CAPACITY)
        self._dead_counts: collections.Counter[str] = collections.Counter()
        """reason -> how many dead letters of it were kept since open (``dead_letter_counts``): every one,
        where ``_dead`` keeps the latest 1,024."""
        self._failed_at_close: set[str] = set()
        """The requests ``_close`` failed (each with its dead letter): ``cut_short`` letters none again."""
        self._topics: dict[str, list[str]] = {}
        """topic -> subscribed live agents, in subscription order (the agents' states journal it)."""
        self._orders: dict[tuple[str, str], int] = {}
        """(topic, agent) -> the subscription's order, as journaled (``IpcSubscribed.order``)."""
        self._next_order = 1
        self._waiting: dict[str, tuple[str, str]] = {}
        """agent -> (the agent its behavior waits on for a reply, the request's correlation id)."""

    # ------------------------------------------------------------- journaling

    def _journal(self, event: Event, *, durable: bool) -> None:
        self._core.persist([event], durable=durable)

    def _journal_message(
        self,
        message: IpcMessage,
        late: Callable[[bool], None],
        *,
        tells: bool = True,
        stopped: list[BaseException] | None = None,
    ) -> None:
        """Journal ``message``, durable first in sync durability.

        If its commit outlasts ``call_timeout`` (``ActorTimeoutError``), or a Ctrl-C
        interrupts the wait, the writer may still store it, and replay would then have
        it sent: ``late(committed)`` runs on the writer's thread once the commit is
        over, so that the live runtime follows the journal. It runs before the caller of
        any later submission wakes: what that caller's thread sends next reaches its
        recipient after it. ``tells``: ``late`` puts it in mailboxes, which a flush under
        way then asks to hand over again. A Ctrl-C before the writer has it (while the
        caller waits for room in its queue) runs ``late(False)`` here: after a Ctrl-C in
        any of its waits, ``late`` has run or will run, once (a ``send``'s slot is its).
        ``stopped`` gets what stopped the wait for the commit (``ActorTimeoutError``,
        ``KeyboardInterrupt``, or a SIGTERM handler's ``SystemExit``, which is handled as a
        Ctrl-C is) before ``late`` can run.
        """
        writer = self._core.writer
        if writer is None or not self._core.sync:
            try:
                self._journal(message, durable=True)
            except INTERRUPTS:
                late(False)  # not handed over: as refused
                raise
            return

        def finish(committed: bool) -> None:
            try:
                late(committed)
            finally:
                if committed and tells:  # once told: a flush that reads it asks that mailbox
                    self._runtime._told_late += 1  # noqa: SLF001

        handoff = _Handoff(finish)
        try:
            ack = writer.submit([message], after=handoff.over)
        except INTERRUPTS:
            late(False)  # not handed over: as refused
            raise
        assert ack is not None
        try:
            ack.wait(self._core.call_timeout)
        except STOPPED_WAITING as exc:
            if stopped is not None:
                stopped.append(exc)
            if handoff.give_up():
                raise
            if isinstance(exc, INTERRUPTS):
                finish(ack.error is None)  # over just as a Ctrl-C came: finished here, then interrupted
                raise
            ack.wait(0.0)  # over just now: its outcome is the caller's

    def _message(self, frm: str, to: str, topic: str, payload: object, **fields: Any) -> IpcMessage:  # noqa: ANN401
        frm = require_str(frm, "sender")
        to = require_str(to, "recipient")
        topic = require_str(topic, "topic")
        if fields.get("cause") is not None:
            fields["cause"] = require_str(fields["cause"], "cause")
        return IpcMessage(
            at=self._core.clock.now(),
            sender=frm,
            recipient=to,
            topic=topic,
            payload=admit_value(payload),
            **fields,
        )

    def _admit(self, message: IpcMessage, timeout: float | None = None) -> _Entry:
        """The recipient's entry with a mailbox slot taken; a refusal leaves one dead letter.

        Raises:
            AgentNotRegisteredError: the recipient is gone (an ``AgentNotFoundError``).
            MailboxFullError: its mailbox stayed full for ``timeout`` (default ``call_timeout``).

        """
        try:
            return self._runtime._admitted(message.recipient, timeout)  # noqa: SLF001
        except AgentNotFoundError as exc:
            error = AgentNotRegisteredError(message.recipient)
            if self._own_letter(message):
                self.dead_letter(message, "agent not registered", str(error))
            raise error from exc
        except MailboxFullError as exc:
            exc.message_id, exc.correlation_id = message.id, message.correlation_id or None
            if self._own_letter(message):
                self.dead_letter(message, "mailbox full", str(exc))
            raise
        except RuntimeClosedError as exc:
            self._closed_letter(message, exc)
            raise

    def _own_letter(self, message: IpcMessage) -> bool:
        """Whether the refusal of ``message`` letters it: a request close() failed has its letter."""
        if message.kind != "request":
            return True
        with self._lock:
            return self._pending.pop(message.correlation_id, None) is not None

    def _closed_letter(self, message: IpcMessage, error: RuntimeClosedError) -> None:
        """A ``closed`` dead letter for a message the runtime's close refused, while it can be journaled.

        A sender that waited for room in a full mailbox when ``close()`` began loses its
        message: the dead letter keeps it, and the text of ``error``, which that sender
        gets. Once the writer refuses submissions (a call
        after close) there is nothing to record it in; on the writer's own thread (a
        message whose commit outlasted its caller, finished there) that is only once the
        writer has stopped, also after a ``close()`` that gave up waiting for it.
        """
        writer = self._core.writer
        if writer is None:
            if self._runtime._close_done.is_set():  # noqa: SLF001
                return
        else:
            try:
                writer.check_usable()
            except CogfabricError:
                return
        if message.kind == "request":
            with self._lock:  # close() letters each request still pending: one letter, whoever takes it
                if self._pending.pop(message.correlation_id, None) is None:
                    return
        with contextlib.suppress(CogfabricError):
            self.dead_letter(message, "closed", _said(error))

    def cut_short(self, message: IpcMessage, error: RuntimeClosedError) -> None:
        """``message``'s behavior stopped half-way on the runtime's close: one ``closed`` dead letter.

        A requester still waiting gets ``error`` at once. The letter is written also for
        a request answered (or timed out: its ``timeout`` letter is the requester's, this
        one the handler's) already: the behavior's changes after that are in the journal,
        and the letter says the message was not handled through (where a behavior's own
        error journals ``AgentFailed``). Not for a request the close failed already
        (``_close``), whose ``closed`` letter is written. Once the writer stopped (for a
        memory-only runtime: once ``close()`` is over) there is nothing to record it in.
        """
        if self._runtime._writer_stopped or self._runtime._close_done.is_set():  # noqa: SLF001
            return
        pending = None
        if message.kind == "request":
            with self._lock:
                if message.correlation_id in self._failed_at_close:
                    return
                pending = self._pending.pop(message.correlation_id, None)
            if pending is not None:
                pending.error = error
                pending.as_is = True
        try:
            self.dead_letter(message, "closed", _said(error))
        finally:
            if pending is not None:
                pending.done.set()  # even when the journal refuses the dead letter

    def _delivery(
        self, message: IpcMessage, entry: _Entry, *, shared: bool = False, alone: bool = False
    ) -> Callable[[bool], None]:
        """Put ``message`` into an admitted mailbox, once its journaling is over.

        ``shared``: the caller keeps ``message`` (``send`` returns it; a request's
        requester letters it if no reply comes). ``alone``: nothing
        but the recipient will hold it (``send_from`` on a memory-only runtime: no writer
        encodes it, and the sender keeps nothing), so it needs no copy of its own.
        """
        own_copy = shared or not (self._core.sync or alone)

        def deliver(committed: bool) -> None:
            if not committed:
                entry.shared.slots.release()
                return
            # The recipient gets its own copy where anyone else could see a change to it:
            # the sender holds the sent message (send returns it; a requester keeps its
            # request for the dead letter of a timeout, an interrupt or a close), and in
            # batch durability the writer may still be encoding it.
            delivered = _own_copy(message) if own_copy else message
            try:
                # only to the agent that is still the recipient's: once its kill is over, a
                # message told would queue behind its actor's stop and be dropped unseen
                self._runtime._tell_current(message.recipient, entry, (IPC, delivered))  # noqa: SLF001
            except AgentNotFoundError:  # its slot is given back
                # killed, or stopped by close(): then the message is one the close refused
                closed = self._core.closing and not entry.killed
                try:
                    if message.kind == "request":  # its requester learns it at once
                        gone: CogfabricError = (
                            RuntimeClosedError("the runtime was closed")
                            if closed
                            else AgentNotRegisteredError(message.recipient)
                        )
                        self.refuse(message, "closed" if closed else "agent not registered", gone)
                    elif closed:
                        self.dead_letter(message, "closed", "the runtime was closed")
                    else:
                        self.dead_letter(
                            message, "agent not registered", str(AgentNotRegisteredError(message.recipient))
                        )
                except (RuntimeClosedError, JournalError) as exc:  # the slot is back already: only log
                    log.warning("a dead letter for %s could not be journaled: %r", message.id, exc)

        return deliver

    def dead_letter(self, message: IpcMessage, reason: str, error: str) -> None:
        """Record ``message`` as undeliverable: journaled, and kept among the latest 1,024.

        Kept once the journal writer took it (a letter is handed over, not waited for, in
        either durability): one the writer refuses (stopped, or fail-stop) raises and is
        kept nowhere; one whose commit then fails (a full map, a storage error) stays in
        memory, while the journal, fail-stop from then on, lacks it.
        """
        letter = self._letter(message, reason, error)
        self._journal(letter, durable=False)
        with self._lock:
            self._dead.append(letter)
            self._dead_counts[reason] += 1

    def _letter(self, message: IpcMessage, reason: str, error: str) -> IpcDeadLettered:
        return IpcDeadLettered(
            at=self._core.clock.now(),
            message_id=message.id,
            sender=message.sender,
            recipient=message.recipient,
            topic=message.topic,
            reason=reason,
            error=error,
            payload=_copied(message.payload),  # its own: the message's may still be in use
            trace_id=message.trace_id,
            cause=message.id,
        )

    def dead_letters(self) -> list[IpcDeadLettered]:
        """The most recent dead letters of this runtime (at most 1,024), oldest first.

        Each holds its message's payload (a copy of its own) and trace id. Each was
        handed to the journal writer (``dead_letter``). Kept in memory since the runtime
        opened; earlier ones are in the journal
        (``IpcDeadLettered`` records of the ``bus`` stream: ``cogfabric export
        --stream bus``), not reloaded on reopen.
        """
        with self._lock:
            letters = list(self._dead)
        return [msgspec.structs.replace(letter, payload=_copied(letter.payload)) for letter in letters]

    def dead_letter_counts(self) -> dict[str, int]:
        """How many dead letters this runtime has recorded since it opened, by reason.

        Every one, where ``dead_letters`` keeps the latest 1,024 only: a long run's
        total, while the runtime runs (its journal cannot be read from its own process
        until ``close()``). Letters, not messages: a broadcast leaves one for each
        recipient that missed it, and a request can leave two (its requester's
        ``"timeout"``, then its recipient's refusal, see ``refuse``, or its handler's
        ``"closed"``, see ``cut_short``). Counted as ``dead_letters`` keeps them, once
        handed to the journal writer; the reasons are those of ``IpcDeadLettered.reason``
        (``"mailbox full"``, ``"handler error"``, ``"timeout"``, ``"closed"``, ...). A
        reopened runtime counts from zero: earlier letters are in the journal
        (``cogfabric export --stream bus --type IpcDeadLettered``).
        """
        with self._lock:
            return dict(self._dead_counts)

    # ------------------------------------------------------------- primitives

    def send(
        self,
        frm: str,
        to: str,
        topic: str,
        payload: object = None,
        *,
        cause: str | None = None,
        trace: str | None = None,
    ) -> IpcMessage:
        """Send a message; returns it as journaled.

        ``cause`` is the id of the event that led to it, and ``trace`` the trace it
        continues (a new one when None), as ``request``'s: the original's ``Send`` stamps
        the caller's trace too.

        Raises:
            AgentNotRegisteredError: ``to`` is no live agent (a dead letter is journaled;
                also an ``AgentNotFoundError``).
            MailboxFullError: ``to``'s mailbox stayed full for ``call_timeout`` (the
                message is not journaled; one dead letter is).
            RuntimeClosedError: the runtime is closed, or ``to``'s actor or the journal
                writer was stopped from outside it (``pykka.ActorRegistry.stop_all()``).
            ActorTimeoutError: its commit outlasted ``call_timeout`` (sync durability);
                it is delivered if the writer then stores it.
            UnencodableValueError: ``payload`` cannot be encoded.
            InvalidTextError: ``frm``, ``to``, ``topic``, ``cause`` or ``trace`` is not a str
                UTF-8 can encode.

        """
        message = self._message(frm, to, topic, payload, trace_id=_trace_of(trace), cause=cause)
        # From its slot taken to its delivery, a Ctrl-C is held (but in the waits: for room,
        # for the commit), then raised: the message is delivered, or its slot given back.
        with _interrupt.HELD:
            self._journal_and_deliver(message, self._admit(message))
        return self._handed_back(message)

    def _handed_back(self, message: IpcMessage) -> IpcMessage:
        """``message`` as a caller gets it: in batch durability, with a payload of its own.

        The writer may still be encoding the journaled message: a change the caller
        made to its payload would change the journal's record.
        """
        return message if self._core.sync else _own_copy(message)

    def _journal_and_deliver(self, message: IpcMessage, entry: _Entry) -> None:
        """Journal ``message`` (durable first), then put it in its admitted mailbox (``send``'s: shared).

        If journaling fails, the mailbox slot is given back and the error raised. If its
        commit times out, it is delivered once stored (the slot is given back if not).
        """
        deliver = self._delivery(message, entry, shared=True)
        try:
            self._journal_message(message, deliver)
        except STOPPED_WAITING:
            raise  # the slot is the late delivery's
        except BaseException:
            entry.shared.slots.release()
            raise
        deliver(True)

    def send_from(self, sender: AgentActor, to: str, topic: str, payload: object = None) -> None:
        """``send`` from inside an agent: journaled with the agent's waiting events.

        The sending agent does not wait for durability: in sync durability the message
        is delivered by the writer once it is durable (one commit per hop, not two). It
        returns nothing: in sync durability the recipient gets the message itself.
        """
        trace_id = sender.trace or new_event_id()
        # As _message, built here: the agent's id and the cause (the id of the message it
        # handles) are the runtime's own plain text, checked when they were made.
        to = require_str(to, "recipient")
        topic = require_str(topic, "topic")
        message = IpcMessage(
            at=self._core.clock.now(),
            sender=sender.agent_id,
            recipient=to,
            topic=topic,
            payload=admit_value(payload),
            trace_id=trace_id,
            cause=sender.cause,
        )
        entry = self._admit(message)
        try:
            deliver = self._delivery(message, entry, alone=self._core.writer is None)
            sender.emit_and_deliver(message, deliver)
        except BaseException:
            entry.shared.slots.release()
            raise

    def request(
        self,
        frm: str,
        to: str,
        topic: str,
        payload: object = None,
        timeout: float = DEFAULT_REQUEST_TIMEOUT,
        *,
        cause: str | None = None,
        trace: str | None = None,
    ) -> IpcMessage:
        """Send a request and wait for the reply message.

        A timeout <= 0 means 30 s (the original's default); one past ``MAX_WAIT``
        (1e9 s), ``inf`` included, waits that long, as long as a thread can.

        ``cause`` is the id of the event that led to it (a behavior's request carries the
        message its agent is handling), and ``trace`` the trace it continues (that
        message's; a new one when None).

        ``timeout`` covers the wait for room in the recipient's mailbox and for the
        reply; journaling the request (durable first, in sync durability) may take up to
        ``call_timeout`` of it.

        Raises:
            AgentNotRegisteredError: ``to`` is no live agent (an ``AgentNotFoundError``);
                one its kill refused once the request was sent names it (``message_id``).
            MailboxFullError: ``to``'s mailbox stayed full for ``timeout`` (or ``call_timeout``,
                if shorter); the request is not journaled, one dead letter is.
            RuntimeClosedError: the runtime is closed, or ``to``'s actor or the journal
                writer was stopped from outside it (``pykka.ActorRegistry.stop_all()``).
            IpcTimeoutError: no reply within ``timeout``, waiting for room in the mailbox
                included (one dead letter is journaled; a second one if the recipient
                then takes it up and cannot handle it: suspended, retired, killed, no
                behavior, its clock failing). Its text names the agents the recipient's
                behavior was waiting for then, if it was blocked in a request of its own
                (``('b' was handling it, waiting for a reply from 'c', which waits for
                'd')``; ``had not begun it`` when it was busy with another message).
            ActorTimeoutError: its commit outlasted ``call_timeout`` (sync durability):
                it is not delivered, and if the writer then stores it, a ``timeout``
                dead letter follows it.
            IpcHandlerError: the recipient's behavior raised (``__cause__``).
            IpcNoHandlerError: the recipient has no behavior, or is suspended or retired
                (raised as soon as it reaches the request; one dead letter is journaled).
            IpcInvalidMessageError: called from ``to``'s own behavior, which would wait
                for its own mailbox, which it is blocking (as ``ctx.request`` to itself);
                or from a behavior that ``to`` waits for, itself or through others (``to``
                requested it, or an agent that requested it...): each would wait for the
                next one's reply until the timeout.
            InvalidTextError: ``frm``, ``to``, ``topic``, ``cause`` or ``trace`` is not a str
                (also a ``TypeError``); nothing is journaled.
            UnencodableValueError: ``payload`` holds a value msgspec cannot encode (also a
                ``TypeError``); nothing is journaled.
            TypeError: ``timeout`` is not a number of seconds.

        """
        timeout = bounded_wait(timeout, DEFAULT_REQUEST_TIMEOUT)
        require_str(to, "recipient")  # before it is looked up: a list is no key
        entry = self._runtime._agents.get(to)  # noqa: SLF001 - a dict read; None: refused below
        if entry is not None and entry.shared.thread is threading.current_thread():
            msg = f"agentipc: invalid message: {to!r} cannot be sent a request from its own behavior"
            raise IpcInvalidMessageError(msg)
        message = self._message(
            frm,
            to,
            topic,
            payload,
            correlation_id=new_event_id() + "-corr",
            trace_id=_trace_of(trace),
            kind="request",
            cause=cause,
        )
        pending = _Pending(message)
        waiter = agent_of_thread(self._core)
        correlation_id = message.correlation_id
        # A Ctrl-C is held but in the waits (for room, the commit, the reply), then raised.
        with _interrupt.HELD:
            try:  # registered inside: whatever interrupts it, it is not left pending
                with self._lock:
                    if waiter is not None:
                        self._wait_on(waiter, to, message.correlation_id)
                    self._pending[message.correlation_id] = pending
                return self._request(message, pending, timeout)
            finally:
                with self._lock:
                    self._pending.pop(message.correlation_id, None)
                    if waiter is not None and self._waiting.get(waiter, ("", ""))[1] == correlation_id:
                        del self._waiting[waiter]

    def _wait_on(self, waiter: str, to: str, correlation_id: str) -> None:
        """Note that ``waiter``'s behavior waits for ``to``; refuse a wait that closes a circle.

        ``to`` handles the request only once it is free, and it is not while it waits,
        itself or through others, for ``waiter``'s behavior, which this request blocks.
        A wait counts until its request is settled (answered, failed or timed out: its
        correlation id leaves ``_pending``), not until its waiter's thread wakes up, and
        while the recipient's behavior has not returned None for it (``deferred``: the
        reply comes later, from elsewhere, and the recipient is free). Under ``_lock``.

        Raises:
            IpcInvalidMessageError: ``to`` waits for ``waiter`` (the request would only
                time out).

        """
        chain = self._waits_for_locked(to, waiter)
        if chain is not None:
            circle = " -> ".join(map(repr, [waiter, *chain]))
            msg = (
                f"agentipc: invalid message: a request from {waiter!r} to {to!r} would wait for "
                f"itself ({circle}: each behavior waits for the next one's reply)"
            )
            raise IpcInvalidMessageError(msg)
        self._waiting[waiter] = (to, correlation_id)

    def waits_for(self, agent_id: str, other: str) -> list[str] | None:
        """The chain of waits by which ``agent_id``'s behavior waits for ``other``'s reply, if any.

        ``[agent_id, ..., other]``: each requested the next and waits for its reply (a
        deferred request, whose reply comes from elsewhere, holds nobody).
        """
        with self._lock:
            return self._waits_for_locked(agent_id, other)

    def _waits_for_locked(self, agent_id: str, other: str) -> list[str] | None:
        chain = [agent_id]
        while (
            (wait := self._waiting.get(chain[-1])) is not None
            and (pending := self._pending.get(wait[1])) is not None
            and not pending.deferred
        ):
            if wait[0] == other:
                return [*chain, other]
            if wait[0] in chain:
                return None  # a circle of others (refused as it forms; bounded all the same)
            chain.append(wait[0])
        return None

    def _waiting_for(self, agent_id: str) -> tuple[str, IpcMessage] | None:
        """What ``agent_id``'s behavior waits for now, if it is blocked in a request: text and request.

        The text reads ``a reply from 'c', which waits for 'd'``: the agent that holds the
        chain up is the last one named (of a long chain, the first few and the last). A
        wait for a deferred reply ends the chain, ``(deferred: the behavior of 'd'
        returned None for it)``: that agent is free, and the reply is to come from
        ``ctx.reply``, which may itself wait for this very agent. The request is
        ``agent_id``'s own, whose ``cause`` is the message its behavior handles (when it
        names one). None when its behavior waits for no reply (idle, or busy otherwise).
        """
        chain = [agent_id]
        deferred = False
        first: IpcMessage | None = None
        with self._lock:  # the walk of _waits_for_locked, to its end, and past a deferral by one
            while (
                not deferred
                and (wait := self._waiting.get(chain[-1])) is not None
                and (pending := self._pending.get(wait[1])) is not None
                and wait[0] not in chain
            ):
                if first is None:
                    first = pending.request
                deferred = pending.deferred
                chain.append(wait[0])
        if first is None:
            return None
        waits = f"a reply from {chain[1]!r}" + "".join(f", which waits for {a!r}" for a in chain[2:_HINTED])
        if len(chain) > _HINTED:
            waits += f", ... which waits for {chain[-1]!r} ({len(chain) - 1} agents down the chain)"
        if deferred:
            waits += f" (deferred: the behavior of {chain[-1]!r} returned None for it)"
        return waits, first

    def _timeout_hint(self, message: IpcMessage, pending: _Pending, entry: _Entry) -> str:
        """Why ``message``, a request that timed out unanswered, may have: the end of its text.

        Its recipient's behavior returned None for it (deferred), which a behavior that
        forgot its ``return`` does, most often; or it was waiting for a reply itself:
        `` ('b' was handling it, waiting for a reply from 'c')`` (``_waiting_for``),
        ``had not begun it`` when it was busy with another message (its own request names
        another cause), neither when that request names no cause. Empty otherwise.
        """
        to = message.recipient
        if pending.deferred:
            msg = (
                f" (its behavior returned None, which defers the reply to "
                f"ctx.reply({message.correlation_id!r}, ...), and no reply came"
            )
            if entry.killed:  # its kill is journaled; a close() that stopped it is no kill
                # its own ctx can no longer answer: an auditor should not look for a slow behavior
                msg += f"; {to!r} was killed meanwhile"
            return msg + ")"
        if (found := self._waiting_for(to)) is None:
            return ""
        waits, first = found
        if first.cause == message.id:
            return f" ({to!r} was handling it, waiting for {waits})"
        if first.cause is not None:
            return f" ({to!r} had not begun it, busy with another message and waiting for {waits})"
        return f" (the behavior of {to!r} was waiting for {waits})"

    def _request(self, message: IpcMessage, pending: _Pending, timeout: float) -> IpcMessage:
        to, topic = message.recipient, message.topic
        deadline = time.monotonic() + timeout  # waiting for room in the mailbox counts too
        entry = self._admit(message, min(timeout, self._core.call_timeout))

        stopped: list[BaseException] = []

        def gave_up(committed: bool) -> None:
            # Its requester stopped waiting at its commit: once stored, it is not
            # delivered (nobody waits for the reply) but dead-lettered, as a request
            # that timed out waiting for its reply is.
            if committed:
                with self._lock:
                    if message.correlation_id in self._failed_at_close:
                        return  # close() failed it, with its "closed" letter: one letter a request
                    # this letter is its one: close() no longer finds it pending
                    self._pending.pop(message.correlation_id, None)
                if stopped and isinstance(stopped[0], INTERRUPTS):
                    said = _interrupted_text(message, "its commit", stopped[0])
                else:  # the text its requester got (Ack.wait's, as _journal_message waited)
                    said = unacknowledged(self._core.call_timeout)
                with contextlib.suppress(CogfabricError):  # stopped meanwhile: nothing to record it in
                    self.dead_letter(message, "timeout", said)

        try:
            self._journal_message(message, gave_up, tells=False, stopped=stopped)
        except BaseException:
            entry.shared.slots.release()
            raise
        # its own copy: a behavior that changes the payload in place does not change this
        # requester's record of it, which its timeout, interrupt or close letter holds
        self._delivery(message, entry, shared=True)(True)
        try:
            answered = pending.done.wait(max(0.0, deadline - time.monotonic()))  # held but its sliced wait
        except INTERRUPTS as exc:
            self._interrupted(message, exc)
            raise
        if not answered:
            with self._lock:
                mine = self._pending.pop(message.correlation_id, None) is not None
            # Not mine: a reply or a failure took it and settles it (its commit, its
            # dead letter) within call_timeout; its outcome is the request's.
            if mine or not pending.done.wait(self._core.call_timeout):
                msg = f"agentipc: request timed out: {topic!r} to {to!r} after {timeout} s"
                if mine:
                    msg += self._timeout_hint(message, pending, entry)
                    self.dead_letter(message, "timeout", msg)
                raise _of_request(IpcTimeoutError(msg), message)
        if pending.as_is and pending.error is not None:
            # killed before it got to the request, or it cannot handle it
            raise _of_request(pending.error, message)
        if pending.error is not None:
            msg = _panicked(message, pending.error)
            raise _of_request(IpcHandlerError(msg), message) from pending.error
        assert pending.reply is not None
        self._reply_delivered(pending.reply)
        return self._handed_back(pending.reply)

    def _interrupted(self, message: IpcMessage, exc: BaseException) -> None:
        """``exc``, a Ctrl-C or an exit, stopped the requester's wait for ``message``'s reply: its letter.

        Nobody waits for the reply now, as after the request's own timeout: the reply
        is not journaled, and the request's letter says why (unless a reply or a
        failure took it meanwhile: its outcome is the request's).
        """
        with self._lock:
            mine = self._pending.pop(message.correlation_id, None) is not None
        if mine:
            said = _interrupted_text(message, "its reply", exc)
            with contextlib.suppress(CogfabricError):  # closed or fail-stop: nothing to record it in
                self.dead_letter(message, "timeout", said)

    def _reply_delivered(self, reply: IpcMessage) -> None:
        """Journal that ``reply`` reached its requester, as a message's delivery is journaled.

        Not waited for: the reply itself is durable already (sync durability), and the
        requester has it; a journal or clock that fails now is logged, not raised.
        """
        try:
            event = IpcDelivered(at=self._core.clock.now(), message_id=reply.id, recipient=reply.recipient)
            self._journal(event, durable=False)
        except (ClockError, RuntimeClosedError, JournalError) as exc:
            log.warning("reply %s reached %r, its delivery not journaled: %r", reply.id, reply.recipient, exc)

    def reply(self, correlation_id: str, payload: object = None, *, frm: str | None = None) -> None:
        """Answer a pending request asynchronously; an unknown or expired id is ignored.

        Raises:
            IpcInvalidMessageError: an empty ``correlation_id``.
            TypeError: ``correlation_id`` is not a str.
            UnencodableValueError: a payload msgspec cannot encode (also a ``TypeError``);
                the request is still pending.

        """
        correlation_id = require_str(correlation_id, "correlation_id")
        if not correlation_id:
            msg = "agentipc: invalid message: empty correlation id"
            raise IpcInvalidMessageError(msg)
        with self._lock:
            pending = self._pending.get(correlation_id)
        if pending is None or pending.done.is_set():
            return
        request = pending.request
        try:
            reply = self._message(  # a payload that cannot cross raises here, and the request stays pending
                frm or request.recipient,
                request.sender,
                "reply",
                payload,
                correlation_id=correlation_id,
                trace_id=request.trace_id,
                kind="reply",
                cause=request.id,
            )
        except ClockError as exc:  # no time to journal it with: the requester hears it now
            # a refusal of the request while it is pending only: not the recipient's (it was
            # handled), and a reply to a request no longer pending is ignored
            self._fail(request, "clock error", exc, as_is=True, pending_only=True)
            raise
        with self._lock:
            if self._pending.pop(correlation_id, None) is None:
                return  # answered, failed or timed out meanwhile
        try:
            self._journal(reply, durable=True)
        except BaseException as exc:
            # The requester learns now, not at its own timeout, as an IpcHandlerError
            # whose cause is the journal's error. A refused reply leaves its dead letter;
            # one whose commit timed out may be stored yet, so it leaves none.
            pending.error = exc
            if isinstance(exc, Exception) and not isinstance(exc, ActorTimeoutError):
                with contextlib.suppress(Exception):
                    # the text its requester gets (IpcHandlerError, as _request raises it)
                    self.dead_letter(request, "reply not journaled", _panicked(request, exc))
            raise
        else:
            pending.reply = reply
        finally:
            pending.done.set()

    def answer(self, request: IpcMessage, frm: str, result: object) -> None:
        """Reply to ``request`` with a behavior's return value."""
        self.reply(request.correlation_id, result, frm=frm)

    def deferred(self, request: IpcMessage) -> None:
        """A behavior returned None for ``request``: it is answered later, by ``reply``."""
        with self._lock:
            pending = self._pending.get(request.correlation_id)
            if pending is not None:
                pending.deferred = True

    def handler_failed(
        self, message: IpcMessage, error: BaseException, reason: str = "handler error"
    ) -> None:
        """A behavior raised on ``message``, or the journal refused what it changed.

        One dead letter; a requester gets ``IpcHandlerError`` with ``error`` as its cause.
        """
        self._fail(message, reason, error, as_is=False)

    def refuse(self, message: IpcMessage, reason: str, error: BaseException) -> None:
        """``message`` will not be handled: its dead letter; a requester gets ``error`` at once.

        A request whose requester gave up already (its timeout letter) gets this letter
        too, unless the close failed it (the close's letter says it).
        """
        self._fail(message, reason, error, as_is=True)

    def _fail(
        self,
        message: IpcMessage,
        reason: str,
        error: BaseException,
        *,
        as_is: bool,
        pending_only: bool = False,
    ) -> None:
        # the dead letter keeps the text its requester gets (would get, for a send)
        said = _said(error) if as_is else _panicked(message, error)
        if message.kind != "request":
            self.dead_letter(message, reason, said)
            return
        with self._lock:
            pending = self._pending.pop(message.correlation_id, None)
        if pending is None:
            # Timed out (or failed at close) already, and that left its own record. The
            # behavior's error is journaled as AgentFailed; a refusal (the agent cannot
            # handle it: suspended, retired, no behavior, killed) gets its own letter, as
            # a send's does, or the journal would read as a request handled after its
            # requester gave up.
            if as_is and not pending_only and message.correlation_id not in self._failed_at_close:
                self.dead_letter(message, reason, said)
            return
        pending.error = error
        pending.as_is = as_is
        try:
            self.dead_letter(message, reason, said)
        finally:
            pending.done.set()  # even when the journal refuses the dead letter

    def _close(self) -> None:
        """Fail every request still waiting for a reply: the runtime is closing, none will come.

        Called by ``Runtime.close`` once its agents are stopped; each request leaves its
        dead letter while the journal writer still runs.
        """
        with self._lock:
            waiting = [p for p in self._pending.values() if not p.done.is_set()]
            self._pending.clear()
            self._failed_at_close.update(p.request.correlation_id for p in waiting)
        said = "the runtime was closed before the request was answered"  # its letter keeps it too
        letters: list[IpcDeadLettered] = []
        try:
            for pending in waiting:
                letter = self._letter(pending.request, "closed", said)
                letters.append(letter)
            writer = self._core.writer
            if writer is not None and letters:
                # one submission that does not wait for room: a stalled writer must not
                # cost call_timeout for each request
                writer.submit_nowait(letters, wait_for_room=False)
            with self._lock:  # kept once the journal took them, as dead_letter() keeps one
                self._dead.extend(letters)
                self._dead_counts.update(letter.reason for letter in letters)
        except CogfabricError as exc:
            log.warning(
                "runtime %r: close(): no dead letters for %s open at close: %s",
                self._core.name,
                "1 request" if len(waiting) == 1 else f"{len(waiting)} requests",
                exc,
            )
        finally:
            for pending in waiting:
                pending.error = RuntimeClosedError(said)
                pending.as_is = True
                pending.done.set()

    def delegate(
        self,
        frm: str,
        to: str,
        topic: str,
        payload: object = None,
        timeout: float = DEFAULT_REQUEST_TIMEOUT,
        *,
        cause: str | None = None,
        trace: str | None = None,
    ) -> IpcMessage:
        """A request made on behalf of ``frm`` (the delegator); exactly ``request``, errors too."""
        return self.request(frm, to, topic, payload, timeout, cause=cause, trace=trace)

    def handoff(
        self,
        frm: str,
        to: str,
        task_id: str,
        snapshot: object = None,
        timeout: float = DEFAULT_REQUEST_TIMEOUT,
        *,
        cause: str | None = None,
        trace: str | None = None,
    ) -> IpcMessage:
        """Hand a task over: a request on topic ``handoff-task``; raises as ``request`` does.

        The recipient's behavior gets the payload ``{"task_id": task_id, "context":
        snapshot, "artifacts": []}`` (the original's shape). ``cause`` and ``trace`` are
        ``request``'s; a behavior hands over a task with ``ctx.handoff``, which passes
        the message it handles as the cause and continues its trace, as the original's
        handoff continues its context's.

        Raises:
            InvalidTextError: ``task_id`` is not a str (also a ``TypeError``).

        """
        task_id = require_str(task_id, "task_id")
        payload = {"task_id": task_id, "context": snapshot, "artifacts": []}
        return self.request(frm, to, HANDOFF_TOPIC, payload, timeout, cause=cause, trace=trace)

    def subscribe(self, agent_id: str, topic: str) -> None:
        """Subscribe a live agent to ``topic`` (journaled; duplicates ignored).

        The agent updates the topic index itself once the change is journaled, in its
        mailbox order, so the index follows the journal even when this call times out.
        Unlike the original, the agent must be live: its subscriptions are journaled on
        its own stream.

        Raises:
            AgentNotRegisteredError: no live agent has that id (an ``AgentNotFoundError``).
            IpcInvalidMessageError: an empty agent id or topic.
            InvalidTextError: ``agent_id`` or ``topic`` is not a str, or UTF-8 cannot
                encode it (also a ``TypeError``).
            ActorTimeoutError: the agent did not get to it within ``call_timeout`` (a
                behavior still busy with a message, say): it is queued, and the agent
                subscribes once it does.
            JournalError: the journal refused the change, or is fail-stop.

        """
        self._check_ids(agent_id, topic)
        self._ask_agent(agent_id, "subscribe", topic)

    def unsubscribe(self, agent_id: str, topic: str) -> None:
        """Unsubscribe an agent from ``topic`` (journaled); a no-op when it is not subscribed.

        As the original's, it never fails for what it is given: an agent that is not
        live (unknown, or killed: a kill drops its subscriptions), an empty id or an
        empty topic has no subscription to remove.

        Raises:
            InvalidTextError: ``agent_id`` or ``topic`` is not a str, or UTF-8 cannot
                encode it (also a ``TypeError``).
            ActorTimeoutError: a live agent stayed busy in its behavior for
                ``call_timeout`` (the change is queued, and applied when it gets to it).

        """
        require_str(agent_id, "agent id")
        require_str(topic, "topic")
        if not agent_id or not topic:
            return
        with contextlib.suppress(AgentNotFoundError):
            self._runtime._ask(agent_id, "unsubscribe", topic)  # noqa: SLF001

    def _ask_agent(self, agent_id: str, name: str, topic: str) -> None:
        try:
            self._runtime._ask(agent_id, name, topic)  # noqa: SLF001
        except AgentNotFoundError as exc:
            raise AgentNotRegisteredError(agent_id) from exc

    def _take_order(self) -> int:
        """The order of a new subscription: after every one made or recovered so far.

        Never past ``MAX_SUBSCRIPTION_ORDER``, which a journaled order may not pass. No
        runtime counts that far; only a hand-written record or snapshot starts there.
        Subscriptions at the bound share it: live they list in the order they were made,
        after a reopen in the order their agents were first spawned (nothing journaled
        breaks the tie; ``subscribers`` says so).
        """
        with self._lock:
            order = self._next_order
            self._next_order = min(order + 1, MAX_SUBSCRIPTION_ORDER)
            return order

    def _add(self, topic: str, agent_id: str, order: int) -> None:
        """List ``agent_id`` under ``topic`` at its subscription's order (under ``_lock``)."""
        members = self._topics.setdefault(topic, [])
        if agent_id in members:
            return
        self._orders[(topic, agent_id)] = order
        self._next_order = max(self._next_order, min(order + 1, MAX_SUBSCRIPTION_ORDER))
        at = len(members)
        while at and self._orders.get((topic, members[at - 1]), 0) > order:
            at -= 1  # most subscriptions come last: the walk is short
        members.insert(at, agent_id)

    def _drop(self, topic: str, agent_id: str) -> None:
        """Take ``agent_id`` off ``topic`` (under ``_lock``)."""
        members = self._topics.get(topic)
        if members is not None and agent_id in members:
            members.remove(agent_id)
            if not members:  # no entry for a topic nobody is subscribed to: the index stays bounded
                del self._topics[topic]
        self._orders.pop((topic, agent_id), None)

    def _subscribed(self, agent_id: str, topic: str, *, subscribed: bool, order: int = 0) -> None:
        """An agent journaled a subscription change (called on its actor's thread)."""
        with self._lock:
            if subscribed:
                self._add(topic, agent_id, order)
            else:
                self._drop(topic, agent_id)

    def _reindex(self, agent_id: str, topics: list[str], orders: dict[str, int]) -> None:
        """Make the index list ``agent_id`` under exactly ``topics`` (after it reloaded)."""
        with self._lock:
            for topic in list(self._topics):
                if topic not in topics:
                    self._drop(topic, agent_id)
            for topic in topics:
                self._add(topic, agent_id, orders.get(topic, 0))

    def _index(self, agent_id: str, topics: list[str], orders: dict[str, int]) -> None:
        """Add a started (or recovered) agent's subscriptions to the topic index, each at its order."""
        with self._lock:
            for topic in topics:
                self._add(topic, agent_id, orders.get(topic, 0))

    def _forget(self, agent_id: str) -> None:
        """Drop a killed agent from every topic."""
        with self._lock:
            for topic in list(self._topics):
                self._drop(topic, agent_id)

    @staticmethod
    def _check_ids(agent_id: str, topic: str) -> None:
        require_str(agent_id, "agent id")
        require_str(topic, "topic")
        if not agent_id:
            msg = "agentipc: agent id required"
            raise IpcInvalidMessageError(msg)
        if not topic:
            msg = "agentipc: invalid message: empty topic"
            raise IpcInvalidMessageError(msg)

    def subscribers(self, topic: str) -> list[str]:
        """The live agents subscribed to ``topic``, in subscription order (broadcast's order).

        The order is journaled with each subscription, so a reopen keeps it; the
        subscriptions of a journal written before that (``IpcSubscribed`` version 1)
        come first, in the order of their agents' first spawn. So do, after a reopen,
        subscriptions that share the largest order, ``MAX_SUBSCRIPTION_ORDER``, which
        only a hand-written record or snapshot brings near.

        Empty once ``close()`` began, as ``runtime.agents()``: no agent is live then.

        Raises:
            TypeError: ``topic`` is not a str.

        """
        topic = require_str(topic, "topic")  # plain text: a subclass's own __hash__ finds nothing
        if self._runtime.closed:
            return []
        with self._lock:
            return list(self._topics.get(topic, ()))

    def broadcast(
        self,
        frm: str,
        topic: str,
        payload: object = None,
        *,
        cause: str | None = None,
        trace: str | None = None,
    ) -> int:
        """Deliver one message to every subscriber with a behavior; returns how many took it.

        Subscribers without a behavior are skipped and not counted, as in the
        original; a behavior's error is dead-lettered later, when it is handled. A
        suspended or retired subscriber's mailbox takes it and is counted: an agent
        reads its lifecycle in its mailbox order (a resume may be ahead of the message),
        and dead-letters the message when it reaches it, as it refuses a request. A
        subscriber whose mailbox stays full is dead-lettered and not counted; all of
        them together wait ``call_timeout`` at most for room.

        Raises:
            RuntimeClosedError: the runtime is closed.
            ActorTimeoutError: its commit outlasted ``call_timeout`` (sync durability);
                it goes to the subscribers it was made for if the writer then stores it.
            TypeError: ``frm``, ``topic``, ``cause`` or ``trace`` is not a str
                (``InvalidTextError``).
            UnencodableValueError: a payload msgspec cannot encode (also a ``TypeError``).

        """
        self._runtime._check_open()  # noqa: SLF001
        message = self._message(
            frm, "", topic, payload, trace_id=_trace_of(trace), kind="broadcast", cause=cause
        )
        with _interrupt.HELD:  # but in its waits: its commit, room in a mailbox
            return self._broadcast(message)

    def _broadcast(self, message: IpcMessage) -> int:
        targets = [a for a in self.subscribers(message.topic) if self._runtime._has_behavior(a)]  # noqa: SLF001

        def late(committed: bool) -> None:
            if committed:  # on the writer's thread: no waiting for room
                with contextlib.suppress(RuntimeClosedError):  # the untold have their letters
                    self._fan_out(message, targets, wait=False)

        self._journal_message(message, late)
        return self._fan_out(message, targets)

    def _fan_out(self, message: IpcMessage, targets: list[str], *, wait: bool = True) -> int:
        """Tell a journaled broadcast to each of ``targets``; how many mailboxes took it.

        ``wait``: for room in a full mailbox (``call_timeout`` at most, for all of them;
        then it is dead-lettered) and for the idle agents woken (``FanOut``). Without
        it (on the writer's thread, for a broadcast stored after its caller timed out),
        a full mailbox takes it past its size at once, as a durable publication's does.

        Raises:
            RuntimeClosedError: the runtime is closing (each target not told has its
                ``closed`` dead letter).

        """
        deadline = time.monotonic() + (self._core.call_timeout if wait else 0.0)
        delivered = 0
        fanout = FanOut(len(targets)) if wait else None
        for n, agent_id in enumerate(targets):
            copy = IpcMessage(
                at=message.at,
                id=message.id,
                sender=message.sender,  # the plain text _message made of them
                recipient=agent_id,
                topic=message.topic,
                payload=copy_value(message.payload),
                trace_id=message.trace_id,
                kind="broadcast",
                cause=message.cause,
            )
            try:
                self._runtime._tell(agent_id, (IPC, copy), max(0.0, deadline - time.monotonic()), fanout)  # noqa: SLF001
            except AgentNotFoundError:
                continue
            except MailboxFullError as exc:
                if wait:
                    self.dead_letter(copy, "mailbox full", str(exc))
                    continue
                try:
                    self._runtime._tell_past_bound(agent_id, (IPC, copy), "broadcast")  # noqa: SLF001
                except AgentNotFoundError:
                    continue
            except RuntimeClosedError as exc:  # closed while it waited for room: the rest are not told
                for untold in targets[n:]:
                    self._closed_letter(msgspec.structs.replace(copy, recipient=untold), exc)
                raise
            delivered += 1
        return delivered


class _Handoff:
    """Who finishes a message once its commit is over: its caller, or (once it gave up) the writer."""

    __slots__ = ("_gave_up", "_late", "_lock", "_over")

    def __init__(self, late: Callable[[bool], None]) -> None:
        self._late = late
        self._lock = threading.Lock()
        self._gave_up = self._over = False

    def over(self, committed: bool) -> None:
        """The writer's post-commit action: run ``late`` if the caller gave up."""
        with self._lock:
            self._over = True
            if not self._gave_up:
                return
        self._late(committed)

    def give_up(self) -> bool:
        """The caller timed out: True if ``late`` will run, False if the commit is over already."""
        with self._lock:
            if self._over:
                return False
            self._gave_up = True
            return True


def _copied(value: object) -> Any:  # noqa: ANN401 - a payload is any encodable value
    """A deep copy of ``value`` (itself when it cannot change)."""
    if isinstance(value, str | int | float | bytes | None):
        return value
    return copy_value(value)


def _own_copy(message: IpcMessage) -> IpcMessage:
    """``message`` with a deep copy of its payload (the same message when it cannot change)."""
    if isinstance(message.payload, str | int | float | bytes | None):
        return message
    return msgspec.structs.replace(message, payload=copy_value(message.payload))


def _interrupted_text(request: IpcMessage, awaited: str, exc: BaseException) -> str:
    """The ``timeout`` letter of a request whose requester ``exc`` stopped waiting for ``awaited``.

    A ``KeyboardInterrupt`` is a Ctrl-C, but for the command line's SIGTERM (``Terminated``);
    a ``SystemExit``, the program exiting (a SIGTERM handler's ``sys.exit``, say).
    """
    topic, to = request.topic, request.recipient
    if isinstance(exc, SystemExit):
        why = "the program exiting"
    else:
        why = "SIGTERM" if isinstance(exc, Terminated) else "Ctrl-C"
    return f"agentipc: request interrupted: {topic!r} to {to!r} ({why} while waiting for {awaited})"


def _of_request(error: BaseException, request: IpcMessage) -> BaseException:
    """``error``, a failure of ``request``: an ``IpcError`` names it (``message_id``, ``correlation_id``)."""
    if isinstance(error, IpcError):
        error.message_id = request.id
        error.correlation_id = request.correlation_id
    return error

"""MailboxSlots: the bounded count behind every agent's mailbox (BoundedSemaphore's contract)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from cogfabric.actors._agent import MailboxSlots

WAIT = 10.0


class CountingCondition(threading.Condition):
    """Counts the callers that start to wait, so a test knows a taker is blocked."""

    def __init__(self, lock: Any) -> None:
        super().__init__(lock)
        self.started = threading.Semaphore(0)

    def wait_for(self, predicate: Any, timeout: float | None = None) -> Any:
        self.started.release()
        return super().wait_for(predicate, timeout)


def watched(size: int) -> tuple[MailboxSlots, CountingCondition]:
    slots = MailboxSlots(size)
    condition = CountingCondition(slots._lock)
    slots._room = condition
    return slots, condition


def test_slots_run_out_and_a_taker_gets_false_after_its_timeout() -> None:
    slots = MailboxSlots(2)

    assert slots.acquire(timeout=0)
    assert slots.acquire(timeout=0)
    assert slots.free == 0
    assert slots.acquire(timeout=0) is False
    assert slots.acquire(timeout=0.05) is False
    slots.release()
    assert slots.free == 1
    assert slots.acquire(timeout=0)


def test_a_release_wakes_a_waiting_taker() -> None:
    slots, condition = watched(1)
    assert slots.acquire()
    got: list[bool] = []
    taker = threading.Thread(target=lambda: got.append(slots.acquire(timeout=60)))
    taker.start()
    assert condition.started.acquire(timeout=WAIT)  # the taker waits
    slots.release()
    taker.join(WAIT)
    assert got == [True]
    assert slots.free == 0


def test_two_releases_wake_two_waiting_takers() -> None:
    # A release must wake a waiter whenever one waits, not only on the way from 0 to 1.
    slots, condition = watched(2)
    assert slots.acquire()
    assert slots.acquire()
    got: list[bool] = []
    lock = threading.Lock()

    def take() -> None:
        ok = slots.acquire(timeout=60)
        with lock:
            got.append(ok)

    takers = [threading.Thread(target=take) for _ in range(2)]
    for taker in takers:
        taker.start()
    for _ in takers:
        assert condition.started.acquire(timeout=WAIT)
    slots.release()
    slots.release()
    for taker in takers:
        taker.join(WAIT)
        assert not taker.is_alive()
    assert got == [True, True]


def test_giving_back_more_slots_than_were_taken_is_a_bug() -> None:
    slots = MailboxSlots(1)
    with pytest.raises(ValueError, match="released more often"):
        slots.release()
    assert slots.acquire(timeout=0)
    slots.release()
    with pytest.raises(ValueError, match="released more often"):
        slots.release()


def test_take_goes_below_zero_and_the_slots_come_back_one_release_at_a_time() -> None:
    slots = MailboxSlots(1)
    assert slots.acquire(timeout=0)
    slots.take()  # a message that must arrive whatever the bound

    assert slots.free == -1
    assert not slots.acquire(timeout=0)  # over its size: nothing free
    slots.release()
    assert not slots.acquire(timeout=0)  # still none free
    slots.release()
    assert slots.acquire(timeout=0)


def test_a_lifecycle_call_goes_past_the_bound_until_the_mailbox_holds_its_allowance() -> None:
    slots, condition = watched(1)
    assert slots.acquire(timeout=0)
    for _ in range(MailboxSlots.CONTROL_EXTRA):
        assert slots.acquire_control(timeout=0)  # past the bound, no waiting
    assert slots.free == -MailboxSlots.CONTROL_EXTRA
    assert slots.acquire_control(timeout=0.05) is False  # the allowance is used up

    got: list[bool] = []
    taker = threading.Thread(target=lambda: got.append(slots.acquire_control(timeout=60)))
    taker.start()
    assert condition.started.acquire(timeout=WAIT)  # it waits for a lifecycle call to be handled
    slots.release()  # a message handled: room for a sender, not for a lifecycle call
    assert not got
    slots.release_control()
    taker.join(WAIT)
    assert got == [True]
    assert slots.free == 1 - MailboxSlots.CONTROL_EXTRA


def test_messages_past_the_bound_that_are_no_lifecycle_calls_leave_the_allowance_whole() -> None:
    # a durable publication takes its slot past the bound too: it must not use up the
    # room a kill has
    slots = MailboxSlots(1)
    assert slots.acquire(timeout=0)
    for _ in range(3 * MailboxSlots.CONTROL_EXTRA):
        slots.take()

    assert slots.acquire_control(timeout=0)
    slots.release_control()
    with pytest.raises(ValueError, match="released more often"):
        slots.release_control()


def test_a_released_lifecycle_call_wakes_a_waiting_lifecycle_call_behind_a_waiting_sender() -> None:
    slots, condition = watched(1)
    assert slots.acquire(timeout=0)
    for _ in range(MailboxSlots.CONTROL_EXTRA):
        assert slots.acquire_control(timeout=0)
    got: list[str] = []
    sender = threading.Thread(target=lambda: got.append(f"sender {slots.acquire(timeout=0.5)}"))
    sender.start()
    assert condition.started.acquire(timeout=WAIT)
    control = threading.Thread(target=lambda: got.append(f"control {slots.acquire_control(timeout=60)}"))
    control.start()
    assert condition.started.acquire(timeout=WAIT)

    slots.release_control()
    control.join(WAIT)
    sender.join(WAIT)

    assert got == ["control True", "sender False"]


def test_close_wakes_a_waiting_lifecycle_call_with_false() -> None:
    slots, condition = watched(1)
    assert slots.acquire(timeout=0)
    for _ in range(MailboxSlots.CONTROL_EXTRA):
        assert slots.acquire_control(timeout=0)
    got: list[bool] = []
    taker = threading.Thread(target=lambda: got.append(slots.acquire_control(timeout=60)))
    taker.start()
    assert condition.started.acquire(timeout=WAIT)
    slots.close()
    taker.join(WAIT)
    assert got == [False]

"""A signal that lands just before a held section's wait begins ends that wait (session 62).

``_interrupt.wait`` delivers the signals held so far, then marks the main thread as
waiting, so that one landing in the wait is raised at once. One that landed between the
two (its handler run by the eval loop after the delivering loop ended, ``_waiting`` not
yet set) was held, and the wait began with it pending: a request then waited out its
whole timeout before the Ctrl-C or SIGTERM took effect (seen as a 10 s request in
``test_sigterm_bus_s59.py``). The handler is run here, as the eval loop would, at the
line that sets ``_waiting``.
"""

from __future__ import annotations

import inspect
import signal
import sys
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import _interrupt

if TYPE_CHECKING:
    from types import FrameType


def _line_setting_waiting() -> int:
    lines, first = inspect.getsourcelines(_interrupt.wait)
    (at,) = [first + i for i, line in enumerate(lines) if line.strip().startswith("_waiting = True")]
    return at


def test_a_signal_landing_as_the_wait_is_about_to_begin_is_raised_before_it() -> None:
    code = _interrupt.wait.__code__
    target = _line_setting_waiting()
    landed: list[int] = []
    began_with: list[Any] = []

    def tracer(frame: FrameType, event: str, arg: object) -> Any:  # noqa: ARG001
        if frame.f_code is not code:
            return None
        frame.f_trace_lines = True

        def lines(frame: FrameType, event: str, arg: object) -> Any:  # noqa: ARG001
            if event == "line" and frame.f_lineno == target and not landed:
                landed.append(target)
                _interrupt._on_signal(signal.SIGINT, frame)  # as the eval loop runs it here
            return lines

        return lines

    def blocking() -> str:
        began_with.append(_interrupt._pending)
        return "waited"

    assert _interrupt.main_ident is not None
    sys.settrace(tracer)
    try:
        with pytest.raises(KeyboardInterrupt), _interrupt.HELD:
            _interrupt.wait(blocking)
    finally:
        sys.settrace(None)
        _interrupt._pending = False
        _interrupt._waiting = False

    assert landed == [target]
    assert began_with == []  # the wait did not begin with the signal held

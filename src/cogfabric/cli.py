"""The ``cogfabric`` command line: run the simulation, and audit any journal.

Audit commands (``verify``, ``replay``, ``trace``, ``export``, ``inspect``, and
``backup`` and ``salvage`` of their source) open the journal read-only and never change
a byte of its data file; ``verify-export`` checks an export without its journal. Exit codes: 0 clean,
1 a problem found in the journal (or a simulation that failed or could not go on), 2 a usage error,
a path that is not a journal, a journal that cannot be opened, or output that cannot be
written (the group's help lists them).
"""

from __future__ import annotations

import codecs
import contextlib
import contextvars
import functools
import hashlib
import io
import logging
import os
import shlex
import signal
import stat
import statistics
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn

import click
from click.core import ParameterSource

import cogfabric
from cogfabric._errors import Terminated

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from typing import BinaryIO

    from cogfabric._audit import Trace
    from cogfabric._export_check import ExportReport
    from cogfabric._simulation import SimulationReport
    from cogfabric.actors import Config

__all__ = ["main"]

EXIT_OK = 0
EXIT_PROBLEM = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped
EXIT_TERMINATED = 143  # 128 + SIGTERM

_JOURNAL = click.argument("journal", type=click.Path(path_type=Path))
_COPY = click.option("--copy", is_flag=True, help="Audit a private copy (for a directory you cannot write).")


def _check_key(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> str | None:
    """The ``--key`` given (once), refused as a usage error (exit 2) if no journal can have it."""
    from cogfabric.store._lmdb import _normalise_key  # noqa: PLC0415 - the store's own rule

    value: str | None = _once(ctx, param, values)
    try:
        _normalise_key(value)
    except ValueError as exc:  # a UnicodeEncodeError too
        raise click.BadParameter(str(exc)) from None
    return value


def _once(_ctx: click.Context, _param: click.Parameter, values: tuple[Any, ...]) -> Any:  # noqa: ANN401
    """The value of an option that may be given once (None when not given); twice is a usage error.

    Click keeps the last of a repeated option, so ``export --stream bus --stream
    runtime`` would export the runtime stream alone, silently narrower than asked.
    """
    if len(values) > 1:
        shown = ", ".join(map(str, values))
        msg = f"given {len(values)} times ({shown}); give it once"
        raise click.BadParameter(msg)
    return values[0] if values else None


def _once_text(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> str | None:
    """``_once`` for a name (an agent, a session, a stream, an event id): UTF-8 in any locale.

    Python decodes the command line with the locale's encoding: under ``LC_ALL=C`` with
    its UTF-8 mode off (``PYTHONUTF8=0``) that is ASCII, so ``--agent rév`` arrived as
    ``r\\udcc3\\udca9v`` and was refused as "not valid UTF-8 text". The argument's bytes
    are read as UTF-8 instead, as the journal stores names; bytes that are not UTF-8 stay
    as they came (and are refused so). A journal path is left in the locale's encoding,
    in which the file system takes it.
    """
    value: str | None = _once(ctx, param, values)
    if value is None:
        return None
    try:
        return os.fsencode(value).decode("utf-8")
    except (UnicodeError, ValueError):  # not UTF-8, or a surrogate that stands for no byte
        return value


def _event_types(
    _ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
) -> frozenset[str] | None:
    """The event types ``--type`` names (None when not given); an unknown name is a usage error."""
    if not values:
        return None
    from cogfabric.events import EVENT_TYPES  # noqa: PLC0415 - the CLI imports the events only to run

    known = {str(cls.__struct_config__.tag) for cls in EVENT_TYPES}
    unknown = [value for value in values if value not in known]
    if unknown:
        msg = f"no event type {unknown[0]!r}; the types: {', '.join(sorted(known))}"
        raise click.BadParameter(msg)
    return frozenset(values)


def _read_key_file(ctx: click.Context, param: click.Parameter, values: tuple[Path, ...]) -> bytes | None:
    """The chain key in a file: its bytes exactly (any bytes: a key of random bytes too).

    Reads one byte more than a key can hold, no more: ``--key-file /dev/urandom`` is
    refused as too long, not read until memory runs out.
    """
    from cogfabric.store._lmdb import _normalise_key  # noqa: PLC0415 - the store's own rule

    path: Path | None = _once(ctx, param, values)
    if path is None:
        return None
    longest = hashlib.blake2b.MAX_KEY_SIZE
    try:
        with path.open("rb") as file:
            key = file.read(longest + 1)
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(key) > longest:
        msg = f"{path}: a chain key must be 1 to {longest} bytes, and the file holds more"
        raise click.BadParameter(msg)
    try:
        _normalise_key(key)
    except ValueError as exc:
        raise click.BadParameter(f"{path}: {exc}") from None
    return key


def _keyed(command: Callable[..., None]) -> Callable[..., None]:
    """Give an audit command the chain key as ``key``: ``--key-file`` (bytes), or ``--key`` (text).

    Either once; both together are a usage error.
    """

    @functools.wraps(command)
    def run(*args: Any, key: str | None, key_file: bytes | None, **kwargs: Any) -> None:  # noqa: ANN401
        if key_file is not None and key is not None:
            _fail("give the chain key once: --key or --key-file, not both")
        command(*args, key=key if key_file is None else key_file, **kwargs)

    with_file = click.option(
        "--key-file",
        "key_file",
        type=click.Path(path_type=Path, dir_okay=False),
        multiple=True,
        callback=_read_key_file,
        help="A file holding the chain key, read as bytes exactly (no newline is stripped).",
    )
    with_key = click.option(
        "--key",
        multiple=True,
        callback=_check_key,
        help="The chain key the journal was written with, as text. A key on the command line "
        "shows in the process list: prefer --key-file.",
    )
    return with_key(with_file(run))


_NO_VERIFY = click.option(
    "--no-verify", is_flag=True, help="Read a journal even if its hash chain does not verify (dangerous)."
)


def _fail(
    message: str, code: int = EXIT_USAGE, *, error: BaseException | None = None, kind: str = ""
) -> NoReturn:
    """Say ``message`` on stderr and exit ``code``; with ``--json``, then the error object (``_say_error``).

    ``error``: the exception it reports (its class is the object's ``kind``, its seq,
    type and versions its fields); ``kind`` names it where there is none (else
    ``UsageError`` for exit 2, ``Error`` for any other).
    """
    _say(f"error: {message}")
    _say_error(message, code, error=error, kind=kind)
    sys.exit(code)


#: The parameters of a command's own option that asks for the error object: ``--json`` (a
#: flag: ``bench --json PATH`` names a file), or ``export --json-errors`` (its lines are JSON
#: already). Given it, an error that leaves stdout without a JSON document (``export``: any
#: error) adds one JSON line to stderr, ``{"error": {...}}`` (README, "The commands' JSON").
_JSON_ERROR_PARAMS: Final = ("as_json", "json_errors")

#: Whether the command line asks for the error object, for an error met before (or after) the
#: command's own options are at hand: a bad option, Ctrl-C. Set by ``_Commands.main``.
_json_asked: contextvars.ContextVar[bool] = contextvars.ContextVar("cogfabric_json_asked", default=False)


def _asks_for_json(args: Sequence[str]) -> bool:
    """Whether ``args`` give their command its option that asks for the error object (``_JSON_ERROR_PARAMS``).

    Read as click parses them: the word after an option that takes a value is that
    value (``--key-file --json`` names a key file called ``--json``), and every word
    after the command's ``--`` is an argument, so neither asks for it (a ``--`` before
    the command is the group's: the word after it is the command, whose options
    follow). This is the answer for an error met without the command's parsed options
    at hand; click may not have parsed the words at all (an unknown option, a value
    missing): an unknown option is taken to take no value, so ``verify J --bogus
    --json`` asks for the object, as the user meant. Once the command's options are
    parsed, ``_json_errors`` reads them instead.
    """
    words = iter(args)
    command = None
    for word in words:  # the group's own options (--help, --version) take no value
        if word == "--" or not word.startswith("-"):
            command = main.commands.get(next(words, "") if word == "--" else word)
            break
    if command is None:
        return False
    asking: set[str] = set()
    values: dict[str, int] = {}  # an option that takes values: how many words
    for param in command.params:
        if not isinstance(param, click.Option):
            continue
        if param.name in _JSON_ERROR_PARAMS and param.is_flag:
            asking.update(param.opts)
        elif not param.is_flag and not param.count:
            values.update(dict.fromkeys(param.opts, param.nargs))
    for word in words:
        if word == "--":
            return False
        if word in asking:
            return True
        for _ in range(values.get(word, 0)):
            next(words, None)
    return False


def _json_errors() -> bool:
    """Whether an error is also said as a JSON object: the command's own option, as parsed where it was."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        for name in _JSON_ERROR_PARAMS:
            if name in ctx.params:
                return bool(ctx.params[name])
    return _json_asked.get()


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _say_error(
    message: str, code: int, *, error: BaseException | None = None, kind: str = "", seq: int | None = None
) -> None:
    """With ``--json`` (``export --json-errors``): the error as one line of JSON on stderr, last.

    ``{"error": {"kind", "exit", "message", "seq", "type_name", "stored", "known"}}``:
    ``kind`` the exception's class (``JournalNotFoundError``, ``JournalFormatError``,
    ``JournalKeyError``, ``JournalRecordVersionError``, ...), or ``UsageError``,
    ``JournalIntegrityError`` (a chain that fails, refused), ``OutputError``,
    ``Interrupted``, ``Terminated``; ``exit`` the exit status; ``seq`` the record it names;
    ``type_name``, ``stored`` and ``known`` an event type and its two versions (of a
    record newer than this code; for ``JournalRecordTypeError`` the type tag alone), or
    for ``JournalFormatError`` the two formats (each null where the error has none).
    Stdout is left as it is: empty, or the lines an export wrote.
    """
    if not _json_errors():
        return
    from cogfabric._audit import encode_json  # noqa: PLC0415

    if not kind:
        kind = (
            type(error).__name__ if error is not None else ("UsageError" if code == EXIT_USAGE else "Error")
        )
    if seq is None:
        seq = _int_or_none(getattr(error, "seq", None))
    type_name = getattr(error, "type_name", None)
    fields = {
        "kind": kind,
        "exit": code,
        "message": message.encode("utf-8", "backslashreplace").decode(),  # a path's undecodable bytes
        "seq": seq,
        "type_name": type_name if isinstance(type_name, str) else None,
        "stored": _int_or_none(getattr(error, "stored", None)),
        "known": _int_or_none(getattr(error, "known", None)),
    }
    _say(encode_json({"error": fields}).decode())


def _say(line: str) -> None:
    """Write a line to stderr, or go on without it when stderr cannot take it.

    A reader of stderr gone, or a full disk, loses the line but never changes the exit
    status: a damaged journal still exits 1 and a usage error 2 (an error raised here
    would be taken for stdout's reader going away, a clean exit 0).

    What a terminal would act on is escaped (``_printable``): a line names journal paths
    and what a journal's own files and records hold, which whoever wrote them chose.
    """
    try:
        click.echo(_printable(line, backslash=False), err=True)
    except OSError:
        _stderr_gone()


def _stderr_gone() -> None:
    """Point stderr at devnull, so that the interpreter's last flush of it cannot fail again."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stderr.fileno())
        os.close(devnull)


class _Commands(click.Group):
    """The command group: every command stops quietly, exit 0, when stdout's reader goes away.

    But for a failed verification (``verify``, ``backup``'s check of its copy,
    ``verify-export``) or salvage, whose verdict exits 1 wherever it could be written.

    Output that cannot be written at all (stdout closed, a full disk) is exit 2 with a
    one-line error: the journal is not at fault, so not exit 1.
    """

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,  # noqa: ANN401 - click's own signature
    ) -> Any:  # noqa: ANN401 - click's own signature
        """Click's main, but a usage error that stderr cannot take still exits 2 (click's own exits 1)."""
        _json_asked.set(_asks_for_json(sys.argv[1:] if args is None else args))
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            done = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.ClickException as exc:
            try:
                if sys.stderr is not None:  # closed (2>&-): click would show it on stdout instead
                    exc.show()
            except OSError:
                _stderr_gone()
            usage = isinstance(exc, click.UsageError)
            _say_error(
                exc.format_message(), exc.exit_code, kind="UsageError" if usage else type(exc).__name__
            )
            sys.exit(exc.exit_code)
        except click.Abort:  # Ctrl-C before a command began (click's own exit 1 means a bad journal here)
            _say("interrupted")
            _say_error("interrupted", EXIT_INTERRUPTED, kind="Interrupted")
            sys.exit(EXIT_INTERRUPTED)
        sys.exit(done if isinstance(done, int) else EXIT_OK)  # click's Exit code (--help), or a command's end

    def invoke(self, ctx: click.Context) -> None:
        """Run the command; its return value is dropped (an int there would become the exit status).

        SIGTERM (``kill``, ``timeout``, systemd) stops a command as Ctrl-C does, with its
        cleanups run (an export's unfinished file removed, a simulation's runtime closed),
        and exits 143; a second SIGTERM kills at once. What the journal's own code logs
        about its files (a data file found empty and started anew, a short one padded, an
        audit that could not fork) is shown on stderr, as warnings. A character stdout's
        encoding cannot take (``PYTHONIOENCODING=latin-1``, a C locale without UTF-8 mode)
        is written as its escape (``_stdout_escapes_what_it_cannot_encode``).
        """
        try:
            with _sigterm_unwinds(), _journal_warnings_shown(), _stdout_escapes_what_it_cannot_encode():
                super().invoke(ctx)
        except _Terminated:
            _say("terminated")
            _say_error("terminated", EXIT_TERMINATED, kind="Terminated")
            sys.exit(EXIT_TERMINATED)
        except KeyboardInterrupt:  # click's own "Aborted!" exits 1, which here means a bad journal
            _say("interrupted")
            _say_error("interrupted", EXIT_INTERRUPTED, kind="Interrupted")
            sys.exit(EXIT_INTERRUPTED)
        except OSError as exc:
            _output_failed(exc)

    def make_context(  # the group's own --help and --version write here, before invoke
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,  # noqa: ANN401 - click's own signature
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except OSError as exc:
            _output_failed(exc)


#: The loggers whose warnings a command shows: what was found in a journal's files and done to
#: them. The runtime's own (an agent's behavior raising, say) stay in the log: a run that
#: fails says so in its summary or its one-line error.
_SHOWN_LOGGERS: Final = ("cogfabric.store", "cogfabric._audit")


class _WarningsToStderr(logging.Handler):
    """Each warning (or worse) of a shown logger as a ``warning: ...`` line on stderr."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        if self._shown_already(record):
            return
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad log call must not stop the command
            self.handleError(record)
            return
        _say(f"warning: {message}")

    def _shown_already(self, record: logging.LogRecord) -> bool:
        """Whether a handler of the program's own writes ``record`` to this stderr too.

        A program that configured its logging (``logging.basicConfig()``, say) and runs
        ``main`` itself would get each warning twice, its own line and this one.
        """
        stderr = sys.stderr
        logger: logging.Logger | None = logging.getLogger(record.name)
        while logger is not None:
            for handler in logger.handlers:
                if handler is self or record.levelno < handler.level:
                    continue
                if isinstance(handler, logging.StreamHandler) and _same_stream(handler.stream, stderr):
                    return True
            logger = logger.parent if logger.propagate else None
        return False


def _same_stream(stream: object, other: object) -> bool:
    """Whether two streams are one, or write to the same file descriptor."""
    if stream is other:
        return True
    try:
        return bool(stream.fileno() == other.fileno())  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return False


@contextlib.contextmanager
def _journal_warnings_shown() -> Iterator[None]:
    """Show the journal's warnings on stderr while a command runs.

    As a library cogfabric configures no logging, so without this the command line
    dropped them: a simulation whose data file was found emptied started a new journal
    and said nothing. Removed again at the end, for a program that runs ``main`` itself;
    a warning that program's own logging writes to this stderr already is not written twice.
    """
    handler = _WarningsToStderr()
    loggers = [logging.getLogger(name) for name in _SHOWN_LOGGERS]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


_SURROGATEESCAPE: Final = codecs.lookup_error("surrogateescape")


def _escape_unencodable(error: UnicodeError) -> tuple[str | bytes, int]:
    """The ``cogfabric-escape`` error handler: a file name's undecodable byte as that byte, else the escape.

    ``surrogateescape`` (what a C locale's stdout has) where it applies, a lone surrogate
    that stands for a byte of a path; else ``backslashreplace``: ``\\xe9``, ``\\U0001f600``.
    """
    if not isinstance(error, UnicodeEncodeError):
        raise error
    try:
        return _SURROGATEESCAPE(error)
    except UnicodeError:
        return codecs.backslashreplace_errors(error)


codecs.register_error("cogfabric-escape", _escape_unencodable)


@contextlib.contextmanager
def _stdout_escapes_what_it_cannot_encode() -> Iterator[None]:
    """Write a character stdout's encoding cannot take as its escape (``\\xe9``), not fail on it.

    Under ``PYTHONIOENCODING=latin-1`` or ``ascii``, or ``LC_ALL=C`` with Python's UTF-8
    mode off (``PYTHONUTF8=0``), a name or value of the journal's that the encoding lacks
    (an agent ``rév``, an emoji) raised ``UnicodeEncodeError`` in a table's text: a
    traceback and exit 1, which here means a damaged journal. The JSON outputs write
    UTF-8 bytes and never meet it; stderr escapes already (Python's ``backslashreplace``).
    A UTF-8 stdout is left as it is. Set back after the command, for a program that runs
    ``main`` itself.
    """
    stdout = sys.stdout
    if not isinstance(stdout, io.TextIOWrapper) or codecs.lookup(stdout.encoding).name == "utf-8":
        yield
        return
    errors = stdout.errors
    if errors not in ("strict", "surrogateescape"):  # the user's own (PYTHONIOENCODING=latin-1:replace)
        yield
        return
    try:
        stdout.reconfigure(errors="cogfabric-escape")
    except (OSError, ValueError):  # closed, or its buffer cannot be flushed: the output's error comes later
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            stdout.reconfigure(errors=errors)


class _Terminated(Terminated):
    """SIGTERM, raised in the main thread: it unwinds the command as Ctrl-C's interrupt does."""


def _on_sigterm(signum: int, frame: object) -> None:  # noqa: ARG001 - a signal handler's signature
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM kills at once, cleanups or not
    raise _Terminated


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """Turn SIGTERM into ``_Terminated`` while a command runs, where no one handles it already.

    Only in the main thread (the only one a handler can be set from) and only over the
    default action: a program that runs ``main`` with a SIGTERM handler of its own keeps it.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _output_failed(exc: OSError) -> NoReturn:
    """Stop on output that cannot be written: quietly (exit 0) when stdout's reader went, else exit 2.

    Raises:
        OSError: ``exc`` itself, when it is an actor's timeout or a journal's error, not the output's.

    """
    if isinstance(exc, BrokenPipeError):  # ``cogfabric export J | head -1``: the reader has what it wanted
        _stdout_closed()
    if isinstance(exc, TimeoutError | cogfabric.CogfabricError):
        raise exc
    where = f" {exc.filename}" if exc.filename else ""
    _fail(f"cannot write the output{where}: {exc.strerror or exc}", kind="OutputError")


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: as click's version option prints it, the version read only then."""
    if value and not ctx.resilient_parsing:
        click.echo(f"cogfabric, version {cogfabric.__version__}", color=ctx.color)
        ctx.exit()


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
def main() -> None:
    """cogfabric: an event-sourced actor runtime for the context of LLM agents.

    \b
    Run the simulation, then audit what it wrote:
        cogfabric simulate --agents 50 --turns 200
        cogfabric inspect ./cogfabric-journal
        cogfabric verify ./cogfabric-journal

    \b
    Exit status, every command:
      0    done (a journal clean, a simulation whose turns all ran)
      1    a problem in the journal (a record, page, header or snapshot found bad;
           verify-export: a bad line; salvage: a copy that does not match the
           journal), or a simulation that failed or could
           not go on (a turn raised, max_map_size, a failed write, a full disk)
      2    a usage error: bad options or config, a path with no journal the
           command can use, a journal it cannot open (held by another writer,
           not writable, no room to create it), a file it cannot read
           (verify-export), or output it cannot write
      130  Ctrl-C; 143 SIGTERM
    Errors and warnings go to stderr: stdout holds only the output (--json too).
    With --json, an error that leaves stdout empty ends stderr with one line
    {"error": {"kind", "exit", "message", "seq", "type_name", "stored", "known"}};
    export gives it for any error with --json-errors.
    """


@main.command()
@click.option(
    "--agents", default=50, show_default=True, type=click.IntRange(2, 100_000), help="Agents, when new."
)
@click.option(
    "--turns",
    default=200,
    show_default=True,
    type=click.IntRange(1),
    help="Researchers' LLM turns in this run (reviewers' answers are more).",
)
@click.option(
    "--journal",
    "path",
    default="./cogfabric-journal",
    show_default=True,
    type=click.Path(),
    callback=lambda _ctx, _param, value: _journal_path(value),
    help="The journal directory (created, or continued).",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the scripted model.")
@click.option(
    "--durability", type=click.Choice(["sync", "batch"]), default=None, help="Overrides the config."
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A cogfabric.yaml.",
)
def simulate(
    agents: int, turns: int, path: Path, seed: int, durability: str | None, config_path: Path | None
) -> None:
    """Run a multi-agent research simulation on the embedded LMDB journal.

    Researchers share a task context, keep private hypotheses and cognitive states,
    take LLM turns through the prompt gate (a scripted model: the same seed gives the
    same answers; a few raw evidence dumps are refused), request reviews, broadcast
    findings and checkpoint. Running it again on the same journal continues. Two runs
    of a seed write the same records but for their seqs, order, times and ids (README:
    "Reproducing a run").

    \b
    Example:
        cogfabric simulate --agents 50 --turns 200 --journal ./cogfabric-journal
    """
    from cogfabric._errors import CogfabricError  # noqa: PLC0415
    from cogfabric._simulation import SimulationError, run_simulation  # noqa: PLC0415 - keep --help fast
    from cogfabric.actors import InvalidConfigError  # noqa: PLC0415
    from cogfabric.config import load_config  # noqa: PLC0415
    from cogfabric.store import (  # noqa: PLC0415
        JournalError,
        JournalFailedError,
        JournalFullError,
        JournalIntegrityError,
        JournalKeyError,
    )

    if sys.stdout is None:  # started with stdout closed (``>&-``): its report could not be written
        _fail("stdout is closed: simulate prints its report there (send it to /dev/null to drop it)")
    try:
        config = load_config(config_path) if config_path is not None else None
    except InvalidConfigError as exc:
        _fail(str(exc))
    except OSError as exc:  # unreadable: a usage error, not a problem in a journal
        _fail(f"cannot read --config {config_path}: {exc.strerror or exc}")
    _say_if_continued(path)
    with _progress("simulating", turns) as advance:
        try:
            report = run_simulation(
                path,
                agents=agents,
                turns=turns,
                seed=seed,
                durability=durability,
                config=config,
                progress=advance,
            )
        except JournalKeyError:  # a usage error: simulate has no key to give
            _fail(f"{path} was written with a chain key; simulate continues only journals without one")
        except JournalFullError as exc:  # run again as it was, it stops again at once
            where = config_path if config_path is not None else "the --config file"
            hint = f"raise journal.max_map_size in {where} (or leave it out: no limit), then run it again"
            _fail(f"the simulation stopped: {exc}; to continue, {hint}", EXIT_PROBLEM)
        except JournalFailedError as exc:  # the run could not go on (a failed write)
            _fail(f"the simulation stopped: {exc}", EXIT_PROBLEM)
        except JournalIntegrityError as exc:  # the journal is bad: refused at open, before a turn
            _fail(f"the simulation did not start: {_refusal(exc, path)}", EXIT_PROBLEM)
        except (JournalError, SimulationError, InvalidConfigError) as exc:
            _fail(str(exc))
        except (CogfabricError, TimeoutError) as exc:  # the run itself could not go on
            _fail(
                f"the simulation stopped: {exc}{_call_timeout_hint(exc, config, config_path)}", EXIT_PROBLEM
            )
    verb = "continued" if report.resumed else "ran"
    given = click.get_current_context().get_parameter_source("agents") is not ParameterSource.DEFAULT
    if report.resumed and given and agents != report.agents:
        _say(f"note: --agents {agents} is for a new journal; this one has {report.agents}")
    click.echo(
        f"{verb} {_many(report.turns, 'turn')} of {_many(report.agents, 'agent')}: "
        f"{_many(report.events, 'event', grouped=True)} in "
        f"{report.seconds:.2f} s ({report.events_per_second:,.0f} events/s)"
    )
    click.echo(
        f"  sessions {report.sessions}, prompts refused {report.refusals}, reviews {report.reviews}, "
        f"findings broadcast {report.broadcasts}, checkpoints {report.checkpoints}"
    )
    named = _printable(str(report.path), backslash=False)  # stdout may be a terminal: see _say
    events = _many(report.total_events, "event", grouped=True)
    click.echo(f"  journal {named}: {events}, {report.journal_bytes / 1e6:.1f} MB")
    where = _shown(report.path)  # a path such as -j would be read as an option of the command
    click.echo(f"audit it: cogfabric inspect {where} && cogfabric verify {where}")
    for warning in _reproduction_warnings(report, seed, where):
        _say(warning)
    if report.failures:
        _say(
            f"error: agents raised {_many(report.failures, 'time')} and were restarted, failing their turns "
            f"(AgentFailed in the journal: cogfabric export {where} --type AgentFailed --after "
            f"{report.total_events - report.events})"
        )
        sys.exit(EXIT_PROBLEM)


def _call_timeout_hint(exc: BaseException, config: Config | None, config_path: Path | None) -> str:
    """The key behind a call that waited ``runtime.call_timeout`` (its text gives the seconds only), or ""."""
    from cogfabric.actors import ActorTimeoutError, Config  # noqa: PLC0415

    if not isinstance(exc, ActorTimeoutError):
        return ""
    seconds = (config or Config()).runtime.call_timeout
    where = config_path if config_path is not None else "a --config file"
    return f" (runtime.call_timeout is {seconds:g} s; a slow disk may need more: raise it in {where})"


def _refusal(exc: Exception, path: Path) -> str:
    """Why ``Runtime.open`` refused the journal at ``path``, and the command that shows it (no library hint).

    A failed verification's message tells a program of ``allow_unverified``, which
    simulate has no option for: the command that shows the bad record is said instead.
    """
    from cogfabric.store import JournalIntegrityError  # noqa: PLC0415

    report = getattr(exc, "report", None)
    if type(exc) is not JournalIntegrityError or report is None:
        return str(exc)
    at = "" if report.first_bad_seq is None else f" at seq {report.first_bad_seq}"
    reason = _printable(report.reason, backslash=False)
    return f"the journal failed verification{at}: {reason}; see where: cogfabric verify {_shown(path)}"


def _reproduction_warnings(report: SimulationReport, seed: int, where: str) -> list[str]:
    """The warnings of a run whose agents' states may differ from another run of its seed."""
    warnings = []
    if report.journal_seed is not None and report.journal_seed != seed:
        advice = (
            "its researchers' last answers before this run named more than one seed already, so none "
            "continues it as one run"
            if report.journal_mixed
            else f"--seed {report.journal_seed} continues with the journal's"
        )
        warnings.append(
            f"warning: this journal's model last answered with --seed {report.journal_seed}, this run's "
            f"with --seed {seed}, so its agents' states now follow neither seed alone ({advice})"
        )
    if report.dead_letters:
        warnings.append(_dead_letter_warning(report, where))
    replaced = report.sessions_replaced
    if replaced:
        after = report.total_events - report.events
        warnings.append(
            f"warning: {replaced} session{'' if replaced == 1 else 's'} ended (their TTL passed, or they "
            "were evicted or deleted) and were replaced, so the agents' states may differ from another run "
            "of this seed: the turns after lost the earlier messages (SessionCreated in the journal: "
            f"cogfabric export {where} --type SessionCreated --after {after})"
        )
    return warnings


def _dead_letter_warning(report: SimulationReport, where: str) -> str:
    """The warning for a run's dead letters, by reason: only full mailboxes are the config's."""
    reasons = report.dead_letter_reasons
    by_reason = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
    hint = ""
    if reasons.get("mailbox full"):
        hint = "; mailbox full: a smaller mailbox_size than the run needs?"
    after = report.total_events - report.events
    were = "was" if report.dead_letters == 1 else "were"
    by_reason = by_reason or "reasons unknown"
    return (
        f"warning: {_many(report.dead_letters, 'message')} {were} not delivered ({by_reason}"
        f"{hint}), so the agents' states may differ from another run of this seed (IpcDeadLettered "
        f"in the journal: cogfabric export {where} --type IpcDeadLettered --after {after})"
    )


class _Progress:
    def __init__(self, label: str, total: int) -> None:
        self._label = label
        self._total = total
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Callable[[int, int], None]:
        if _stderr_is_terminal():
            from rich.console import Console  # noqa: PLC0415 - only on a terminal
            from rich.progress import Progress  # noqa: PLC0415

            # on stderr, the terminal it was asked for: stdout stays clean for a pipe
            self._bar = Progress(console=Console(stderr=True), transient=True)
            self._bar.start()
            self._task = self._bar.add_task(self._label, total=self._total)
        return self._advance

    def _advance(self, done: int, total: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=done + 1, total=total)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def _progress(label: str, total: int) -> _Progress:
    return _Progress(label, total)


def _stderr_is_terminal() -> bool:
    """Whether progress may be shown: only on a terminal, never into a file or a pipe."""
    return sys.stderr is not None and sys.stderr.isatty()  # None: started with stderr closed


def _working(step: str) -> None:
    """Say on stderr, on a terminal only, what an audit is doing before a long silent step.

    A journal of millions of records takes each command many seconds to read whole (its
    pages, then its chain): a line a step shows that it is at work, and on what, without
    a word in a file or a pipe (stdout is never touched).
    """
    if _stderr_is_terminal():
        _say(f"  {step}...")


def _say_if_continued(path: Path) -> None:
    """On a terminal, say that a continued run's open verifies and recovers, before any turn ran.

    A path that cannot be looked at (too long a name, no permission) says nothing here:
    the open names what is wrong with it.
    """
    if not _stderr_is_terminal():
        return
    try:
        continued = (path / "data.mdb").exists()
    except OSError:  # Path.exists raises for ENAMETOOLONG and EACCES
        continued = False
    if continued:
        _working(f"opening {_shown(path)}: verifying its hash chain and recovering its agents")


@contextlib.contextmanager
def _audit(path: Path, *, copy: bool, key: bytes | str | None) -> Iterator[Any]:
    from cogfabric._audit import open_for_audit  # noqa: PLC0415

    _working(f"opening {_shown(path)}{' (a private copy)' if copy else ''}: reading every page first")
    with open_for_audit(path, copy=copy, key=key) as opened:
        yield opened


def _check(opened: Any, *, skip: bool, upto: int | None = None) -> int:  # noqa: ANN401 - a journal
    """Refuse to read a journal that fails verification: a tampered record could decode.

    Returns the last seq it verified (with ``skip``, the last seq now): a command reads
    up to it, so records a running simulation appends meanwhile are neither shown
    unverified nor mixed into a view of an earlier seq.

    ``upto``: the last seq a command reads in seq order (``export --until`` without
    ``--stream``). A journal whose chain breaks at a record after it is read up to it,
    with a note: the chain checked every record from seq 1 up to the bad one. A failure
    of anything else (an index, the head: records read through them may mislead) is
    refused all the same.
    """
    if skip:
        _say("warning: the journal was not verified (--no-verify): a changed record reads as if it were not")
        return int(opened.last_seq)
    _working(f"checking the hash chain of {_many(int(opened.last_seq), 'record', grouped=True)}")
    report = opened.verify()
    bad = report.first_bad_seq
    if not report.ok and upto is not None and bad is not None and report.checked == bad - 1 and upto < bad:
        reason = _printable(report.reason, backslash=False)
        _say(
            f"note: the journal fails verification at seq {bad}: {reason}; "
            f"{_seqs(1, upto)}, before it, verified, {'is' if upto == 1 else 'are'} read"
        )
        return upto
    if not report.ok:
        # a problem of no one record (a missing chain head, a stream index naming no records) has no seq
        where = f" at seq {report.first_bad_seq}" if report.first_bad_seq is not None else ""
        message = (
            f"the journal fails verification{where}: {_printable(report.reason, backslash=False)}"
            "; refusing to read it (--no-verify reads it anyway)"
        )
        _say(f"error: {message}")
        _say_error(message, EXIT_PROBLEM, kind="JournalIntegrityError", seq=report.first_bad_seq)
        sys.exit(EXIT_PROBLEM)
    return int(report.head_seq)


def _exit_code(exc: Exception) -> int:
    """1 for a problem inside the journal (a bad record, a damaged page), 2 for anything else.

    A wrong or missing chain key is the user's input, not the journal's fault.
    """
    from cogfabric.store import JournalIntegrityError, JournalKeyError  # noqa: PLC0415

    if isinstance(exc, JournalKeyError):
        return EXIT_USAGE
    return EXIT_PROBLEM if isinstance(exc, JournalIntegrityError) else EXIT_USAGE


def _fail_journal(exc: Exception, key: bytes | str | None) -> NoReturn:
    """Report a journal error the same way in every audit command, with its exit code."""
    from cogfabric.store import JournalKeyError  # noqa: PLC0415

    message = str(exc)
    if isinstance(exc, JournalKeyError) and key is None:
        message += " (pass it with --key-file or --key)"
    _fail(message, _exit_code(exc), error=exc)


def _journal_errors() -> tuple[type[Exception], ...]:
    from cogfabric.store import JournalError  # noqa: PLC0415

    return (JournalError,)


@main.command()
@_JOURNAL
@_keyed
@_COPY
@click.option(
    "--no-snapshots",
    is_flag=True,
    help="Skip comparing each agent's snapshot with its events (two replays of each such agent).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as one JSON document.")
def verify(journal: Path, key: bytes | str | None, copy: bool, no_snapshots: bool, as_json: bool) -> None:
    """Check JOURNAL's hash chain, indexes and snapshots, and that every record decodes.

    Then each agent's snapshot is compared with the state its events make (a forger
    can recompute an unkeyed journal's snapshot hashes, not make them agree), unless
    --no-snapshots. Exits 0 when it is clean, 1 naming the first bad seq and why (or a
    damaged data file, a changed header, a snapshot that disagrees), 2 when JOURNAL is
    not a journal, or one of another format, or the chain key is wrong or missing
    (with no verdict, --json too). --json prints ok, checked,
    head_seq, first_bad_seq (for a snapshot, the seq it covers), reason and snapshots
    (how many were compared; null when they were not) with the same exit status.

    \b
    Example:
        cogfabric verify ./cogfabric-journal
    """
    _need_stdout()
    from cogfabric._audit import check_snapshots, encode_json  # noqa: PLC0415

    snapshots, bad, bad_seq = 0, None, None
    try:
        with _audit(journal, copy=copy, key=key) as opened:
            records = _many(int(opened.last_seq), "record", grouped=True)
            _working(f"checking the hash chain of {records}, each decoded")
            report = opened.verify(decode=True)
            if report.ok and not no_snapshots:
                _working("comparing each agent's snapshot with its events")
                snapshots, bad, bad_seq = check_snapshots(opened, until=report.head_seq)
            showable = not report.ok and _readable(opened, report.first_bad_seq)
    except _journal_errors() as exc:
        if as_json and _exit_code(exc) == EXIT_PROBLEM:  # the journal's fault: a verdict still
            _say(f"error: {exc}")
            refused = {"ok": False, "checked": None, "head_seq": None, "first_bad_seq": None}
            _failed_verdict(encode_json({**refused, "reason": str(exc), "snapshots": None}).decode())
        _fail_journal(exc, key)
    if as_json:
        verdict = {
            "ok": report.ok and bad is None,
            "checked": report.checked,
            "head_seq": report.head_seq,
            # a snapshot that disagrees with its events: the seq it covers, as one whose hash fails
            "first_bad_seq": bad_seq if bad is not None else report.first_bad_seq,
            "reason": bad if bad is not None else report.reason,
            "snapshots": None if no_snapshots or not report.ok else snapshots,
        }
        line = encode_json(verdict).decode()
        if verdict["ok"]:
            click.echo(line)
            sys.exit(EXIT_OK)
        _failed_verdict(line)
    if report.ok and bad is None:
        agree = "snapshot agrees with its" if snapshots == 1 else "snapshots agree with their"
        checked = "" if no_snapshots else f"; {snapshots} {agree} events"
        click.echo(f"ok: {_many(report.checked, 'record')} verified, head at seq {report.head_seq}{checked}")
        sys.exit(EXIT_OK)
    if bad is not None:
        _failed_verdict(
            f"FAILED: {_printable(bad, backslash=False)} ({_many(report.checked, 'record')} verified)"
        )
    _failed_verdict(_failed_line(journal, report, showable=showable, keyed=key is not None, copy=copy))


@main.command()
@_JOURNAL
@click.argument("dest", type=click.Path(path_type=Path))
@_keyed
@click.option("--copy", is_flag=True, help="Back up from a private copy (for a directory you cannot write).")
@click.option(
    "--no-compact",
    is_flag=True,
    help="Copy every page, free ones too (as large as the data file).",
)
@click.option("--no-verify", is_flag=True, help="Do not verify the backup's hash chain afterwards.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as one JSON document.")
def backup(
    journal: Path,
    dest: Path,
    key: bytes | str | None,
    copy: bool,
    no_compact: bool,
    no_verify: bool,
    as_json: bool,
) -> None:
    """Copy JOURNAL to DEST, a new journal directory, consistently, even while it is written.

    LMDB copies one read transaction: DEST holds every record up to the seq printed,
    whatever a simulation commits meanwhile (a copy of the files, cp or tar or rsync,
    is torn then). DEST must not exist (or be an empty directory), outside JOURNAL; it is written
    beside itself and renamed into place, so nothing is left under DEST on a failure.
    Then DEST's hash chain is verified (every record, decoded), unless --no-verify. A
    keyed journal's backup keeps its key: give it (--key-file) to open and verify.
    Exits 0 when DEST is a verified backup, 1 when the journal (so its backup) fails
    verification (DEST is kept, as it is), 2 for a usage error or a DEST that exists
    or cannot be written (or, written and kept, cannot be opened to verify). --json
    prints ok, head_seq, bytes, verified, checked, first_bad_seq and reason.

    \b
    Example:
        cogfabric backup ./cogfabric-journal /backups/cogfabric-$(date +%F)
    """
    _need_stdout()
    from cogfabric._audit import encode_json  # noqa: PLC0415

    try:
        with _audit(journal, copy=copy, key=key) as opened:
            _working(f"copying {_many(int(opened.last_seq), 'record', grouped=True)} to {_shown(dest)}")
            seq = opened.backup(dest, compact=not no_compact)
    except FileExistsError as exc:
        _fail(str(exc), error=exc)
    except _journal_errors() as exc:
        if as_json and _exit_code(exc) == EXIT_PROBLEM:  # a damaged journal: a verdict, as verify's
            _refused_backup(str(exc), head_seq=None, size=None)
        _fail_journal(exc, key)
    size = (dest / "data.mdb").stat().st_size
    report = None
    if not no_verify:
        try:
            with _audit(dest, copy=False, key=key) as copied:
                _working(f"checking the hash chain of the copy's {_many(seq, 'record', grouped=True)}")
                report = copied.verify(decode=True)
        except _journal_errors() as exc:  # the backup is whole: say it is there, unverified
            msg = f"backed up {_many(seq, 'record')} to {dest}, which is kept, but could not verify it: {exc}"
            if as_json and _exit_code(exc) == EXIT_PROBLEM:
                _refused_backup(msg, head_seq=seq, size=size)
            _fail(msg, _exit_code(exc), error=exc)
    ok = report is None or report.ok
    if as_json:
        verdict = {
            "ok": ok,
            "head_seq": seq,
            "bytes": size,
            "verified": report is not None,
            "checked": None if report is None else report.checked,
            "first_bad_seq": None if report is None else report.first_bad_seq,
            "reason": "" if report is None else report.reason,
        }
        line = encode_json(verdict).decode()
        if ok:
            click.echo(line)
            sys.exit(EXIT_OK)
        _failed_verdict(line)
    if report is None:
        click.echo(
            f"ok: backed up {_many(seq, 'record')} to {_shown(dest)}, {size:,} bytes "
            "(not verified: --no-verify)"
        )
        sys.exit(EXIT_OK)
    if report.ok:
        click.echo(
            f"ok: backed up {_many(seq, 'record')} to {_shown(dest)}, {size:,} bytes; "
            f"{_many(report.checked, 'record')} verified, head at seq {report.head_seq}"
        )
        sys.exit(EXIT_OK)
    line = _failed_line(dest, report, showable=False, keyed=key is not None, copy=False)
    _failed_verdict(f"{line}; the backup {_shown(dest)} holds the journal as it is")


def _refused_backup(reason: str, *, head_seq: int | None, size: int | None) -> NoReturn:
    """``backup --json``'s verdict for a journal (or backup) too damaged to open, as ``verify --json``'s.

    The error goes to stderr too; ``verified`` is false (no verification ran to a
    verdict), and what is not known is null. A usage error (exit 2) prints no verdict.
    """
    from cogfabric._audit import encode_json  # noqa: PLC0415

    _say(f"error: {reason}")
    verdict = {
        "ok": False,
        "head_seq": head_seq,
        "bytes": size,
        "verified": False,
        "checked": None,
        "first_bad_seq": None,
        "reason": reason,
    }
    _failed_verdict(encode_json(verdict).decode())


@main.command()
@_JOURNAL
@click.argument("dest", type=click.Path(path_type=Path))
@_keyed
@click.option(
    "--until",
    type=click.IntRange(1),
    multiple=True,
    callback=_once,
    help="The last seq to copy (default: the one before the first bad record).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as one JSON document.")
def salvage(journal: Path, dest: Path, key: bytes | str | None, until: int | None, as_json: bool) -> None:
    """Copy JOURNAL's records before its first bad one into DEST, a new journal, chained as they were.

    For a journal that fails verification (README, "When a journal fails
    verification"). JOURNAL is read, never written. Without --until, its hash chain is
    checked (as verify does) and every record before the first bad one is copied; all
    of a journal that verifies clean; for a damaged page of its records, every record
    before the first seq the page may hold (read without the page walk, which stops at
    that page). --until N copies seqs 1 to N, before the first bad record. The records
    are appended to DEST a batch at a time, each batch's chain link checked against the
    one stored: a record that differs (one stored at an older version of its event is
    copied upcast, so its bytes and chain link differ) stops the salvage. A record a
    newer cogfabric wrote (a newer version of its event, or a type this one does not
    know) is no damage: it stops the salvage too, naming it, with nothing written:
    salvage JOURNAL with the cogfabric that wrote it (one of event types of your own,
    in Python: README), or --until the seq before it copies the records before it alone.
    DEST is
    written beside itself, verified and renamed into place, so nothing is left under
    DEST on a failure; it must not exist (or be an empty directory), outside JOURNAL. Snapshots are not
    copied: opening DEST replays its events. A keyed journal's salvage keeps its key:
    give it (--key-file). Exits 0 when DEST is a verified salvage, 1 when the copy
    could not be made to match (or nothing precedes the first bad record, or it is a
    record a newer cogfabric wrote), 2 for a
    usage error: a DEST that exists, --until at or past the first bad record, a
    journal whose good records' end cannot be told without --until, a wrong key.
    --json prints ok, until, head_seq, chain, first_bad_seq, left_out and reason.

    \b
    Example:
        cogfabric salvage ./cogfabric-journal ./cogfabric-journal.salvaged
    """
    _need_stdout()
    from cogfabric._audit import (  # noqa: PLC0415
        AuditAccessError,
        SalvageMismatchError,
        newer_record,
        written_by_newer,
    )
    from cogfabric._audit import salvage as copy_records  # noqa: PLC0415
    from cogfabric.store import JournalDamagedError, JournalRecordError  # noqa: PLC0415
    from cogfabric.store._lmdb import refuse_target  # noqa: PLC0415 - backup's rule for DEST

    try:
        refuse_target(dest, "salvage into", journal)
    except FileExistsError as exc:
        _fail(str(exc), error=exc)
    except _journal_errors() as exc:  # DEST cannot be looked at, or is a mount point
        _fail(str(exc), error=exc)
    plan = _SalvagePlan(journal, dest, until, as_json=as_json)
    opened_at_all = False
    try:
        try:
            with _audit(journal, copy=False, key=key) as opened:
                opened_at_all = True
                _working(f"checking the hash chain of {_many(int(opened.last_seq), 'record', grouped=True)}")
                report = opened.verify(decode=True)
                plan.verified(report, newer_record(opened, report))
                end = plan.end()
                copied = "seq 1" if end == 1 else f"seqs 1 to {end:,}"  # grouped, as the step lines count
                _working(f"copying {copied} to {_shown(dest)}")
                chain, checked = copy_records(opened, dest, end, key=key)
        except JournalDamagedError as exc:
            if opened_at_all:  # damage met reading, not by the page walk at the open
                raise
            plan.damaged(exc)  # the pages before the damaged one: read without the walk, which stops there
            chain, checked = plan.before_page(key)
    except SalvageMismatchError as exc:
        plan.refused(exc.seq, plan.mismatch(exc, dest))
    except FileExistsError as exc:
        _fail(str(exc), error=exc)
    except AuditAccessError as exc:  # no --copy here: salvage a copy of the directory instead
        _fail(
            f"{str(exc).partition('; rerun with --copy')[0]}; salvage a copy of its directory (cp -a)",
            error=exc,
        )
    except _journal_errors() as exc:
        if _exit_code(exc) != EXIT_PROBLEM:
            _fail_journal(exc, key)
        if written_by_newer(exc):  # met before a damaged page: a newer cogfabric's record, no damage
            plan.newer = exc
            plan.refused(plan.newer.seq, plan.not_damage())
        plan.refused(exc.seq if isinstance(exc, JournalRecordError) else None, str(exc))
    plan.done(dest, chain, checked)


class _SalvagePlan:
    """Where ``salvage`` stops, from JOURNAL's verdict (or its damaged page) and ``--until``; its output."""

    def __init__(self, journal: Path, dest: Path, until: int | None, *, as_json: bool) -> None:
        self.journal = journal
        self.dest = dest
        self.until = until
        self.as_json = as_json
        self.last = 0  # the last seq copied, once ``end`` has found it
        self.head_seq: int | None = None  # JOURNAL's last seq: None until read, and for a damaged page
        self.first_bad_seq: int | None = None
        self.clean = False
        self.reason = ""  # why JOURNAL fails ("" clean)
        self.checked: int | None = None  # the records verify checked, before the first bad one
        self.page = False  # a damaged page was found at the open
        self.held: int | None = None  # for a damaged page: the last seq the open found (not in the JSON)
        self.newer: Any = None  # the error of the record newer code wrote, where it stops, or None

    def verified(self, report: Any, newer: Any = None) -> None:  # noqa: ANN401 - a VerifyReport, a record's error
        """JOURNAL's verdict; ``newer``: the error of the record it fails at, where newer code wrote it."""
        self.head_seq, self.clean, self.checked = report.head_seq, report.ok, report.checked
        self.first_bad_seq, self.reason = report.first_bad_seq, report.reason
        self.newer = newer

    def newer_one(self) -> str:
        """The record newer code wrote (``newer``), named with its type and versions, and what writes it."""
        return str(self.newer)  # an unknown type's error says what writes it, as a newer version's does

    def own_types(self) -> str:
        """For a record of an unknown type (``newer``): code with event types of its own may have written it.

        This command reads this package's types only: such a journal is salvaged in Python (README).
        """
        from cogfabric.store import JournalRecordTypeError  # noqa: PLC0415

        if not isinstance(self.newer, JournalRecordTypeError):
            return ""
        return " (a journal of event types of your own: in Python, with their codec)"

    def not_damage(self) -> str:
        """Why a record newer code wrote (``newer``) is not left out as damage: salvage it with that code."""
        seq, own = self.newer.seq, self.own_types()
        retry = f", or give --until {seq - 1} to salvage the records before it alone" if seq > 1 else ""
        salvage = (  # before a damaged page, it is damaged (the warning above), but not there
            f"salvage {self.journal} with the cogfabric that wrote that record{own}"
            if self.page
            else f"{self.journal} need not be damaged: salvage it with the cogfabric that wrote it{own}"
        )
        return (
            f"cannot salvage {self.journal} into {self.dest}: {self.newer_one()}; {salvage}{retry}; "
            f"nothing was written to {self.dest}"
        )

    def before_page(self, key: bytes | str | None) -> tuple[bytes, int]:
        """Salvage the records before JOURNAL's damaged page, read without the page walk (``salvage``).

        No chain is verified first: a record met that newer code wrote (a newer version,
        an unknown type) is refused as such by the caller only when its chain link and
        every record's before it match; the first whose link fails is damage, refused
        here naming it (exit 1).
        """
        from cogfabric._audit import salvage as copy_records  # noqa: PLC0415
        from cogfabric._audit import written_by_newer  # noqa: PLC0415
        from cogfabric.store import JournalRecordError, LmdbJournal  # noqa: PLC0415

        with LmdbJournal.open(self.journal, readonly=True, key=key, check_pages=False) as opened:
            self.held = opened.last_seq
            try:
                return copy_records(opened, self.dest, self.end(), key=key)
            except JournalRecordError as exc:
                if written_by_newer(exc):  # the records before it were read, not checked against the chain
                    intact = opened.record_intact
                    broken = next((seq for seq in range(1, exc.seq + 1) if not intact(seq)), None)
                    if broken is not None:
                        self.refused(broken, self.broken(broken))
                raise

    def broken(self, seq: int) -> str:
        """Why record ``seq``, met reading the records before a damaged page, is damage: its chain link fails.

        (Whatever its type tag or version reads as: a record newer code wrote matches its link.)
        """
        retry = f"; give --until {seq - 1} to salvage the records before it" if seq > 1 else ""
        return (
            f"cannot salvage {self.journal} into {self.dest}: seq {seq} does not match its hash chain link, "
            f"so {self.journal} is damaged there too{retry}; nothing was written to {self.dest}"
        )

    def damaged(self, exc: Exception) -> None:
        self.page, self.reason = True, str(exc)
        self.first_bad_seq = getattr(exc, "first_seq", None)
        _say(f"warning: {exc}")

    def end(self) -> int:
        """The last seq to copy (kept as ``last``)."""
        self.last = self._end()
        return self.last

    def _end(self) -> int:
        """The last seq to copy; a usage error (exit 2) when it is not to be copied, or not known."""
        named = _shown(self.journal)
        bad, until = self.first_bad_seq, self.until
        if self.clean:
            head = int(self.head_seq or 0)
            if not head:
                _fail(f"{named} holds no records: there is nothing to salvage")
            if until is not None and until > head:
                _fail(f"--until {until} is past {named}'s last record, seq {head}")
            return head if until is None else until
        if self.newer is not None and bad is not None and (until is None or until >= bad):
            if until is None:  # no damage to salvage from: leaving it out would drop a healthy record
                self.refused(bad, self.not_damage())
            _fail(
                f"--until {until} reaches seq {bad} of {named}, which this cogfabric cannot read: "
                f"{self.newer_one()}; salvage {named} with the cogfabric that wrote it{self.own_types()}"
                + (f", or give --until {bad - 1} or less" if bad > 1 else "")
            )
        if bad == 1:
            self.refused(1, f"{self.journal} fails at seq 1: no record precedes it to salvage")
        if bad is None:
            if until is None:
                known = f" (its records check out up to seq {self.checked})" if self.checked else ""
                reason = _printable(self.reason, backslash=False)
                _fail(
                    f"cannot tell where {named}'s good records end: {reason}{known}; "
                    "give the last seq to copy with --until"
                )
            last = self.head_seq if self.head_seq is not None else self.held
            if last is not None and until > last:
                _fail(f"--until {until} is past {named}'s last record, seq {last}")
            return until
        if until is not None and until >= bad:
            where = "the damaged page's first record" if self.page else "the first bad record"
            _fail(
                f"--until {until} reaches seq {bad}, {where} of {named}: a salvage copies only "
                f"the records before it; give --until {bad - 1} or less, or leave it out"
            )
        return bad - 1 if until is None else until

    def mismatch(self, exc: Any, dest: Path) -> str:  # noqa: ANN401 - a SalvageMismatchError
        if exc.seq is None:
            return f"cannot salvage {self.journal} into {dest}: {exc.why}; nothing was written to {dest}"
        before = exc.seq - 1
        retry = f" (seqs 1 to {before} match: --until {before} salvages them)" if before else ""
        if before == 1:
            retry = " (seq 1 matches: --until 1 salvages it)"
        return (
            f"cannot salvage {self.journal} into {dest}: seq {exc.seq}'s copy does not match it: {exc.why}; "
            f"nothing was written to {dest}{retry}"
        )

    def refused(self, seq: int | None, reason: str) -> NoReturn:
        """Exit 1, nothing salvaged (``seq``: the first record that could not be); a verdict with --json."""
        from cogfabric._audit import encode_json  # noqa: PLC0415

        _say(f"error: {reason}")
        if not self.as_json:
            sys.exit(EXIT_PROBLEM)
        verdict = {
            "ok": False,
            "until": None,
            "head_seq": self.head_seq,
            "chain": None,
            "first_bad_seq": seq if seq is not None else self.first_bad_seq,
            "left_out": self.head_seq,
            "reason": reason,
        }
        _failed_verdict(encode_json(verdict).decode())

    def done(self, dest: Path, chain: bytes, checked: int) -> NoReturn:
        """Print the salvage into ``dest`` (``chain``: seq ``last``'s link; ``checked``: verified); exit 0."""
        from cogfabric._audit import encode_json  # noqa: PLC0415

        until, head = self.last, self.head_seq
        if self.as_json:
            verdict = {
                "ok": True,
                "until": until,
                "head_seq": head,
                "chain": chain.hex(),
                "first_bad_seq": self.first_bad_seq,
                "left_out": None if head is None else head - until,
                "reason": self.reason,
            }
            click.echo(encode_json(verdict).decode())
            sys.exit(EXIT_OK)
        named = _shown(self.journal)
        if self.clean:
            left = (
                f"{named} verifies clean: every record was copied"
                if until == head
                else f"left out {_seqs(until + 1, head or until + 1)} (--until)"
            )
        elif self.page and self.first_bad_seq is None:  # not a page of the records
            held = self.held or until
            rest = (
                "every record it holds was copied"
                if until >= held
                else f"left out {_seqs(until + 1, held)} (--until)"
            )
            left = f"{rest}; {named} is damaged (the warning above)"
        elif self.page:
            left = f"left out seq {until + 1} on: {named} is damaged there (the warning above)"
        else:
            at = f" at seq {self.first_bad_seq}" if self.first_bad_seq is not None else ""
            failed = f"{named} fails verification{at}: {_printable(self.reason, backslash=False)}"
            if head is not None and until >= head:  # its chain head names records it lacks
                left = f"every record it holds was copied, but {failed}"
            else:
                left = f"left out {_seqs(until + 1, head or until + 1)}: {failed}"
        click.echo(
            f"ok: salvaged {_seqs(1, until)} of {named} into {_shown(dest)}, chain {until}:{chain.hex()}; "
            f"{_many(checked, 'record')} verified; {left}"
        )
        sys.exit(EXIT_OK)


def _many(count: int, noun: str, *, grouped: bool = False) -> str:
    """``count`` and ``noun``, plural unless ``count`` is 1: ``1 record``, ``5468 records``.

    ``grouped``: the count with thousands separators (``5,468 records``).
    """
    number = f"{count:,}" if grouped else str(count)
    return f"{number} {noun}" if count == 1 else f"{number} {noun}s"


def _seqs(first: int, last: int) -> str:
    """``seq 5``, or ``seqs 5 to 9``."""
    return f"seq {first}" if first == last else f"seqs {first} to {last}"


def _readable(opened: Any, seq: int | None) -> bool:  # noqa: ANN401 - a journal
    """Whether ``export --no-verify`` could show record ``seq``: it reads and decodes as that seq."""
    from cogfabric.store import JournalError  # noqa: PLC0415

    if seq is None or not 0 < seq <= opened.last_seq:
        return False
    try:
        return [r.seq for r in opened.read(after=seq - 1, until=seq)] == [seq]
    except JournalError:
        return False


def _failed_line(
    journal: Path,
    report: Any,  # noqa: ANN401 - a VerifyReport
    *,
    showable: bool,
    keyed: bool,
    copy: bool,
) -> str:
    """The verdict on a journal that fails: where, why, how many records were checked.

    A bad record that export can read (``showable``: it fails its link, say, yet
    decodes) comes with the command that shows it: verify reads nothing past what it
    checks.
    """
    raw = report.reason or ""
    reason = _printable(raw, backslash=False)
    bad = report.first_bad_seq
    if bad is None:
        return f"FAILED: {reason} ({_many(report.checked, 'record')} checked)"
    if report.checked >= bad:  # an index found wrong after the records were checked
        return f"FAILED at seq {bad}: {reason} ({_many(report.checked, 'record')} checked)"
    shown = ""
    if showable:
        target = _shown(journal)
        options = " --copy" if copy else ""
        shown = f"; see it: cogfabric export {target}{options} --no-verify --after {bad - 1} --until {bad}"
        if keyed:
            shown += " (with the same --key-file or --key)"
    return f"FAILED at seq {bad}: {reason} ({_many(report.checked, 'record')} checked before it){shown}"


def _shown(journal: Path) -> str:
    """``journal`` as a shell word of a command a message suggests (never taken for an option).

    A path holding what a terminal acts on (an ESC, a carriage return: whoever named the
    journal's directory chose them) is written as a ``$'...'`` word, its characters as
    escapes bash and zsh read back, so the line prints as it is and the command still runs.
    """
    named = str(journal)
    return _shell_word(named if not named.startswith("-") else f"./{named}")


def _shell_word(text: str) -> str:
    """``text`` as one shell word: quoted, or a ``$'...'`` word when it holds what a terminal acts on.

    Quoted alone, such a character would reach the line raw, or escaped by ``_say`` as
    Python writes it, which inside quotes the shell reads as that text, not the character.
    """
    if text.isprintable():
        return shlex.quote(text)
    return "$'" + "".join(map(_ansi_c_escaped, text)) + "'"


def _ansi_c_escaped(char: str) -> str:
    """``char`` inside a ``$'...'`` shell word: a character the terminal acts on as its escape.

    The bytes that name it in the file system (``os.fsencode``: UTF-8, or for a lone
    surrogate the byte of a name that is not UTF-8 it stands for), each as ``\\xHH``: the
    shell reads them back as they are in any locale (``\\u0085`` is U+0085's UTF-8 only in
    a UTF-8 one; in the C locale bash leaves it as the six characters).
    """
    if char in "\\'":
        return "\\" + char
    if char.isprintable():
        return char
    try:
        raw = os.fsencode(char)
    except UnicodeEncodeError:  # a surrogate that stands for no byte: no file's name holds it
        return f"\\u{ord(char):04x}"
    return "".join(f"\\x{byte:02x}" for byte in raw)


def _export_hint(journal: Path, stream: str, seq: int, *, copy: bool, no_verify: bool, keyed: bool) -> str:
    """The ``cogfabric export`` command that shows ``stream``'s records up to ``seq``."""
    options = (" --copy" if copy else "") + (" --no-verify" if no_verify else "")
    shown = f"cogfabric export {_shown(journal)}{options} --stream {_shell_word(stream)} --until {seq}"
    return shown + (" (with the same --key-file or --key)" if keyed else "")


def _failed_verdict(line: str) -> NoReturn:
    """Print a failed verification and exit 1, whether or not stdout takes the line.

    A reader gone (``verify J | head -c0``) or a full disk must not turn a journal
    that failed into a clean exit: the line goes to stderr then, and the exit is still 1.
    """
    try:
        click.echo(line)
        sys.stdout.flush()
    except OSError as exc:
        with contextlib.suppress(OSError, ValueError):  # the interpreter's last flush cannot raise again
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        with contextlib.suppress(OSError):
            click.echo(f"{line} (stdout could not take this line: {exc.strerror or exc})", err=True)
    sys.exit(EXIT_PROBLEM)


@main.command()
@_JOURNAL
@click.option("--agent", multiple=True, callback=_once_text, help="Rebuild this agent.")
@click.option("--session", multiple=True, callback=_once_text, help="Rebuild this session.")
@click.option(
    "--at",
    "at",
    multiple=True,
    callback=_once,
    type=click.IntRange(0),
    help="As of this seq (default: the end).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@_keyed
@_COPY
@_NO_VERIFY
def replay(
    journal: Path,
    agent: str | None,
    session: str | None,
    at: int | None,
    as_json: bool,
    key: bytes | str | None,
    copy: bool,
    no_verify: bool,
) -> None:
    """Rebuild an agent or a session at any seq, from the journal alone (no model is called).

    An agent shows its task and private layers, its IPC traffic, cognitive state,
    checkpoints, the failures of its behavior (each restarted it) and lifecycle; a
    session its messages. With neither option: every agent and session
    that exists at that seq, a line each.

    \b
    Examples:
        cogfabric replay ./cogfabric-journal --agent researcher-001
        cogfabric replay ./cogfabric-journal --agent researcher-001 --at 500 --json
        cogfabric replay ./cogfabric-journal --session SESSION_ID
        cogfabric replay ./cogfabric-journal --at 500
    """
    _need_stdout()
    from cogfabric._audit import agent_view, encode_json, journal_view, session_view  # noqa: PLC0415

    if agent is not None and session is not None:
        _fail("give one of --agent or --session, not both")
    unspawned = 0
    try:
        with _audit(journal, copy=copy, key=key) as opened:
            if at is not None and at > opened.last_seq:
                _fail(f"--at {at} is past the journal's last seq {opened.last_seq}")
            verified = _check(opened, skip=no_verify)
            seq = verified if at is None else at
            if agent is None and session is None:
                overview = journal_view(opened, seq)
            else:
                view = (
                    agent_view(opened, agent, seq)
                    if agent is not None
                    else session_view(opened, session or "", seq)
                )
                ended = None if view is not None else _ending(opened, agent, session, seq)
                begins = None if view is not None else _begins(opened, agent, session, seq, verified)
                if view is None and agent is not None and ended is None and begins is None:
                    unspawned = sum(1 for _ in opened.read(until=seq, stream=f"agent/{agent}"))
    except _journal_errors() as exc:
        _fail_journal(exc, key)
    if agent is None and session is None:
        if as_json:
            click.echo(encode_json(overview, indent=2))
        else:
            _print_overview(overview)
        return
    if view is None:
        what = f"agent {agent!r}" if agent is not None else f"session {session!r}"
        if unspawned:  # records on its stream (Journal.append, runtime.llm), never a spawn
            shown = _export_hint(
                journal, f"agent/{agent}", seq, copy=copy, no_verify=no_verify, keyed=key is not None
            )
            _fail(
                f"{what} was never spawned: its stream holds {unspawned} record{'s' * (unspawned != 1)} "
                f"up to seq {seq}, "
                f"none of them an AgentSpawned (replay rebuilds the agents a runtime spawned; {shown} "
                "shows the records)"
            )
        _absent(what, ended, begins, seq, at)
    if as_json:
        click.echo(encode_json(view, indent=2))  # as export encodes: strict JSON
        return
    _print_view(view)


def _named(output: Path | None) -> str:
    """``output`` as a message names it: a file called - as ./- (a - alone is stdout)."""
    return "./-" if str(output) == "-" else str(output)


def _sink(target: Path | None, output: Path | None) -> Any:  # noqa: ANN401 - a binary file
    """Where ``export`` writes: ``target`` opened, or stdout's bytes.

    A file it creates is owner-only (0600), as the journal's files are: an export may
    hold every private value. A file that exists keeps its mode: this writes in place
    only what ``_replaceable`` refuses (a plain file it may replace is written beside its
    name and renamed over it, ``_partial_file``, so that one ends owner-only too).
    """
    if target is None:
        if sys.stdout is None:  # started with stdout closed (``>&-``)
            _fail("stdout is closed: name a file with --output")
        return sys.stdout.buffer
    # A symbolic link is written through only when you (or root) made it: one planted
    # where the export goes, in a directory others can write, would have it truncate or
    # create whatever file its maker chose that you can write (as Linux's
    # fs.protected_symlinks refuses in sticky directories only). A name that is no link is
    # never opened through one: O_NOFOLLOW refuses a link put there after the check.
    linked = target.is_symlink()
    if linked:
        with contextlib.suppress(OSError):  # gone meanwhile: the open says what is there
            owner = target.lstat().st_uid
            if owner not in (os.geteuid(), 0):
                _fail(
                    f"cannot write --output {_named(output)}: it is a symbolic link another user (uid "
                    f"{owner}) made, which an export does not write through; name the file it points to"
                )
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | (0 if linked else os.O_NOFOLLOW)
    try:
        return os.fdopen(os.open(target, flags, 0o600), "wb")
    except OSError as exc:  # a missing directory, no permission: a usage error
        _fail(f"cannot write --output {_named(output)}: {exc.strerror or exc}")


def _ending(opened: Any, agent: str | None, session: str | None, seq: int) -> tuple[str, int] | None:  # noqa: ANN401
    """How and when the agent or session ended by ``seq`` (killed; deleted, expired, evicted), if it did."""
    from cogfabric.events import (  # noqa: PLC0415
        AgentKilled,
        AgentSpawned,
        SessionDeleted,
        SessionEvicted,
        SessionExpired,
    )

    stream = f"agent/{agent}" if agent is not None else f"session/{session}"
    last = None
    for record in opened.read(until=seq, stream=stream):
        # an agent's life is its spawns and kill: a model's output recorded on its stream
        # after its kill (runtime.llm(agent_id=...)) ends nothing
        if agent is None or isinstance(record.event, AgentSpawned | AgentKilled):
            last = record
    if last is None:
        return None
    ends = (
        (AgentKilled, "killed"),
        (SessionDeleted, "deleted"),
        (SessionExpired, "expired"),
        (SessionEvicted, "evicted"),
    )
    return next(((how, last.seq) for kind, how in ends if isinstance(last.event, kind)), None)


def _absent(
    what: str, ended: tuple[str, int] | None, begins: tuple[str, int] | None, seq: int, at: int | None
) -> NoReturn:
    """Refuse a replay of what does not exist at ``seq``: say when it ended, or begins, if it does."""
    later = ""
    if begins is not None:
        how, when = begins
        later = f"it is {how}{' again' if ended else ''} at seq {when}: --at {when} shows it"
    if ended is not None:
        how, when = ended
        before = f"{what} was {how} at seq {when}; --at {when - 1} shows it before"
        _fail(before + (f"; {later}" if later else ""))
    if later:
        _fail(f"{what} does not exist at seq {seq}; {later}")
    _fail(f"{what} does not exist " + (f"at seq {at}" if at is not None else "in the journal"))


def _begins(
    opened: Any,  # noqa: ANN401 - a journal
    agent: str | None,
    session: str | None,
    seq: int,
    verified: int,
) -> tuple[str, int] | None:
    """How and when what does not exist at ``seq`` begins after it (up to ``verified``), if it does."""
    from cogfabric.events import AgentSpawned, SessionCreated  # noqa: PLC0415

    stream = f"agent/{agent}" if agent is not None else f"session/{session}"
    kind, how = (AgentSpawned, "spawned") if agent is not None else (SessionCreated, "created")
    later = opened.read(after=seq, until=verified, stream=stream)
    return next(((how, r.seq) for r in later if isinstance(r.event, kind)), None)


_CELL_MAX = 2_000


def _printable(text: str, *, backslash: bool = True) -> str:
    """``text`` safe to print: what a terminal would act on or hide is escaped.

    A journal's text comes from its agents: an ESC sequence, a newline, a bidi override
    (U+202E) or a backspace in an agent id could move the cursor, erase or forge a line
    of an audit's output. Every character ``str.isprintable`` refuses (controls, format
    characters, line and paragraph separators) is written as its Python escape, and so is
    a backslash (unless ``backslash`` is False: JSON text, whose backslashes are escapes).
    """
    if text.isprintable() and (not backslash or "\\" not in text):
        return text
    return "".join(
        c if c.isprintable() and (c != "\\" or not backslash) else c.encode("unicode_escape").decode()
        for c in text
    )


def _print_overview(overview: dict[str, Any]) -> None:
    """``journal_view``'s agents and sessions as two tables, every value as ``--json`` shows it.

    Ids are quoted too, as the other columns' values are: an id reads the same in each
    column, and ``null`` (no parent) differs from an agent named "null".
    """
    from rich.table import Table  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415 - a journal's text is shown as it is, never as markup

    from cogfabric._audit import encode_json  # noqa: PLC0415

    shown: list[Any] = []
    for kind in ("agents", "sessions"):
        rows = overview[kind]
        noun = kind if len(rows) != 1 else kind[:-1]
        title = f"{len(rows):,} {noun} at seq {overview['at']}"
        if kind == "agents" and rows:  # how many in each lifecycle, above a table of thousands of rows
            by_state = Counter(str(row["lifecycle"]) for row in rows)
            title += " (" + ", ".join(f"{_printable(k)} {v:,}" for k, v in by_state.most_common()) + ")"
        shown.append(Text(title, style="bold"))
        if not rows:
            continue
        table = Table()
        for column in rows[0]:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*(Text(_cell(encode_json(value).decode())) for value in row.values()))
        shown.append(table)
    console = _console()
    for item in shown:
        console.print(item)


def _cell(json_text: str) -> str:
    """A value's JSON text made safe to print, and cut past ``_CELL_MAX``: rich folds a long cell slowly."""
    if len(json_text) <= _CELL_MAX:
        return _printable(json_text, backslash=False)
    # only the part shown is escaped: once one character needs it, escaping the whole
    # value builds a string per character of it, to print 2,000 of them
    head = _printable(json_text[:_CELL_MAX], backslash=False)[:_CELL_MAX]
    return f"{head}... ({len(json_text):,} characters; --json shows it whole)"


_WIDTH_MIN: Final = 40
"""The fewest columns the audit tables take: a narrower table cuts its field names short (rich's
ellipsis), and at 0 columns rich prints nothing at all."""


def _console_width() -> int:
    """``COLUMNS`` when it is a number, else the terminal's width, and 120 when the output is no terminal.

    At least ``_WIDTH_MIN``. A ``COLUMNS`` that is no number is not set, as for the shell's
    other readers: the table of a command whose output is a file stays 120 columns wide.
    """
    columns = os.environ.get("COLUMNS", "")
    width = 120
    if columns.isascii() and columns.isdigit():  # not "²": a digit to isdigit, none to int
        width = int(columns)
    elif sys.stdout.isatty():
        with contextlib.suppress(OSError, ValueError):  # a size a pseudo-terminal cannot tell
            width = os.get_terminal_size(sys.stdout.fileno()).columns or 120  # 0: one that does not
    return max(width, _WIDTH_MIN)


def _console() -> Any:  # noqa: ANN401 - a rich Console
    """A rich console whose broken pipe ends the command quietly (exit 0).

    As wide as ``_console_width`` says. Its height is given too: rich reads ``COLUMNS``
    again for a console whose size is not whole, and ``int("²")`` fails.
    """
    from rich.console import Console  # noqa: PLC0415

    class _Console(Console):
        def on_broken_pipe(self) -> None:  # rich's own exits 1: here that means a bad journal
            self.quiet = True
            _stdout_closed()

    return _Console(width=_console_width(), height=25)  # the height: no pager or live display here


def _print_view(view: dict[str, Any]) -> None:
    from rich.table import Table  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415 - a journal's text is shown as it is, never as markup

    from cogfabric._audit import encode_json  # noqa: PLC0415 - values as --json shows them

    title = f"agent {view['agent']}" if "agent" in view else f"session {view['session']}"
    table = Table(title=Text(f"{_printable(title)} at seq {view['at']}"), show_lines=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for name, value in view.items():
        if name in ("agent", "session", "at"):
            continue
        if name == "ipc":
            table.add_row(Text(name), Text(_ipc_cell(value)))
            continue
        if name == "messages":
            table.add_row(Text(name), Text(_messages_cell(value)))
            continue
        if name == "checkpoints":
            table.add_row(Text(name), Text(_checkpoints_cell(value)))
            continue
        if name == "failures":
            table.add_row(Text(name), Text(_failures_cell(value)))
            continue
        if name in _TIMES and isinstance(value, float):  # the clock's seconds, and their UTC date
            table.add_row(Text(name), Text(f"{encode_json(value).decode()} ({_when(value)})"))
            continue
        # as --json shows it: a str quoted, so that "null" is not null (no parent)
        table.add_row(Text(name), Text(_cell(encode_json(value).decode())))
    _console().print(table)


def _checkpoints_cell(checkpoints: dict[str, Any]) -> str:
    """How many checkpoints an agent's id took, and the latest: its seq, UTC time and state."""
    from cogfabric._audit import encode_json  # noqa: PLC0415

    taken = checkpoints["taken"]
    latest = checkpoints["latest"]
    if latest is None:
        return "none taken"
    head = f"{taken} taken, the latest at seq {latest['seq']} ({_when(latest['at'])}):"
    return head + "\n" + _cell(encode_json(latest["state"]).decode())


def _failures_cell(failures: dict[str, Any]) -> str:
    """How many times an agent's behavior raised, and the latest, a line each.

    Seq, UTC time, the error (its type, then its message, as one JSON string, as ``trace``
    shows it) and the message it was handling: its seq, kind, sender and topic where it
    is among the agent's IPC, else its id.
    """
    latest = failures["latest"]
    count = failures["count"]
    if not count:
        return "none"
    head = f"{count} failure{'' if count == 1 else 's'}" + (
        f", the latest {len(latest)}:" if len(latest) < count else ":"
    )
    lines = [head]
    for f in latest:
        error = ": ".join(t for t in (f["error"], f["detail"]) if t)
        line = f"seq {f['seq']} ({_when(f['at'])}) error {_shown_text(error)}"
        handled = f["message"]
        if handled is not None and handled["seq"] is not None:
            sort = _cut(handled["kind"] or "refused")  # as the IPC lines name it
            line += f", handling seq {handled['seq']} {sort} from {_shown_text(handled['from'])}"
            line += f" {_shown_text(handled['topic'])}"
        elif handled is not None:
            line += f", handling message {_shown_text(handled['id'])}"
        lines.append(line)
    return "\n".join(_printable(line, backslash=False) for line in lines)


def _cut(text: str) -> str:
    """``text`` cut at ``_NAME_MAX`` characters, ``...`` marking the cut (as it is, not quoted)."""
    return text if len(text) <= _NAME_MAX else f"{text[:_NAME_MAX]}..."


def _ipc_cell(ipc: dict[str, Any]) -> str:
    """An agent's IPC traffic, a line a message: seq, kind, sender -> recipient, topic: status.

    Names and topics as --json shows them (JSON strings: a newline in one cannot fake a
    line); a broadcast's recipient is ``*``.
    """
    latest = ipc["latest"]
    count = ipc["messages"]
    head = f"{count} message{'' if count == 1 else 's'}" + (
        f", the latest {len(latest)}:" if len(latest) < count else ":" if latest else ""
    )
    lines = [head]
    for m in latest:
        to = _shown_text(m["to"]) if m["to"] else "*"
        route = f"{_shown_text(m['from'])} -> {to} {_shown_text(m['topic'])}"
        status = _cut(m["status"])
        sort = _cut(m["kind"] or "refused")  # send, request, reply or broadcast; any text by hand
        lines.append(f"seq {m['seq']} {sort} {route}: {status}")
    return "\n".join(_printable(line, backslash=False) for line in lines)


def _shown_text(value: object) -> str:
    """A name, topic or text as --json shows it (a JSON string), cut past ``_NAME_MAX``.

    It may be megabytes: its start, as ``_cell`` shows a value's.
    """
    from cogfabric._audit import encode_json  # noqa: PLC0415

    text = encode_json(value).decode()
    return text if len(text) <= _NAME_MAX else f"{text[:_NAME_MAX]}... ({len(text):,} characters)"


def _messages_cell(messages: list[dict[str, Any]]) -> str:
    """A session's messages, a line each (the latest ``_MESSAGES_SHOWN``): number, role, content.

    Then what a message holds beside them: its turn, tool call id, tool calls, event
    kind, parent and artifacts (``--json`` shows each whole, with its time).
    """
    count = len(messages)
    latest = messages[-_MESSAGES_SHOWN:]
    head = f"{count} message{'' if count == 1 else 's'}" + (
        f", the latest {len(latest)}:" if len(latest) < count else ":" if latest else ""
    )
    lines = [head]
    for number, m in enumerate(latest, count - len(latest) + 1):
        line = f"{number}. {_shown_text(m['role'])}: {_shown_text(m['content'])}"
        for key, label in _MESSAGE_TAGS:
            if m.get(key):
                line += f" {label} {_shown_text(m[key])}"
        for key, noun in (("tool_calls", "tool call"), ("artifact_refs", "artifact")):
            if m.get(key):
                n = len(m[key])
                line += f" ({n} {noun}{'' if n == 1 else 's'})"
        lines.append(line)
    return "\n".join(_printable(line, backslash=False) for line in lines)


_MESSAGE_TAGS: Final = (
    ("turn_id", "turn"),
    ("tool_call_id", "tool call id"),
    ("event_kind", "event"),
    ("parent_id", "parent"),
)
"""A session message's text fields a replay line shows beside its role and content, and their labels."""

_TIMES: Final = frozenset({"created_at", "accessed_at"})
"""The fields of a replay view that hold a clock reading: the table adds its UTC date."""

_MESSAGES_SHOWN: Final = 50
"""The latest messages of a session the replay table shows (``--json`` shows every one)."""

_NAME_MAX = 200
"""The characters of a name, a topic, a status or a message's text a line of the replay table shows."""


@main.command()
@_JOURNAL
@click.option("--seq", multiple=True, callback=_once, type=click.IntRange(1), help="Trace this record.")
@click.option(
    "--id",
    "event_id",
    multiple=True,
    callback=_once_text,
    help=(
        "Trace the record of this event id (an IPC message's id is its event's, or its "
        "dead letter's if it was never journaled), or the request of this correlation id."
    ),
)
@click.option(
    "--depth",
    multiple=True,
    callback=_once,
    type=click.IntRange(0),
    help="Follow effects this many levels down (default: every level).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@_keyed
@_COPY
@_NO_VERIFY
def trace(
    journal: Path,
    seq: int | None,
    event_id: str | None,
    depth: int | None,
    as_json: bool,
    key: bytes | str | None,
    copy: bool,
    no_verify: bool,
) -> None:
    """Show what led to a record, the root first, and what it led to, as a tree.

    An event follows from the one its cause names: an agent's changes, sends, model
    records and session records made while its behavior handles a message name that
    message, a reply its request; a message's delivery or dead letter follows from the
    message. Effects are searched in every record up to the last one verified.

    \b
    Examples:
        cogfabric trace ./cogfabric-journal --seq 4001
        cogfabric trace ./cogfabric-journal --id MESSAGE_ID --depth 1 --json
    """
    _need_stdout()
    from cogfabric._audit import find_trace, trace_effects  # noqa: PLC0415

    if (seq is None) == (event_id is None):
        _fail("give one of --seq or --id")
    try:
        with _audit(journal, copy=copy, key=key) as opened:
            verified = _check(opened, skip=no_verify)
            if event_id is not None:
                seq = opened.seq_of(event_id)
                if seq is None:  # a request's correlation id, or a message's with a dead letter alone
                    seq = _record_named_by(opened, event_id, verified)
                if seq is None or seq > verified:
                    shown = _printable(repr(event_id), backslash=False)  # repr's escapes read once
                    _fail(f"no record up to seq {verified} holds the event id {shown}")
            assert seq is not None  # one of the two was given
            if seq > verified:
                _fail(f"--seq {seq} is past the journal's last seq {verified}")
            found = find_trace(opened, seq, until=verified, depth=depth)
            assert found is not None  # seqs are gapless: a record up to the verified one is there
            # the effects are read as they are shown: a record that led to a million holds
            # them one by one, not all whole at once
            effects = trace_effects(opened, found.effects)
            if as_json:
                _print_trace_json(found, effects)
            else:
                _print_trace(found, effects, depth)
    except _journal_errors() as exc:
        _fail_journal(exc, key)


def _record_named_by(journal: Any, message_id: str, until: int) -> int | None:  # noqa: ANN401 - a journal
    """The seq of the record an IPC error names by an id no event has, up to ``until``; None if none.

    A request's error names its ``correlation_id`` beside its ``message_id``: either
    finds the request. A message refused at a full mailbox before it was journaled
    (``MailboxFullError``) has its dead letter alone, found by its ``message_id`` (a
    dead letter's record has an id of its own). Read only when no event has the id, so
    a trace by event id reads no more.
    """
    from cogfabric.events import IpcDeadLettered, IpcMessage  # noqa: PLC0415

    correlation = message_id.endswith("-corr")  # every correlation id the runtime makes
    for record in journal.read(until=until, stream="bus"):
        event = record.event
        if (
            correlation
            and isinstance(event, IpcMessage)
            and event.kind == "request"
            and event.correlation_id == message_id
        ) or (isinstance(event, IpcDeadLettered) and event.message_id == message_id):
            seq: int = record.seq
            return seq
    return None


_INDENT_MAX = 40
"""The levels of effects ``trace`` shows by indenting them; one deeper shows its level as a number."""

_LINES_A_WRITE = 1_000


def _print_trace_json(found: Trace, effects: Iterator[dict[str, Any]]) -> None:
    """``trace_view``'s JSON (as ``encode_json(view, indent=2)``), written as the effects are read."""
    from cogfabric._audit import encode_json  # noqa: PLC0415

    head = {"seq": found.seq, "until": found.until, "record": found.record, "causes": found.causes}
    parts = [encode_json(head, indent=2)[: -len(b"\n}")] + b',\n  "effects": [']
    count = 0
    for effect in effects:
        parts.append(
            b"%s\n    %s" % (b"," if count else b"", encode_json(effect, indent=2).replace(b"\n", b"\n    "))
        )
        count += 1
        if len(parts) >= _LINES_A_WRITE:
            click.echo(b"".join(parts), nl=False)
            parts.clear()
    parts.append(b"\n  ]\n}" if count else b"]\n}")
    click.echo(b"".join(parts))


def _print_trace(found: Trace, effects: Iterator[dict[str, Any]], depth: int | None) -> None:
    """A trace as lines: the causes, the record, its effects indented by level.

    Indented up to ``_INDENT_MAX`` levels, then by that many and the level as a number:
    a chain thousands deep would otherwise print a line as wide as its level, a
    thousand times (the text growing as the square of the depth). ``depth``: the
    ``--depth`` effects were followed to, which the count of effects says. Each effect
    is kept as its line only, until the tree's order is known.
    """
    lines = ["caused by, the root first:" if found.causes else "caused by: nothing (a root)"]
    for cause in found.causes:
        if cause.get("loop"):
            lines.append(f"  id {_shown_name(cause['id'])}: seq {cause['seq']} again (the causes loop)")
        elif cause["seq"] is None:
            lines.append(f"  id {_shown_name(cause['id'])}: no record up to seq {found.until} holds it")
        else:
            lines.append("  " + _trace_line(cause))
    lines.append("record:")
    lines.append("  " + _trace_line(found.record))
    total = len(found.effects)
    followed = "" if depth is None else f" {depth} level{'s' * (depth != 1)} down (--depth {depth})"
    if depth == 0:
        lines.append(f"led to: not followed (--depth 0), up to seq {found.until}")
    elif not total:
        lines.append(f"led to: nothing, up to seq {found.until}")
    else:
        lines.append(f"led to {total:,} record{'s' * (total != 1)}{followed}, up to seq {found.until}:")
    shown = {effect["seq"]: _trace_line(effect) for effect in effects}
    children: dict[int, list[int]] = {}
    for effect_seq, (parent, _level) in found.effects.items():  # in seq order
        children.setdefault(parent, []).append(effect_seq)
    stack = list(reversed(children.get(found.seq, [])))
    while stack:  # depth first, without recursion: a chain of replies may be thousands deep
        at = stack.pop()
        level = found.effects[at][1]
        indent = "  " * level if level <= _INDENT_MAX else f"{'  ' * _INDENT_MAX}[level {level:,}] "
        lines.append(indent + shown.pop(at))
        stack.extend(reversed(children.pop(at, [])))
        if len(lines) >= _LINES_A_WRITE:  # a write a thousand lines, not one a line
            click.echo("\n".join(lines))
            lines.clear()
    if lines:
        click.echo("\n".join(lines))


def _shown_name(value: object) -> str:
    """A name, topic or key as JSON shows it (quoted: a newline cannot fake a line); its start if long."""
    return _printable(_shown_text(value), backslash=False)


_LLM_KINDS = frozenset({"LlmOutputRecorded", "PromptRejected", "LlmCallFailed"})


def _trace_line(node: dict[str, Any]) -> str:
    """One record of a trace: seq, type, stream, and what it is about.

    A message's route and topic, a dead letter's recipient and reason, a key, a state, a
    session message's role, a model's output, a refused prompt's reason and length, an error;
    and the session of a model call made in one (``turn``, ``continue_turn``).
    """
    data = node["data"]
    kind = node["type"]
    about = ""
    if kind == "IpcMessage":
        to = _shown_name(data["recipient"]) if data["recipient"] else "*"
        sort = _printable(_cut(str(data["kind"])))  # send, request, reply or broadcast; any text by hand
        about = f"{sort} {_shown_name(data['sender'])} -> {to} {_shown_name(data['topic'])}"
    elif kind == "IpcDelivered":
        about = f"to {_shown_name(data['recipient'])}"
    elif kind == "IpcDeadLettered":  # a broadcast's has one a subscriber: which one missed it
        about = f"to {_shown_name(data['recipient'])} {_shown_name(data['reason'])}"
    elif kind == "LlmOutputRecorded":
        about = f"output {_shown_name(data['output'])}"
    elif kind == "PromptRejected":
        about = f"{_shown_name(data['reason'])} length {data['length']} limit {data['limit']}"
    elif kind == "LlmCallFailed":
        about = f"error {_shown_name(data['error'])}"
    elif kind == "AgentFailed":  # the exception's type, then its message
        about = f"error {_shown_name(': '.join(t for t in (data['error'], data['detail']) if t))}"
    elif kind == "PrivateSet":
        about = f"key {_shown_name(data['key'])}"
    elif kind == "LifecycleChanged":
        about = _shown_name(data["state"])
    elif kind == "SessionMessageAdded":
        about = f"role {_shown_name(data['message'].role)}"
    if kind in _LLM_KINDS and data.get("session") is not None:  # a turn's call: which session it answered
        about += f" session {_shown_name(data['session'])}"
    line = f"seq {node['seq']} {_printable(str(kind))} {_printable(str(node['stream']))}"
    return f"{line} {about}" if about else line


@main.command()
@_JOURNAL
@click.option(
    "--output",
    "-o",
    type=click.Path(),
    multiple=True,
    callback=_once,
    help="A file (default stdout, as for -; ./- names a file called -).",
)
@click.option(
    "--stream", multiple=True, callback=_once_text, help="Only this stream, e.g. agent/researcher-001."
)
@click.option(
    "--layer",
    type=click.Choice(["task_shared", "agent_private", "ipc"], case_sensitive=False),
    multiple=True,
    callback=_once,
    help="Only records that hold a part of this context layer (see `layers`).",
)
@click.option(
    "--after", type=click.IntRange(0), multiple=True, callback=_once, help="Only records after this seq."
)
@click.option(
    "--until", type=click.IntRange(0), multiple=True, callback=_once, help="Only records up to this seq."
)
@click.option(
    "--type",
    "types",
    multiple=True,
    callback=_event_types,
    help="Only records of this event type, e.g. LifecycleChanged (repeat it for several).",
)
@click.option(
    "--verifiable",
    is_flag=True,
    help="Add each record's stored bytes (record, base64) and the chain link before it (prev), "
    "so that `cogfabric verify-export` can check the export without the journal. Every record "
    "of the range: no --stream, --layer or --type.",
)
@click.option(
    "--json-errors",
    is_flag=True,
    help="On an error, end stderr with one line of JSON naming it, as --json does in the other "
    "commands (after any lines written: stdout stays the export).",
)
@_keyed
@_COPY
@_NO_VERIFY
def export(
    journal: Path,
    output: str | Path | None,  # the text as given: a Path would make ./- a -
    stream: str | None,
    layer: str | None,
    after: int | None,
    until: int | None,
    types: frozenset[str] | None,
    verifiable: bool,
    json_errors: bool,  # noqa: ARG001 - read where an error is said (_json_errors)
    key: bytes | str | None,
    copy: bool,
    no_verify: bool,
) -> None:
    """Export JOURNAL as JSON Lines, one record a line, streamed.

    Each line has seq, time, stream, layer (the one the event touches, or null),
    layers (every layer the record holds a part of), type, version, data and chain
    (the record's hash-chain link, hex); with --verifiable also prev and record. A
    journal that fails verification is refused (--no-verify reads it anyway), but for
    --until a seq before a record whose chain link fails (without --stream): the chain
    checked every record up to it, and they are read, with a note.

    \b
    Example:
        cogfabric export ./cogfabric-journal --layer agent_private -o private.jsonl
        cogfabric export ./cogfabric-journal --verifiable -o all.jsonl
    """
    from cogfabric._audit import export_lines  # noqa: PLC0415

    # stdout, as verify-export reads - as stdin; the text as given (a Path makes ./- a -)
    output = None if output is None or str(output) == "-" else Path(output)
    if verifiable and (stream is not None or layer is not None or types is not None):
        _fail("--verifiable exports every record of its range: drop --stream, --layer and --type")
    if after is not None and until is not None and after >= until:  # a typo would write an empty export
        _fail(f"--after {after} is not before --until {until}: the range holds no record")
    if until == 0:  # no --after: seqs start at 1, so this range holds none either
        _fail("--until 0 is before the first seq, 1: the range holds no record")
    # A new file, or a plain one it may rename over (``_replaceable``), is written beside
    # its name and renamed once whole: a record that fails to decode half-way leaves no
    # partial export behind. Anything else (a pipe, a device, a link; a file in a directory
    # it cannot write, another user's in a sticky one) is written in place, as stdout is.
    if output is not None and output.is_dir():
        _fail(f"{_named(output)} is a directory; name a file for --output")
    refusal = None if output is None else _writes_into(journal, output)
    if refusal is not None:
        _fail(f"--output {_named(output)} {refusal}; name a file elsewhere")
    try:
        with _audit(journal, copy=copy, key=key) as opened:
            # a range in seq order before a broken chain link is read: the chain checked it
            verified = _check(opened, skip=no_verify, upto=until if stream is None else None)
            if after is not None and after > verified:  # at it: nothing new since, an empty export
                _fail(f"--after {after} is past the journal's last seq {verified}")
            if stream is not None and next(iter(opened.read(until=verified, stream=stream)), None) is None:
                _fail(
                    f"{journal} has no stream {stream!r}; streams are agent/<id>, session/<id>, bus, runtime"
                )
            with _export_target(output) as sink:
                last = verified if until is None else min(until, verified)
                for line in export_lines(
                    opened,
                    stream=stream,
                    layer=layer,
                    types=types,
                    after=after or 0,
                    until=last,
                    verifiable=verifiable,
                ):
                    sink.write(line)
    except _journal_errors() as exc:
        _fail_journal(exc, key)


def _anchors(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> dict[int, bytes]:
    from cogfabric._export_check import parse_anchor  # noqa: PLC0415

    anchors: dict[int, bytes] = {}
    for value in values:
        try:
            seq, chain = parse_anchor(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
        if anchors.setdefault(seq, chain) != chain:
            raise click.BadParameter(f"seq {seq} is anchored twice, to two links")
    return anchors


@main.command("verify-export")
@click.argument("export_file", metavar="FILE", type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--anchor",
    "anchors",
    multiple=True,
    callback=_anchors,
    help="SEQ:CHAIN, a seq and its chain link (hex) kept apart from the export, e.g. the journal's "
    "head_seq and head_chain from `cogfabric inspect --json`: that line's chain (or, for the seq "
    "before the first line, its prev) must be it. Repeat it for several.",
)
@_keyed
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as one JSON document.")
def verify_export(
    export_file: str, anchors: dict[int, bytes], key: bytes | str | None, as_json: bool
) -> None:
    """Check FILE, a `cogfabric export --verifiable` (- for stdin), without its journal.

    Each line's record must match its hash-chain link (keyed with --key-file or
    --key for a keyed journal), the line must be byte for byte what export writes for
    that record, and it must follow the line before it (the next seq, chained to its
    link). Exits 0 when it checks out, 1 naming the first bad line and why, 2 when
    FILE cannot be read. --json prints ok, lines, first_seq, last_seq, prev,
    last_chain, anchors, anchored_to, bad_line and reason with the same exit status
    (and the same notes on stderr).

    That shows the export is consistent, not where it came from: anyone can compute
    an unkeyed chain. Anchor it (--anchor) to a head of the journal kept elsewhere,
    or check it with the key of a keyed journal. An anchor backs the lines up to its
    seq only: anyone can chain records onto a link, so anchor the last line.

    \b
    Example:
        cogfabric verify-export all.jsonl --anchor 84:935a07335fabbfa91876d9adca3c019d
    """
    _need_stdout()
    stdin = export_file == "-"  # the text as given: ./- names a file called -
    if stdin and sys.stdin is None:
        _fail("stdin is closed: there is no export to read")
    from cogfabric._audit import encode_json  # noqa: PLC0415
    from cogfabric._export_check import verify_export as check  # noqa: PLC0415

    try:
        with contextlib.ExitStack() as stack:
            source: Any = sys.stdin.buffer if stdin else stack.enter_context(Path(export_file).open("rb"))
            _working(f"checking {'stdin' if stdin else _shown(Path(export_file))} line by line")
            report = check(source, key=key, anchors=anchors)
    except OSError as exc:
        _fail(f"cannot read {export_file}: {exc.strerror or exc}")
    if as_json:
        line = encode_json(report).decode()
        if not report.ok:
            _failed_verdict(line)
        click.echo(line)
        _note_unbacked(report, keyed=key is not None)
        sys.exit(EXIT_OK)
    if not report.ok:
        before = "" if report.bad_line is None else " before it"
        reason = _printable(report.reason, backslash=False)
        _failed_verdict(f"FAILED: {reason} ({_many(report.lines, 'record')} verified{before})")
    if report.first_seq is None:
        click.echo("ok: an empty export (no records)")
    else:
        start = (
            "from the journal's start"
            if report.first_seq == 1
            else f"the first chained on prev {report.prev} (seq {report.first_seq - 1}'s link)"
        )
        anchored = (
            "" if not report.anchors else f"; {report.anchors} anchor{'s' * (report.anchors > 1)} matched"
        )
        seqs = _seqs(report.first_seq, report.last_seq or report.first_seq)  # both set by the first line
        click.echo(
            f"ok: {_many(report.lines, 'record')} verified, {seqs}, {start}; "
            f"last chain link {report.last_chain}{anchored}"
        )
    _note_unbacked(report, keyed=key is not None)
    sys.exit(EXIT_OK)


def _note_unbacked(report: ExportReport, *, keyed: bool) -> None:
    """Say on stderr which lines of an export that checked out nothing backs (neither key nor anchor).

    With --json too: a script that reads ``ok`` gets the note beside the verdict.
    """
    if keyed:
        return
    if not report.anchors:
        _say(
            "note: the export is consistent; unanchored and unkeyed, that does not show it came from the "
            "journal (anyone can compute an unkeyed chain): compare the last link with the journal's head "
            "(--anchor SEQ:CHAIN)"
        )
    elif report.last_seq is not None and (report.anchored_to or 0) < report.last_seq:
        past = max(report.first_seq or 1, (report.anchored_to or 0) + 1)
        which = f"seq {past} comes" if past == report.last_seq else f"seqs {past} to {report.last_seq} come"
        _say(
            f"note: {which} after the last anchor (seq {report.anchored_to}), which backs only the "
            "lines up to it: anyone can chain records onto a link, so nothing shows those came from the "
            "journal; anchor the last line (the journal's head, from inspect --json)"
        )


@contextlib.contextmanager
def _export_target(output: Path | None) -> Iterator[BinaryIO]:
    """What ``export`` writes to: stdout, ``output`` in place, or a new file renamed over it once whole."""
    if output is None or not _replaceable(output):
        sink = _sink(output, output)
        try:
            yield sink
        finally:
            if output is not None:
                sink.close()
            else:
                sink.flush()
        return
    fd, partial = _partial_file(output)
    try:
        with os.fdopen(fd, "wb", buffering=_PARTIAL_BUFFER) as sink:
            yield sink
        partial.replace(output)
    finally:
        partial.unlink(missing_ok=True)


_PARTIAL_BUFFER: Final = 1 << 18
"""The write buffer of an export's partial file (256 KiB): no one reads that file before it is
whole, and the default 8 KiB makes a system call every few dozen lines (bench/audit.py measures
export as a whole: docs/performance.md, "Export")."""


def _partial_file(output: Path) -> tuple[int, Path]:
    """A new owner-only (0600) file beside ``output``, open for writing: its descriptor and path.

    Made with a random name and ``O_EXCL`` (``tempfile.mkstemp``): a file or link someone
    planted under a name known in advance is never written through, nor kept with its mode.
    """
    try:
        # the name cut short: with the random part and suffix it must fit the 255 a name may have
        fd, name = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name[:64]}.", suffix=".partial")
    except OSError as exc:  # a missing directory, no permission: a usage error
        _fail(f"cannot write --output {_named(output)}: {exc.strerror or exc}")
    return fd, Path(name)


def _writes_into(journal: Path, output: Path) -> str | None:
    """Why ``output`` may not be written: one of the journal's files (or a link to one), or in its directory.

    Truncating ``data.mdb`` under an open LMDB environment loses the journal and kills
    the process on its next read (SIGBUS): an audit must never write there. None: it may.
    """
    if not (journal / "data.mdb").exists():
        return None  # no journal there: opening it fails with its own error
    with contextlib.suppress(OSError):
        target = output.stat()
        if any(entry.is_file() and os.path.samestat(entry.stat(), target) for entry in journal.iterdir()):
            return f"would write over the journal's own files in {journal}"
    if Path(os.path.realpath(output)).parent == Path(os.path.realpath(journal)):  # links and loops too
        return f"is in the journal's directory {journal}, where an audit writes nothing"
    return None


def _replaceable(output: Path) -> bool:
    """Whether ``output`` may be written beside and renamed: new or a plain file, its directory writable.

    Not another user's file in a sticky directory (``/tmp``), which only its owner, the
    directory's or root may rename over: it is written in place, as a file in a directory
    you cannot write is (or refused at once when you may not write it, or where Linux's
    fs.protected_regular refuses to open it, one neither yours nor the directory's owner's), rather
    than refused at the rename, after the whole export.
    """
    plain = not output.is_symlink() and (output.is_file() or not output.exists())
    return plain and os.access(output.parent, os.W_OK) and not _sticky_for_you(output)


def _sticky_for_you(output: Path) -> bool:
    """Whether ``output`` is a file in a sticky directory that this user may not rename over."""
    try:
        owner = output.stat().st_uid
        folder = output.parent.stat()
    except OSError:
        return False  # no file there yet: a new one is yours
    you = os.geteuid()
    return bool(folder.st_mode & stat.S_ISVTX) and you != 0 and you not in (owner, folder.st_uid)


def _stdout_closed() -> NoReturn:
    """Stop quietly when the reader of stdout has gone (``export ... | head -1``): exit 0.

    Whatever is left in stdout's buffer cannot be written; pointing stdout at devnull
    keeps the interpreter's final flush from raising again.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    sys.exit(EXIT_OK)


def _need_stdout() -> None:
    """Refuse to audit with nowhere to say the result: started with stdout closed (``>&-``), exit 2."""
    if sys.stdout is None:
        _fail("stdout is closed: the result could not be shown")


@main.command()
@_JOURNAL
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option(
    "--no-streams",
    is_flag=True,
    help="Leave out the count of each stream (a line an agent and a session); --json: streams is null.",
)
@click.option(
    "--skip-newer",
    is_flag=True,
    help="Summarise a journal that holds records newer than this cogfabric (a newer release wrote "
    "them) rather than stop at the first: each is counted and named, one of a newer version (newer) "
    "or of a type this cogfabric does not know (unknown).",
)
@_keyed
@_COPY
@_NO_VERIFY
def inspect(
    journal: Path,
    as_json: bool,
    no_streams: bool,
    skip_newer: bool,
    key: bytes | str | None,
    copy: bool,
    no_verify: bool,
) -> None:
    """Summarise JOURNAL: format, records, the head, first and last time, counts per type and stream, size.

    The head is the last seq and its hash-chain link (hex): keep it somewhere else to
    detect a later rewrite of the journal. The time is the first and the last record's
    (UTC), not the earliest and latest: after a wall clock stepped back, a record between
    them can be earlier. Each stream's count takes a line (every agent and session has
    streams of its own): --no-streams leaves them out, the counts per kind of stream kept.

    A record of a version newer than this cogfabric, or of a type it does not know
    (one a newer cogfabric added), stops it (exit 1) unless --skip-newer: then the
    records it cannot read are counted too, by type and stream (their type, version and
    stream are read without their data), and named with their first and last seqs (the
    times are of the others), with exit 0: a newer version by type, the version stored
    and the one this code knows (newer), an unknown type by its type tag (unknown).

    \b
    Example:
        cogfabric inspect ./cogfabric-journal
    """
    _need_stdout()
    from cogfabric._audit import encode_json, inspect_journal  # noqa: PLC0415

    try:
        with _audit(journal, copy=copy, key=key) as opened:
            until = _check(opened, skip=no_verify)
            _working(f"counting {_many(until, 'record', grouped=True)} by type and stream")
            summary = inspect_journal(opened, journal, until=until, skip_newer=skip_newer)
    except _journal_errors() as exc:
        from cogfabric._audit import written_by_newer  # noqa: PLC0415

        # a newer release wrote it (a newer version, or a type it added): --skip-newer summarises
        # the rest; not an older version no upcaster reads, nor one --skip-newer met already
        if written_by_newer(exc) and not skip_newer:
            _fail(f"{exc} (--skip-newer summarises the journal)", _exit_code(exc), error=exc)
        _fail_journal(exc, key)
    if summary["newer"] or summary["unknown"]:
        _say(_not_read_note(summary["newer"], summary["unknown"]))
    if no_streams:
        summary["streams"] = None
    if as_json:
        click.echo(encode_json(summary, indent=2))  # strict JSON: a NaN time as null
        return
    click.echo(f"journal   {_printable(summary['path'], backslash=False)}")  # backslashreplace's escapes kept
    click.echo(f"format    {summary['format']} ({summary['hash']}{', keyed' if summary['keyed'] else ''})")
    click.echo(
        f"records   {summary['records']:,} in {_many(summary['stream_count'], 'stream', grouped=True)}"
    )
    click.echo(f"head      seq {summary['head_seq']}, chain {summary['head_chain'] or '-'}")
    click.echo(f"time      {_when(summary['first_time'])} .. {_when(summary['last_time'])}")
    click.echo(f"on disk   {summary['bytes_on_disk'] / 1e6:.1f} MB")
    click.echo("types     " + ", ".join(f"{_printable(k)} {v:,}" for k, v in summary["types"].items()))
    if summary["newer"]:
        click.echo("newer     " + ", ".join(map(_newer_cell, summary["newer"])))
    if summary["unknown"]:
        click.echo("unknown   " + ", ".join(map(_unknown_cell, summary["unknown"])))
    click.echo("streams   " + ", ".join(f"{_printable(k)} {v:,}" for k, v in summary["stream_kinds"].items()))
    if no_streams:
        return
    width = max((len(f"{v:,}") for v in summary["streams"].values()), default=0)
    for stream, count in summary["streams"].items():
        click.echo(f"  {count:>{width},}  {_printable(stream)}")


def _not_read_note(newer: list[dict[str, Any]], unknown: list[dict[str, Any]]) -> str:
    """``inspect --skip-newer``'s note of the records it counted, not read (``newer``, ``unknown``)."""
    newer_ones = sum(found["records"] for found in newer)
    unknown_ones = sum(found["records"] for found in unknown)
    first = newer_ones or unknown_ones
    records = f"{first:,} record{'s' * (first > 1)}"
    if not unknown_ones:
        what = f"{records} newer than this cogfabric"
    elif not newer_ones:
        what = f"{records} of a type this cogfabric does not know"
    else:
        what = f"{records} newer than this cogfabric and {unknown_ones:,} of a type it does not know"
    keys = ", ".join(key for key, found in (("newer", newer), ("unknown", unknown)) if found)
    return f"note: {what} counted, not read ({keys}): the times are of the others"


def _newer_cell(found: dict[str, Any]) -> str:
    """``inspect``'s newer records of a type and version: ``PrivateSet v2 3 (known v1; first seq 7, last 9)``.

    (The type is one this code knows, at a version it does not.)
    """
    kind = f"{_printable(found['type'])} v{found['stored']}"
    return f"{kind} {found['records']:,} (known v{found['known']}; {_found_seqs(found)})"


def _unknown_cell(found: dict[str, Any]) -> str:
    """``inspect``'s records of a type tag this code does not know: ``BudgetSet 3 (first seq 7, last 9)``."""
    return f"{_printable(found['type'])} {found['records']:,} ({_found_seqs(found)})"


def _found_seqs(found: dict[str, Any]) -> str:
    """``inspect``'s ``newer`` or ``unknown`` records' seqs: ``seq 7``, ``first seq 7, last 9``."""
    first, last = found["first_seq"], found["last_seq"]
    return f"seq {first}" if first == last else f"first seq {first}, last {last}"


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    import datetime as dt  # noqa: PLC0415

    try:
        return dt.datetime.fromtimestamp(seconds, tz=dt.UTC).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):  # NaN, infinite, or past what a date can be
        return repr(seconds)


@main.command()
@click.option("--quick", is_flag=True, help="Small sizes and one run: a smoke test, under a minute.")
@click.option(
    "--json", "json_path", type=click.Path(path_type=Path), default=None, help="Write every sample here."
)
@click.option(
    "--repeat", type=click.IntRange(1, 50), default=None, help="Runs per workload (default 3, quick 1)."
)
@click.option(
    "--dir",
    "tmp_parent",
    type=click.Path(exists=True, file_okay=False, writable=True, path_type=Path),
    default=None,
    help="Parent of the temporary journals (default: TMPDIR or /tmp): a real disk, not tmpfs.",
)
def bench(quick: bool, json_path: Path | None, repeat: int | None, tmp_parent: Path | None) -> None:
    """Measure cogfabric's workloads, each beside its reference measured in the same run.

    References: raw LMDB batched append of pre-encoded values (writes), a raw scan with
    typed decode (reads), a bare Pykka tell loop (the actor path). Each figure is the
    median of the runs; the ratio, the workload's rate over its reference's (the median
    of the rounds' paired ratios), is the headline. Every commit is synced, so the synced
    workloads measure the disk under --dir: on tmpfs an fsync costs nothing. --json
    writes every sample and the machine (cores, CPU, memory, Python, package versions,
    git commit, where the journals were).

    \b
    Example:
        cogfabric bench --quick --json bench.json
    """
    from cogfabric._bench import Sizes, run_bench, to_json, unwritable  # noqa: PLC0415

    if json_path is not None and (problem := unwritable(json_path)) is not None:
        # before minutes of measuring
        raise click.BadParameter(f"{json_path} {problem}; name a file you can write", param_hint="'--json'")
    sizes = Sizes.quick() if quick else Sizes()
    runs = repeat or (1 if quick else 3)
    shown = _stderr_is_terminal()  # progress only on a terminal, as simulate's bar
    results, machine = run_bench(
        sizes, runs, progress=(lambda label: _say(f"  {label}...")) if shown else None, tmp_parent=tmp_parent
    )
    unwritten: OSError | None = None
    if json_path is not None:  # first: a table that cannot be printed (a closed pipe) loses no sample
        try:
            json_path.write_text(to_json(results, machine, repeat=runs, quick=quick), encoding="utf-8")
        except OSError as exc:  # a full disk: the table below still shows what was measured
            unwritten = exc
    try:
        _print_bench_table(results, machine, runs)
    finally:
        if unwritten is not None:  # after the table, or in place of a broken pipe's quiet exit
            raise unwritten  # "cannot write the output ...", exit 2
    if json_path is not None:
        click.echo(f"wrote {json_path}")


def _print_bench_table(results: list[Any], machine: dict[str, Any], runs: int) -> None:
    """The table of ``cogfabric bench``: each workload's median, min, max, rate and ratio."""
    by_name = {r.name: r for r in results}
    click.echo(
        f"cogfabric bench: median of {runs} ({_many(machine['cores'], 'core')}, Python {machine['python']}, "
        f"commit {machine['git_commit'] or '?'})"
    )
    if machine.get("tmp_parent"):
        click.echo(f"journals under {machine['tmp_parent']}, on {machine.get('tmp_filesystem') or '?'}")
    if machine.get("tmp_filesystem") == "tmpfs":
        _say(  # on stderr, as every warning: stdout holds the table alone
            "warning: tmpfs holds the journals: an fsync costs nothing there, so the synced "
            "workloads measure no disk (--dir names a directory on one)"
        )
    click.echo(
        f"{'workload':<52} {'count':>9} {'median s':>9} {'min s':>8} {'max s':>8} {'rate/s':>11}  "
        f"{'ratio':>8}  reference"
    )
    for result in results:
        reference = by_name.get(result.reference or "")
        ratio = _ratio(result.ratio_to(reference)) if reference is not None else ""
        click.echo(
            f"{result.name:<52} {result.count:>9,} {statistics.median(result.samples):>9.3f} "
            f"{min(result.samples):>8.3f} {max(result.samples):>8.3f} "
            f"{result.rate:>11,.0f}  {ratio:>8}  {result.reference or ''}"
        )
    if any(result.reference for result in results):
        click.echo("ratio: the workload's rate over its reference's, the median of the runs' paired ratios")
    for result in results:
        grown = result.extra.get("peak_rss_growth_bytes")
        if grown:
            median = statistics.median(grown) / 2**20
            click.echo(f"{result.name}: peak resident memory +{median:.0f} MiB (median)")


def _journal_path(value: str) -> Path:
    """``--journal`` as a path; an empty one (an unset shell variable, say) is refused.

    ``Path("")`` is the working directory, where the journal's files would land.
    """
    if not value:
        msg = "must not be empty (it would be the working directory); give a directory"
        raise click.BadParameter(msg)
    return Path(value)


def _ratio(value: float) -> str:
    """Two decimals, or two significant digits below 0.1 (a tiny ratio is not 0.00x)."""
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.2g}x"  # noqa: PLR2004

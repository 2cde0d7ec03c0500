"""What every command shares: turning any failure into one line on stderr and its exit code.

Bad input (an :class:`AtpsimError`, an unreadable or undecodable file, a folder where a file
belongs) exits 2; running out of memory exits 5; anything else is a bug and exits 3 with one
line (``ATPSIM_TRACEBACK=1`` re-raises it for the traceback). ``atpsim --help`` lists the codes.

The library names its own parameters in errors and warnings (``devices``, `` `resume=True` ``);
:data:`FLAGS` and :func:`flag` show each as the command's flag (``--devices``, ``--resume``).
Limits set in the environment (``ATPSIM_MAX_MEMORY``, ``ATPSIM_MAX_LAYOUTS``) are read here,
once, and passed down as the library's arguments (``memory_bytes``, ``max_layouts``).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import gc
import logging
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TypeVar

import click

from atpsim.api import (
    EXIT_CODES,
    MEMORY_SHARE,
    AtpsimError,
    check_number,
    describe_os_error,
    env_limit,
    machine_memory_bytes,
    show_params,
    source_date_epoch,
)

F = TypeVar("F", bound=Callable[..., Any])

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
EXIT_OUT_OF_MEMORY = 5
EXIT_INTERRUPTED = 130


MEMORY_ENV = "ATPSIM_MAX_MEMORY"
LAYOUTS_ENV = "ATPSIM_MAX_LAYOUTS"

#: The flag of each library parameter that is not the command's option of the same name,
#: for every command ("") and per command; an environment variable for a limit.
FLAGS: dict[str, dict[str, str]] = {
    "": {"out_dir": "-o", "uncertainty": "--uncertainty", "trace": "--trace",
         "memory_bytes": MEMORY_ENV, "max_layouts": LAYOUTS_ENV},
    "plan": {"path": "--links", "model": "--model"},
}


def flag(name: str, value: str | None = None) -> str | None:
    """How the running command's user spells the library parameter *name* (with *value*, the
    repr of the value the library advises): its flag (``--engine auto``; a flag alone for
    ``True``), an environment variable (``ATPSIM_MAX_LAYOUTS=20``), or None where the command
    has no such option."""
    ctx = click.get_current_context(silent=True)
    command = ctx.command if ctx is not None else None
    table = {**FLAGS[""], **FLAGS.get(command.name or "" if command else "", {})}
    spelled = table.get(name)
    if spelled is not None and not spelled.startswith("-"):
        return spelled if value is None else f"{spelled}={value}"
    options = [p for p in (command.params if command else []) if isinstance(p, click.Option)]
    if spelled is None or not any(spelled in p.opts for p in options):
        spelled = next((max(p.opts, key=len) for p in options if p.name == name), None)
    if spelled is None or value is None:
        return spelled
    try:
        shown = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return None
    return spelled if shown is True else f"{spelled} {shown}"


class FlagFormatter(logging.Formatter):
    """A log formatter that shows the library parameters a record names as flags."""

    def format(self, record: logging.LogRecord) -> str:
        return show_params(super().format(record), flag)


def exit_codes_help() -> str:
    """The exit statuses and the limits as a help epilog, one per line."""
    lines = [f"{code:>4}  {text}" for code, text in EXIT_CODES]
    limits = (
        "Limits: a topology of more than 65,536 GPUs is refused (ATPSIM_MAX_GPUS raises it), "
        "as is a search space of more than 1,000,000 candidate layouts (ATPSIM_MAX_LAYOUTS) and "
        "-j past 4 worker processes per CPU; "
        f"a process stops with exit 5 past {MEMORY_ENV} bytes of memory (default "
        f"{MEMORY_SHARE:.0%} of this machine's RAM), before the machine itself runs out."
    )
    return "Exit status:\n\n\b\n" + show_params("\n".join(lines), _help_flag) + "\n\n" + limits


def _help_flag(name: str, value: str | None) -> str:
    return "--" + name.replace("_", "-")


def cap_memory() -> int | None:
    """Lower this process's soft data limit to :func:`memory_cap` bytes, so an oversized
    request fails with MemoryError (one line, exit 5) rather than waking the kernel's OOM
    killer. Returns the cap, or None where it cannot be set."""
    try:
        import resource

        cap = memory_cap()
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if cap is None or (hard != resource.RLIM_INFINITY and cap > hard):
            return None
        if soft == resource.RLIM_INFINITY or cap < soft:
            resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
        return cap
    except (ImportError, OSError, ValueError):
        return None


def _memory_cap_or_none() -> int | None:
    try:
        return memory_cap()
    except AtpsimError:
        return None


#: The bounds of ``ATPSIM_MAX_MEMORY``, bytes: 256 MiB (less cannot import the package) to
#: 1 EiB (2^60, past any machine's memory and within what the OS's data limit holds).
MEMORY_RANGE = (2**28, 2**60)


def memory_cap() -> int | None:
    """The memory this process may use, bytes: ``ATPSIM_MAX_MEMORY`` where set (the one
    place it is read; a finite byte count within :data:`MEMORY_RANGE`, else an AtpsimError
    naming it), else the library's default (:func:`atpsim.api.machine_memory_bytes`); None
    where neither is known."""
    text = os.environ.get(MEMORY_ENV)
    if text:
        try:
            value: object = float(text)
        except ValueError:
            value = text
        low, high = MEMORY_RANGE
        check_number(value, MEMORY_ENV, low=low, high=high, what="a byte count", shown=text,
                     bounds=f" from {low} (256 MiB) to {high} (1 EiB)")  # fmt: skip
        return int(value)  # type: ignore[call-overload]
    return machine_memory_bytes()


def size_limit(name: str) -> int | None:
    """The size limit the environment variable *name* sets (``ATPSIM_MAX_LAYOUTS``; the one
    place it is read): an integer >= 1, else a SizeLimitError naming it; None where it is not
    set (the library's default applies)."""
    return env_limit(name)


def check_environment() -> None:
    """Before a command's module is imported: an environment variable that would break the
    imports themselves (SOURCE_DATE_EPOCH, read by numpy's f2py) is one line and exit 2."""
    try:
        source_date_epoch()
    except AtpsimError as error:
        _fail(f"error: {error.format(flag)}", EXIT_BAD_INPUT)


def clean_errors(fn: F) -> F:
    """Run *fn*; every failure but click's own becomes ``atpsim: ...`` on stderr and an exit
    code: 2 for bad input (the library's errors, file-system and decoding errors), 5 when
    memory runs out, 3 for an internal error."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out_of_memory = False
        try:
            cap_memory()
            return fn(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit):
            raise
        except AtpsimError as error:
            _fail(f"error: {error.format(flag)}", error.exit_code)
        except BrokenPipeError:
            reader_gone()
        except (OSError, UnicodeError) as error:
            _fail(f"error: {describe_os_error(error)}", EXIT_BAD_INPUT)
        except MemoryError:
            out_of_memory = True  # reported below, once the traceback's frames are freed
        except KeyboardInterrupt:
            raise
        except Exception as error:  # the last net: a bug must still read as one line
            if os.environ.get("ATPSIM_TRACEBACK"):
                raise
            _internal_error(error)
        if out_of_memory:
            _out_of_memory()

    return wrapper  # type: ignore[return-value]


def given(*names: str) -> list[str]:
    """The options among *names* (parameter names) that the user set, as their flags
    (``--seed``), so a command can refuse an option that does nothing in its context."""
    ctx = click.get_current_context()
    flags = {p.name: max(p.opts, key=len) for p in ctx.command.params if isinstance(p, click.Option)}
    return [flags[n] for n in names
            if ctx.get_parameter_source(n) not in (None, click.core.ParameterSource.DEFAULT)]  # fmt: skip


def refuse_unused(options: list[str], why: str) -> None:
    """Refuse the first of *options* (flags the user gave) with one line saying *why*."""
    if options:
        raise AtpsimError(f"does nothing {why}", key=options[0])


@contextlib.contextmanager
def warnings_to_stderr() -> Iterator[None]:
    """While the block runs, atpsim's warnings print as ``atpsim: warning: ...`` lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(FlagFormatter("atpsim: warning: %(message)s"))
    logger = logging.getLogger("atpsim")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def reader_gone() -> NoReturn:
    """The reader of stdout closed it (``atpsim topo show ic5 | head``): stop quietly, with
    stdout pointed at /dev/null so the interpreter's final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)


def _out_of_memory() -> NoReturn:
    gc.collect()
    cap = _memory_cap_or_none()
    limit = f" (the limit is {cap / 1e9:.1f} GB, {MEMORY_ENV})" if cap else ""
    _fail(
        f"error: out of memory{limit}: the request is too large for this machine; ask for "
        "fewer GPUs, sizes or points",
        EXIT_OUT_OF_MEMORY,
    )


def _internal_error(error: Exception) -> NoReturn:
    text = " ".join(f"{type(error).__name__}: {error}".split())
    _fail(
        f"internal error: {text[:300]} (a bug; rerun with ATPSIM_TRACEBACK=1 for the "
        "traceback and report it)",
        EXIT_INTERNAL,
    )


def _fail(message: str, code: int) -> NoReturn:
    """``atpsim: <message>`` on stderr as one line (a message quoting a file's text, e.g. a
    YAML parser's, is folded onto it), then exit with *code*."""
    click.echo(f"atpsim: {' '.join(message.split())}", err=True)
    sys.exit(code)

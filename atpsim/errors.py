"""The one error type the library raises for bad input, and its message format.

The CLI turns an :class:`AtpsimError` into one line on stderr and exit code 2, so every
message names where the bad value came from (file and key path) and what was expected.

The library speaks in its own parameters, never in command-line flags: an error about an
argument names it as its *param* (``devices``), and a message that mentions one marks it with
:func:`param` (`` `devices` ``). A Python caller reads those names; ``atpsim.commands`` holds
the one table from parameter names to flags and shows each as the flag (``--devices``).
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

#: The exit statuses of every command, as ``atpsim --help`` lists them.
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
EXIT_WORKER_DIED = 4
EXIT_OUT_OF_MEMORY = 5
EXIT_INTERRUPTED = 130

EXIT_CODES: tuple[tuple[int, str], ...] = (
    (EXIT_OK, "success"),
    (EXIT_FAILED, "ran, but some sweep points failed or a validation missed its tolerance"),
    (EXIT_BAD_INPUT, "bad input: a file, key or option (also a request over a size limit)"),
    (EXIT_INTERNAL, "internal error (a bug; ATPSIM_TRACEBACK=1 shows the traceback)"),
    (EXIT_WORKER_DIED, "a worker process died (killed or out of memory); `resume=True` continues"),
    (EXIT_OUT_OF_MEMORY, "this machine ran out of memory"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C); `resume=True` continues"),
)

#: A mention of a library parameter in a message: `` `name` `` or `` `name=value` `` (:func:`param`).
PARAM_MENTION = re.compile(r"`([a-z_][a-z0-9_]*)(?:=([^`]*))?`")


def param(name: str, value: object = None) -> str:
    """The library parameter *name* (with *value*, when the advice is to give that value) as
    a message mentions it: `` `devices` ``, `` `resume=True` ``, `` `engine='auto'` ``.
    A command shows it as its flag (``--devices``, ``--resume``, ``--engine auto``)."""
    return f"`{name}`" if value is None else f"`{name}={value!r}`"


def show_params(text: str, flag: Callable[[str, str | None], str | None]) -> str:
    """*text* with each :func:`param` mention replaced by ``flag(name, value)`` (the value's
    repr, or None), left as it is where *flag* answers None."""

    def shown(match: re.Match[str]) -> str:
        return flag(match[1], match[2]) or match[0]

    return PARAM_MENTION.sub(shown, text)


class AtpsimError(Exception):
    """Bad input: a *source* (file or argument), a *key* path inside it, and what was *expected*.

    *param* names the library parameter the error is about (``devices``) where it is one; it
    is then the *key* as well, and a command shows it as its flag. *exit_code* is the
    command's exit status for it: 2 (bad input) unless a subclass says otherwise.
    """

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, *, source: str | None = None, key: str | None = None,
                 param: str | None = None):  # fmt: skip
        self.message = message
        self.source = source
        self.key = key if key is not None else param
        self.param = param
        super().__init__(self.format())

    def format(self, flag: Callable[[str, str | None], str | None] | None = None) -> str:
        """One line: ``source: key: message`` with the parts that are known; with *flag*
        (``flag(name, value)``, a command's), the parameters it knows shown as it says."""
        parts = [p for p in (self.source, self.key) if p]
        if flag is None:
            return ": ".join([*parts, self.message])
        key = flag(self.param, None) if self.param is not None and self.key == self.param else None
        parts = [p for p in (self.source and show_params(self.source, flag), key or self.key) if p]
        return ": ".join([*parts, show_params(self.message, flag)])

    def with_source(self, source: str) -> AtpsimError:
        """Return a copy that names *source* (e.g. the scenario file) when none was set."""
        return type(self)(self.message, source=self.source or source, key=self.key, param=self.param)


class ScenarioError(AtpsimError):
    """A scenario file that cannot be read or does not validate."""


class TopologyError(AtpsimError):
    """A topology that cannot be built: unknown name, bad parameter, disconnected graph."""


class SimulationError(AtpsimError):
    """A request the simulator cannot carry out (e.g. an algorithm that does not fit the group)."""


class SizeLimitError(AtpsimError):
    """A request larger than a limit (GPUs, links, flows, sweep points): the message says how
    big it is and which option or scenario key raises the limit."""


class WorkerDiedError(SimulationError):
    """A sweep's worker process died (killed, out of memory): not bad input, exit 4."""

    exit_code = EXIT_WORKER_DIED


class OutputLockedError(AtpsimError):
    """Another run holds the output folder's lock."""


def did_you_mean(name: object, choices: Iterable[object]) -> str:
    """' (did you mean 'x'?)' for the nearest of *choices* to *name*, else the list of valid names.

    Appended to an "unknown ..." message, so every typo in a file or option is answered with
    the nearest valid spelling (towncrier's style).
    """
    names = [str(c) for c in choices]
    close = difflib.get_close_matches(str(name), names, n=1)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f"; expected one of {sorted(names)}"


def describe_os_error(error: OSError | UnicodeError, path: object = None) -> str:
    """One line for a file-system or decoding *error*: the file, then what went wrong in words
    (e.g. ``/proc/x: cannot write here (read-only file system)``)."""
    if isinstance(error, UnicodeError):
        where = f"{path}: " if path is not None else ""
        return f"{where}not a UTF-8 text file ({type(error).__name__} at byte {_byte(error)})"
    name = path if path is not None else (error.filename or "")
    what = error.strerror or type(error).__name__
    hint = {
        "IsADirectoryError": "expected a file, found a folder",
        "NotADirectoryError": "expected a folder, found a file",
        "PermissionError": "permission denied",
        "FileNotFoundError": "no such file or folder",
    }.get(type(error).__name__, what)
    return f"{name}: {hint}" + (f" ({what})" if hint != what else "") if name else hint


#: The last second of the year 9999, the latest date Python's datetime can show.
MAX_EPOCH_S = 253_402_300_799


def limit_from_env(name: str, default: int, error_type: type[AtpsimError] = SizeLimitError) -> int:
    """A size limit: the environment variable *name* if set (:func:`env_limit`), else
    *default*. The GPU and slot limits are read this way, where they are checked: every
    topology build and job check (scenario expansion, sweep workers, planners) reaches them,
    too many paths to carry an argument. The commands read the others (memory, layouts) once
    and pass them down."""
    value = env_limit(name, error_type)
    return default if value is None else value


#: The largest count an environment limit may set (2^63 - 1, what the OS's limits hold).
MAX_ENV_COUNT = 2**63 - 1


def env_limit(name: str, error_type: type[AtpsimError] = SizeLimitError) -> int | None:
    """The integer from 1 to :data:`MAX_ENV_COUNT` the environment variable *name* sets (an
    *error_type* naming it for anything else), or None where it is not set."""
    text = os.environ.get(name)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_ENV_COUNT:
        raise error_type(f"expected an integer from 1 to {MAX_ENV_COUNT}, got {text!r}", key=name)
    return value


def check_number(value: object, key: str | None, *, low: float = -math.inf,
                 high: float = math.inf, what: str = "a number", bounds: str | None = None,
                 shown: object = None,
                 error_type: type[AtpsimError] = AtpsimError) -> float:  # fmt: skip
    """*value* as a float where it is a finite number (not a bool) from *low* to *high*
    (inclusive); otherwise an *error_type* at *key* that says *what* was expected and the
    bounds: the one check every number that enters from a user passes (an option, an
    environment limit, a builder parameter), so ``nan``, ``inf`` and ``1e400`` are refused
    by name where they enter rather than crashing later (``int(inf)``) or running silently
    (``x < 1`` is false for nan). *bounds* words the bounds where their numbers read badly
    (' from 256 MiB to 1 EiB'); *shown* is what the user wrote, where *value* was parsed from it."""
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    limits = _bounds(low, high) if bounds is None else bounds
    got = value if shown is None else shown
    if number is None or not math.isfinite(number):
        raise error_type(f"expected {_finite(what)}{limits}, got {got!r}", key=key)
    if not low <= number <= high:
        raise error_type(f"expected {what}{limits}, got {got!r}", key=key)
    return float(number)


def _finite(what: str) -> str:
    """'a finite number' from 'a number', 'a finite integer' from 'an integer'."""
    article, _, rest = what.partition(" ")
    return f"a finite {rest}" if article in ("a", "an") and rest else f"finite {what}"


def _bounds(low: float, high: float) -> str:
    """' >= 1', ' from 1 to 10', ' <= 5' or '' for the bounds of :func:`check_number`."""
    if math.isinf(low) and math.isinf(high):
        return ""
    if math.isinf(high):
        return f" >= {low:g}"
    if math.isinf(low):
        return f" <= {high:g}"
    return f" from {low:g} to {high:g}"


#: Share of this machine's physical memory one process may take when no cap is given.
MEMORY_SHARE = 0.8


def machine_memory_bytes() -> int | None:
    """The memory one process may use unless told otherwise, bytes: :data:`MEMORY_SHARE` of
    this machine's physical memory; None where that is not known. The one default of every
    memory cap (the reference engine's budget, the commands' data limit)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") * MEMORY_SHARE)
    except (AttributeError, ValueError, OSError):
        return None


def source_date_epoch() -> int | None:
    """``SOURCE_DATE_EPOCH`` (whole seconds since 1970, the reproducible-builds convention,
    https://reproducible-builds.org/specs/source-date-epoch/) as an int, None when unset;
    an AtpsimError naming it otherwise (numpy's f2py, which importing scipy loads, fails
    on such a value before a command could run)."""
    text = os.environ.get("SOURCE_DATE_EPOCH")
    if text is None:
        return None
    if not text.strip().isdigit() or int(text) > MAX_EPOCH_S:
        raise AtpsimError(f"expected whole seconds since 1970 (0 to {MAX_EPOCH_S}), got {text!r}",
                          key="SOURCE_DATE_EPOCH")  # fmt: skip
    return int(text)


def _byte(error: UnicodeError) -> object:
    return getattr(error, "start", "?")


def read_text(path: object, what: str, error_type: type[AtpsimError] = AtpsimError) -> str:
    """The UTF-8 text of the file *path* (*what* it is, e.g. 'the scenario file'); a missing,
    unreadable or binary file, or a folder, is an *error_type* naming the file."""
    source = str(path)
    try:
        return Path(source).read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise error_type(
            f"cannot read {what}: expected UTF-8 text, found binary data at byte {error.start}",
            source=source,
        ) from None
    except OSError as error:
        raise error_type(
            f"cannot read {what}: {describe_os_error(error, '')}", source=source
        ) from None

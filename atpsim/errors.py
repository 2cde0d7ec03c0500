"""The one error type the library raises for bad input, and its message format.

The CLI turns an :class:`AtpsimError` into one line on stderr and exit code 2, so every
message names where the bad value came from (file and key path) and what was expected.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class AtpsimError(Exception):
    """Bad input: a *source* (file or argument), a *key* path inside it, and what was *expected*."""

    def __init__(self, message: str, *, source: str | None = None, key: str | None = None):
        self.message = message
        self.source = source
        self.key = key
        super().__init__(self.format())

    def format(self) -> str:
        """One line: ``source: key: message`` with the parts that are known."""
        parts = [p for p in (self.source, self.key) if p]
        return ": ".join([*parts, self.message])

    def with_source(self, source: str) -> AtpsimError:
        """Return a copy that names *source* (e.g. the scenario file) when none was set."""
        return type(self)(self.message, source=self.source or source, key=self.key)


class ScenarioError(AtpsimError):
    """A scenario file that cannot be read or does not validate."""


class TopologyError(AtpsimError):
    """A topology that cannot be built: unknown name, bad parameter, disconnected graph."""


class SimulationError(AtpsimError):
    """A request the simulator cannot carry out (e.g. an algorithm that does not fit the group)."""


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

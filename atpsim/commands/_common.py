"""What every command shares: turning library errors into one line and exit code 2."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from atpsim.api import AtpsimError

F = TypeVar("F", bound=Callable[..., Any])


def clean_errors(fn: F) -> F:
    """Run *fn*; an :class:`AtpsimError` becomes ``atpsim: <message>`` on stderr and exit 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AtpsimError as error:
            click.echo(f"atpsim: error: {error.format()}", err=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]

"""The error types and exit statuses, re-exported without importing the stages (so a command
can catch them without paying for the engine's imports)."""

from __future__ import annotations

from atpsim.errors import (
    EXIT_CODES,
    MEMORY_SHARE,
    AtpsimError,
    OutputLockedError,
    SimulationError,
    SizeLimitError,
    WorkerDiedError,
    check_number,
    describe_os_error,
    env_limit,
    machine_memory_bytes,
    show_params,
    source_date_epoch,
)

__all__ = [
    "EXIT_CODES",
    "MEMORY_SHARE",
    "AtpsimError",
    "OutputLockedError",
    "SimulationError",
    "SizeLimitError",
    "WorkerDiedError",
    "check_number",
    "describe_os_error",
    "env_limit",
    "machine_memory_bytes",
    "show_params",
    "source_date_epoch",
]

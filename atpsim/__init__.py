"""atpsim: a discrete-event simulator of adaptive tensor parallelism (ATP) on GPU interconnects.

Data flows scenario -> topology -> collective schedule / compute plan -> event engine ->
results table -> report; each stage is a subpackage of the same name, and :mod:`atpsim.api`
chains them. Its entry points are available here too, loaded on first use::

    import atpsim
    step = atpsim.simulate(topology="dgx-h100", model="M3", mesh=(4, 2), chunks=2)
    sweep = atpsim.collective("ib-cluster:4x8", "all_reduce", "1 GiB")
    ranked = atpsim.plan("ic1", "M2", chunks=(1, 2))
    summary = atpsim.run_scenario("scenarios/quickstart.yaml")
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """The public API's names (:data:`atpsim.api.__all__`), imported when first asked for."""
    # lazy: every ``import atpsim.<part>`` runs this file, which must not load the top layer
    import atpsim.api as api

    if name in api.__all__:
        return getattr(api, name)
    raise AttributeError(f"module 'atpsim' has no attribute {name!r}")


def __dir__() -> list[str]:
    import atpsim.api as api  # lazy: as in __getattr__

    return sorted([*globals(), *api.__all__])

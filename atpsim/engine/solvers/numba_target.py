"""numba's CPU target loaded without scipy's linear algebra, which the compiled loops never call.

The first function numba compiles or loads from its cache in a process loads the CPU target's
implementations of numpy; one of them (``numba.np.arraymath``) asks whether BLAS is there by
importing ``scipy.linalg.cython_blas``, which imports ``scipy.linalg`` and, through scipy's
array-API layer, ``numpy.f2py``: 0.2-0.4 s of CPU a process (measured on the 2-core machine,
``python3 -c`` of :func:`load_cpu_target` then ``compile_joint_loop()``, with and without it:
0.70-0.81 s against 1.01-1.14 s). atpsim's compiled loops (:mod:`.flow_kernel`,
:mod:`.joint_kernel`, :mod:`.joint_rates`) use no BLAS call (no ``np.dot``, no ``@``, no
``np.linalg``), so :func:`load_cpu_target` loads the target with that import answered "not
installed" (a ``None`` entry in :data:`sys.modules`, Python's own way to refuse an import),
then takes the entry out again: a later ``import scipy.linalg`` (the calibration fits) imports
it as usual. Numba then reports BLAS missing for this process only, which would matter only to
a numba function that calls BLAS.
"""

from __future__ import annotations

import functools
import sys

#: The module numba imports to ask whether BLAS is there (``numba.np.linalg.ensure_blas``).
BLAS_PROBE = "scipy.linalg.cython_blas"


@functools.cache
def load_cpu_target() -> None:
    """Load numba's CPU target now (once a process), without importing scipy.linalg where it
    is not imported yet (module docstring)."""
    from numba.core.registry import cpu_target

    if BLAS_PROBE in sys.modules or "scipy.linalg" in sys.modules:
        cpu_target.target_context.refresh()
        return
    sys.modules[BLAS_PROBE] = None  # type: ignore[assignment]  # "import refused"
    try:
        cpu_target.target_context.refresh()
    finally:
        del sys.modules[BLAS_PROBE]

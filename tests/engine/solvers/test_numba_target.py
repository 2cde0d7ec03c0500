"""numba's CPU target loads without scipy.linalg, and leaves scipy importable as usual."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("numba")

PROBE = """
import sys
from atpsim.engine.solvers.joint_loop import compile_joint_loop
from atpsim.engine.solvers.numba_target import BLAS_PROBE
assert compile_joint_loop()
print("scipy.linalg" in sys.modules, BLAS_PROBE in sys.modules)
import scipy.linalg.cython_blas  # a later import works: the refusal was taken out
from scipy.optimize import brentq
print(round(brentq(lambda x: x * x - 2.0, 0.0, 2.0), 6))
"""


def test_compiled_loops_load_without_scipy_linalg_and_scipy_still_imports() -> None:
    """Loading the compiled joint loop (its functions run on a few flows) imports no
    scipy.linalg and leaves no refusal behind; scipy.optimize (which imports scipy.linalg)
    works afterwards in the same process."""
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False", "1.414214"]

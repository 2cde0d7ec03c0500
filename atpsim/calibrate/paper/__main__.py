"""Fit the paper's machines to its Table 3: ``python -m atpsim.calibrate.paper``.

Runs the fit (:func:`atpsim.calibrate.paper.fit.run_fit`, deterministic, about 45 s), prints
every parameter (fitted and spec), the fit residuals per cell, the check-set errors and the M4
predictions (:mod:`atpsim.calibrate.paper.printout`), then writes the fitted values into
``atpsim/data/presets.yaml`` (ic1-ic4) and ``atpsim/data/hardware/a100-sxm4-80gb-paper-stack.yaml``
(:mod:`atpsim.calibrate.paper.datafiles`) and records the fit in
``atpsim/data/calibration/paper-fit.yaml`` (:mod:`atpsim.calibrate.paper.record`).
``--dry-run`` writes nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from atpsim.calibrate.paper import datafiles, printout
from atpsim.calibrate.paper.fit import run_fit
from atpsim.calibrate.paper.table3 import PAPER_B_ELEMENT_BYTES


def main(argv: Sequence[str] | None = None) -> int:
    """Fit, print the report, and (unless ``--dry-run``) write the data files."""
    parser = argparse.ArgumentParser(
        prog="python -m atpsim.calibrate.paper", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--dry-run", action="store_true", help="print only; write no data file")
    parser.add_argument(
        "--b-element-bytes", type=int, choices=(2, 4), default=PAPER_B_ELEMENT_BYTES,
        help="bytes per element under which the paper's IC1 bandwidths are read",
    )  # fmt: skip
    args = parser.parse_args(argv)
    result = run_fit(args.b_element_bytes)
    print(printout.report(result))
    if not args.dry_run:
        for path in datafiles.write_all(result):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

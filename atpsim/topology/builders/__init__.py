"""Topology builders; importing this package registers every builder by name."""

import atpsim.topology.custom  # noqa: F401
from atpsim.topology.builders import cluster, pcie, switch, torus  # noqa: F401

"""Topology builders; importing this package registers every builder by name."""

from atpsim.topology import custom  # noqa: F401
from atpsim.topology.builders import cluster, pcie, switch, torus  # noqa: F401

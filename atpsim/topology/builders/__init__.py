"""Topology builders; importing this package registers every builder by name."""

from atpsim.topology.builders import switch, torus  # noqa: F401

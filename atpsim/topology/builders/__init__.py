"""Topology builders, one family per module; each registers its builders by name on import
(:mod:`atpsim.topology.builders.base`), and :mod:`atpsim.topology.registry` imports them all."""

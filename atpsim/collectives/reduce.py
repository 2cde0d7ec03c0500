"""Reduce to the group's first rank: a broadcast's schedule run backwards.

A reduce moves the same bytes over the same pairs as the broadcast of the same buffer, in the
opposite direction and the opposite step order (a pipelined chain toward the root, or a
binomial tree folding onto the root; Thakur, Rabenseifner and Gropp 2005, ref [27], treat
reduce as the dual of broadcast). The reduction's arithmetic is not timed, like every other
collective here, so its time equals the broadcast's wherever links are full duplex.
"""

from __future__ import annotations

from atpsim.collectives.broadcast import binomial_broadcast, ring_broadcast
from atpsim.collectives.schedule import Pattern, Steps, step


def reversed_pattern(forward: Pattern) -> Pattern:
    """*forward*'s steps in reverse order with every transfer's direction swapped."""
    return Steps.of(step(s.dst, s.src, s.nbytes) for s in reversed(forward))


def ring_reduce(p: int, nbytes: float) -> Pattern:
    """The pipelined chain of :func:`ring_broadcast`, reversed: chunks flow toward rank 0."""
    return reversed_pattern(ring_broadcast(p, nbytes))


def binomial_reduce(p: int, nbytes: float) -> Pattern:
    """The binomial tree of :func:`binomial_broadcast`, reversed: halves fold onto rank 0."""
    return reversed_pattern(binomial_broadcast(p, nbytes))

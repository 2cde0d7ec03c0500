"""Reductions: each shrinks a collective problem to a smaller one and expands the smaller
one's answer exactly (replicated clusters, rank-shift symmetry, periodic extension)."""

"""Reductions: each shrinks a collective problem to a smaller one and expands the smaller
one's answer exactly (link-disjoint components, shared with the joint network; replicated
clusters, the collective's use of them; rank-shift symmetry; mirror; periodic extension)."""

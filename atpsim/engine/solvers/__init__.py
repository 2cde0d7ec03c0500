"""Solvers: each times a problem, or answers None where it would not be exact (the
longest-path sweep); the event-driven max-min solver always answers."""

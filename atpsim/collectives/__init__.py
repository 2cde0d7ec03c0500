"""Collective algorithms as data: (groups, bytes) -> a schedule of transfer steps, no simpy.

:mod:`registry` names the algorithms per op and builds schedules; :mod:`closed_form` is the
no-contention oracle the engine is tested against; :mod:`nccl` plans what NCCL would run for a
call (channel rings, trees, protocols) as candidates the engine times, each schedule planned for
one machine a :class:`~atpsim.collectives.planned.PlannedPattern`.
"""

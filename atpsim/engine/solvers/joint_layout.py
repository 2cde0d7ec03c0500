"""The layout of the compiled joint loop's arrays (:mod:`~atpsim.engine.solvers.joint_loop`):
which row of which array holds what, and the slots of its scalars. Shared by the loop's
functions (:mod:`~atpsim.engine.solvers.joint_kernel`), its rate solve
(:mod:`~atpsim.engine.solvers.joint_rates`) and the class that holds the arrays.

numba caches the compiled functions by their own source files, not by the constants they
import from here, and the loop's cached machine code holds its own copy of the rate solve: a
cache from before a change here would index the rows as they were (it wrote past the links'
rows once). So ``joint_kernel.py`` and ``joint_rates.py`` each name the layout they were
written for (``LAYOUT``, this module's :func:`fingerprint`), and a test holds them to it: a
change here fails it until both files say the new fingerprint, which changes them, so numba
compiles them again."""

import hashlib

# Rows of the per-node float state, the per-node integer state and the per-link state.
LAT, NBYTES, RELEASE, START, FINISH, REMAINING, RATE = range(7)
# (ACTIVE and FIRST are by position among the flows in flight: the flow, its first incidence;
# GROUP: the node's group, whose end a run may stop at, -1: none)
PROTOCOL, WAITING, ACTIVE, FIRST, GROUP = range(5)
# the incidences of the flows in flight (each flow's consecutive, flows in ACTIVE order)
OWNER, LINK = range(2)
# per link: state, then scratch rows of the rate solve (working capacity, load, share, gone)
CAP, BUSY_SINCE, BUSY, BYTES, WCAP, LOAD, SHARE, GONE = range(8)
# per link: class, flows on it, changed mark; scratch: mark, queue
CLASS, ON_LINK, FLAG, MARK, QUEUE = range(5)
# The arrival heap's integer rows and the node buffers' rows (GROUP_LEFT by group: its nodes
# not done).
SEQ, SEG_START, SEG_LEN = range(3)
IDS, DONE, GROUP_LEFT = range(3)
# Scalar slots (int64) and the clock (float64).
N_NODES, N_DONE, N_EVENTS, N_SEQ, N_ACTIVE, N_INC, N_HEAP, IDS_TOP, DONE_TOP, CHANGED, WEIGHTED, \
    N_LINKS, INC_DONE, N_GROUPS, GROUP_ENDED = range(15)
NOW = 0


def fingerprint() -> str:
    """The layout's rows and slots (every name and its number here), hashed: 12 hex digits."""
    names = sorted((name, value) for name, value in globals().items() if name.isupper() and isinstance(value, int))
    return hashlib.sha1(repr(names).encode()).hexdigest()[:12]

"""The layout of the compiled joint loop's arrays (:mod:`~atpsim.engine.solvers.joint_loop`):
which row of which array holds what, and the slots of its scalars. Shared by the loop's
functions (:mod:`~atpsim.engine.solvers.joint_kernel`), its rate solve
(:mod:`~atpsim.engine.solvers.joint_rates`) and the class that holds the arrays.

numba caches the compiled functions by their own source files, not by the constants they
import from here, and the loop's cached machine code holds its own copy of the rate solve: a
change to this layout must come with a change to ``joint_kernel.py`` and ``joint_rates.py``
(their docstrings name the layout's last change), or a cache from before would index the
rows as they were."""

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

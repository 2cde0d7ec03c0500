"""atpsim: a discrete-event simulator of adaptive tensor parallelism (ATP) on GPU interconnects.

Data flows scenario -> topology -> collective schedule / compute plan -> event engine ->
results table -> report; each stage is a subpackage of the same name.
"""

__version__ = "0.1.0"

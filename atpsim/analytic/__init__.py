"""The paper's analytical model (Sections 3.3-3.5, 5.3-5.4): the hierarchical communication
matrix derived from a topology graph, Eq. 2-4, the IC5/IC6 closed form and ATP's mesh choice."""

from atpsim.analytic.hcm import HcmGroup, HcmLayer, HierarchicalCommMatrix, derive_hcm
from atpsim.analytic.model import (
    PAPER_IC1_CALIBRATION,
    MeshEstimate,
    algo_bandwidth,
    closed_form_t_comm_s,
    closed_form_units,
    delta_s,
    estimate_mesh,
    mesh_bandwidths,
    plan_analytic,
    t_comm_s,
)

__all__ = [
    "PAPER_IC1_CALIBRATION",
    "HcmGroup",
    "HcmLayer",
    "HierarchicalCommMatrix",
    "MeshEstimate",
    "algo_bandwidth",
    "closed_form_t_comm_s",
    "closed_form_units",
    "delta_s",
    "derive_hcm",
    "estimate_mesh",
    "mesh_bandwidths",
    "plan_analytic",
    "t_comm_s",
]

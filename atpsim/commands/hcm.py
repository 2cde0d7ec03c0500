"""`atpsim hcm TOPOLOGY [--devices N] [--json]`: the hierarchical communication matrix."""

from __future__ import annotations

import json

import click

from atpsim.api import format_hcm, hcm, hcm_as_dict
from atpsim.commands._common import clean_errors


@click.command("hcm")
@click.argument("topology")
@click.option(
    "--devices",
    "-n",
    type=click.IntRange(min=1),
    default=None,
    help="GPU count for scalable presets and builders (e.g. ic5, ic6, torus).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the full matrix as JSON (bytes/s).")
@clean_errors
def command(topology: str, devices: int | None, as_json: bool) -> None:
    """Print the hierarchical communication matrix of TOPOLOGY (paper Section 3.4): for each
    layer its ranks (the GPUs each holds), the P2P matrix and the group bandwidth per rank, in
    GB/s per direction. TOPOLOGY is a preset (ic1..ic6), a builder spec ('torus:4x4',
    'ib-cluster:4x4') or a custom YAML file, as in `atpsim topo show`."""
    matrix = hcm(topology, devices)
    click.echo(json.dumps(hcm_as_dict(matrix)) if as_json else format_hcm(matrix, " (--json for all)"))

"""`atpsim topo`: show a topology, trace a route, list presets and builders."""

from __future__ import annotations

import click

from atpsim.api import (
    builders,
    draw_topology,
    format_bandwidth,
    format_time,
    load_topology,
    presets,
    route,
    topology_summary,
)
from atpsim.commands._common import clean_errors


@click.group("topo")
def command() -> None:
    """Inspect interconnect topologies (presets, builder specs such as torus:32x32, YAML files)."""


@command.command("show")
@click.argument("topology")
@click.option(
    "--devices", "-n", type=click.IntRange(min=1), default=None,
    help="Size a scalable preset or builder.",
)
@click.option(
    "--png", "png", type=click.Path(dir_okay=False), default=None, help="Draw the graph to FILE."
)
@clean_errors
def show(topology: str, devices: int | None, png: str | None) -> None:
    """Summarize TOPOLOGY: GPUs, switches, links by kind and bandwidth, routing."""
    topo = load_topology(topology, devices)
    summary = topology_summary(topo)
    click.echo(f"topology: {summary.name}")
    if summary.description:
        click.echo(f"  {summary.description}")
    click.echo(f"GPUs: {summary.n_gpus}")
    others = {k: n for k, n in summary.nodes_by_kind.items() if k != "gpu"}
    if others:
        click.echo("switches and hosts: " + ", ".join(f"{n} {k}" for k, n in others.items()))
    click.echo("links (full duplex; bandwidth per direction):")
    click.echo(f"  {'kind':<16}{'count':>7}  {'bandwidth':>12}  {'latency':>10}")
    for group in summary.links:
        click.echo(
            f"  {group.kind:<16}{group.count:>7}  {format_bandwidth(group.bandwidth_Bps):>12}"
            f"  {format_time(group.latency_s):>10}"
        )
    click.echo(f"routing: {summary.router}")
    if summary.wiring:
        click.echo("wiring:")
        for line in summary.wiring:
            click.echo(f"  {line}")
    if "hardware" in summary.meta:
        click.echo(f"default hardware: {summary.meta['hardware']}")
    if png:
        note = draw_topology(topo, png)
        click.echo(f"wrote {png}{f' ({note})' if note else ''}")


@command.command("route")
@click.argument("topology")
@click.argument("src", type=int)
@click.argument("dst", type=int)
@click.option(
    "--devices", "-n", type=click.IntRange(min=1), default=None,
    help="Size a scalable preset or builder.",
)
@clean_errors
def route_(topology: str, src: int, dst: int, devices: int | None) -> None:
    """The links a transfer from GPU SRC to GPU DST crosses on TOPOLOGY."""
    topo = load_topology(topology, devices)
    summary = route(topo, src, dst)
    click.echo(f"{topo.name}: GPU {src} -> GPU {dst}, {len(summary.hops)} hop(s)")
    for hop in summary.hops:
        click.echo(
            f"  {str(hop.src):>14} -> {str(hop.dst):<14} {hop.kind:<15}"
            f"{format_bandwidth(hop.bandwidth_Bps):>12}  {format_time(hop.latency_s):>10}"
        )
    click.echo(f"total latency: {format_time(summary.latency_s)}")
    bottleneck = "n/a (same GPU)" if not summary.hops else format_bandwidth(summary.bottleneck_Bps)
    click.echo(f"bottleneck bandwidth: {bottleneck}")


@command.command("list")
@clean_errors
def list_() -> None:
    """Presets, one line each; builders, each with its parameters, units and defaults."""
    click.echo("presets:")
    for name, description in presets():
        click.echo(f"  {name:<24}{description}")
    click.echo(
        "builders (NAME or NAME:SIZE, e.g. torus:32x32, ib-cluster:4x8; "
        "parameters after a comma, e.g. torus:4x4,link_bandwidth_Bps=50 GB/s):"
    )
    click.echo(f"      {'PARAMETER':<32}{'TYPE [UNIT]':<24}{'DEFAULT':<12}DESCRIPTION")
    for builder in builders():
        click.echo(f"  {builder.name:<24}{builder.summary}")
        for param in builder.params:
            click.echo(
                f"      {param.name:<32}{param.type_text:<24}{param.default_text:<12}"
                f"{param.description}"
            )

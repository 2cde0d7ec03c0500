"""`atpsim topo`: show a topology, trace a route, list presets and builders."""

from __future__ import annotations

import click

from atpsim.commands._common import clean_errors
from atpsim.units import format_bandwidth, format_time


@click.group("topo")
def command() -> None:
    """Inspect interconnect topologies (presets, builder specs such as torus:32x32, YAML files)."""


@command.command("show")
@click.argument("topology")
@click.option("--gpus", type=int, default=None, help="Size a scalable preset or builder.")
@click.option(
    "--png", "png", type=click.Path(dir_okay=False), default=None, help="Draw the graph to FILE."
)
@clean_errors
def show(topology: str, gpus: int | None, png: str | None) -> None:
    """Summarize TOPOLOGY: GPUs, switches, links by kind and bandwidth, routing."""
    from atpsim.topology.spec import load_topology
    from atpsim.topology.summary import summarize

    topo = load_topology(topology, n_gpus=gpus, source=topology)
    summary = summarize(topo)
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
        from atpsim.report.topology_plot import draw_topology

        note = draw_topology(topo, png)
        click.echo(f"wrote {png}{f' ({note})' if note else ''}")


@command.command("route")
@click.argument("topology")
@click.argument("src", type=int)
@click.argument("dst", type=int)
@click.option("--gpus", type=int, default=None, help="Size a scalable preset or builder.")
@clean_errors
def route(topology: str, src: int, dst: int, gpus: int | None) -> None:
    """The links a transfer from GPU SRC to GPU DST crosses on TOPOLOGY."""
    from atpsim.topology.spec import load_topology
    from atpsim.topology.summary import describe_route

    topo = load_topology(topology, n_gpus=gpus, source=topology)
    summary = describe_route(topo, src, dst)
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
    """Presets and builders, one line each."""
    from atpsim.topology.presets import preset_info, preset_names
    from atpsim.topology.registry import builder_names, get_builder

    click.echo("presets:")
    for name in preset_names():
        click.echo(f"  {name:<24}{preset_info(name).get('description', '')}")
    click.echo("builders (NAME or NAME:SIZE, e.g. torus:32x32, ib-cluster:4x8):")
    for name in builder_names():
        click.echo(f"  {name:<24}{_first_sentence(get_builder(name).__doc__ or '')}")


def _first_sentence(doc: str) -> str:
    text = " ".join(doc.split()).replace("*", "").replace("``", "")
    return text.split(". ")[0].split("; ")[0].rstrip(".")

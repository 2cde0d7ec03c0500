"""`atpsim import KIND INPUT [-o job.yaml]`: a framework's description of a training run
(Megatron-LM command line, NeMo recipe, DeepSpeed config, Hugging Face config.json) as a job
scenario, every value traced to the input line it came from."""

from __future__ import annotations

from pathlib import Path

import click

from atpsim.api import import_job, imported_yaml, importer_kinds, show_params
from atpsim.commands._common import clean_errors, flag


@click.command("import")
@click.argument("kind", type=click.Choice(importer_kinds()))
@click.argument("input_path", metavar="INPUT",
                type=click.Path(exists=True, dir_okay=False, path_type=Path))  # fmt: skip
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the scenario here (default: print it).")  # fmt: skip
@click.option("-t", "--topology", metavar="SPEC",
              help="The machine (a preset, builder spec such as 'ib-cluster:4x8,generation=h100' "
              "or topology file). Default: DGX H100 nodes of 8 GPUs on InfiniBand, as many as "
              "the job's GPUs fill.")  # fmt: skip
@click.option("--gpus", type=click.IntRange(min=1),
              help="The job's GPU count, where the input does not give it (Megatron-LM without "
              "torchrun's --nnodes/--nproc-per-node, DeepSpeed, Hugging Face).")  # fmt: skip
@click.option("--model", metavar="MODEL",
              help="deepspeed only: the model, a preset (gpt3-13b, llama3.1-8b, ...) or a "
              "Hugging Face config.json.")  # fmt: skip
@click.option("--tp", type=click.IntRange(min=1), help="deepspeed, hf: tensor-parallel size "
              "(default 1).")  # fmt: skip
@click.option("--pp", type=click.IntRange(min=1), help="deepspeed, hf: pipeline stages "
              "(default 1).")  # fmt: skip
@click.option("--micro-batch", type=click.IntRange(min=1),
              help="hf: sequences per micro-batch (default 1).")
@click.option("--global-batch", type=click.IntRange(min=1),
              help="hf: sequences per iteration (default micro-batch x data parallelism).")
@click.option("--seq", type=click.IntRange(min=1),
              help="deepspeed, hf: sequence length (default: the model's; a config.json's "
              "max_position_embeddings).")  # fmt: skip
@click.option("--vocab", type=click.IntRange(min=1),
              help="megatron, nemo: the tokenizer's vocabulary (tokens), where the input names "
              "a tokenizer whose size atpsim does not know.")  # fmt: skip
@click.option("--name", help="The scenario's name (default: the input file's stem).")
@click.option("--no-check", is_flag=True,
              help="Do not validate the scenario (build its topology, check its sizes) before "
              "writing it.")  # fmt: skip
@clean_errors
def command(kind: str, input_path: Path, out: Path | None, topology: str | None,
            gpus: int | None, model: str | None, tp: int | None, pp: int | None,
            micro_batch: int | None, global_batch: int | None, seq: int | None,
            vocab: int | None, name: str | None, no_check: bool) -> None:  # fmt: skip
    """Turn INPUT, a framework's description of a training run, into a job scenario for
    `atpsim run`. KIND is what INPUT is: megatron (a launch script or argument file of
    pretrain_gpt.py), nemo (a NeMo or Megatron-Bridge recipe YAML), deepspeed (a DeepSpeed
    JSON config; give --model) or hf (a Hugging Face config.json: the model's shape).

    Every value of the scenario carries a comment naming the input line it came from (or the
    option, or the framework's default); what atpsim does not model, or does not understand,
    is a warning on stderr naming it, and listed in the scenario's header."""
    options = {"topology": topology, "gpus": gpus, "model": model, "tp": tp, "pp": pp,
               "micro_batch": micro_batch, "global_batch": global_batch, "seq": seq,
               "vocab": vocab, "name": name,
               "out_dir": str(out.parent) if out is not None else None}  # fmt: skip
    job = import_job(kind, input_path, check=not no_check,
                     **{k: v for k, v in options.items() if v is not None})  # fmt: skip
    for warning in job.warnings():
        click.echo(f"atpsim: warning: {show_params(warning, flag)}", err=True)
    text = show_params(imported_yaml(job), flag)  # `gpus=16` as the option was written: --gpus 16
    if out is None:
        click.echo(text, nl=False)
        return
    out.write_text(text, encoding="utf-8")
    devices = job.parallelism.get("devices")
    size = f"{devices.value} GPUs, " if devices is not None else ""
    click.echo(f"{out}: job scenario '{job.name}' ({size}topology {job.topology.value}); "
               f"run it with: atpsim run {out}")  # fmt: skip

"""What every importer shares: the options, the draft of a job's settings, and the last steps
(GPU count and topology, data parallelism, the global batch, the rank order) that turn a
draft into an :class:`~atpsim.importers.trace.ImportedJob`.

An importer fills a :class:`JobDraft` with the settings its input gives (each traced to its
line) and the framework's defaults for those it leaves out; :func:`finish` then derives what
the frameworks derive the same way:

- **data parallelism** = GPUs / (TP x CP x PP): Megatron-LM's ``data_parallel_size =
  world_size // total_model_size`` (``megatron/training/arguments.py``, ``validate_args``),
  NeMo and DeepSpeed alike; a GPU count it does not divide is refused, as they refuse it;
- **the global batch**, where the input leaves it out: micro-batch x DP (Megatron-LM's
  ``args.global_batch_size = args.micro_batch_size * args.data_parallel_size``);
- **the schedule**: interleaved 1F1B where a stage holds more than one model chunk, else 1F1B
  (Megatron-Core's ``forward_backward_pipelining_with_interleaving`` / ``..._without_...``);
- **the rank order**: Megatron-Core's ``initialize_model_parallel(order="tp-cp-ep-dp-pp")``:
  TP innermost, then CP, then DP, pipeline stages outermost (scenario ``order``, innermost
  first: ``[tp, cp, dp, pp]``);
- **the network**: ``isolated``, each collective timed alone (as the committed job scenarios
  run); ``joint`` (every call in flight sharing the links) can take minutes to simulate at
  hundreds of GPUs where a TP group is smaller than a node, so it is left to the user to ask;
- **the machine**, where ``-t`` does not name one: DGX H100 nodes of 8 GPUs on an InfiniBand
  fat tree (``ib-cluster:<nodes>x8,generation=h100``: NVLink4, one NDR 400 Gb/s NIC per GPU,
  the builder's H100 defaults), as many as the GPU count fills.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from atpsim.errors import AtpsimError, param
from atpsim.importers.trace import (
    IGNORED,
    NOT_MODELLED,
    OPTION,
    UNKNOWN,
    Finding,
    ImportedJob,
    Origin,
    Traced,
    default,
    option,
    traced,
)
from atpsim.topology.spec import load_topology, requested_gpus

#: GPUs per node of the default machine (a DGX H100).
GPUS_PER_NODE = 8
#: The builder spec of the default machine, for *nodes* nodes of *per_node* GPUs.
DEFAULT_TOPOLOGY = "ib-cluster:{nodes}x{per_node},generation=h100"


@dataclass(frozen=True)
class ImportOptions:
    """What ``atpsim import`` is told besides the input (each None where not given):

    - *topology*: the machine (a topology spec, as a scenario's ``topology`` takes it);
    - *gpus*: the job's GPU count, where the input does not give it;
    - *model*: the model of a DeepSpeed job (a preset such as ``gpt3-13b``, or a Hugging
      Face ``config.json``);
    - *tp*, *pp*, *micro_batch*, *global_batch*, *seq*: the layout, batch and sequence of a
      job whose input does not give them (DeepSpeed, Hugging Face);
    - *vocab*: the vocabulary (tokens) where the input names a tokenizer atpsim does not know;
    - *name*: the scenario's name (default: the input file's stem);
    - *out_dir*: the folder the scenario is written to (a topology file's path is written
      relative to it).
    """

    topology: str | None = None
    gpus: int | None = None
    model: str | None = None
    tp: int | None = None
    pp: int | None = None
    micro_batch: int | None = None
    global_batch: int | None = None
    seq: int | None = None
    vocab: int | None = None
    name: str | None = None
    out_dir: str | None = None

    def given(self) -> list[str]:
        """The options set (not None), by name, *out_dir* and *name* aside."""
        return [f.name for f in fields(self)
                if getattr(self, f.name) is not None and f.name not in ("out_dir", "name")]  # fmt: skip


def option_origin(options: ImportOptions, name: str) -> Origin:
    """The origin of option *name* with its value, as the library names a parameter
    (`` `gpus=16` ``; the command line shows it as its flag, ``--gpus 16``)."""
    return option(param(name, getattr(options, name)))


@dataclass
class JobDraft:
    """A job's settings as an importer reads them, before :func:`finish`: the scenario's
    ``model`` keys, the layout (``gpus``, ``tp``, ``pp``, ``cp``, ``ep``, ``virtual_stages``,
    ``partition``, ``micro_batch``, ``global_batch``, ``sequence_parallel``, ``recompute``,
    ``zero``), each traced; *gpus_per_node* where the input says it (torchrun's
    ``--nproc-per-node``, NeMo's ``trainer.devices``); and the findings so far."""

    kind: str
    source: str
    framework: str
    model: dict[str, Traced] = field(default_factory=dict)
    layout: dict[str, Traced] = field(default_factory=dict)
    gpus_per_node: Traced | None = None
    rank_order: str = ("Megatron-Core's rank order tp-cp-ep-dp-pp (initialize_model_parallel), "
                       "innermost first")
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def unknown(self, origin: Origin, why: str = "") -> None:
        self.findings.append(Finding(origin, UNKNOWN, why))

    def not_modelled(self, origin: Origin, why: str) -> None:
        self.findings.append(Finding(origin, NOT_MODELLED, why))

    def ignored(self, origin: Origin, why: str = "") -> None:
        self.findings.append(Finding(origin, IGNORED, why))

    def agrees(self, origin: Origin, what: str) -> None:
        """A setting atpsim simulates as the input asks, with no key of its own: a note."""
        self.notes.append(f"{origin.describe()}: {what}")

    def error(self, message: str, origin: Origin | None = None, key: str | None = None) -> AtpsimError:
        """Bad input: one line naming the file (and line) and the flag or key; where *origin*
        is an option of atpsim import, that option (its parameter)."""
        if origin is not None and origin.kind == OPTION:
            return AtpsimError(message, source=self.source, param=origin.text.strip("`").split("=")[0])
        where = origin.where if origin is not None else None
        return AtpsimError(message, source=where or self.source, key=key)

    def value(self, key: str) -> Any:
        """The layout setting *key*'s value (None where not set)."""
        item = self.layout.get(key)
        return None if item is None else item.value


def whole(text: Any, origin: Origin, key: str, draft: JobDraft, *, low: int = 1) -> int:
    """*text* as a whole number >= *low*, else bad input naming *key* at *origin*."""
    if isinstance(text, bool):
        raise draft.error(f"expected a whole number, got {text!r}", origin, key)
    if isinstance(text, int):
        number = text
    else:
        shown = str(text)
        if not re.fullmatch(r"[+-]?\d+", shown.strip()):
            hint = " (a shell variable this file does not set?)" if "$" in shown else ""
            raise draft.error(f"expected a whole number, got {shown!r}{hint}", origin, key)
        number = int(shown)
    if number < low:
        raise draft.error(f"expected a whole number >= {low}, got {number}", origin, key)
    return number


#: Tokenizers whose vocabulary is published (tokens, before any padding): GPT-2's BPE
#: (Radford et al. 2019; 50,257, the ``vocab_size`` of the released ``gpt2`` config.json, and
#: GPT-3's, Brown et al. 2020 Section 2.1), Llama 2 (32,000) and Llama 3 / 3.1 (128,256), and
#: Mixtral 8x7B (32,000), each its released ``config.json``'s ``vocab_size``.
KNOWN_TOKENIZERS: dict[str, int] = {
    "GPT2BPETokenizer": 50257,
    "gpt2": 50257,
    "meta-llama/Llama-2-7b-hf": 32000,
    "meta-llama/Llama-2-13b-hf": 32000,
    "meta-llama/Llama-2-70b-hf": 32000,
    "meta-llama/Meta-Llama-3-8B": 128256,
    "meta-llama/Meta-Llama-3-70B": 128256,
    "meta-llama/Meta-Llama-3.1-8B": 128256,
    "meta-llama/Meta-Llama-3.1-70B": 128256,
    "meta-llama/Meta-Llama-3.1-405B": 128256,
    "meta-llama/Llama-3.1-8B": 128256,
    "meta-llama/Llama-3.1-70B": 128256,
    "meta-llama/Llama-3.1-405B": 128256,
    "mistralai/Mixtral-8x7B-v0.1": 32000,
}


def padded_vocab(tokens: int, divisible_by: int, tp: int) -> int:
    """*tokens* padded up to a multiple of *divisible_by* x *tp*: Megatron-LM's
    ``_vocab_size_with_padding`` (``--make-vocab-size-divisible-by``, default 128), which NeMo
    uses too; GPT-2's 50,257 at TP 8 is 51,200."""
    multiple = divisible_by * tp
    return -(-tokens // multiple) * multiple


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """The line (1-based) of each mapping key of the YAML or JSON document *text*, by its key
    path (``("model", "hidden_size")``); empty where the text does not parse as YAML (a JSON
    file PyYAML cannot read: the values are still read, the lines are not known)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    lines: dict[tuple[str, ...], int] = {}
    stack: list[tuple[Any, tuple[str, ...]]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    key_path = (*path, str(key_node.value))
                    lines.setdefault(key_path, key_node.start_mark.line + 1)
                    stack.append((value_node, key_path))
    return lines


def scenario_name(source: str, options: ImportOptions) -> str:
    """The scenario's name: ``--name``, else the input file's stem made a valid name
    (letters, digits, ``.``, ``_``, ``-``)."""
    if options.name:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", options.name):
            raise AtpsimError("expected a name of letters, digits, '.', '_' and '-' "
                              f"(starting with a letter or digit), got {options.name!r}",
                              param="name")  # fmt: skip
        return options.name
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(source).stem).strip("-._")
    return stem or "imported"


def finish(draft: JobDraft, options: ImportOptions, description: str) -> ImportedJob:
    """The imported job of *draft*: the GPU count and topology, data parallelism, the global
    batch, the schedule and the rank order derived as the module docstring says."""
    layout = draft.layout
    gpus = _gpus(draft, options)
    topology = _topology(draft, options, gpus)
    parallelism: dict[str, Traced] = {}
    if gpus is not None:
        parallelism["devices"] = gpus
    tp, pp, cp = (layout[k] for k in ("tp", "pp", "cp"))
    parallelism["tp"] = traced([[tp.value, 1]], *tp.origins,
                               how=f"{tp.value}-way tensor parallelism, Megatron-LM's 1D TP "
                               f"(mesh {tp.value} x 1)")  # fmt: skip
    parallelism["pp"] = pp
    parallelism["cp"] = cp
    if "ep" in layout and (layout["ep"].value != 1 or draft.model.get("experts")):
        parallelism["ep"] = layout["ep"]
    dp = _data_parallel(draft, gpus, tp, pp, cp)
    parallelism["dp"] = dp
    parallelism["micro_batch"] = layout["micro_batch"]
    parallelism["global_batch"] = _global_batch(draft, dp)
    parallelism.update(_schedule(draft))
    for key in ("sequence_parallel", "recompute", "zero"):
        parallelism[key] = layout[key]
    parallelism["order"] = _order(draft, cp.value)
    parallelism["network"] = traced("isolated", default(
        "atpsim import's default: each collective timed alone, as scenarios/gpt-scale.yaml "
        "runs; 'joint' shares the links among the calls in flight (closer to a real run, and up "
        "to minutes slower to simulate where a TP group is smaller than a node)"))
    return ImportedJob(kind=draft.kind, source=draft.source, name=scenario_name(draft.source, options),
                       description=description, topology=topology, model=dict(draft.model),
                       parallelism=parallelism, findings=list(draft.findings),
                       notes=list(draft.notes))  # fmt: skip


def _gpus(draft: JobDraft, options: ImportOptions) -> Traced | None:
    """The job's GPU count: ``--gpus``, else what the input says (torchrun, NeMo's trainer),
    else the GPUs of the machine ``-t`` names (None where they are not known before the
    scenario builds it: the job then fills them, ``dp: auto``)."""
    if options.gpus is not None:
        return traced(options.gpus, option_origin(options, "gpus"))
    if "gpus" in draft.layout:
        return draft.layout["gpus"]
    if options.topology is None:
        raise AtpsimError(
            f"the GPU count is not in the input: give {param('gpus')} (or {param('topology')}, "
            "whose GPUs the job then fills)", source=draft.source)  # fmt: skip
    return topology_gpus(options)


def topology_gpus(options: ImportOptions) -> Traced | None:
    """The GPUs of the machine ``-t`` names, where its spec says them (``ib-cluster:4x8``: 32)
    or it is a preset of a fixed size (built, as the scenario would build it); None for one
    whose size is not known before the scenario sizes it."""
    if options.topology is None:
        return None
    count = requested_gpus(options.topology)
    if count is None and "/" not in options.topology and not options.topology.endswith((".yaml", ".yml")):
        try:
            count = load_topology(options.topology).n_gpus
        except AtpsimError:
            count = None  # a spec the scenario check refuses, by its own key
    if count is None:
        return None
    return traced(count, option_origin(options, "topology"), how=f"the topology's {count} GPUs")


def _topology(draft: JobDraft, options: ImportOptions, gpus: Traced | None) -> Traced:
    if options.topology is not None:
        spec = _relative_file(options.topology, options.out_dir)
        return traced(spec, option_origin(options, "topology"))
    assert gpus is not None  # _gpus refuses a job with neither
    count = gpus.value
    per_node = draft.gpus_per_node.value if draft.gpus_per_node is not None else None
    if per_node is None:
        per_node = count if count <= GPUS_PER_NODE else GPUS_PER_NODE
    if count % per_node:
        raise AtpsimError(f"{count} GPUs do not fill nodes of {per_node}; give {param('topology')} for "
                          "the machine", source=draft.source)  # fmt: skip
    spec = DEFAULT_TOPOLOGY.format(nodes=count // per_node, per_node=per_node)
    origins = gpus.origins + (draft.gpus_per_node.origins if draft.gpus_per_node else ())
    draft.notes.append(f"Topology: {spec}, DGX H100 nodes on an InfiniBand fat tree (atpsim "
                       f"import's default machine; {param('topology')} names another) for the "
                       f"{count} GPUs of the input.")  # fmt: skip
    return traced(spec, *origins, default("atpsim import's default machine: DGX H100 nodes "
                                          "(ib-cluster, generation h100)"),
                  how=f"{count // per_node} nodes x {per_node} GPUs")  # fmt: skip


def _relative_file(spec: str, out_dir: str | None) -> str:
    """A topology file's path as the scenario must write it (relative to the scenario's
    folder); any other spec as given."""
    if out_dir is not None and os.path.isfile(spec):
        return os.path.relpath(os.path.abspath(spec), os.path.abspath(out_dir))
    return spec


def _data_parallel(draft: JobDraft, gpus: Traced | None, tp: Traced, pp: Traced,
                   cp: Traced) -> Traced:  # fmt: skip
    model_parallel = tp.value * pp.value * cp.value
    if gpus is None:
        return traced("auto", default("the topology's GPUs / (TP x CP x PP), as "
                                      f"{draft.framework} sets its data parallelism"))  # fmt: skip
    if gpus.value % model_parallel:
        origin = next((o for o in (*tp.origins, *pp.origins, *cp.origins) if o.kind != "default"),
                      None)  # fmt: skip
        raise draft.error(f"{gpus.value} GPUs are not a multiple of TP x CP x PP = {tp.value} x "
                          f"{cp.value} x {pp.value} = {model_parallel} (the data-parallel size "
                          f"must be whole, as {draft.framework} asserts)", origin,
                          origin.text.split()[0] if origin else None)  # fmt: skip
    dp = gpus.value // model_parallel
    return traced(dp, *gpus.origins, *tp.origins, *cp.origins, *pp.origins,
                  how=f"{gpus.value} GPUs / (TP {tp.value} x CP {cp.value} x PP {pp.value}), "
                  f"{draft.framework}'s data-parallel size")  # fmt: skip


def _global_batch(draft: JobDraft, dp: Traced) -> Traced:
    if "global_batch" in draft.layout:
        return draft.layout["global_batch"]
    micro = draft.layout["micro_batch"]
    if dp.value == "auto":
        raise AtpsimError("the global batch is not in the input and the GPU count is not known: "
                          f"give {param('gpus')} (the global batch is then micro-batch x data "
                          "parallelism)", source=draft.source)  # fmt: skip
    return traced(micro.value * dp.value, *micro.origins, *dp.origins,
                  default(f"{draft.framework}'s global batch where none is given: micro-batch x "
                          "data-parallel size"),
                  how=f"{micro.value} x {dp.value}")  # fmt: skip


def _schedule(draft: JobDraft) -> dict[str, Traced]:
    virtual = draft.layout.get("virtual_stages")
    result: dict[str, Traced] = {}
    if virtual is not None and virtual.value > 1:
        result["schedule"] = traced("interleaved", *virtual.origins,
                                    how=f"{virtual.value} model chunks per stage: interleaved 1F1B")
        result["virtual_stages"] = virtual
    else:
        origins = virtual.origins if virtual is not None else ()
        result["schedule"] = traced("1f1b", *origins, default(
            f"{draft.framework}'s pipeline schedule without virtual stages: 1F1B"))
    if "partition" in draft.layout:
        result["partition"] = draft.layout["partition"]
    return result


def _order(draft: JobDraft, cp: int) -> Traced:
    order = ["tp", "cp", "dp", "pp"] if cp > 1 else ["tp", "dp", "pp"]
    return traced(order, default(draft.rank_order))

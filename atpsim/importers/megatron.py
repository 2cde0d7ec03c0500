"""A Megatron-LM launch command line or argument file as a job scenario.

The input is a shell script that launches ``pretrain_gpt.py`` (``torchrun --nnodes N
--nproc-per-node G pretrain_gpt.py --num-layers ...``; variables and arrays set in the script
are substituted, :mod:`atpsim.importers.cmdline`) or a file of its arguments alone. Flags are
Megatron-LM's own (``megatron/training/arguments.py``: ``_add_network_size_args``,
``_add_training_args``, ``_add_distributed_args``, ``_add_mixed_precision_args``,
``_add_moe_args``, ``_add_tokenizer_args``, ``_add_transformer_engine_args``), read with
Megatron-LM's defaults where a flag is left out and its rules where it derives one
(``validate_args``):

=========================================  =================================================
flag (Megatron-LM default)                 scenario key
=========================================  =================================================
--num-layers, --hidden-size,               model.layers, .hidden, .heads (required: Megatron-LM
--num-attention-heads                      asserts they are given)
--seq-length (or --encoder-seq-length)     model.seq (required)
--ffn-hidden-size (4 x hidden; with        model.ffn_hidden
--swiglu int(8 x hidden / 3 / 64) x 64)
--swiglu (off: GeLU)                       model.ffn: swiglu
--group-query-attention with               model.kv_heads (without --group-query-attention
--num-query-groups (1)                     the groups are ignored, as Megatron-LM ignores them)
--untie-embeddings-and-output-weights      model.tie_embeddings: false (tied by default)
(tied)
--bf16 / --fp16 / --fp8-format (fp32)      model.dtype (fp8: FP8 GEMMs, bf16 elsewhere)
--vocab-size, --tokenizer-type,            model.vocab: the tokenizer's tokens (GPT-2's 50,257
--padded-vocab-size,                       for GPT2BPETokenizer; NullTokenizer adds its EOD),
--make-vocab-size-divisible-by (128)       padded to a multiple of 128 x TP
--num-experts, --moe-router-topk (2),      model.experts, .top_k, .expert_ffn_hidden,
--moe-ffn-hidden-size (ffn), --moe-layer-  .moe_every, .capacity_factor
freq (1), --moe-expert-capacity-factor
torchrun --nnodes x --nproc-per-node       parallelism.devices (or ``--gpus`` of atpsim import)
--tensor-model-parallel-size (1)           parallelism.tp: [[t, 1]] (1D TP)
--pipeline-model-parallel-size (1)         parallelism.pp
--num-layers-per-virtual-pipeline-stage,   parallelism.virtual_stages, schedule: interleaved
--num-virtual-stages-per-pipeline-rank
--decoder-first/last-pipeline-num-layers   parallelism.partition
--context-parallel-size (1)                parallelism.cp
--expert-model-parallel-size (1)           parallelism.ep
--micro-batch-size (required)              parallelism.micro_batch
--global-batch-size (micro x DP)           parallelism.global_batch
--sequence-parallel (off; off at TP 1)     parallelism.sequence_parallel
--recompute-granularity, --recompute-      parallelism.recompute (none by default)
activations (= selective)
--use-distributed-optimizer (off)          parallelism.zero: 1 (else 0)
=========================================  =================================================

Flags that change a real run's time but that atpsim does not simulate (FlashAttention,
RMSNorm, RoPE, TP communication overlap, fused kernels, ...) are warnings, as is anything
not understood; flags with no bearing on an iteration's time (learning rate, data,
checkpoints, logging) are listed as ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from atpsim.errors import did_you_mean, param, read_text
from atpsim.importers.cmdline import Script, Word, read_script
from atpsim.importers.common import (
    KNOWN_TOKENIZERS,
    ImportOptions,
    JobDraft,
    finish,
    option_origin,
    padded_vocab,
    scenario_name,
    whole,
)
from atpsim.importers.megatron_flags import (
    _NODES,
    _PER_NODE,
    IGNORED_FLAGS,
    NOT_MODELLED_FLAGS,
    READ_FLAGS,
    SWITCHES,
)
from atpsim.importers.trace import ImportedJob, Origin, Traced, default, traced

KIND = "megatron"
FRAMEWORK = "Megatron-LM"
#: The ``atpsim import`` options a Megatron-LM command line takes (the rest it gives itself).
OPTIONS = frozenset({"topology", "gpus", "vocab", "name", "out_dir"})

@dataclass(frozen=True)
class Argument:
    """One flag of the command line with its values (``--data-path`` takes several)."""

    flag: str
    values: tuple[Word, ...]
    word: Word

    def origins(self, source: str) -> tuple[Origin, ...]:
        """The flag as written at its line, and each variable assignment its values came from."""
        text = " ".join([self.flag, *(w.text for w in self.values)])
        origins = [Origin(text, source, self.word.line)]
        origins += [Origin(w.variable, source, w.variable_line) for w in self.values
                    if w.variable and w.variable_line is not None]  # fmt: skip
        return tuple(origins)


class _Reader:
    """The arguments of the command line, read once each; what is left is sorted into the
    findings (:meth:`sort_the_rest`)."""

    def __init__(self, arguments: dict[str, Argument], draft: JobDraft):
        self.arguments = arguments
        self.draft = draft
        self.read: set[str] = set()

    def given(self, flag: str) -> bool:
        return flag in self.arguments

    def origins(self, flag: str) -> tuple[Origin, ...]:
        self.read.add(flag)
        return self.arguments[flag].origins(self.draft.source)

    def text(self, flag: str) -> str:
        argument = self.arguments[flag]
        self.read.add(flag)
        if len(argument.values) != 1:
            raise self.draft.error(f"expected one value, got {len(argument.values)}",
                                   argument.origins(self.draft.source)[0], flag)  # fmt: skip
        return argument.values[0].text

    def number(self, flag: str, fallback: int | None = None, *, low: int = 1) -> Traced | None:
        """*flag*'s whole number, traced; else *fallback* as Megatron-LM's default (None: no
        value)."""
        if flag in self.arguments:
            origins = self.origins(flag)
            return traced(whole(self.text(flag), origins[0], flag, self.draft, low=low), *origins)
        if fallback is None:
            return None
        return traced(fallback, default(f"{FRAMEWORK}'s default {fallback} for {flag}"))

    def setting(self, flag: str, fallback: int) -> Traced:
        """*flag*'s whole number, else Megatron-LM's default *fallback*; traced."""
        item = self.number(flag, fallback)
        assert item is not None
        return item

    def required(self, flag: str, *, alias: str | None = None) -> Traced:
        item = self.number(flag) or (self.number(alias) if alias else None)
        if item is None:
            raise self.draft.error(f"missing: {FRAMEWORK} requires it (validate_args)", key=flag)
        return item

    def peek(self, flag: str) -> str | None:
        """*flag*'s first value, without counting it as read (None where not given)."""
        argument = self.arguments.get(flag)
        return argument.values[0].text if argument and argument.values else None

    def switch(self, flag: str) -> bool:
        if flag in self.arguments:
            self.read.add(flag)
            return True
        return False

    def choice(self, flag: str, choices: tuple[str, ...]) -> str | None:
        if flag not in self.arguments:
            return None
        value = self.text(flag)
        if value not in choices:
            raise self.draft.error(f"expected one of {', '.join(choices)}, got {value!r}",
                                   self.origins(flag)[0], flag)  # fmt: skip
        return value

    def sort_the_rest(self) -> None:
        """Every argument not read: ignored, not modelled, or not understood."""
        known = {*IGNORED_FLAGS, *NOT_MODELLED_FLAGS, *READ_FLAGS}
        for flag, argument in self.arguments.items():
            if flag in self.read:
                continue
            origin = argument.origins(self.draft.source)[0]
            if flag in IGNORED_FLAGS:
                self.draft.ignored(origin, IGNORED_FLAGS[flag])
            elif flag in NOT_MODELLED_FLAGS:
                self.draft.not_modelled(origin, NOT_MODELLED_FLAGS[flag])
            else:
                self.draft.unknown(origin, f"not a flag atpsim reads{_nearest(flag, known)}")


def _nearest(flag: str, known: set[str]) -> str:
    hint = did_you_mean(flag, sorted(known))
    return hint if hint.startswith(" (did you mean") else ""


def import_megatron(path: str | Path, options: ImportOptions) -> ImportedJob:
    """The job scenario of the Megatron-LM launch script or argument file *path* (module
    docstring), its GPU count from torchrun's ``--nnodes`` x ``--nproc-per-node`` or
    ``options.gpus``."""
    source = str(path)
    script = read_script(read_text(path, "the Megatron-LM command line"), source)
    draft = JobDraft(KIND, source, FRAMEWORK)
    _launcher(script, draft)
    reader = _Reader(_arguments(script.arguments, draft), draft)
    tp = reader.setting("--tensor-model-parallel-size", 1)
    _model(reader, draft, options, tp.value)
    _layout(reader, draft, tp)
    reader.sort_the_rest()
    model = draft.model
    model["name"] = traced(scenario_name(source, options), default("the input file's name"))
    draft.model = {"name": model.pop("name"), **model}
    description = (f"{model['layers'].value} layers, hidden {model['hidden'].value}, "
                   f"{model['heads'].value} heads, as {source} launches it with Megatron-LM "
                   f"(atpsim import megatron)")  # fmt: skip
    return finish(draft, options, description)


def _launcher(script: Script, draft: JobDraft) -> None:
    """torchrun's node and per-node process counts (the GPU count); the launcher's other
    words, and the script's other commands, listed as ignored."""
    words = script.launcher
    counts: dict[str, Traced] = {}
    rest: list[Word] = []
    k = 0
    while k < len(words):
        flag, equals, inline = words[k].text.partition("=")
        if flag not in _NODES + _PER_NODE:
            rest.append(words[k])
            k += 1
            continue
        value = words[k + 1] if not equals and k + 1 < len(words) else Word(inline, words[k].line)
        origin = Origin(f"{flag} {value.text}", draft.source, words[k].line)
        counts["nodes" if flag in _NODES else "per_node"] = traced(
            whole(value.text, origin, flag, draft), origin,
            *([Origin(value.variable, draft.source, value.variable_line)] if value.variable else []))
        k += 1 if equals else 2
    if rest:
        draft.ignored(Origin(" ".join(w.text for w in rest), draft.source, rest[0].line),
                      "the launcher (only its node and process counts matter)")  # fmt: skip
    if counts:
        nodes, per_node = counts.get("nodes"), counts.get("per_node")
        n, g = (nodes.value if nodes else 1), (per_node.value if per_node else 1)
        origins = (*(nodes.origins if nodes else ()), *(per_node.origins if per_node else ()))
        draft.layout["gpus"] = traced(n * g, *origins, how=f"{n} nodes x {g} processes, one GPU each")
        draft.gpus_per_node = per_node
    for command in script.other:
        draft.ignored(Origin(command.text, draft.source, command.line), "another shell command")


def _arguments(words: list[Word], draft: JobDraft) -> dict[str, Argument]:
    """The flags of *words* with their values (the words up to the next flag); a flag given
    twice keeps its last value, as argparse does (the first is listed as ignored)."""
    arguments: dict[str, Argument] = {}
    k = 0
    while k < len(words):
        word = words[k]
        if not _is_flag(word.text):
            draft.unknown(Origin(word.text, draft.source, word.line),
                          "a word that follows no flag")  # fmt: skip
            k += 1
            continue
        flag, equals, inline = word.text.partition("=")
        values: list[Word] = [Word(inline, word.line)] if equals else []
        k += 1
        while not equals and k < len(words) and not _is_flag(words[k].text) and flag not in SWITCHES:
            values.append(words[k])
            k += 1
        if flag in arguments:
            earlier = arguments[flag]
            draft.ignored(earlier.origins(draft.source)[0], f"given again at line {word.line}; "
                          "argparse keeps the last")  # fmt: skip
        arguments[flag] = Argument(flag, tuple(values), word)
    return arguments


def _is_flag(text: str) -> bool:
    return text.startswith("--") or (len(text) == 2 and text[0] == "-" and text[1].isalpha())


def _model(reader: _Reader, draft: JobDraft, options: ImportOptions, tp: int) -> None:
    model = draft.model
    model["layers"] = reader.required("--num-layers")
    model["hidden"] = hidden = reader.required("--hidden-size")
    model["heads"] = reader.required("--num-attention-heads")
    model["seq"] = reader.required("--seq-length", alias="--encoder-seq-length")
    swiglu = reader.switch("--swiglu")
    if swiglu:
        model["ffn"] = traced("swiglu", *reader.origins("--swiglu"))
    model["ffn_hidden"] = reader.number("--ffn-hidden-size") or _default_ffn(hidden.value, swiglu)
    _attention_groups(reader, draft)
    model["dtype"] = _dtype(reader, draft)
    if reader.switch("--untie-embeddings-and-output-weights"):
        model["tie_embeddings"] = traced(False, *reader.origins("--untie-embeddings-and-output-weights"))
    else:
        model["tie_embeddings"] = traced(True, default(
            f"{FRAMEWORK}'s default: the LM head tied to the embedding "
            "(no --untie-embeddings-and-output-weights)"))  # fmt: skip
    model["vocab"] = _vocab(reader, draft, options, tp)
    _experts(reader, draft)


def _default_ffn(hidden: int, swiglu: bool) -> Traced:
    if swiglu:
        size = int((4 * hidden * 2 / 3) / 64) * 64
        return traced(size, default(f"{FRAMEWORK}'s --ffn-hidden-size with --swiglu: "
                                    f"int(4 x {hidden} x 2/3 / 64) x 64"))  # fmt: skip
    return traced(4 * hidden, default(f"{FRAMEWORK}'s --ffn-hidden-size: 4 x {hidden}"))


def _attention_groups(reader: _Reader, draft: JobDraft) -> None:
    groups = reader.number("--num-query-groups")
    if reader.switch("--group-query-attention"):
        origins = reader.origins("--group-query-attention")
        draft.model["kv_heads"] = groups if groups else traced(1, *origins, default(
            f"{FRAMEWORK}'s default 1 for --num-query-groups"))  # fmt: skip
    elif groups is not None:
        draft.ignored(groups.origins[0], "without --group-query-attention Megatron-LM "
                      "ignores the query groups (multi-head attention)")  # fmt: skip


def _dtype(reader: _Reader, draft: JobDraft) -> Traced:
    fp8 = reader.choice("--fp8-format", ("e4m3", "hybrid"))
    bf16, fp16 = reader.switch("--bf16"), reader.switch("--fp16")
    if bf16 and fp16:
        raise draft.error("--bf16 and --fp16 together; Megatron-LM asserts one at most",
                          reader.origins("--fp16")[0], "--fp16")  # fmt: skip
    if reader.switch("--grad-reduce-in-bf16"):
        draft.agrees(reader.origins("--grad-reduce-in-bf16")[0], "gradients are reduced in "
                     "bf16, as atpsim reduces them (in the model's dtype)")  # fmt: skip
    elif bf16:
        draft.not_modelled(reader.origins("--bf16")[0], "Megatron-LM reduces bf16 gradients in "
                           "fp32 (accumulate_allreduce_grads_in_fp32); atpsim reduces them in "
                           "the model's dtype, half the bytes")  # fmt: skip
    if fp8 is not None:
        return traced("fp8", *reader.origins("--fp8-format"),
                      *(reader.origins("--bf16") if bf16 else ()),
                      how="FP8 GEMMs (Transformer Engine), bf16 elsewhere")  # fmt: skip
    if bf16 or fp16:
        flag = "--bf16" if bf16 else "--fp16"
        return traced(flag[2:], *reader.origins(flag))
    return traced("fp32", default(f"{FRAMEWORK}'s default precision (no --bf16 or --fp16): fp32"))


def _vocab(reader: _Reader, draft: JobDraft, options: ImportOptions, tp: int) -> Traced:
    """The padded vocabulary: ``--padded-vocab-size``; else the tokenizer's tokens (``--vocab``
    of atpsim import, ``--vocab-size``, or a tokenizer whose size is published) padded as
    Megatron-LM pads them."""
    padded = reader.number("--padded-vocab-size")
    if padded is not None:
        return padded
    divisible = reader.setting("--make-vocab-size-divisible-by", 128)
    tokens = _tokens(reader, draft, options)
    size = padded_vocab(tokens.value, divisible.value, tp)
    return traced(size, *tokens.origins, *divisible.origins,
                  how=f"{tokens.value:,} tokens padded to a multiple of {divisible.value} x TP {tp} "
                  f"(Megatron-LM's _vocab_size_with_padding)")  # fmt: skip


def _tokens(reader: _Reader, draft: JobDraft, options: ImportOptions) -> Traced:
    """The tokenizer's tokens before padding (see :func:`_vocab`)."""
    if options.vocab is not None:
        return traced(options.vocab, option_origin(options, "vocab"))
    tokenizer = reader.peek("--tokenizer-type")
    size = reader.number("--vocab-size")
    if size is not None:
        if tokenizer == "NullTokenizer":
            return traced(size.value + 1, *size.origins, *reader.origins("--tokenizer-type"),
                          how="NullTokenizer adds an end-of-document token")  # fmt: skip
        return size
    for flag in ("--tokenizer-type", "--tokenizer-model"):
        name = reader.peek(flag)
        if name in KNOWN_TOKENIZERS:
            return traced(KNOWN_TOKENIZERS[name], *reader.origins(flag),
                          how=f"{name}'s published vocabulary")  # fmt: skip
    named = ", ".join(n for n in (tokenizer, reader.peek("--tokenizer-model")) if n) or "no tokenizer named"
    raise draft.error(f"the vocabulary is not known ({named}): give --vocab-size in the command "
                      f"line, or {param('vocab')} to atpsim import", key="--vocab-size")  # fmt: skip


def _experts(reader: _Reader, draft: JobDraft) -> None:
    experts = reader.number("--num-experts", low=0)
    if experts is None or experts.value == 0:
        return
    model = draft.model
    model["experts"] = experts
    model["top_k"] = reader.setting("--moe-router-topk", 2)
    model["expert_ffn_hidden"] = reader.number("--moe-ffn-hidden-size") or traced(
        model["ffn_hidden"].value, *model["ffn_hidden"].origins,
        default(f"{FRAMEWORK}'s --moe-ffn-hidden-size: the --ffn-hidden-size"))  # fmt: skip
    if reader.given("--moe-layer-freq"):
        text = reader.text("--moe-layer-freq")
        origin = reader.origins("--moe-layer-freq")[0]
        if text.strip().isdigit():
            model["moe_every"] = traced(whole(text, origin, "--moe-layer-freq", draft), origin)
        else:
            draft.not_modelled(origin, "a layer pattern: atpsim's experts are every k-th layer")
    if reader.given("--moe-expert-capacity-factor"):
        origins = reader.origins("--moe-expert-capacity-factor")
        text = reader.text("--moe-expert-capacity-factor")
        try:
            factor = float(text)
        except ValueError:
            raise draft.error(f"expected a number, got {text!r}", origins[0],
                              "--moe-expert-capacity-factor") from None  # fmt: skip
        model["capacity_factor"] = traced(factor, *origins)


def _layout(reader: _Reader, draft: JobDraft, tp: Traced) -> None:
    layout = draft.layout
    layers = draft.model["layers"].value
    layout["tp"] = tp
    layout["pp"] = pp = reader.setting("--pipeline-model-parallel-size", 1)
    layout["cp"] = reader.setting("--context-parallel-size", 1)
    layout["ep"] = reader.setting("--expert-model-parallel-size", 1)
    layout["micro_batch"] = reader.required("--micro-batch-size")
    global_batch = reader.number("--global-batch-size")
    if global_batch is not None:
        layout["global_batch"] = global_batch
    _virtual_stages(reader, draft, layers, pp)
    _partition(reader, draft, layers, pp)
    sequence_parallel = reader.switch("--sequence-parallel")
    if sequence_parallel and tp.value == 1:
        layout["sequence_parallel"] = traced(False, *reader.origins("--sequence-parallel"), *tp.origins,
                                             how="Megatron-LM turns it off at TP 1")  # fmt: skip
    elif sequence_parallel:
        layout["sequence_parallel"] = traced(True, *reader.origins("--sequence-parallel"))
    else:
        layout["sequence_parallel"] = traced(False, default(
            f"{FRAMEWORK}'s default: no --sequence-parallel"))
    layout["recompute"] = _recompute(reader)
    if reader.switch("--use-distributed-optimizer"):
        layout["zero"] = traced(1, *reader.origins("--use-distributed-optimizer"),
                                how="the distributed optimizer shards optimizer state over DP: ZeRO-1")
    else:
        layout["zero"] = traced(0, default(f"{FRAMEWORK}'s default: no "
                                           "--use-distributed-optimizer (ZeRO 0)"))  # fmt: skip
    if reader.switch("--overlap-grad-reduce"):
        draft.agrees(reader.origins("--overlap-grad-reduce")[0], "atpsim overlaps the gradient "
                     "reduction with the backward pass, as this asks")  # fmt: skip
    else:
        draft.not_modelled(default("no --overlap-grad-reduce"), "Megatron-LM then reduces "
                           "gradients after the backward pass; atpsim overlaps the reduction "
                           "with it (JobConfig.overlap_grad_reduce), as --overlap-grad-reduce does")  # fmt: skip


def _virtual_stages(reader: _Reader, draft: JobDraft, layers: int, pp: Traced) -> None:
    per_chunk = reader.number("--num-layers-per-virtual-pipeline-stage")
    chunks = reader.number("--num-virtual-stages-per-pipeline-rank")
    if chunks is not None:
        draft.layout["virtual_stages"] = chunks
    elif per_chunk is not None:
        per_stage = layers // pp.value
        if layers % pp.value or per_stage % per_chunk.value:
            raise draft.error(f"{layers} layers on {pp.value} stages do not split into chunks of "
                              f"{per_chunk.value} (Megatron-LM asserts it)", per_chunk.origins[0],
                              "--num-layers-per-virtual-pipeline-stage")  # fmt: skip
        draft.layout["virtual_stages"] = traced(
            per_stage // per_chunk.value, *per_chunk.origins, *pp.origins, *draft.model["layers"].origins,
            how=f"{layers} layers / {pp.value} stages / {per_chunk.value} layers per chunk")  # fmt: skip


def _partition(reader: _Reader, draft: JobDraft, layers: int, pp: Traced) -> None:
    first = reader.number("--decoder-first-pipeline-num-layers", low=0)
    last = reader.number("--decoder-last-pipeline-num-layers", low=0)
    if first is None and last is None:
        return
    inner_stages = pp.value - (first is not None) - (last is not None)
    rest = layers - (first.value if first else 0) - (last.value if last else 0)
    where = (first or last)
    assert where is not None
    if inner_stages < 0 or rest < 0 or (inner_stages and rest % inner_stages) or (not inner_stages and rest):
        raise draft.error(f"{layers} layers do not split over {pp.value} stages with these first "
                          "and last stages (Megatron-LM asserts an even split of the rest)",
                          where.origins[0], where.origins[0].text.split()[0])  # fmt: skip
    middle = [rest // inner_stages] * inner_stages if inner_stages else []
    counts = ([first.value] if first else []) + middle + ([last.value] if last else [])
    origins = (*(first.origins if first else ()), *(last.origins if last else ()), *pp.origins)
    draft.layout["partition"] = traced(counts, *origins, how="the other stages split the rest evenly")


def _recompute(reader: _Reader) -> Traced:
    granularity = reader.choice("--recompute-granularity", ("full", "selective"))
    if granularity is not None:
        return traced(granularity, *reader.origins("--recompute-granularity"))
    if reader.switch("--recompute-activations"):
        return traced("selective", *reader.origins("--recompute-activations"),
                      how="Megatron-LM's --recompute-activations is selective recomputation")
    return traced("none", default(f"{FRAMEWORK}'s default: no --recompute-granularity "
                                  "(no recomputation)"))  # fmt: skip

"""One set of job defaults (:mod:`atpsim.training.defaults`, issue 23): each default held to
the source that recommends it, and every entry point that takes a job's settings (JobConfig
and simulate_job, ``atpsim plan --global-batch`` and plan_job, a search's and a job
scenario's ``parallelism``, JobPoint) held to that one set."""

from __future__ import annotations

import dataclasses

import pytest

from atpsim.commands.plan import command as plan_command
from atpsim.compute.models import PRESET_VOCAB, ModelConfig, model_preset
from atpsim.errors import SimulationError
from atpsim.parallel.layout import ParallelLayout
from atpsim.parallel.mesh import DeviceMesh
from atpsim.scenario.job_point import JobPoint
from atpsim.scenario.parallelism import Neighbour, Parallelism
from atpsim.training.config import JobConfig, resolved_sequence_parallel
from atpsim.training.defaults import (
    JOB_DEFAULTS,
    SEARCH_SEQUENCE_PARALLEL,
    job_default,
    preset_vocab,
)
from atpsim.training.job import job_memory, simulate_job
from atpsim.training.layouts import plan_job

#: A small model that any settings leave quick to simulate: 2 layers, h = 1024.
TINY = ModelConfig("tiny", hidden=1024, heads=16, layers=2, batch=1, seq=1024)

#: Each setting's default and a word its source must name (the module docstring's papers).
EXPECTED = {
    "sequence_parallel": (True, "Korthikanti"),
    "recompute": ("selective", "Korthikanti"),
    "zero": (1, "Megatron"),
    "schedule": ("1f1b", "Narayanan"),
    "vocab": (None, "PRESET_VOCAB"),  # None: the preset's own
}


def tiny_config(mesh: DeviceMesh, **settings) -> JobConfig:
    """TINY on *mesh* x 1 stage x 2 replicas, micro-batch 1, 4 samples an iteration."""
    return JobConfig(TINY, ParallelLayout(mesh, 1, 2), 1, 4, **settings)


# --- the defaults and their sources ---------------------------------------------------------


def test_every_setting_has_its_default_and_no_other():
    assert set(JOB_DEFAULTS) == set(EXPECTED)


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_each_default_is_megatron_lms_with_the_source_that_recommends_it(key):
    value, source = EXPECTED[key]
    assert JOB_DEFAULTS[key].value == job_default(key) == value
    assert type(JOB_DEFAULTS[key].value) is type(value)  # True, not 1; 1, not True
    assert JOB_DEFAULTS[key].source.strip() and source in JOB_DEFAULTS[key].source


def test_a_search_tries_sequence_parallelism_on_and_off():
    assert SEARCH_SEQUENCE_PARALLEL == (True, False)


def test_the_vocabulary_is_the_presets_padded_one_else_none():
    """GPT-3's 50,257 tokens padded to 51,200 (a multiple of 128 x 8 TP ranks, Megatron-LM's
    padding); no preset, or a preset without a vocabulary (the paper's M2): 0."""
    assert PRESET_VOCAB["gpt3-175b"] == preset_vocab("gpt3-175b") == 51200
    assert 51200 % (128 * 8) == 0 and 51200 - 50257 < 128 * 8
    assert preset_vocab(None) == preset_vocab("") == 0
    assert "M2" not in PRESET_VOCAB and preset_vocab("M2") == 0


# --- one job: JobConfig, simulate_job ----------------------------------------------------------


def test_a_jobconfig_without_settings_takes_the_defaults():
    """Recompute, ZeRO and the schedule as JOB_DEFAULTS says; the vocabulary 0 (a JobConfig
    holds a ModelConfig, not a preset name: simulate_job and plan_job look the preset's up)."""
    config = tiny_config(DeviceMesh(4, 1))
    assert (config.recompute, config.zero, config.schedule) == (
        job_default("recompute"), job_default("zero"), job_default("schedule"))
    assert config.vocab == preset_vocab(None) == 0


def test_sequence_parallelism_defaults_to_on_for_a_1d_mesh_and_off_for_a_2d_one():
    assert tiny_config(DeviceMesh(4, 1)).sequence_parallel is True
    assert tiny_config(DeviceMesh(2, 2)).sequence_parallel is False
    assert tiny_config(DeviceMesh(4, 1), sequence_parallel=False).sequence_parallel is False
    assert tiny_config(DeviceMesh(1, 1)).sequence_parallel is False  # one rank: nothing to split
    resolved = [resolved_sequence_parallel(None, DeviceMesh(*m)) for m in ((8, 1), (1, 8), (4, 2))]
    assert resolved == [True, False, False]


def test_sequence_parallelism_asked_for_on_a_2d_mesh_is_refused_by_name():
    """Not silently dropped: the config keeps what was asked, and the job's memory and its
    simulation refuse it, naming ``sequence_parallel``."""
    config = tiny_config(DeviceMesh(2, 2), sequence_parallel=True)
    assert config.sequence_parallel is True
    with pytest.raises(SimulationError) as memory:
        job_memory(config)
    assert memory.value.key == "sequence_parallel"
    with pytest.raises(SimulationError) as simulated:
        simulate_job("ib-cluster:1x8", TINY, tp=(2, 2), pp=1, dp=2, micro_batch=1, global_batch=4,
                     sequence_parallel=True)  # fmt: skip
    assert simulated.value.key == "sequence_parallel"


def test_simulate_job_without_settings_is_the_job_with_every_default_given():
    """gpt3-125m by name on 2x1 TP x 4 replicas: the same iteration as with sequence
    parallelism, selective recomputation, ZeRO-1, 1F1B and the preset's 51,200 tokens given;
    the same model as a ModelConfig has no preset, so no vocabulary."""
    job = dict(topology="ib-cluster:1x8", tp=(2, 1), pp=1, dp=4, micro_batch=2, global_batch=16)
    given = dict(sequence_parallel=True, recompute="selective", zero=1, schedule="1f1b")
    defaulted = simulate_job(model="gpt3-125m", **job)
    every = simulate_job(model="gpt3-125m", **job, **given, vocab=51200)
    assert defaulted.iteration_time_s == every.iteration_time_s
    unnamed = simulate_job(model=model_preset("gpt3-125m"), **job)
    headless = simulate_job(model="gpt3-125m", **job, **given, vocab=0)
    assert unnamed.iteration_time_s == headless.iteration_time_s
    assert unnamed.iteration_time_s < defaulted.iteration_time_s  # no LM head


# --- the other entry points: the same set ----------------------------------------------------


def test_plan_global_batch_options_default_to_the_job_defaults():
    """``atpsim plan``'s --zero, --recompute and --schedule; --vocab and --sequence-parallel
    None (the preset's; each 1D layout both ways)."""
    defaults = {p.name: p.default for p in plan_command.params}
    for key in ("zero", "recompute", "schedule"):
        assert defaults[key] == job_default(key), key
    assert defaults["vocab"] is None and defaults["sequence_parallel"] is None


def test_a_scenarios_parallelism_and_neighbour_default_to_the_job_defaults():
    """A job scenario's (and a search space's) lists: one value each, sequence parallelism
    both ways; a neighbour job's single values, sequence parallelism resolved per mesh."""
    fields = Parallelism.model_fields
    for key in ("recompute", "zero", "schedule"):
        assert fields[key].default == (job_default(key),), key
        assert Neighbour.model_fields[key].default == job_default(key), key
    assert fields["sequence_parallel"].default == SEARCH_SEQUENCE_PARALLEL
    assert fields["vocab"].default is job_default("vocab") is None
    assert Neighbour.model_fields["sequence_parallel"].default is None


def test_a_job_points_defaults_are_the_job_defaults():
    defaults = {f.name: f.default for f in dataclasses.fields(JobPoint)}
    for key in ("recompute", "zero", "schedule"):
        assert defaults[key] == job_default(key), key
    point = dict(scenario="s", topology="ib-cluster:1x8", topology_label="ib", n_devices=8,
                 hardware="a100-sxm4-80gb", model=TINY, pp=1, dp=2, micro_batch=1, global_batch=4)  # fmt: skip
    assert JobPoint(**point, tp=DeviceMesh(4, 1)).sequence_parallel is True
    assert JobPoint(**point, tp=DeviceMesh(2, 2)).sequence_parallel is False
    assert JobPoint(**point, tp=DeviceMesh(4, 1)).config().sequence_parallel is True


# --- a search over layouts: each 1D layout both ways ----------------------------------------


def tried(**settings) -> list[tuple[int, int, bool]]:
    """(d1, d2, sequence parallelism) of every layout plan_job ranks for gpt3-125m on 8 GPUs
    of one node, TP meshes of at most 2 GPUs (1x1, 2x1, 1x2), pp 1, micro-batch 2."""
    plan = plan_job("ib-cluster:1x8", "gpt3-125m", devices=8, global_batch=16, pipelines=(1,),
                    micro_batches=(2,), max_tp=2, **settings)  # fmt: skip
    assert not plan.pruned["divisibility"] and not plan.pruned["memory"]
    return sorted((c.config.layout.tp.d1, c.config.layout.tp.d2, c.config.sequence_parallel)
                  for c in plan.candidates)  # fmt: skip


def test_plan_job_tries_each_1d_layout_with_and_without_sequence_parallelism():
    """By default the 1D mesh 2x1 twice, the 2D mesh 1x2 and the one-rank 1x1 once (without:
    nothing to split); asked either way, each mesh once (on only where it is 1D of 2+ ranks)."""
    assert tried() == [(1, 1, False), (1, 2, False), (2, 1, False), (2, 1, True)]
    assert tried(sequence_parallel=True) == [(1, 1, False), (1, 2, False), (2, 1, True)]
    assert tried(sequence_parallel=False) == [(1, 1, False), (1, 2, False), (2, 1, False)]

"""The committed CPU trace mapped onto atpsim's program and predicted, as a fit and as a
check against the committed measurements folder; `atpsim validate TRACE` end to end."""

import json
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner

from atpsim.api.calibrate import simulate_layer
from atpsim.calibrate.machine import fitted_paths
from atpsim.calibrate.measurements.description import cpu_share, slowed
from atpsim.calibrate.trace.compare import compare_trace
from atpsim.calibrate.trace.layer import traced_layer
from atpsim.calibrate.trace.mapping import layer_program, map_trace
from atpsim.calibrate.trace.reader import read_trace
from atpsim.cli import main
from atpsim.compute.hardware import load_profile
from atpsim.compute.timing import compute_time_s
from atpsim.errors import AtpsimError

TRACE = Path(__file__).parent / "data" / "trace.1x2.c1.rank0.json"
FOLDER = Path(__file__).parents[3] / "validation" / "measurements" / "cpu-gloo-2core-2ranks"


@pytest.fixture(scope="module")
def trace():
    return read_trace(TRACE)


def test_every_program_op_is_found_in_both_steps(trace):
    layer = traced_layer(trace.metadata)
    mapping = map_trace(trace, layer_program(layer.model, layer.mesh, layer.chunks), layer.mesh)
    assert mapping.missing == () and mapping.steps == 2
    by_key = {m.key: m for m in mapping.matched}
    assert all(len(m.measured_s) == 2 for m in mapping.matched)
    assert by_key["l0.qkv"].trace_names == {"aten::mm"}
    assert by_key["l0.attn_scores"].trace_names == {"aten::baddbmm"}
    assert by_key["l0.attn_gather"].trace_names == {"gloo:all_gather"}
    assert "aten::gelu" in by_key["l0.fc1_bias_gelu"].trace_names
    # the key's transposed weight gradient (autograd computes dK^T) still maps by shape
    assert by_key["l0.attn_scores_dgrad_k"].trace_names == {"aten::bmm"}
    # no GEMM or collective of the trace is left over; only copies the program lacks
    assert set(mapping.unattributed_s) <= {"memory"}


def test_measured_times_follow_the_trace(trace, tmp_path):
    """The same trace on a clock running half as fast (every ts and dur doubled): every
    measured time and the step double, no prediction moves."""
    data = json.loads(TRACE.read_text())
    for event in data["traceEvents"]:
        for key in ("ts", "dur"):
            if key in event:
                event[key] *= 2
    slower = tmp_path / "slower.json"
    slower.write_text(json.dumps(data))
    layer = traced_layer(trace.metadata)
    before = compare_trace(trace, layer, FOLDER, predict=simulate_layer)
    after = compare_trace(read_trace(slower), layer, FOLDER, predict=simulate_layer)
    assert after.step_measured_s == pytest.approx(2 * before.step_measured_s)
    assert after.step_predicted_s == before.step_predicted_s
    for old, new in zip(before.ops, after.ops, strict=True):
        assert new.measured_s == pytest.approx(2 * old.measured_s), new.key
        assert new.predicted_s == old.predicted_s


def test_check_predicts_each_op_with_the_folders_fitted_profile(trace):
    layer = traced_layer(trace.metadata)
    result = compare_trace(trace, layer, FOLDER, predict=simulate_layer)
    assert result.source.startswith("check against")
    profile = slowed(load_profile(fitted_paths(FOLDER)[1]), cpu_share(layer.machine, 2))
    program = {t.op.name: t.op for t in layer_program(layer.model, layer.mesh, 1)}
    qkv = next(o for o in result.ops if o.key == "l0.qkv")
    assert qkv.predicted_s == pytest.approx(compute_time_s(program["l0.qkv"], profile, "fp32"))
    assert all(o.predicted_s is not None for o in result.ops)
    assert result.step_predicted_s is not None
    assert result.step_measured_s == pytest.approx(statistics.median(read_trace(TRACE).step_s))


def test_fit_to_the_trace_itself_predicts_every_op_and_the_step(trace):
    result = compare_trace(trace, traced_layer(trace.metadata), predict=simulate_layer)
    assert result.source.startswith("fit to this trace")
    assert all(o.predicted_s is not None for o in result.ops)
    assert result.step_predicted_s is not None and result.median_abs_error("gemm") < 0.5


def test_layer_text_overrides_and_errors_name_the_option(trace):
    layer = traced_layer(trace.metadata, "chunks=1")
    assert layer.chunks == 1 and layer.mesh.d2 == 2
    with pytest.raises(AtpsimError, match="chunks=2 contradicts .* which says chunks=1"):
        traced_layer(trace.metadata, "chunks=2")
    with pytest.raises(AtpsimError, match="layer.*did you mean 'heads'"):
        traced_layer({}, "head=8")
    with pytest.raises(AtpsimError, match="does not say which layer"):
        traced_layer({"distributedInfo": {}})


def run(*args):
    return CliRunner().invoke(main, ["validate", *map(str, args)])


def test_validate_trace_prints_per_op_predicted_vs_measured():
    result = run(TRACE, "--fitted", FOLDER, "--tolerance", "100")
    assert result.exit_code == 0, result.output
    assert "l0.qkv" in result.output and "measured us" in result.output
    assert "median |error| by kind: gemm" in result.output and "PASS" in result.output
    assert run(TRACE, "--fitted", FOLDER, "--tolerance", "0").exit_code == 1


@pytest.mark.parametrize(
    "content, message",
    [
        ("{truncated", "not a JSON trace"),
        ('{"displayTimeUnit": "ms"}', "without a 'traceEvents' list"),
        ('{"traceEvents": [{"ph": "X", "name": "x", "ts": 0, "dur": 1}]}', "no GEMM"),
    ],
)
def test_a_corrupt_or_foreign_trace_is_one_line_exit_2(tmp_path, content, message):
    path = tmp_path / "trace.json"
    path.write_text(content)
    result = run(path)
    assert result.exit_code == 2
    assert message in result.output and len(result.output.strip().splitlines()) == 1


def test_options_of_another_input_kind_are_refused(tmp_path):
    assert run(TRACE, "--refit").exit_code == 2
    assert run(TRACE, "--layer", "mesh=2").exit_code == 2
    assert run(FOLDER, "--layer", "mesh=1x2").exit_code == 2

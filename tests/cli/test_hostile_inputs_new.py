"""Issue 11's promise held against the features added after it (search, --trace,
--uncertainty, validate TRACE, report --index and provenance, the paper's claims): every bad
input is one line naming the file or option and what was expected, exit 2; nothing grows
past an announced limit; an interrupted run loses no row. One test per class of hole found
by a hostile-input pass; each runs the real CLI in-process on tiny inputs (no step is
simulated except one analytic point)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from atpsim.cli import main
from atpsim.report.claims import verdicts
from atpsim.results.io import read_results
from atpsim.scenario.job_point import JobPoint
from atpsim.scenario.report import Reference

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "calibrate" / "trace" / "data" / "trace.1x2.c1.rank0.json"
FITTED = ROOT / "validation" / "measurements" / "cpu-gloo-2core-2ranks" / "fitted"
SEARCH = ["search", "-t", "ib-cluster:1x8", "-m", "gpt3-125m", "--global-batch", "16", "--pp", "1,2",
          "--micro-batch", "2", "--no-progress"]  # fmt: skip
ANALYTIC = """name: an
topology: [ic3]
model: M2
parallelism: {devices: 8, meshes: [[8, 1]]}
mode: [analytic]
report: {figures: []}
"""


def run(*args: Any, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env)


def refused(result, *named: str) -> str:
    """The command exited 2 with one line on stderr, no traceback, naming each of *named*."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert all(name in lines[0] for name in named), lines[0]
    return lines[0]


def fake_job(point: JobPoint) -> dict[str, Any]:
    """A row from the layout alone, no simulation."""
    time_s = 0.1 * point.tp.size + 0.05 * point.pp
    return {"iteration_time_s": time_s, "tflops_per_gpu": 10.0 / time_s, "mfu": 0.3,
            "memory_per_rank_bytes": 1e9, "fits_memory": True}  # fmt: skip


# --- no row lost --------------------------------------------------------------------------


def test_a_row_torn_by_a_crash_is_dropped_before_a_resume_appends(tmp_path, monkeypatch):
    """A crash mid-write leaves the partial file's last line without its newline; a resume
    appended its first row onto that line, which then no reader could parse: that point's
    row was lost and the resumed search stopped with exit 2. Now the torn text is cut first
    and the resumed table equals a clean run's byte for byte. (SEARCH is 16 layouts: each 1D
    mesh of 2 or more ranks with and without sequence parallelism, the default.)"""
    monkeypatch.setattr("atpsim.api.search.simulate_job_point", fake_job)
    assert run(*SEARCH, "-o", tmp_path / "clean").exit_code == 0
    clean = (tmp_path / "clean" / "results.csv").read_text()
    lines = clean.splitlines(keepends=True)
    (tmp_path / "torn").mkdir()
    (tmp_path / "torn" / "results.partial.csv").write_text("".join(lines[:4]) + lines[4][:40])
    resumed = run(*SEARCH, "-o", tmp_path / "torn", "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "resuming: 3 of 16 points" in resumed.stderr
    assert (tmp_path / "torn" / "results.csv").read_text() == clean


# --- sizes announced and bounded ----------------------------------------------------------


@pytest.mark.parametrize("args", [
    [*SEARCH, "-j", "1000000"],
    ["run", "SCENARIO", "-j", "100000", "--scheduler", "local"],
])  # fmt: skip
def test_more_worker_processes_than_the_cpus_can_use_are_refused(tmp_path, args):
    """-j N started N processes of 80-300 MB each (min(N, points)): -j 100000 on a big sweep
    takes the machine down. Refused before anything is expanded or written."""
    scenario = tmp_path / "an.yaml"
    scenario.write_text(ANALYTIC)
    args = [str(scenario) if a == "SCENARIO" else a for a in args]
    refused(run(*args, "-o", tmp_path / "out"), "--jobs", "per CPU")
    assert not (tmp_path / "out").exists()


def test_a_search_space_past_the_limit_is_refused_before_it_is_pruned(tmp_path, monkeypatch):
    """A space of millions of layouts was counted silently for minutes (pruning checks some
    3,500 a second). Its size is now known from the axes alone: 10 TP meshes of 1-8 GPUs x
    2 depths x 1 micro-batch x 1 batch x 2 sequence-parallel settings (on and off, the
    default) = 40 candidates, past a limit of 39, is refused."""
    monkeypatch.setattr("atpsim.api.search.DEFAULT_MAX_LAYOUTS", 39)
    line = refused(run(*SEARCH, "-o", tmp_path), "parallelism", "40 candidate layouts", "ATPSIM_MAX_LAYOUTS=40")
    assert "39" in line
    monkeypatch.setenv("ATPSIM_MAX_LAYOUTS", "lots")
    refused(run(*SEARCH, "-o", tmp_path), "ATPSIM_MAX_LAYOUTS", "'lots'")


def test_a_gzip_bomb_stops_at_the_trace_size_limit(tmp_path, monkeypatch):
    """A small .json.gz can hold gigabytes; it was decompressed whole. Now decompression
    stops past MAX_TRACE_BYTES (patched to 1,000 here) with one line."""
    monkeypatch.setattr("atpsim.calibrate.trace.reader.MAX_TRACE_BYTES", 1000)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * 100_000))
    refused(run("validate", bomb), str(bomb), "MiB of JSON")


@pytest.mark.parametrize("count", ["0", "65", "1000000"])
def test_channels_past_ncclmaxchannels_are_refused(count):
    """-c 1000000 built a million rings until memory ran out (exit 5)."""
    refused(run("collective", "-t", "ic3", "--bytes", "1M", "-c", count), "--channels", "64")


# --- options that would do nothing, or could not be stored --------------------------------


@pytest.mark.parametrize("args, named", [
    (["plan", "-t", "ic3", "--seed", "5"], "--seed"),
    (["collective", "-t", "ic3", "--bytes", "1M", "--seed", "5"], "--seed"),
    (["run", "SCENARIO", "--seed", "5"], "--seed"),
    (["plan", "-t", "ic3", "--pp", "2"], "--pp"),
    (["plan", "-t", "ic3", "--top", "3"], "--top"),
    (["plan", "-t", "ib-cluster:1x8", "-m", "gpt3-125m", "--global-batch", "16", "--placement",
      "column-major"], "--placement"),
    (["collective", "-t", "ic3", "--bytes", "1M", "--csv", "--json"], "--csv"),
    (["plan", "-t", "ic3", "--chunks", "1,1"], "--chunks"),
    (["plan", "-t", "ic3", "--chunks", "1048576"], "--chunks"),
    (["validate", TRACE, "--tolerance", "nan"], "--tolerance"),
    (["plan", "-t", "ic3", "--uncertainty", "2", "--seed", str(2**70)], "--seed"),
    (["run", "SCENARIO", "--uncertainty", "2", "--seed", str(2**70)], "--seed"),
])  # fmt: skip
def test_an_option_that_does_nothing_or_cannot_be_kept_is_refused(tmp_path, args, named):
    """A lone --seed, a job option without --global-batch and a step option with it were
    ignored silently; --chunks 1,1 printed each row twice, --chunks 1048576 a '7.5 hours'
    warning before its error; --tolerance nan printed FAIL and exited 0; a seed past 2^63 ran the whole
    sweep and then failed writing its int64 column (exit 3)."""
    scenario = tmp_path / "an.yaml"
    scenario.write_text(ANALYTIC)
    args = [str(scenario) if a == "SCENARIO" else a for a in args]
    refused(run(*args, "-o", tmp_path / "out") if args[0] == "run" else run(*args), named)
    assert not (tmp_path / "out" / "results.partial.csv").exists()


def test_rerunning_a_run_folders_own_scenario_copy_works(tmp_path):
    """`atpsim run out/scenario.yaml -o out` simulated everything and then failed copying the
    file onto itself ("atpsim: error: SameFileError", exit 2)."""
    scenario = tmp_path / "an.yaml"
    scenario.write_text(ANALYTIC)
    assert run("run", scenario, "-o", tmp_path / "out", "--no-progress").exit_code == 0
    again = run("run", tmp_path / "out" / "scenario.yaml", "-o", tmp_path / "out", "--no-progress")
    assert again.exit_code == 0, again.output
    assert (tmp_path / "out" / "scenario.yaml").read_text() == ANALYTIC


# --- every message one line, exit 2 -------------------------------------------------------


@pytest.mark.parametrize("value", ["abc", "", "-1", "1.5", "99999999999999999"])
def test_a_bad_source_date_epoch_is_one_line_before_any_import(tmp_path, value):
    """numpy's f2py (imported with scipy) parses SOURCE_DATE_EPOCH at import: 'abc' crashed
    every command with an 87-line traceback and exit 1; a date past year 9999 likewise."""
    refused(run("report", tmp_path, env={"SOURCE_DATE_EPOCH": value}), "SOURCE_DATE_EPOCH", repr(value))


def test_a_message_quoting_a_parser_is_folded_onto_one_line(tmp_path):
    """A YAML parser's message spans lines (the mark, a caret): the hardware file's error
    printed four."""
    bad = tmp_path / "hw.yaml"
    bad.write_text("name: [\n")
    refused(run("plan", "-t", "ic3", "--hardware", bad), "hw.yaml", "invalid YAML")


# --- validate TRACE: malformed content is bad input, not a bug ---------------------------


def _mutated(tmp_path: Path, change) -> Path:
    data = json.loads(TRACE.read_text())
    change(data)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    return path


def _first(data: dict, name: str) -> dict:
    return next(e for e in data["traceEvents"] if str(e.get("name", "")).startswith(name))


@pytest.mark.parametrize("change, named", [
    (lambda d: _first(d, "aten::mm")["args"].update({"Input Dims": [[10**200, 2], [2, 2]]}), "Input Dims"),
    (lambda d: _first(d, "aten::mm")["args"].update({"Input Dims": [[-512, 128], [128, 768]]}), "Input Dims"),
    (lambda d: _first(d, "aten::mm")["args"].update({"Input Dims": [[True, 128], [128, 768]]}), "Input Dims"),
    (lambda d: _first(d, "gloo:")["args"].update({"In msg nelems": "abc"}), "In msg nelems"),
    (lambda d: d["atpsim_layer"].update(hidden=256.5), "atpsim_layer.hidden"),
    (lambda d: d["atpsim_layer"].update(chunks=3), "atpsim_layer"),
    (lambda d: d["atpsim_layer"].update(hidden=512), "another layer"),
])  # fmt: skip
def test_a_malformed_trace_names_the_file_and_what_is_wrong(tmp_path, change, named):
    """Overflowing or negative shapes, a non-numeric count and a layer entry of the wrong
    type or size were internal errors (exit 3), misleading, or ran on silently; a layer
    none of whose GEMMs are in the trace was reported against nothing."""
    path = _mutated(tmp_path, change)
    refused(run("validate", path), str(path), named)


@pytest.mark.parametrize("change", [
    lambda d: _first(d, "aten::mm").update(args="x"),
    lambda d: _first(d, "aten::mm").update(pid=[1]),
])  # fmt: skip
def test_odd_event_fields_do_not_crash_the_reader(tmp_path, change):
    """args that is not a mapping or a pid that is a list raised AttributeError/TypeError
    (exit 3); the reader now treats them as a trace's other odd events."""
    from atpsim.calibrate.trace.reader import read_trace

    assert read_trace(_mutated(tmp_path, change)).ops


def test_deeply_nested_json_is_not_a_trace(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"traceEvents": ' + "[" * 100_000 + "]" * 100_000 + "}")
    refused(run("validate", path), str(path), "nested too deeply")


@pytest.mark.parametrize("text, named", [
    ("link: [\n", "invalid YAML"),
    ("- 1\n", "expected a mapping"),
    ("link: {latency_s: 1.0e-6}\n", "bandwidth_Bps > 0"),
    ("link: {latency_s: 0, bandwidth_Bps: 0}\n", "bandwidth_Bps > 0"),
    ("link: {latency_s: -1, bandwidth_Bps: -5}\n", "bandwidth_Bps > 0"),
])  # fmt: skip
def test_a_broken_fit_summary_names_it(tmp_path, text, named):
    """--fitted DIR read fitted/fit.yaml unchecked: a YAML error, a list, a missing or zero
    bandwidth were internal errors (exit 3); a negative link ran on silently."""
    shutil.copytree(FITTED, tmp_path / "m" / "fitted")
    (tmp_path / "m" / "fitted" / "fit.yaml").write_text(text)
    refused(run("validate", TRACE, "--fitted", tmp_path / "m"), "fit.yaml", named)


@pytest.mark.parametrize("layer, named", [
    ("hidden=256,hidden=512,heads=8,batch=4,seq=128,mesh=1x2", "twice"),
    ("hidden=256,heads=8,batch=4,seq=128,mesh=0x2", "mesh"),
    ("hidden=256,heads=8,batch=4,seq=128,mesh=1x2,dtype=fp7", "fp7"),
])  # fmt: skip
def test_a_bad_layer_option_names_it(layer, named):
    """Errors of the layer built from --layer did not say they came from it."""
    refused(run("validate", TRACE, "--layer", layer), "--layer", named)


# --- reports ------------------------------------------------------------------------------


@pytest.mark.parametrize("content", [b"", b"HEADER", b"\x00\xff\xfe"])
def test_an_empty_or_binary_results_table_keeps_the_report_it_had(tmp_path, content):
    """A 0-byte or header-only results.csv rebuilt the report as '0 points' over the good one
    (exit 0); a binary one gave a line without the file's name."""
    scenario = tmp_path / "an.yaml"
    scenario.write_text(ANALYTIC)
    out = tmp_path / "out"
    assert run("run", scenario, "-o", out, "--no-progress").exit_code == 0
    report = (out / "report.md").read_bytes()
    header = (out / "results.csv").read_bytes().splitlines(keepends=True)[0]
    (out / "results.csv").write_bytes(header if content == b"HEADER" else content)
    refused(run("report", out), "results.csv")
    assert (out / "report.md").read_bytes() == report


def test_report_of_a_folder_without_results_names_the_table_not_a_lock():
    """`atpsim report /proc` failed creating /proc/.atpsim.lock."""
    if not Path("/proc").is_dir():
        pytest.skip("no /proc here")
    refused(run("report", "/proc"), "/proc/results.csv")


@pytest.mark.parametrize("claim, named", [
    ({"check": "atp_gain", "low": 0.5, "high": 0.1}, "low <= high"),
    ({"check": "atp_gain", "low": float("nan")}, "finite"),
    ({"check": "atp_gain"}, "needs low or high"),
    ({"check": "best_mesh", "mesh": "2by4"}, "D1xD2"),
    ({"check": "chunk_gain", "chunks": 0, "low": 0.1}, "chunks"),
    ({"check": "comm_trend", "trend": "up"}, "needs atp"),
])  # fmt: skip
def test_a_claim_that_cannot_be_checked_is_refused(tmp_path, claim, named):
    """A claim with an empty or NaN range, an unparseable mesh or without the key its check
    needs was always 'no', vacuously 'yes', or crashed the report (exit 3) after the run."""
    scenario = tmp_path / "an.yaml"
    scenario.write_text(ANALYTIC + "reference: " + json.dumps({"claims": [
        {"text": "x", "topology": "ic3", **claim}]}).replace("NaN", ".nan") + "\n")  # fmt: skip
    refused(run("run", scenario, "-o", tmp_path / "out"), "an.yaml", "reference.claims[0]", named)


def test_claims_with_no_rows_to_compare_have_no_verdict():
    """A chunk gain at a chunk count the sweep lacks crashed the report (min() of nothing);
    a trend of an ATP-i the sweep lacks held vacuously."""
    frame = read_results(ROOT / "reports" / "quickstart")
    reference = Reference.model_validate({"claims": [
        {"text": "a", "check": "chunk_gain", "topology": "ic3", "chunks": 8, "low": 0.0},
        {"text": "b", "check": "comm_trend", "topology": "ic3", "atp": 3, "trend": "up"},
        {"text": "c", "check": "atp_gain", "topology": "ic3", "low": -1.0},
    ]})  # fmt: skip
    found = [(v.shown, v.agrees) for v in verdicts(frame, reference)]
    assert found[:2] == [("no simulated rows it applies to", None)] * 2
    assert found[2][1] is True


def test_table3_cells_must_be_positive(tmp_path):
    scenario = tmp_path / "an.yaml"
    scenario.write_text(ANALYTIC + "reference: {table3: {M2: {ic3: {1: -5}}}}\n")
    refused(run("run", scenario, "-o", tmp_path / "out"), "reference.table3.M2.ic3.1", "> 0")


def test_tracing_many_points_is_announced(caplog):
    """`--trace mode=des` on a sweep of hundreds of points simulated each once more after the
    sweep without a word."""
    from atpsim.api.point_trace import MANY_TRACES, select_trace_points

    class Point:
        n_devices, chunks, mode = 8, 1, "des"

        def columns(self, index: int) -> dict[str, Any]:
            return {"point_index": index, "mode": "des", "model": "M2"}

    points = [Point() for _ in range(MANY_TRACES + 1)]
    select_trace_points(points, ["best"])
    assert "simulated once more" not in caplog.text
    select_trace_points(points, ["model=M2"])
    assert f"`trace` selects {MANY_TRACES + 1} points" in caplog.text  # --trace on the CLI


@pytest.mark.parametrize("extra, named", [
    ("reference: {claims: [{text: x, check: atp_gain, topology: ib-cluster:1x8, low: 0.1}]}", "reference"),
    ("parallelism: {global_batch: [16], pp: [1], micro_batch: [2], tp: [3x1]}", "no TP mesh x depth"),
])  # fmt: skip
def test_a_search_space_key_that_does_nothing_is_refused(tmp_path, extra, named):
    """A search writes no report, so a space's reference claims were ignored silently; a
    space whose listed meshes divide no device count said only that nothing fits."""
    space = tmp_path / "space.yaml"
    base = "topology: [ib-cluster:1x8]\nmodel: [gpt3-125m]\n"
    if not extra.startswith("parallelism"):
        base += "parallelism: {global_batch: [16], pp: [1], micro_batch: [2]}\n"
    space.write_text(base + extra + "\n")
    refused(run("search", "--space", space, "-o", tmp_path / "out", "--no-progress"), "space.yaml", named)


def test_a_search_keeps_the_output_formats_of_its_space(tmp_path, monkeypatch):
    monkeypatch.setattr("atpsim.api.search.simulate_job_point", fake_job)
    space = tmp_path / "space.yaml"
    space.write_text("topology: [ib-cluster:1x8]\nmodel: [gpt3-125m]\noutput: {formats: [csv]}\n"
                     "parallelism: {global_batch: [16], pp: [1], micro_batch: [2]}\n")  # fmt: skip
    assert run("search", "--space", space, "-o", tmp_path / "out", "--no-progress").exit_code == 0
    assert not (tmp_path / "out" / "results.parquet").exists()


@pytest.mark.parametrize("args", [
    ["plan", "-t", "ib-cluster:4x8", "-m", "megatron-1.7b", "--devices", "32"],
    ["search", "-t", "ib-cluster:4x8", "-m", "megatron-1.7b", "--pp", "1", "--micro-batch", "1",
     "--no-progress"],
])  # fmt: skip
def test_a_global_batch_too_large_to_simulate_is_refused_at_once(tmp_path, args):
    """A billion-sample batch built a billion-slot task graph for half a minute, then died."""
    result = run(*args, "--global-batch", 10**9, "-o" if args[0] == "search" else "--top",
                 tmp_path / "s" if args[0] == "search" else 3)  # fmt: skip
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert "\n" not in line and "global_batch" in line and "ATPSIM_MAX_SLOTS" in line


def test_the_slot_limit_moves_with_its_variable(monkeypatch):
    from atpsim.parallel.job_memory import check_slots

    assert check_slots(2, 1, 1024, 1) is None
    monkeypatch.setenv("ATPSIM_MAX_SLOTS", "2047")
    assert "2,048" in check_slots(2, 1, 1024, 1)
    monkeypatch.setenv("ATPSIM_MAX_SLOTS", "lots")
    with pytest.raises(Exception, match="ATPSIM_MAX_SLOTS"):
        check_slots(2, 1, 1024, 1)


JOB = """name: j
topology: ib-cluster:2x8
model: gpt3-125m
parallelism: {devices: 16, tp: [[8, 1]], pp: 1, dp: auto, global_batch: 4, EXTRA}
"""


@pytest.mark.parametrize("extra, named", [
    ("network: isolated, perturb: {seed: 1, stragglers: 1}", "parallelism.perturb"),
    ("network: isolated, neighbour: {model: gpt3-125m, tp: [8, 1], pp: 1, dp: 1, global_batch: 4}",
     "parallelism.neighbour"),
    ("perturb: {seed: 1, stragglers: 99}", "parallelism.perturb.stragglers"),
])  # fmt: skip
def test_a_job_sweep_that_could_not_run_its_perturbation_is_refused(tmp_path, extra, named):
    """network: isolated with a perturbation skipped every point, and the run then failed on
    an empty table; 99 stragglers among 16 GPUs failed every point."""
    path = tmp_path / "j.yaml"
    path.write_text(JOB.replace("EXTRA", extra), encoding="utf-8")
    result = run("run", path, "-o", tmp_path / "out", "--no-progress")
    assert result.exit_code == 2, result.output
    assert named in result.output and str(path) in result.output
    assert not (tmp_path / "out" / "results.csv").exists()

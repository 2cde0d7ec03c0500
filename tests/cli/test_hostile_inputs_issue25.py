"""Issue 25's input classes, each held by the real CLI in-process: every input either runs
right or is refused by name (exit 2, one line naming the option, file or key and what was
expected, no traceback). Numbers that are not finite or are absurd, degenerate groups, the
YAML loader, --scheduler, a value named twice, options that do nothing, markup in generated
HTML, and a search folder owned by its space. Each case is one line; none simulates more than
a few tiny collectives."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from atpsim.cli import main


def run(*args: Any, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env)


def refused(result, *named: str) -> str:
    """The command exited 2 with one line on stderr, no traceback, naming each of *named*."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert all(name in lines[0] for name in named), lines[0]
    return lines[0]


COLLECTIVE = ["collective", "-t", "ib-cluster:1x8"]


# --- numbers: finite and in range, refused by name where they enter ------------------------


@pytest.mark.parametrize(("args", "env", "named"), [
    (["--bytes", "1e400"], None, ["--bytes", "expected a finite size", "'1e400'"]),
    (["--bytes", "8:1e400"], None, ["--bytes", "expected a finite size", "'1e400'"]),
    (["--bytes", "8:1e300"], None, ["--bytes", "from 0 to 1 PiB (2^50 bytes) per rank", "'1e300'"]),
    (["--bytes", "2000T"], None, ["--bytes", "1 PiB", "'2000T'"]),
    (["--bytes", "8"], {"ATPSIM_MAX_MEMORY": "inf"}, ["ATPSIM_MAX_MEMORY", "finite byte count", "'inf'"]),
    (["--bytes", "8"], {"ATPSIM_MAX_MEMORY": "nan"}, ["ATPSIM_MAX_MEMORY", "finite byte count", "'nan'"]),
    (["--bytes", "8"], {"ATPSIM_MAX_MEMORY": "1e30"}, ["ATPSIM_MAX_MEMORY", "to 1152921504606846976 (1 EiB)", "'1e30'"]),
    (["--bytes", "8"], {"ATPSIM_MAX_GPUS": "9" * 30}, ["ATPSIM_MAX_GPUS", "expected an integer from 1 to 9223372036854775807"]),
])  # fmt: skip
def test_a_number_past_its_range_is_refused_by_name(args, env, named):
    """``--bytes 1e400`` was an OverflowError (exit 3), ``8:1e300`` ran 994 sizes up to 6.7e299
    bytes, ATPSIM_MAX_MEMORY=inf or 1e30 an OverflowError: each is now refused where it enters
    (:func:`atpsim.errors.check_number`), naming the option or variable and the range."""
    refused(run(*COLLECTIVE, *args, env=env), *named)


@pytest.mark.parametrize(("spec", "named"), [
    ("ib-cluster:2x8,oversubscription=nan", ["oversubscription", "expected a finite number", "'nan'"]),
    ("ib-cluster:2x8,oversubscription=inf", ["oversubscription", "expected a finite number", "'inf'"]),
    ("ib-cluster:2x8,oversubscription=1e400", ["oversubscription", "expected a finite number", "'1e400'"]),
    ("ib-cluster:2x8,oversubscription=0.5", ["oversubscription", "expected a ratio >= 1, got 0.5"]),
    ("torus:4x4,link_bandwidth_Bps=inf", ["link_bandwidth_Bps", "expected a finite number"]),
    ("torus:4x4,link_bandwidth_Bps=1e400 GB/s", ["link_bandwidth_Bps", "expected a finite bandwidth"]),
    ("torus:4x4,link_bandwidth_Bps=-25 GB/s", ["link_bandwidth_Bps", "expected a positive bandwidth"]),
    ("torus:4x4,link_latency_s=nan", ["link_latency_s", "expected a finite number"]),
    ("torus:4x4,link_latency_s=-1 us", ["link_latency_s", "expected a non-negative time"]),
])  # fmt: skip
def test_a_builder_parameter_that_is_not_a_finite_number_in_range_is_refused(spec, named):
    """``oversubscription=nan`` passed ``< 1`` and crashed (exit 3); ``inf`` left a fat tree
    without spines (a disconnected-graph error about no parameter)."""
    refused(run("topo", "show", spec), spec, *named)


@pytest.mark.parametrize(("params", "named"), [
    ({"oversubscription": float("nan")}, ["oversubscription", "expected a finite ratio >= 1, got nan"]),
    ({"oversubscription": float("inf")}, ["oversubscription", "expected a finite ratio >= 1, got inf"]),
    ({"nic_bandwidth_Bps": float("inf")}, ["nic_bandwidth_Bps", "expected a finite positive bandwidth"]),
    ({"ib_latency_s": float("inf")}, ["ib_latency_s", "expected a finite latency >= 0, got inf"]),
    ({"ib_latency_s": float("nan")}, ["ib_latency_s", "expected a finite latency >= 0, got nan"]),
])  # fmt: skip
def test_a_builder_mapping_with_a_non_finite_value_is_refused_by_key(tmp_path, params, named):
    """The same checks hold for a builder written as a YAML mapping (``.nan``, ``.inf``): the
    builders' own parameter checks (:mod:`atpsim.topology.params`)."""
    from atpsim.api import AtpsimError, load_topology

    with pytest.raises(AtpsimError) as info:
        load_topology({"builder": "ib-cluster", "nodes": 2, **params})
    assert all(name in str(info.value) for name in named), str(info.value)


# --- a value named twice ------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "named"), [
    ("ib-cluster:2x4,nodes=3", ["nodes", "given twice, by the size '2x4' and by 'nodes=3'"]),
    ("ib-cluster:2x4,gpus_per_node=8", ["gpus_per_node", "given twice, by the size '2x4'"]),
    ("ib-cluster:2x8,oversubscription=2,oversubscription=4",
     ["oversubscription", "given twice, by 'oversubscription=2' and by 'oversubscription=4'"]),
    ("nvl72:2,domains=3", ["domains", "given twice, by the size '2'"]),
    ("torus:4x4,dims=8", ["dims", "given twice"]),
])  # fmt: skip
def test_a_spec_that_names_a_value_twice_is_refused_not_last_wins(spec, named):
    """``ib-cluster:2x4,nodes=3`` built 3 nodes (the last value won) without a word."""
    refused(run("topo", "show", spec), *named)


def test_a_builder_mapping_that_repeats_its_spec_strings_size_is_refused():
    from atpsim.api import AtpsimError, load_topology

    with pytest.raises(AtpsimError, match="nodes: given twice: in the spec string 'ib-cluster:2x4'"):
        load_topology({"builder": "ib-cluster:2x4", "nodes": 3})


# --- degenerate groups --------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["-t", "torus:1x1"],
    ["-t", "ib-cluster:1x8", "--devices", "1"],
    ["-t", "ib-cluster:1x8", "--groups", "dim1:1x8"],
    ["-t", "ib-cluster:1x8", "--groups", "dim1:1x8", "-a", "ring", "--protocol", "none"],
    ["-t", "torus:1x1", "--op", "all_to_all"],
    ["-t", "dgx-h100", "--groups", "dim1:1x8"],
])  # fmt: skip
def test_a_collective_over_one_gpu_takes_no_time(args):
    """A group of one GPU moves nothing: every row is 0 s with algbw and busbw 0, as the
    collectives' closed forms and the step simulator answer ``p = 1`` (was IndexError, exit 3;
    ``--devices 1`` on ib-cluster:1x8 was refused as not a multiple of a node)."""
    result = run("collective", *args, "--bytes", "8:64", "--csv")
    assert result.exit_code == 0, result.output
    rows = [line.split(",") for line in result.stdout.strip().splitlines()[1:]]
    assert [(r[6], r[8], r[10], r[11], r[12]) for r in rows] == [
        ("1", size, "0", "0", "0") for size in ("8", "16", "32", "64")]


def test_the_text_table_of_a_one_gpu_collective_says_why_it_is_zero():
    result = run(*COLLECTIVE, "--devices", "1", "--bytes", "8")
    assert result.exit_code == 0, result.output
    assert "# p = 1: a group of one GPU moves nothing, so every time, algbw and busbw is 0" in result.stdout


# --- options that do nothing --------------------------------------------------------------


@pytest.mark.parametrize(("args", "named"), [
    (["-a", "rabenseifner"], ["--channels: does nothing for rabenseifner", "ring, tree or auto"]),
    (["-a", "ring-rank-order"], ["--channels: does nothing for ring-rank-order"]),
    (["-a", "bidirectional-ring"], ["--channels: does nothing for bidirectional-ring"]),
    (["--op", "broadcast"], ["--channels: does nothing for auto", "no broadcast algorithm runs on channels"]),
    (["--op", "all_gather", "-a", "nvls"], ["--channels: does nothing for nvls", "ring or auto"]),
])  # fmt: skip
def test_channels_for_an_algorithm_of_one_channel_are_refused(args, named):
    """``--channels 4`` was dropped without a word for an algorithm that runs one channel."""
    refused(run(*COLLECTIVE, *args, "--channels", "4", "--bytes", "8"), *named)


@pytest.mark.parametrize("algorithm", ["ring", "tree", "auto"])
def test_channels_still_apply_to_the_algorithms_that_run_on_them(algorithm):
    result = run("collective", "-t", "ib-cluster:2x8", "-a", algorithm, "--channels", "2",
                 "--bytes", "1M", "--csv")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1].split(",")[5] == "2"


# --- the YAML loader ----------------------------------------------------------------------

ANALYTIC = """name: merged
model: M2
mode: [analytic]
report: {figures: []}
cases:
  - &first
    topology: [ic3]
    parallelism: {devices: 8, meshes: [[8, 1]]}
    chunks: 1
  - <<: *first
    chunks: 2
"""


def test_a_merge_key_takes_the_anchor_and_its_own_keys_override(tmp_path):
    """``<<: *anchor`` was refused (the duplicate-key check built the merge key itself);
    now the second case is the first with chunks 2, as YAML's merge type says."""
    (tmp_path / "merged.yaml").write_text(ANALYTIC)
    result = run("run", tmp_path / "merged.yaml", "-o", tmp_path / "out", "--no-progress")
    assert result.exit_code == 0, result.output
    with (tmp_path / "out" / "results.csv").open() as table:
        cells = list(csv.DictReader(table))
    assert [(c["topology"], c["mesh"], c["chunks"]) for c in cells] == [("ic3", "8x1", "1"), ("ic3", "8x1", "2")]


def _bomb(levels: int = 9) -> str:
    """Anchors of nine aliases of the one before: 9^levels values from a few hundred bytes."""
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("text", "named"), [
    ("name: k\n? [a, b]\n: 1\n", ["line 2, column 3", "a list used as a key; expected a name or a number"]),
    ("name: k\n? {a: 1}\n: 1\n", ["line 2, column 3", "a mapping used as a key"]),
    ("name: k\nmodel: M2\nmodel: M3\n", ["line 3", "duplicate key 'model'"]),
    ("name: k\nx: " + "[" * 400 + "]" * 400 + "\n", ["nested deeper than 64 levels"]),
    ("name: k\nx: &x [1, *x]\n", ["an alias refers to a node that contains it"]),
    ("name: k\n" + _bomb(), ["its aliases add more than 100,000 values to the document"]),
    (_bomb() + "name: b\ntopology: [{builder: ib-cluster, nodes: 2, bogus: *a9}]\n",
     ["its aliases add more than 100,000 values"]),
], ids=["list-key", "mapping-key", "duplicate-key", "depth-400", "recursive-alias", "alias-bomb",
        "alias-bomb-in-builder"])  # fmt: skip
def test_a_scenario_file_the_loader_cannot_take_is_one_line_naming_it(tmp_path, text, named):
    """A list or mapping as a key and a 400-level nesting were exit 3; an alias bomb inside a
    builder mapping was walked value by value (no answer in 120 s): each is now refused by
    the loader (:mod:`atpsim.yamlfile`), before anything is built or walked."""
    (tmp_path / "s.yaml").write_text(text)
    refused(run("run", tmp_path / "s.yaml", "-o", tmp_path / "out"), "s.yaml", "invalid YAML", *named)


def test_a_search_space_file_goes_through_the_same_loader(tmp_path):
    (tmp_path / "space.yaml").write_text(_bomb() + "model: gpt3-125m\n")
    refused(run("search", "--space", tmp_path / "space.yaml", "-o", tmp_path / "out"),
            "space.yaml", "its aliases add more than 100,000 values")


def test_a_custom_topology_file_goes_through_the_same_loader(tmp_path):
    (tmp_path / "topo.yaml").write_text("nodes: []\n" + _bomb())
    refused(run("topo", "show", tmp_path / "topo.yaml"), "topo.yaml", "its aliases add more than 100,000 values")


def test_a_scenario_number_that_is_not_finite_is_refused_by_key(tmp_path):
    """``straggler_factor: .inf`` leaked a RuntimeWarning, then an IndexError as a point
    failure; every float of a scenario is now finite (scenario.fields.Frozen)."""
    (tmp_path / "s.yaml").write_text(
        "name: s\ntopology: [ib-cluster:1x8]\nmodel: gpt3-125m\nparallelism: {devices: 8, global_batch: 16, "
        "micro_batch: 2, tp: [[1, 1]], pp: 1, perturb: {seed: 1, stragglers: 1, straggler_factor: .inf}}\n")
    refused(run("run", tmp_path / "s.yaml", "-o", tmp_path / "out"), "s.yaml",
            "parallelism.perturb.straggler_factor: expected a finite number, got inf")


# --- HTML and Markdown escaping -----------------------------------------------------------

HOSTILE = """name: x
description: 'A run. [click](javascript:alert(1)) and <img src=x onerror=alert(2)>.'
topology: [ic3]
model: M2
parallelism: {devices: 8, meshes: [[8, 1]]}
mode: [analytic]
report: {figures: [], title: '"><script>alert(1)</script> [t](JavaScript:alert(3))'}
"""


def _live(page: str) -> list[str]:
    """The markup a user's text would make live in *page*: tags and javascript: links."""
    return re.findall(r"<script|<img|<b>|href=\"\s*javascript:", page, flags=re.IGNORECASE)


def test_the_index_and_a_report_escape_every_name_from_a_user(tmp_path):
    """Run folders named like markup (``<b>x<b>``) or a link (``javascript:alert(1)``) and a
    report title and description with ``"><script>`` and ``javascript:`` links: no tag and no
    live javascript: link in reports/index.html, report.html or report.md (outside code); the
    folders are relative links, percent-encoded."""
    (tmp_path / "x.yaml").write_text(HOSTILE)
    reports = tmp_path / "reports"
    assert run("run", tmp_path / "x.yaml", "-o", reports / "<b>x<b>").exit_code == 0
    (reports / "javascript:alert(1)").mkdir()
    for path in (reports / "<b>x<b>").iterdir():
        (reports / "javascript:alert(1)" / path.name).write_bytes(path.read_bytes())
    assert run("report", "--index", reports).exit_code == 0
    index = (reports / "index.html").read_text()
    page = (reports / "<b>x<b>" / "report.html").read_text()
    markdown = (reports / "<b>x<b>" / "report.md").read_text().split("```")[0::2]  # outside code
    assert (_live(index), _live(page), _live("".join(markdown))) == ([], [], [])
    assert 'href="%3Cb%3Ex%3Cb%3E/report.html">&lt;b&gt;x&lt;b&gt;: &quot;&gt;&lt;script&gt;' in index
    assert 'href="javascript%3Aalert%281%29/report.html"' in index
    assert "&lt;b&gt;x&lt;b&gt;" in index and "A run. click) and &lt;img" in page


@pytest.mark.parametrize(("text", "html"), [
    ("[a](javascript:alert(1))", "a)"),
    ("[a](JAVASCRIPT:x)", "a"),
    ("[a](data:text/html,x)", "a"),
    ("[a](vbscript:x)", "a"),
    ("[a](b/report.html)", '<a href="b/report.html">a</a>'),
    ("[a](https://example.org/x)", '<a href="https://example.org/x">a</a>'),
    ("[x\\]\\(javascript:y\\)](z/report.html)", '<a href="z/report.html">x](javascript:y)</a>'),
])  # fmt: skip
def test_a_link_is_live_only_when_relative_or_web(text, html):
    from atpsim.report.document import inline_html

    assert inline_html(text) == html


# --- --scheduler --------------------------------------------------------------------------

SCHEDULERS = ["inproc://10.0.0.1/1/2", "ucx://host:8786", "tls://host:8786", "http://host:8786",
              "tcp://host", "tcp://host:0", "tcp://host:70000", "tcp://host:8786/x", "host:8786", ""]


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_a_scheduler_other_than_local_or_tcp_is_refused_at_once(tmp_path, scheduler):
    """``inproc://`` and ``ucx://`` were exit 3 after 24 s with a traceback from Dask's
    ``Client.__del__``: now only ``local`` and ``tcp://HOST:PORT`` are taken, checked before the
    scenario is read (its bad YAML is not reached) or any client is made."""
    (tmp_path / "never-read.yaml").write_text("[not: a scenario")
    refused(run("run", tmp_path / "never-read.yaml", "--scheduler", scheduler),
            f"--scheduler: expected 'local' or a scheduler address such as tcp://host:8786, got {scheduler!r}")


@pytest.mark.parametrize("scheduler", SCHEDULERS[:2])
def test_a_search_refuses_the_same_schedulers(tmp_path, scheduler):
    refused(run("search", "-t", "ib-cluster:1x8", "-m", "gpt3-125m", "--global-batch", "16",
                "-o", tmp_path / "out", "--scheduler", scheduler), "--scheduler", repr(scheduler))


# --- a search's folder is owned by its space ----------------------------------------------

SEARCH = ["search", "-t", "ib-cluster:1x8", "-m", "gpt3-125m", "--global-batch", "16", "--pp", "1",
          "--micro-batch", "2", "--no-progress"]  # fmt: skip


def fake_job(point: Any) -> dict[str, Any]:
    """A row from the layout alone, no simulation."""
    time_s = 0.1 * point.tp.size + 0.05 * point.pp
    return {"iteration_time_s": time_s, "tflops_per_gpu": 10.0 / time_s, "mfu": 0.3,
            "memory_per_rank_bytes": 1e9, "fits_memory": True}  # fmt: skip


def test_a_second_search_of_other_options_does_not_overwrite_the_first(tmp_path, monkeypatch):
    """Every command-line search was named "search", so a second one with other options into
    the same -o replaced the first's table without a word. A search made by options is now
    named by their hash: the same options regenerate their folder, others are refused there
    (naming -o, --resume and --fresh), and each has its own default folder."""
    monkeypatch.setattr("atpsim.api.search.simulate_job_point", fake_job)
    out = tmp_path / "out"
    assert run(*SEARCH, "-o", out).exit_code == 0
    first = (out / "results.csv").read_bytes()
    line = refused(run(*SEARCH, "--zero", "0", "-o", out), f"-o: {out} holds the results of search 'search-",
                   "expected an empty folder or one of search 'search-", "continues there with --resume",
                   "give another -o, or --fresh to replace them")  # fmt: skip
    assert (out / "results.csv").read_bytes() == first, line
    assert run(*SEARCH, "-o", out).exit_code == 0  # the same search regenerates its own
    assert run(*SEARCH, "--zero", "0", "-o", out, "--fresh").exit_code == 0


def test_searches_of_other_options_have_their_own_default_folders(tmp_path, monkeypatch):
    monkeypatch.setattr("atpsim.api.search.simulate_job_point", fake_job)
    monkeypatch.chdir(tmp_path)
    assert run(*SEARCH).exit_code == 0 and run(*SEARCH, "--zero", "0").exit_code == 0
    folders = sorted(p.name for p in (tmp_path / "reports").iterdir())
    assert len(folders) == 2 and all(re.fullmatch(r"search-[0-9a-f]{8}", f) for f in folders), folders


# --- a trace's times ----------------------------------------------------------------------

TRACE = Path(__file__).resolve().parents[1] / "calibrate" / "trace" / "data" / "trace.1x2.c1.rank0.json"


@pytest.mark.parametrize(("field", "text"), [("dur", "1e400"), ("dur", "NaN"), ("ts", "-Infinity")])
def test_a_trace_event_whose_time_is_not_finite_is_refused_naming_it(tmp_path, field, text):
    """A Kineto event with ``dur`` 1e400 (JSON reads it as inf) ran to exit 0 with "+nan%"."""
    data = json.loads(TRACE.read_text())
    index, event = next((i, e) for i, e in enumerate(data["traceEvents"])
                        if str(e.get("name", "")).startswith("aten::mm"))  # fmt: skip
    event[field] = 0.0
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data).replace(f'"{field}": 0.0', f'"{field}": {text}', 1))
    refused(run("validate", path), str(path), f"traceEvents[{index}].{field}: expected a finite time")


# --- perturbations that meant nothing or too much -------------------------------------------


@pytest.mark.parametrize(("perturb", "named"), [
    ("{seed: 1, gpus: [[3, 1.5], [1, 2], [3, 2]]}",
     "parallelism.perturb.gpus[2]: rank 3 listed twice; expected each rank once"),
    ("[{}, {gpus: [[0, 2], [0, 2]]}]", "parallelism.perturb[1].gpus[1]: rank 0 listed twice"),
    ("[]", "parallelism.perturb: expected a perturbation or a list of them, got an empty list"),
])  # fmt: skip
def test_a_perturbation_that_would_run_otherwise_than_written_is_refused(tmp_path, perturb, named):
    """A rank listed twice in ``perturb.gpus`` had its factors multiplied; ``perturb: []``
    expanded to no point and failed on an empty table."""
    (tmp_path / "p.yaml").write_text(
        "name: p\ntopology: [ib-cluster:1x8]\nmodel: gpt3-125m\nparallelism: {devices: 8, "
        f"global_batch: 16, micro_batch: 2, tp: [[1, 1]], pp: 1, perturb: {perturb}}}\n")
    refused(run("run", tmp_path / "p.yaml", "-o", tmp_path / "out"), "p.yaml", named)

"""Figure 10's bars: Megatron-LM is ATP-1 at one chunk, ATP the best ATP row, SUMMA the best
SUMMA row, SageMaker the best SageMaker row; neither counts as an ATP-i bar."""

from __future__ import annotations

from report_fakes import frame_of, point

from atpsim.parallel.grid import Grid
from atpsim.parallel.mesh import DeviceMesh
from atpsim.parallel.sagemaker import SageMakerGroup
from atpsim.report.build import build_report
from atpsim.report.data import mesh_rows
from atpsim.report.figures import SCHEME_SERIES, scheme_series
from atpsim.results.io import read_results, write_results


def fig10_frame():
    atp = [point("ic4", 16, m, DeviceMesh(16 // i, i), chunks=c)
           for m in ("M1", "M2") for i in (1, 4) for c in (1, 2)]
    summa = [point("ic4", 16, m, Grid(4)) for m in ("M1", "M2")]
    sagemaker = [point("ic4", 16, m, SageMakerGroup(16)) for m in ("M1",)]
    return frame_of(atp + summa + sagemaker)


def test_series_split_the_rows_by_scheme():
    frame = fig10_frame()
    series = scheme_series(frame, "tflops_per_gpu")
    megatron, atp, summa, sagemaker = (series[name] for name in SCHEME_SERIES)
    assert set(zip(megatron["mesh"], megatron["chunks"], strict=True)) == {("16x1", 1)}
    assert set(atp["scheme"]) == {"atp"} and len(atp) == 8
    assert set(summa["scheme"]) == {"summa"} and len(summa) == 2
    assert set(sagemaker["scheme"]) == {"sagemaker"} and list(sagemaker["mesh"]) == ["16x1"]
    assert set(mesh_rows(frame, 4)["scheme"]) == {"atp"}
    assert set(mesh_rows(frame, 1)["scheme"]) == {"atp"}
    assert SCHEME_SERIES[3] not in scheme_series(frame[frame["scheme"] != "sagemaker"],
                                                 "tflops_per_gpu")


def test_fig10_report_draws_the_scheme_bars(tmp_path):
    text = "name: t\nreport:\n  figures: [scheme_bars]\n"
    write_results(tmp_path, fig10_frame(), parquet=False)
    (tmp_path / "scenario.yaml").write_text(text)
    build_report(tmp_path, read_results(tmp_path), text)
    assert (tmp_path / "figures/scheme_bars.png").stat().st_size > 10_000
    assert "as the paper's Figure 10" in (tmp_path / "report.md").read_text()

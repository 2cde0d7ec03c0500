"""Reading a measurements folder's tables: repetitions reduced by the statistic, bad input
naming its file and key."""

import pytest

from atpsim.calibrate.measurements.folder import read_measurements
from atpsim.errors import AtpsimError


def test_repeated_rows_reduce_to_their_median(tmp_path):
    (tmp_path / "g.csv").write_text(
        "m,n,k,dtype,time_s\n8,8,8,fp32,1e-5\n8,8,8,fp32,3e-5\n8,8,8,fp32,2.5e-5\n"
    )
    (gemm,) = read_measurements(tmp_path).gemms
    assert gemm.time_s == pytest.approx(2.5e-5) and gemm.label == "8x8x8 fp32"


@pytest.mark.parametrize(
    "name, text, expected",
    [
        ("x.csv", "a,b\n1,2\n", "x.csv: not a collectives"),
        (
            "g.csv",
            "m,n,k,dtype,time_s\n8,8,8,fp32,-1\n",
            "g.csv: row 2.time_s: expected a positive",
        ),
        ("g.csv", "m,n,k,dtype\n8,8,8,fp32\n", "g.csv: time_s: no time column"),
        (
            "c.csv",
            "op,group_size,bytes,time_s\nbcast,2,8,1e-5\n",
            "c.csv: c.csv row 0.op: expected an op",
        ),
        (
            "l.csv",
            "d1,d2,chunks,hidden,heads,batch,seq,dtype,fwd_bwd_time_s\n2,2,0,8,2,2,4,fp32,1\n",
            "l.csv row 0.chunks: expected an integer >= 1",
        ),
    ],
)
def test_bad_tables_name_file_and_key(tmp_path, name, text, expected):
    (tmp_path / name).write_text(text)
    with pytest.raises(AtpsimError, match=expected.replace(".", r"\.")):
        read_measurements(tmp_path)

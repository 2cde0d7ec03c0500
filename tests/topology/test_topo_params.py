"""Builder parameter checks (atpsim.topology.params): SI values out, TopologyError naming the key."""

import math

import pytest

from atpsim.errors import TopologyError
from atpsim.topology.params import bandwidth_param, choice_param, count_param, time_param


@pytest.mark.parametrize(
    "value, expected_Bps",
    [(25e9, 25e9), ("25 GB/s", 25e9), ("200 Gb/s", 25e9), ("450e9", 450e9)],
)
def test_bandwidth_reads_numbers_units_and_numbers_written_as_text(value, expected_Bps):
    assert bandwidth_param(value, "b") == expected_Bps


@pytest.mark.parametrize(
    "value, message",
    [
        (0, "expected a positive bandwidth, got 0"),
        (math.nan, "expected a positive bandwidth"),
        (math.inf, "expected a finite positive bandwidth, got inf"),
        ("inf", "expected a finite positive bandwidth, got 'inf'"),
        ("fast", "expected a bandwidth such as"),
        ("-1 GB/s", "expected a bandwidth such as"),
    ],
)
def test_bad_bandwidths_name_the_key(value, message):
    with pytest.raises(TopologyError, match=message) as info:
        bandwidth_param(value, "link_bandwidth_Bps")
    assert info.value.key == "link_bandwidth_Bps"


def test_time_reads_units_and_allows_zero_but_not_negative():
    assert time_param("0.6 us", "t") == pytest.approx(0.6e-6)
    assert time_param("1e-6", "t") == 1e-6
    assert time_param(0, "t") == 0.0
    with pytest.raises(TopologyError, match="expected a latency >= 0, got -1") as info:
        time_param(-1, "latency_s")
    assert info.value.key == "latency_s"


@pytest.mark.parametrize("value", [0, True, 2.0, "2"])
def test_count_wants_an_integer_at_or_above_the_minimum(value):
    with pytest.raises(TopologyError, match="expected an integer >= 1") as info:
        count_param(value, "gpus")
    assert info.value.key == "gpus"
    assert count_param(3, "gpus") == 3


def test_choice_lists_the_choices():
    assert choice_param("a100", "generation", ("a100", "h100")) == "a100"
    with pytest.raises(TopologyError, match=r"expected one of \['a100', 'h100'\], got 'v100'"):
        choice_param("v100", "generation", ("a100", "h100"))

"""The Mathis model against a hand computation."""

import math

import pytest

from lab.stats.models import MATHIS_C, mathis_goodput_bps


def test_mathis_by_hand():
    # MSS 1200 B, RTT 160 ms, p = 5 %: 9600 bit / 0.16 s = 60 000 bit/s per RTT-window segment;
    # sqrt(3/2) / sqrt(0.05) = 1.224745 / 0.223607 = 5.477226; 60 000 * 5.477226 = 328 633.6 bit/s (~0.33 Mbit/s)
    assert mathis_goodput_bps(1200, 0.160, 0.05) == pytest.approx(328_633.6, rel=1e-6)
    assert mathis_goodput_bps(1200, 0.160, 0.05) / 1e6 == pytest.approx(0.33, abs=0.005)
    assert abs(MATHIS_C - 1.2247449) < 1e-7


def test_mathis_scaling_and_edges():
    base = mathis_goodput_bps(1460, 0.05, 0.01)
    assert mathis_goodput_bps(1460, 0.10, 0.01) == pytest.approx(base / 2)  # 1/RTT
    assert mathis_goodput_bps(1460, 0.05, 0.04) == pytest.approx(base / 2)  # 1/sqrt(p)
    assert mathis_goodput_bps(1460, 0.05, 0.01, c=1.0) == pytest.approx(base / MATHIS_C)
    assert mathis_goodput_bps(1460, 0.05, 0.0) == math.inf
    for bad in ((0, 0.05, 0.01), (1460, 0, 0.01), (1460, 0.05, 5.0), (1460, 0.05, -0.1)):
        with pytest.raises(ValueError):
            mathis_goodput_bps(*bad)

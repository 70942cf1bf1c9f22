"""The lab's one median and percentile rule (lab/quantiles.py): linear interpolation between order statistics,
numpy's default to the last bit, and no module of lab/ computing a median or a percentile any other way."""

from __future__ import annotations

import math
import random
import re
import statistics
from pathlib import Path

import numpy as np
import pytest

from lab.quantiles import lerp, median, middle, position, quantile, quantiles
from lab.stats.stats import Obs, describe

LAB = Path(__file__).resolve().parents[2] / "lab"


def test_the_rule_by_hand():
    assert median([3, 1, 2]) == 2.0
    assert median([4, 1, 3, 2]) == 2.5  # the mean of the two middle values
    assert quantile([10, 20, 30, 40, 50], 0.95) == pytest.approx(48.0)  # h = 3.8: 40 + 0.8 * 10
    assert quantile([10, 20, 30, 40, 50], 0.25) == 20.0  # h = 1 falls on x[1]
    assert quantile([7.0], 0.99) == 7.0
    assert quantiles([5, 1, 4, 2, 3], (0.0, 0.5, 1.0)) == [1.0, 3.0, 5.0]
    assert position(5, 0.95) == (3, pytest.approx(0.8))


def test_it_is_numpys_default_to_the_last_bit():
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(1, 40)
        xs = [rng.lognormvariate(0, 2) * rng.choice((1, -1)) for _ in range(n)]
        for q in (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0, rng.random()):
            assert quantile(xs, q) == float(np.quantile(xs, q)), (xs, q)
        if n > 1:
            assert quantile(xs, 0.95) == pytest.approx(statistics.quantiles(xs, n=100, method="inclusive")[94])
        assert median(xs) == pytest.approx(float(np.median(xs)), rel=1e-15, abs=0)


def test_a_median_between_infinities_is_their_limit_as_numpys():
    for xs in ([1.0, math.inf], [-math.inf, 1.0], [-math.inf, -math.inf], [math.inf, math.inf, 2.0, 3.0]):
        assert median(xs) == float(np.median(xs))
    assert math.isnan(median([-math.inf, math.inf]))
    assert lerp(1.0, 2.0, 0.0) == 1.0 and lerp(1.0, 2.0, 0.75) == 1.75


def test_censored_statistics_use_the_same_rule():
    xs = [0.31, 0.12, 0.5, 0.27, 0.9, 0.44]
    d = describe(xs)
    assert d is not None
    assert (d.median.value, d.q1.value, d.q3.value) == (median(xs), quantile(xs, 0.25), quantile(xs, 0.75))
    assert describe([*map(Obs, xs[:5]), Obs(2.0, 1)]).median.value == median([*xs[:5], 2.0])


def test_no_quantile_of_nothing_and_the_middle_run():
    with pytest.raises(ValueError, match=r"0\.5-quantile of 0 values"):
        median([])
    with pytest.raises(ValueError):
        quantile([1.0], 1.5)
    assert middle(["a", "b", "c", "d"]) == "b" and middle(["a"]) == "a"
    with pytest.raises(ValueError):
        middle([])


#: a median or percentile computed some other way than lab/quantiles.py (or lab/stats/stats.py's censored one)
OTHER_WAYS = re.compile(r"np\.(median|percentile|quantile|nanmedian|nanpercentile)\(|statistics\.(median|quantiles)"
                        r"|\[\(?len\(\w+\) ?(- ?1\)? ?)?// ?2\]|\[\w+ ?// ?2( ?- ?1)?\]"
                        r"|\[(min\([^\]]*)?int\([\d.]+ ?\*")


def test_no_module_of_lab_computes_a_median_or_percentile_by_itself():
    found = [f"{p.relative_to(LAB.parent)}:{i}: {line.strip()}" for p in sorted(LAB.rglob("*.py"))
             if p.name != "quantiles.py"
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if OTHER_WAYS.search(line)]
    assert found == []


def test_the_scan_finds_the_forms_it_looks_for():
    for line in ("float(np.median(xs))", "statistics.median(rtts)", "order[(len(order) - 1) // 2]", "s[len(s) // 2]",
                 "s[n // 2 - 1]", "rtts[int(0.25 * (len(rtts) - 1))]", "statistics.quantiles(xs, n=100)",
                 "np.percentile(t, [25])", "late[int(0.9 * (samples - 1))]",
                 "over[min(len(over) - 1, int(0.9 * len(over)))]"):
        assert OTHER_WAYS.search(line), line

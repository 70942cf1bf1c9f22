"""The link benchmark's pure logic: how side-by-side forwarding pairs are summarized."""

from lab.bench.link import (
    KERNEL,
    LINKEM,
    THREADED,
    CapacityPair,
    rotation,
    summarize_capacity,
    summarize_threaded,
)


def test_disturbed_pairs_are_set_aside():
    pairs = [CapacityPair(2.0, 1.0, steal_pct=1), CapacityPair(1.0, 0.2, steal_pct=30),
             CapacityPair(1.8, 1.2, steal_pct=5)]
    kernel, through, ratio, used = summarize_capacity(pairs)
    assert used == 2
    assert (kernel, through) == (1.9, 1.1)
    assert ratio == (0.5 + 1.2 / 1.8) / 2  # median of the per-pair ratios, not a ratio of medians


def test_all_disturbed_uses_every_pair():
    pairs = [CapacityPair(2.0, 1.0, steal_pct=20), CapacityPair(1.0, 0.3, steal_pct=30)]
    assert summarize_capacity(pairs)[3] == 2


def test_ratio_of_a_failed_kernel_run_is_zero():
    assert CapacityPair(0.0, 1.0, steal_pct=0).ratio == 0.0


def test_rounds_rotate_so_each_path_takes_each_place_once():
    paths = [KERNEL, LINKEM, THREADED]
    orders = [rotation(paths, i) for i in range(3)]
    assert all(sorted(o) == sorted(paths) for o in orders)
    assert all({o[k] for o in orders} == set(paths) for k in range(3))
    assert [rotation([KERNEL, LINKEM], i) for i in range(2)] == [[KERNEL, LINKEM], [LINKEM, KERNEL]]


def test_threaded_summary_uses_the_same_undisturbed_rounds():
    pairs = [CapacityPair(1.0, 0.5, steal_pct=1, threaded_gbps=1.0), CapacityPair(1.0, 0.5, steal_pct=40,
                                                                                  threaded_gbps=0.1),
             CapacityPair(1.2, 0.6, steal_pct=2, threaded_gbps=0.9)]
    gbps, ratio = summarize_threaded(pairs) or (0.0, 0.0)
    assert gbps == 0.95 and ratio == (1.0 + 0.75) / 2
    assert summarize_threaded([CapacityPair(1.0, 0.5, steal_pct=0)]) is None

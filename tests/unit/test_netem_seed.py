"""The seeds handed to netem: a model of the kernel's generator shows the loss process looks random from the first
packet after a `shape`, for the small seeds users give (the default is 1).

Linux 6.6+ seeds netem's PRNG from TCA_NETEM_PRNG_SEED with prandom_seed_state() (include/linux/prandom.h: the
64-bit seed folded to 32 bits, the four Tausworthe components started from it with no warm-up) and draws one
prandom_u32_state() (lib/random32.c, lfsr113) per packet for `loss random P` when no other random option is set;
a packet is lost when P (as u32) >= the draw. The model reproduces what Debian trixie's stock kernel (6.12) did in
the VM of scripts/vm.sh (2026-11-25, datagrams over a veth, no other traffic): with seeds 1 and 2 passed unscrambled
at 1 %, packets #2 and #4 (and #7 with seed 2) of the first 20 were lost, and 245 of 20,000 with seed 2.
tests/lab/test_netem.py checks the real kernel's loss from the first packet after each shape.
"""

from __future__ import annotations

import math

from lab.link.netem import plan
from lab.link.spec import parse_link

M32 = 0xFFFFFFFF


class KernelPrandom:
    """prandom_seed_state + prandom_u32_state, as in Linux 6.6-6.18."""

    def __init__(self, seed: int) -> None:
        i = ((seed >> 32) ^ (seed << 10) ^ seed) & M32
        self.s = [i + m if i < m else i for m in (2, 8, 16, 128)]

    def next(self) -> int:
        def taus(s: int, a: int, b: int, c: int, d: int) -> int:
            return (((s & c) << d) & M32) ^ ((((s << a) & M32) ^ s) >> b)

        s = self.s
        s[0] = taus(s[0], 6, 13, 4294967294, 18)
        s[1] = taus(s[1], 2, 27, 4294967288, 2)
        s[2] = taus(s[2], 13, 21, 4294967280, 7)
        s[3] = taus(s[3], 3, 12, 4294967168, 13)
        return s[0] ^ s[1] ^ s[2] ^ s[3]


def lost_packets(seed: int, n: int, p: float) -> list[int]:
    """The 1-based numbers of the packets netem's `loss random p` drops among the first n."""
    g, threshold = KernelPrandom(seed), int(p * M32)
    return [k for k in range(1, n + 1) if threshold >= g.next()]


def _seeds_in_plan(seed: int) -> tuple[int, int]:
    p = plan(parse_link({"loss": "1%", "seed": str(seed)}), "eth1", "eth2")
    down, up = (int(c[c.index("seed") + 1]) for c in p.commands if "netem" in c)
    return down, up


def test_model_matches_the_kernel_seen_in_the_vm():
    # (what the unscrambled seeds 1 and 2 did on a stock kernel: the model reproduces it exactly)
    assert lost_packets(1, 20, 0.01) == [2, 4]
    assert lost_packets(2, 20, 0.01) == [2, 4, 7]
    assert len(lost_packets(2, 20_000, 0.01)) == 245


def test_first_packets_after_shape_are_lost_at_the_loss_rate():
    """For the seeds users give (1..100, both directions), the first 20 packets after a `shape --loss` are lost no
    more often than the loss rate says: inside the 99.9 % binomial interval at 1 % and at 5 %. With the user's
    seed passed unchanged, 68 of 4000 were lost at 1 % (40 expected; the bound is 61) and 289 at 5 % (200; 245)."""
    first, users = 20, range(1, 101)
    seeds = [s for u in users for s in _seeds_in_plan(u)]
    for p in (0.01, 0.05):
        lost = sum(len(lost_packets(s, first, p)) for s in seeds)
        n = len(seeds) * first
        half = 3.29 * math.sqrt(n * p * (1 - p))
        assert n * p - half <= lost <= n * p + half, f"{lost} of the first {n} packets lost at {p:.0%}"


def test_default_seed_loses_no_fixed_early_packets():
    down, up = _seeds_in_plan(1)
    assert len(lost_packets(down, 20_000, 0.01)) in range(160, 241)  # 99.9 % interval of 200
    assert len(lost_packets(up, 20_000, 0.01)) in range(160, 241)


def test_netem_seed_is_splitmix64_per_direction():
    from lab.link.netem import netem_seed

    # splitmix64's first two outputs from state = seed (reference values of the published algorithm for seed 0)
    assert netem_seed(0, "downlink") == 0xE220A8397B1DCDAF
    assert netem_seed(0, "uplink") == 0x6E789E6AA1B965F4
    assert netem_seed(1, "uplink") != netem_seed(2, "downlink")
    assert all(0 <= netem_seed(2**64 - 1, d) < 2**64 for d in ("downlink", "uplink"))

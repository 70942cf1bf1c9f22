"""Analytic models to hold measurements against."""

from __future__ import annotations

import math

MATHIS_C = math.sqrt(3 / 2)  # periodic loss, delayed ACKs off (Mathis, Semke, Mahdavi, Ott 1997): ~1.22


def mathis_goodput_bps(mss_bytes: float, rtt_s: float, loss_p: float, c: float = MATHIS_C) -> float:
    """Mathis et al.'s bound on a Reno-style flow's steady-state rate: MSS/RTT * C/sqrt(p), in bit/s.

    loss_p is a probability (0.05 for 5 %), not a percentage. With no loss the model sets no limit (inf).
    """
    if mss_bytes <= 0 or rtt_s <= 0:
        raise ValueError(f"mss_bytes and rtt_s must be > 0 (got {mss_bytes}, {rtt_s})")
    if not 0 <= loss_p <= 1:
        raise ValueError(f"loss_p is a probability in [0, 1] (got {loss_p})")
    if loss_p == 0:
        return math.inf
    return mss_bytes * 8 / rtt_s * c / math.sqrt(loss_p)

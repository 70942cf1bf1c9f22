"""The stack matrix's heatmap (lab/report/matrix.py) as a small hand-written SVG: servers as rows, clients as
columns; a cell's colour is its median efficiency (red 0 -> yellow 0.5 -> green 1), its text the median goodput, the
efficiency with its interval and level, n and the verdict against the TCP baseline; a failed, unsupported or unrun
pair is never blank: it shows what happened and the reason from its records (the whole reason in the cell's
tooltip and in the table beside the plot). Deterministic text: the same matrix gives the same file."""

from __future__ import annotations

import itertools
import textwrap
from html import escape

from lab.report.matrix import FAILED_FIGURE, WHY_EFFICIENCY, Cell, Matrix, eff_text, mbit, needs_why, status_text
from lab.stats.fmt import NA, fmt_est, fmt_level, sig3

CELL_W, CELL_H = 200, 104
LABEL_W, HEAD_H, TITLE_H, LEGEND_H = 130, 44, 46, 64
LINE_H = 13
WRAP = 29  # characters per line of a reason in a cell
FONT = "font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif"

FAILED_FILL, UNSUPPORTED_FILL, EMPTY_FILL = "#f2b8b5", "#e4e4e4", "#ffffff"
_STOPS = ((0.0, (215, 48, 39)), (0.5, (254, 224, 139)), (1.0, (26, 152, 80)))


def colour(efficiency: float) -> str:
    """Red (0) -> yellow (0.5) -> green (1), lightened so that black text stays readable."""
    e = min(1.0, max(0.0, efficiency))
    for (a, ca), (b, cb) in itertools.pairwise(_STOPS):
        if e <= b:
            w = (e - a) / (b - a)
            rgb = [round((x + (y - x) * w) * 0.55 + 255 * 0.45) for x, y in zip(ca, cb, strict=True)]
            return "#" + "".join(f"{v:02x}" for v in rgb)
    return "#8fcf9f"  # (not reached)


def fill(c: Cell) -> str:
    if c.status == "failed":
        return FAILED_FILL
    if c.status == "unsupported":
        return UNSUPPORTED_FILL
    e = c.efficiency
    if c.status in ("not run", "no result") or e is None or e.value is None:
        return EMPTY_FILL
    return colour(e.value)


def _verdict_line(c: Cell) -> str:
    v = c.verdict
    if v is None:
        return ""
    word = {"equivalent": "\u2248 TCP", "faster": "faster than TCP", "slower": "slower than TCP"}.get(v.verdict,
                                                                                                   v.verdict)
    return f"{word} ({fmt_est(v.ratio)}x)"


def lines(c: Cell) -> list[tuple[str, bool]]:
    """The cell's text lines, (text, bold)."""
    if c.status in ("failed", "unsupported", "not run", "no result"):
        head = status_text(c).upper() if c.status != "failed" else f"FAILED ({c.n_censored} of {c.n})"
        reason = textwrap.wrap(c.failure or NA, WRAP)
        out = [(head, True), *((t, False) for t in reason[:4])]
        if len(reason) > 4:
            out[-1] = (out[-1][0][: WRAP - 1] + "\u2026", False)
        if c.status == "failed" and (v := _verdict_line(c)):
            out = [*out[:4], (v, False)]
        return out[:6]
    eff = c.efficiency
    out = [(f"{mbit(c.goodput)} Mbit/s", True),
           (f"eff {eff_text(c).split(' [')[0]}" if eff is not None else "eff " + NA, False)]
    ci = c.efficiency_ci
    if ci is not None:
        out.append((f"[{fmt_est(ci[0], 1, _two)}\u2013{fmt_est(ci[1], 1, _two)}] {fmt_level(c.ci)}, n={c.n}", False))
    else:
        out.append((f"n={c.n} (no interval below 2)", False))
    if c.status == "partly failed":
        out.append((status_text(c), True))
    if c.share is not None:
        out.append((f"share {c.share * 100:.0f} % (TCP {c.other_share * 100:.0f} %)" if c.other_share is not None
                    else f"share {c.share * 100:.0f} %", False))
    if v := _verdict_line(c):
        out.append((v, False))
    return out[:6]


def _two(v: float) -> str:
    return f"{v:.2f}"


def _tooltip(c: Cell) -> str:
    parts = [c.method, status_text(c), *([f"goodput {mbit(c.goodput)} Mbit/s", f"efficiency {eff_text(c)}"]
                                          if c.status != "failed" else [f"goodput: {FAILED_FIGURE}"])]
    if c.verdict is not None:
        parts.append(f"vs {c.verdict.baseline}: {c.verdict.verdict}, {c.verdict.reason}")
    if c.failure:
        parts.append(c.failure)
    if c.why:
        parts.append(f"why ({c.why_run}): {c.why}")
    return "\n".join(parts)


def _text(x: float, y: float, s: str, size: int = 11, bold: bool = False, anchor: str = "start") -> str:
    weight = ' font-weight="bold"' if bold else ""
    return (f'<text x="{x:.0f}" y="{y:.0f}" font-size="{size}"{weight} text-anchor="{anchor}" style="{FONT}">'
            f"{escape(s)}</text>")


def heatmap_svg(m: Matrix) -> str:
    width = max(1000, LABEL_W + CELL_W * max(1, len(m.clients)) + 10)
    height = TITLE_H + HEAD_H + CELL_H * max(1, len(m.servers)) + LEGEND_H
    rate = next((c.rate_bps for c in m.cells.values() if c.rate_bps), None)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}">',
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
           _text(8, 18, f"Stack matrix, {m.link} link: HTTP/3 per server (row) x client (column)", 14, True),
           _text(8, 36, f"median goodput; efficiency = goodput / {sig3(rate / 1e6) if rate else NA} Mbit/s with the "
                        "interval of the median at its level; verdict against the HTTP/2 TCP baseline", 11)]
    top = TITLE_H + HEAD_H
    for j, client in enumerate(m.clients):
        x = LABEL_W + j * CELL_W + CELL_W / 2
        out.append(_text(x, TITLE_H + HEAD_H - 12, client, 12, True, "middle"))
    for i, server in enumerate(m.servers):
        y = top + i * CELL_H
        out.append(_text(LABEL_W - 8, y + CELL_H / 2 + 4, server, 12, True, "end"))
        for j, client in enumerate(m.clients):
            c = m.cell(server, client)
            x = LABEL_W + j * CELL_W
            dash = ' stroke-dasharray="4 3"' if c.status in ("not run", "no result") else ""
            width_px = 3 if needs_why(c, m.link) else 1
            stroke = "#b00020" if needs_why(c, m.link) else "#8c959f"
            out.append(f'<g><title>{escape(_tooltip(c))}</title>'
                       f'<rect x="{x + 1}" y="{y + 1}" width="{CELL_W - 2}" height="{CELL_H - 2}" fill="{fill(c)}" '
                       f'stroke="{stroke}" stroke-width="{width_px}"{dash}/>')
            for k, (t, bold) in enumerate(lines(c)):
                out.append(_text(x + 8, y + 17 + k * (LINE_H + 2), t, 11, bold))
            out.append("</g>")
    ly = top + CELL_H * len(m.servers) + 16
    for k, e in enumerate((0.0, 0.25, 0.5, 0.75, 1.0)):
        out.append(f'<rect x="{8 + k * 46}" y="{ly}" width="44" height="14" fill="{colour(e)}" stroke="#8c959f"/>')
        out.append(_text(30 + k * 46, ly + 28, f"{e:g}", 10, False, "middle"))
    lx = 8 + 5 * 46 + 14
    out.append(f'<rect x="{lx}" y="{ly}" width="24" height="14" fill="{FAILED_FILL}" stroke="#8c959f"/>')
    out.append(_text(lx + 30, ly + 11, "failed", 10))
    out.append(f'<rect x="{lx + 80}" y="{ly}" width="24" height="14" fill="{UNSUPPORTED_FILL}" stroke="#8c959f"/>')
    out.append(_text(lx + 110, ly + 11, "unsupported", 10))
    out.append(f'<rect x="{lx + 190}" y="{ly}" width="24" height="14" fill="none" stroke="#b00020" '
               'stroke-width="3"/>')
    out.append(_text(lx + 220, ly + 11, f"needs a why (failed, or efficiency < {WHY_EFFICIENCY} on the goodput "
                                        "link at 0 % loss; report: \"Needs a why\")", 10))
    out.append(_text(8, ly + 44, "efficiency colour scale; hover a cell for its whole text", 10))
    out.append("</svg>")
    return "\n".join(out) + "\n"

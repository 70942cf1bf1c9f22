"""SVG documents inlined into report.html (matplotlib's files or strings): one rule for both."""

from __future__ import annotations

import re

_SVG_PROLOGUE = re.compile(r"<\?xml.*?\?>|<!DOCTYPE.*?>|<metadata>.*?</metadata>|<!--.*?-->", re.S)


def svg_element(svg: str) -> str:
    """An SVG document's text as an inline element: XML prologue, doctype, metadata and fixed size removed."""
    svg = _SVG_PROLOGUE.sub("", svg).strip()
    return re.sub(r'(<svg\b[^>]*?)\s+width="[^"]*"\s+height="[^"]*"', r"\1", svg, count=1)

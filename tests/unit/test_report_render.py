"""report.html of a synthetic sweep renders offline in headless Chromium into a real, non-blank page with charts."""

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from lab.report.report import build_report
from tests.unit.test_report import make_sweep

CHROMIUM = Path("/usr/bin/chromium")


def screenshot(html: Path, png: Path, profile: Path) -> None:
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--window-size=1280,2400", f"--screenshot={png}", html.as_uri()]
    subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def test_report_renders_in_chromium(tmp_path):
    if not CHROMIUM.exists() or shutil.which(str(CHROMIUM)) is None:
        pytest.skip("needs Debian's chromium (apt-get install chromium)")
    folder = make_sweep(tmp_path / "sweep")
    build_report(folder)
    png = tmp_path / "shot.png"
    screenshot(folder / "report.html", png, tmp_path / "profile")
    assert png.is_file(), "chromium wrote no screenshot"
    assert png.stat().st_size > 50_000
    img = imread(png)[..., :3]  # floats 0..1
    assert img.shape[:2] == (2400, 1280)
    assert img.std() > 0.05, "screenshot is (nearly) uniform"
    non_white = (img < 0.9).any(axis=2)
    assert non_white.mean() > 0.02, "almost nothing drawn"
    # the plots' line colours (matplotlib's blue, orange, green) are on the page
    for rgb in ((0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E), (0x2C, 0xA0, 0x2C)):
        close = (np.abs(img * 255 - np.array(rgb)) < 12).all(axis=2)
        assert close.sum() > 200, f"colour {rgb} not found: charts missing?"

"""The replay page in a real browser: headless chromium renders it, the script ran
without error, and the screenshot shows the chart (its series' colours), not a blank
or an error page.  `.ci/run` installs Debian's chromium when it is missing."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter

import pytest

from lossless.cli import main
from lossless.report.html import COLORS
from test_picture import WINDOW, write_session

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install chromium; .ci/run installs it)")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
         "--host-resolver-rules=MAP * ~NOTFOUND")  # no name resolves: the page must need no network


def browse(tmp_path, page, *extra):
    env = {**os.environ, "HOME": str(tmp_path)}  # chromium writes its caches under HOME
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *extra, page.as_uri()],
                          capture_output=True, text=True, timeout=120, env=env, check=True)


def pixels(png: bytes) -> tuple[int, int, list[tuple[int, int, int]]]:
    """Width, height and RGB pixels of an 8-bit RGB or RGBA, non-interlaced PNG (what chromium writes)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        body = png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    out, prev = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out.extend(tuple(line[x * bpp:x * bpp + 3]) for x in range(width))
        prev = line
    return width, height, out


def near(rgb, hex_colour, tolerance=40):
    target = tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return sum(abs(p - t) for p, t in zip(rgb, target)) <= tolerance


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    out = tmp / "replay.html"
    assert main(["replay", str(write_session(tmp / "s.json")), "--window", str(WINDOW), "--html", str(out)]) == 0
    return out


def test_the_script_runs_without_error(page, tmp_path):
    dom = browse(tmp_path, page, "--dump-dom").stdout
    body = re.search(r"<body[^>]*>", dom)[0]
    assert "data-script-error" not in body and "neterror" not in body, body
    assert 'data-rendered="4"' in body  # two series in each chart, counted by the script once it had run


def test_the_screenshot_shows_the_chart(page, tmp_path):
    shot = tmp_path / "replay.png"
    browse(tmp_path, page, f"--screenshot={shot}", "--window-size=1400,900")
    width, height, rgb = pixels(shot.read_bytes())
    assert (width, height) == (1400, 900)
    colours = Counter(rgb)
    assert len(colours) > 50, "a blank page has a handful of colours"
    managed = sum(n for c, n in colours.items() if near(c, COLORS["managed"]))
    unmanaged = sum(n for c, n in colours.items() if near(c, COLORS["unmanaged"], 12))
    window = sum(n for c, n in colours.items() if near(c, COLORS["window"]))
    assert managed > 800 and unmanaged > 800 and window > 50, (managed, unmanaged, window)

"""The HTML report in a real headless browser (Debian's chromium): it loads without console errors or blocked
requests, the rendered DOM shows the primary diagnosis, and a screenshot is produced. Skipped only when no
chromium is installed (``.ci/run`` installs it)."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from aoti_trace.pipeline import analyze
from aoti_trace.report import render

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
# what chromium logs for page problems: console errors, uncaught exceptions, CSP-blocked loads, failed requests
PAGE_PROBLEM = re.compile(r"CONSOLE|Uncaught|Refused to|net::ERR_|Failed to load resource", re.I)


def chromium(url: str, tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp / 'profile'}",
           "--enable-logging=stderr", "--v=0", *extra, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def page_problems(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if PAGE_PROBLEM.search(ln)]


def case_dir() -> Path:
    for name in ("cuda_triton_index_oob", "cpp_compile_error"):
        if (REPO / "fixtures" / "cases" / name / "stderr.txt").exists():
            return REPO / "fixtures" / "cases" / name
    pytest.skip("no failing fixture case with a capture")


@pytest.mark.slow
def test_problem_detector_sees_a_broken_page(tmp_path):
    """Control: the log check used below does report a page with a script error and a blocked load."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><img src='http://127.0.0.1:9/x.png'>"
                   "<script>undefinedFunction()</script></body></html>")
    p = chromium(bad.as_uri(), tmp_path, "--dump-dom")
    assert page_problems(p.stderr), p.stderr[-2000:]


@pytest.mark.slow
def test_report_loads_cleanly_and_shows_the_diagnosis(tmp_path):
    analysis = analyze([case_dir()])
    primary = analysis.primary
    assert primary is not None
    page = tmp_path / "report.html"
    page.write_text(render(analysis, "html"), encoding="utf-8")

    p = chromium(page.as_uri(), tmp_path, "--dump-dom")
    assert p.returncode == 0, p.stderr[-2000:]
    assert not page_problems(p.stderr), page_problems(p.stderr)
    dom = p.stdout
    assert "PRIMARY DIAGNOSIS" in dom and primary.rule_id in dom
    assert primary.title.replace("'", "&#x27;") in dom or primary.title in dom

    png = tmp_path / "report.png"
    p = chromium(page.as_uri(), tmp_path, f"--screenshot={png}", "--window-size=1280,2000")
    assert p.returncode == 0 and not page_problems(p.stderr), p.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1280, 2000)
    assert len(data) > 50_000  # a rendered page, not a blank canvas

"""Exit codes and output plumbing of ``aoti-trace analyze``, through the real entry point
(``python3 -m aoti_trace analyze ...`` in a subprocess) on real fixture captures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAILING = "fixtures/cases/cpp_compile_error"  # captured C++ compile failure: one error finding
PASSING = "fixtures/cases/ok_compile_load_run"  # captured success: no finding


def run(*args: str, code: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", code] if code else [sys.executable, "-m", "aoti_trace", "analyze", *args]
    full_env = {**os.environ, **(env or {})}
    full_env.pop("AOTI_TRACE_DEBUG", None)
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120, env=full_env)


def test_error_finding_exits_1_and_text_is_plain_when_piped():
    p = run(FAILING)
    assert p.returncode == 1, p.stderr
    assert p.stdout.startswith("PRIMARY") and "\x1b[" not in p.stdout
    assert "Traceback" not in p.stderr


def test_no_finding_exits_0():
    p = run(PASSING)
    assert p.returncode == 0, p.stderr
    assert "No problem found." in p.stdout


def test_fail_on_never_exits_0_and_report_goes_to_output(tmp_path):
    out = tmp_path / "r.json"
    p = run(FAILING, "--fail-on", "never", "-f", "json", "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    doc = json.loads(out.read_text())
    assert doc["summary"]["counts"]["error"] >= 1
    assert p.stderr.startswith("aoti-trace: ") and doc["summary"]["primary"] in p.stderr


def test_html_option_writes_the_page_and_color_always(tmp_path):
    page = tmp_path / "r.html"
    p = run(FAILING, "--html", str(page), "--color", "always")
    assert p.returncode == 1
    assert "\x1b[" in p.stdout
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_missing_input_is_a_usage_error_without_traceback():
    p = run("fixtures/cases/does_not_exist")
    assert p.returncode == 2
    assert p.stderr.startswith("aoti-trace: error:") and len(p.stderr.strip().splitlines()) == 1
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("args", [("-f", "xml", PASSING), ()])
def test_bad_usage_exits_2(args):
    p = run(*args)
    assert p.returncode == 2
    assert "Traceback" not in p.stderr and p.stderr.strip()


def test_unwritable_output_exits_2(tmp_path):
    p = run(PASSING, "-o", str(tmp_path / "no" / "such" / "dir" / "r.txt"))
    assert p.returncode == 2
    assert p.stderr.startswith("aoti-trace: error: cannot write") and "Traceback" not in p.stderr


def test_internal_error_exits_3_with_bug_hint():
    code = ("import aoti_trace.report as r\n"
            "def boom(*a, **k):\n    raise RuntimeError('renderer exploded')\n"
            "r.render = boom\n"
            "from aoti_trace.cli import main\n"
            f"main(['analyze', {PASSING!r}])\n")
    p = run(code=code)
    assert p.returncode == 3
    assert "internal error: RuntimeError: renderer exploded" in p.stderr
    assert "report" in p.stderr and "Traceback" not in p.stderr

"""--format github: workflow-command annotations, one per finding, on real captures."""

import re
import shutil
from pathlib import Path

from aoti_trace.pipeline import analyze
from aoti_trace.report import render
from aoti_trace.report.github import escape_data, escape_property

CASES = Path(__file__).resolve().parents[2] / "fixtures" / "cases"
COMMAND = re.compile(r"^::(?P<level>error|warning|notice) (?P<props>[^:]*)::(?P<msg>.*)$")


def test_one_annotation_per_finding_at_the_evidence_line(tmp_path):
    """Analysed from a checkout that holds the capture, whose user frame is elsewhere: the annotation is on the
    captured log line (repository-relative), as the SARIF result is (tests/report/test_sarif.py checks the two agree)."""
    root = tmp_path / "checkout"
    shutil.copytree(CASES / "dtype_mismatch_checked", root / "fixtures" / "cases" / "dtype_mismatch_checked")
    a = analyze([root / "fixtures" / "cases" / "dtype_mismatch_checked"])
    lines = render(a, "github", source_root=root).splitlines()
    assert len(lines) == len(a.findings) >= 1
    m = COMMAND.match(lines[0])
    props = dict(p.split("=", 1) for p in m["props"].split(","))
    primary = a.primary
    assert m["level"] == "error" and props["line"] == str(primary.evidence[0].line)
    assert props["file"] == escape_property(str(Path(primary.evidence[0].path).relative_to(root)))
    assert props["title"] == "AOTI-E001 input-dtype-mismatch (primary diagnosis)"
    assert "%0Afix: " in m["msg"] and "%0Are-run: AOTI_RUNTIME_CHECK_INPUTS=1" in m["msg"]


def test_multi_line_messages_stay_on_one_line():
    a = analyze([CASES / "cpp_compile_error"])  # the compiler output spans many lines
    out = render(a, "github")
    assert out.count("\n") == len(a.findings) and all(COMMAND.match(line) for line in out.splitlines())


def test_escaping_follows_the_actions_toolkit():
    assert escape_data("50% a\r\nb") == "50%25 a%0D%0Ab"
    assert escape_property("a:b,c%") == "a%3Ab%2Cc%25"

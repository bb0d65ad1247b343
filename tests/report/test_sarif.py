"""SARIF that GitHub code scanning can track: a stable category, in-repository locations, the committed schema.

Inputs are real captures under ``fixtures/cases``. "Two captures of the same failure" are two copies of one real
capture under two timestamp folder names, which is what two ``aoti-trace run`` invocations of the same script
produce (``./aoti-trace-out/<timestamp>``; the run id is the folder name)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from aoti_trace.pipeline import analyze
from aoti_trace.cli import main
from aoti_trace.report import render
from aoti_trace.report.common import user_location

REPO = Path(__file__).resolve().parents[2]
CASES = REPO / "fixtures" / "cases"
SCHEMA = REPO / "tests" / "data" / "schemas" / "sarif-schema-2.1.0.json"


def _cli(args: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code


def _two_captures(tmp_path: Path, case: str) -> list[Path]:
    out = []
    for stamp in ("20260101-101500", "20260102-093012"):
        dst = tmp_path / "aoti-trace-out" / stamp
        shutil.copytree(CASES / case, dst)
        out.append(dst)
    return out


def test_schema_is_committed_and_is_the_oasis_schema():
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    assert schema["title"].startswith("Static Analysis Results Format (SARIF) Version 2.1.0")
    assert "automationDetails" in schema["definitions"]["run"]["properties"]


def test_two_captures_of_one_failure_share_the_automation_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    docs = []
    for i, cap in enumerate(_two_captures(tmp_path, "dtype_mismatch_checked")):
        out = tmp_path / f"{i}.sarif"
        assert _cli(["analyze", str(cap), "-f", "sarif", "-o", str(out)]) == 1
        docs.append(json.loads(out.read_text()))
    validator = jsonschema.Draft7Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))
    for doc in docs:
        assert not list(validator.iter_errors(doc))
    ids = [d["runs"][0]["automationDetails"]["id"] for d in docs]
    assert ids[0] == ids[1] == "aoti-trace/"
    assert docs[0]["runs"][0]["properties"]["runs"] != docs[1]["runs"][0]["properties"]["runs"]  # two run ids
    fps = [[r["partialFingerprints"] for r in d["runs"][0]["results"]] for d in docs]
    assert fps[0] == fps[1] and fps[0]  # the same alerts, so GitHub matches (and later closes) them


def test_sarif_category_sets_the_id(tmp_path):
    out = tmp_path / "x.sarif"
    assert _cli(["analyze", str(CASES / "dtype_mismatch_checked"), "-f", "sarif", "--sarif-category", "gpu/a100",
                 "-o", str(out), "--fail-on", "never"]) == 0
    assert json.loads(out.read_text())["runs"][0]["automationDetails"]["id"] == "gpu/a100/"


def test_location_is_in_the_repository_and_the_log_is_related(tmp_path, monkeypatch):
    """A capture inside the checkout whose user frame is outside it: the alert sits on the captured log line
    (in the checkout), the log lines stay in relatedLocations; with the user's script inside, the call site wins."""
    # a checkout of its own that holds the capture (wherever this repository lives, the capture's user frame,
    # recorded on the machine that captured it, is then outside it)
    repo = tmp_path / "checkout"
    shutil.copytree(CASES / "cpp_compile_error", repo / "fixtures" / "cases" / "cpp_compile_error")
    a = analyze([repo / "fixtures" / "cases" / "cpp_compile_error"])
    f = a.primary
    user = user_location(a, f)
    assert user is not None and not Path(user.path).resolve().is_relative_to(repo)  # captured on another machine
    res = json.loads(render(a, "sarif", source_root=repo))["runs"][0]["results"][0]
    art = res["locations"][0]["physicalLocation"]["artifactLocation"]
    assert art["uriBaseId"] == "SRCROOT" and art["uri"].startswith("fixtures/cases/cpp_compile_error/")
    assert res["properties"]["location_in_repository"] is True
    related = [r["physicalLocation"]["artifactLocation"]["uri"] for r in res["relatedLocations"]]
    assert art["uri"] in related

    # the user's call site inside the checkout: point there
    root = Path(user.path).parent
    res = json.loads(render(a, "sarif", source_root=root))["runs"][0]["results"][0]
    phys = res["locations"][0]["physicalLocation"]
    assert phys["artifactLocation"] == {"uri": Path(user.path).name, "uriBaseId": "SRCROOT"}
    assert phys["region"]["startLine"] == user.line and res["properties"]["location_kind"] == "user"
    assert res["relatedLocations"], "the log locations are kept"


@pytest.mark.slow
def test_fixture_results_are_placed_in_the_repository():
    """Every result of every fixture case with a located finding is inside the checkout when analysed from it."""
    outside = total = 0
    for case in sorted(p for p in CASES.iterdir() if (p / "manifest.json").exists() or (p / "stderr.txt").exists()):
        doc = json.loads(render(analyze([case]), "sarif", source_root=REPO))
        for res in doc["runs"][0]["results"]:
            if "locations" in res:
                total += 1
                outside += res["locations"][0]["physicalLocation"]["artifactLocation"].get("uriBaseId") != "SRCROOT"
    assert total > 20 and outside == 0, f"{outside} of {total} results outside the repository"


def test_github_annotations_follow_the_sarif_location():
    a = analyze([CASES / "dtype_mismatch_checked"])
    sarif = json.loads(render(a, "sarif", source_root=REPO))["runs"][0]["results"]
    lines = render(a, "github", source_root=REPO).splitlines()
    for res, line in zip(sarif, lines):
        phys = res["locations"][0]["physicalLocation"]
        assert f"file={phys['artifactLocation']['uri']}," in line
        assert f"line={phys['region']['startLine']}," in line

"""action.yml: a composite action whose structure follows GitHub's metadata syntax, and whose analysis step,
run as the runner would (its bash script, the env it declares, GITHUB_STEP_SUMMARY / GITHUB_OUTPUT files), writes
the Markdown summary, the annotations and a valid SARIF file on a real capture."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
ACTION = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
SARIF_SCHEMA = REPO / "tests" / "data" / "schemas" / "sarif-schema-2.1.0.json"
EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def _expressions(node) -> list[str]:  # type: ignore[no-untyped-def]
    if isinstance(node, dict):
        return [e for v in node.values() for e in _expressions(v)]
    if isinstance(node, list):
        return [e for v in node for e in _expressions(v)]
    return EXPR.findall(node) if isinstance(node, str) else []


def test_metadata_structure():
    assert {"name", "description", "inputs", "outputs", "runs"} <= set(ACTION)
    assert ACTION["runs"]["using"] == "composite"
    for name, spec in ACTION["inputs"].items():
        assert re.fullmatch(r"[a-z][a-z0-9-]*", name) and spec["description"], name
        assert set(spec) <= {"description", "required", "default", "deprecationMessage"}, name
        assert isinstance(spec.get("required", False), bool) and isinstance(spec.get("default", ""), str), name
    assert ACTION["inputs"]["path"]["required"] is True
    for name, spec in ACTION["outputs"].items():
        assert spec["description"] and EXPR.search(spec["value"]), name  # composite outputs need a value
    steps = ACTION["runs"]["steps"]
    ids = {s["id"] for s in steps if "id" in s}
    for step in steps:
        assert ("run" in step) != ("uses" in step), step
        if "run" in step:
            assert step["shell"] == "bash", step  # composite run steps must name their shell
        assert set(step) <= {"name", "id", "if", "run", "shell", "env", "with", "uses", "working-directory",
                             "continue-on-error"}, step
    for expr in _expressions(ACTION):
        for ref in re.findall(r"\b(inputs|steps)\.([\w-]+)", expr):
            assert ref[1] in (ACTION["inputs"] if ref[0] == "inputs" else ids), expr
    uses = [s["uses"] for s in steps if "uses" in s]
    assert uses == ["github/codeql-action/upload-sarif@v3"]


@pytest.mark.slow
def test_analyse_step_runs_on_a_real_capture(tmp_path):
    step = next(s for s in ACTION["runs"]["steps"] if s.get("id") == "analyze")
    inputs = {"path": str(REPO / "fixtures" / "cases" / "dtype_mismatch_checked"), "rules": "", "fail-on": "error",
              "sarif-category": "aoti-trace"}
    env = {**os.environ, "RUNNER_TEMP": str(tmp_path), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
           "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for key, value in step["env"].items():
        env[key] = EXPR.sub(lambda m: inputs[m[1].split(".", 1)[1]], value)
    proc = subprocess.run(["bash", "-e", "-c", step["run"]], env=env, capture_output=True, text=True, timeout=300,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    outputs = dict(line.split("=", 1) for line in (tmp_path / "output.txt").read_text().splitlines())
    assert outputs["exit-code"] == "1"  # the capture has an error finding
    assert (tmp_path / "summary.md").read_text().startswith("## aoti-trace: ")
    assert re.search(r"^::error file=.*title=AOTI-E001", proc.stdout, re.M)
    sarif = json.loads(Path(outputs["sarif-file"]).read_text())
    assert not list(jsonschema.Draft7Validator(json.loads(SARIF_SCHEMA.read_text())).iter_errors(sarif))
    assert sarif["runs"][0]["automationDetails"]["id"] == "aoti-trace/"

"""aoti_trace.run.minify: PyTorch's AOTI minifier driven by aoti-trace, and the repro block of the reports.

Most tests read ``fixtures/minify/cpu_compile_error``, the real output of ``aoti-trace minify`` on a 23-node model
with Inductor's injected C++ compile error (see fixtures/minify/README.md); the decisions that need no torch run
real failing commands; one ``torch`` test runs the whole thing on a tiny model.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from aoti_trace.pipeline import analyze
from aoti_trace.cli import _register, cli
from aoti_trace.run.ladder import LadderResult, run_ladder
from aoti_trace.run.minify import (
    NOT_MINIFIABLE,
    MinifyResult,
    assess,
    cannot_minify,
    launcher_path,
    minify,
    read_minifier_log,
    unpinned,
    verdict,
)
from aoti_trace.report import render
from aoti_trace.report.json import document_schema
from aoti_trace.model.vocabulary import FAMILIES

REPO = Path(__file__).resolve().parents[2]
CPU = REPO / "fixtures" / "minify" / "cpu_compile_error"
CASES = REPO / "fixtures" / "cases"
HAS_TORCH = importlib.util.find_spec("torch") is not None
SEGFAULT = [sys.executable, "-c", "import ctypes; ctypes.string_at(0)"]
MISSING_LIB = [sys.executable, "-c", "import ctypes; ctypes.CDLL('libaoti_trace_not_there.so')"]


@pytest.fixture(scope="module")
def cpu():
    """The real CPU run, re-assessed from its folders by the current code."""
    stored = json.loads((CPU / "minify.json").read_text())
    result, analysis = assess(CPU, budget_s=stored["budget_s"])
    return result, analysis, stored


# --------------------------------------------------------------------------- the real CPU run (acceptance)


def test_real_run_shrinks_a_20_plus_node_graph_and_reproduces_the_same_rule(cpu):
    result, analysis, stored = cpu
    assert result.status == "reproduced" and result.reproduced
    assert result.nodes_before >= 20 and result.nodes_after < result.nodes_before
    assert (result.nodes_before, result.nodes_after) == (23, 3)
    assert result.target.rule_id == result.verified.rule_id == "AOTI-I001"
    assert result.target.family == result.verified.family == "cpp_compile_error"
    assert analysis.primary.rule_id == "AOTI-I001" and analysis.repro is result
    # within the documented budget, and the same numbers as the run itself wrote
    assert not result.budget_exhausted and result.minify_s < result.budget_s
    for key in ("status", "nodes_before", "nodes_after", "queries", "minify_s", "target", "verified", "rerun"):
        assert result.to_json()[key] == stored[key], key


def test_the_repro_is_the_last_checkpoint_without_the_pinned_variables():
    log = read_minifier_log(CPU / "minify" / "stderr.txt")
    assert log.finished and log.queries == 22 and log.checkpoint.name == "3.py"
    source = (CPU / "minimal_repro.py").read_text()
    checkpoint = next((CPU / "torch-debug").rglob("checkpoints/3.py")).read_text()
    assert "os.environ['TORCH_TRACE'] =" in checkpoint and "os.environ['TORCH_TRACE'] =" not in source
    assert "os.environ['TORCH_COMPILE_DEBUG_DIR'] =" not in source
    assert source.endswith(unpinned(checkpoint)) and source.startswith("# Minimal repro written by")
    assert "command='run'" in source and "inject_relu_bug_TESTING_ONLY = 'compile_error'" in source


def test_launcher_is_found_in_the_dump_runs_stderr_and_run_unpinned():
    logged = launcher_path(CPU / "dump" / "stderr.txt")
    assert logged.name == "minifier_launcher.py" and "torch-debug/torch_compile_debug/run_" in str(logged)
    original = next((CPU / "torch-debug").rglob("minifier/minifier_launcher.py")).read_text()
    ran = (CPU / "minify" / "minifier_launcher.py").read_text()
    assert ran == unpinned(original) and ran != original
    assert "os.environ['TORCHINDUCTOR_CACHE_DIR']" in ran  # only the two pinned variables are dropped
    assert launcher_path(CASES / "cpp_compile_error" / "stderr.txt") is None


# --------------------------------------------------------------------------- the report carries the repro


def test_every_report_format_carries_the_repro(cpu):
    result, analysis, _ = cpu
    text = render(analysis, "text")
    assert "Minimal repro:" in text and "23 -> 3 graph nodes" in text and f"re-run:  {result.rerun}" in text
    doc = json.loads(render(analysis, "json"))
    jsonschema.Draft202012Validator(document_schema()).validate(doc)
    assert doc["repro"]["status"] == "reproduced" and doc["repro"]["nodes_after"] == 3
    assert doc["repro"]["target"]["rule_id"] == doc["summary"]["primary"] == "AOTI-I001"
    sarif = json.loads(render(analysis, "sarif"))
    assert sarif["runs"][0]["properties"]["repro"]["repro"] == str(CPU / "minimal_repro.py")
    page = render(analysis, "html")
    assert '<section id="repro">' in page and "23 &rarr; 3 graph nodes" in page
    assert "### Minimal repro" in render(analysis, "markdown")


def test_reports_without_a_repro_are_unchanged():
    analysis = analyze([CASES / "cpp_compile_error"])
    assert "repro" not in json.loads(render(analysis, "json"))
    assert "repro" not in json.loads(render(analysis, "sarif"))["runs"][0]["properties"]
    assert "Minimal repro" not in render(analysis, "text") and 'id="repro"' not in render(analysis, "html")


def test_schema_rejects_a_repro_with_an_unknown_status(cpu):
    doc = json.loads(render(cpu[1], "json"))
    doc["repro"]["status"] = "probably"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(document_schema()).validate(doc)


# --------------------------------------------------------------------------- when the minifier cannot help


@pytest.mark.parametrize(("case", "says"), [
    ("cuda_default_cxx_load_segfault", "segfault while loading the package"),
    ("missing_custom_op", "custom op is not registered"),
    ("no_cxx_compiler", "environment problem"),
    ("shape_mismatch_checked", "inputs it was not compiled for"),
    ("export_error", "no exported program"),
])
def test_cannot_minify_says_why_for_real_failures(case, says):
    primary = analyze([CASES / case]).primary
    assert says in cannot_minify(primary)


def test_not_minifiable_names_real_families():
    assert set(NOT_MINIFIABLE) <= set(FAMILIES)


def test_cannot_minify_lets_graph_failures_through():
    assert cannot_minify(analyze([CASES / "cpp_compile_error"]).primary) is None
    assert cannot_minify(analyze([CASES / "lowering_error"]).primary) is None
    assert cannot_minify(None) is None


def test_verdict_needs_the_same_rule_and_family(cpu):
    target, verified = cpu[0].target, cpu[0].verified
    assert verdict(target, verified)[0] == "reproduced"
    other = analyze([CASES / "lowering_error"]).primary
    status, why = verdict(target, other)
    assert status == "different_failure" and other.rule_id in why and target.rule_id in why
    assert verdict(target, None, "exit code 0")[0] == "not_reproduced"
    assert verdict(None, verified)[0] == "unverified"


@pytest.mark.torch  # runs `aoti-trace run` / capture: its environment probe imports torch
def test_a_crash_leaves_no_launcher_and_says_so(tmp_path):
    result, _ = minify(SEGFAULT, tmp_path / "m")
    assert result.status == "no_launcher" and "killed by SIGSEGV" in result.reason
    assert "AOTINDUCTOR_REPRO_LEVEL=3" in result.reason


@pytest.mark.torch  # runs `aoti-trace run` / capture: its environment probe imports torch
def test_a_failure_outside_aoti_compile_leaves_no_launcher(tmp_path):
    result, _ = minify([sys.executable, "-c", "raise RuntimeError('not an AOTI failure')"], tmp_path / "m")
    assert result.status == "no_launcher" and "aoti_compile_and_package" in result.reason


@pytest.mark.torch  # runs `aoti-trace run` / capture: its environment probe imports torch
def test_a_command_that_works_has_nothing_to_minify(tmp_path):
    result, _ = minify([sys.executable, "-c", "print('fine')"], tmp_path / "m")
    assert result.status == "nothing_to_minify" and not result.reproduced


@pytest.mark.torch  # runs `aoti-trace run` / capture: its environment probe imports torch
def test_cli_minify_declines_an_environment_failure_after_one_run(tmp_path):
    _register()
    out = tmp_path / "m"
    res = CliRunner().invoke(cli, ["minify", "--out", str(out), "-f", "json", "--", *MISSING_LIB])
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    assert doc["summary"]["primary_family"] == "environment"
    assert doc["repro"]["status"] == "cannot_minify" and "environment" in doc["repro"]["reason"]
    assert sorted(p.name for p in out.iterdir()) == ["dump", "minify.json"]  # nothing else ran
    assert json.loads((out / "minify.json").read_text()) == doc["repro"]
    env = json.loads((out / "dump" / "manifest.json").read_text())["env"]
    assert env["DUMP_AOTI_MINIFIER"] == "1" and env["TORCH_COMPILE_DEBUG_DIR"] == str(out / "torch-debug")
    bad = CliRunner().invoke(cli, ["minify", "--budget", "0", "--out", str(tmp_path / "n"), "--", *MISSING_LIB])
    assert bad.exit_code == 2 and "--budget must be positive" in bad.output


# --------------------------------------------------------------------------- ladder --minify


@pytest.mark.torch  # runs `aoti-trace run` / capture: its environment probe imports torch
def test_ladder_minify_stage_skips_what_it_cannot_help(tmp_path):
    result = run_ladder(MISSING_LIB, tmp_path / "l", echo=False, minify=True)
    assert result.decisive.stage.id == "1"
    assert result.minify.status == "cannot_minify" and result.reported.analysis.repro is result.minify
    assert not (tmp_path / "l" / "stage-5-minify").exists()
    row = result.table().splitlines()[-3]
    assert row.startswith("5-minify") and "skipped" in row and "environment" in row
    assert json.loads((tmp_path / "l" / "ladder.json").read_text())["minify"]["status"] == "cannot_minify"


@pytest.mark.torch  # runs `aoti-trace run` / capture: its environment probe imports torch
def test_ladder_minify_stage_runs_after_the_last_stage(tmp_path):
    result = run_ladder(SEGFAULT, tmp_path / "l", echo=False, minify=True)
    assert result.decisive is None and result.minify.status == "no_launcher"
    dump = json.loads((tmp_path / "l" / "stage-5-minify" / "dump" / "manifest.json").read_text())["env"]
    assert dump["DUMP_AOTI_MINIFIER"] == "1" and dump["AOTI_RUNTIME_CHECK_INPUTS"] == "1"  # earlier flags kept
    assert "AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER" not in dump
    assert "5-minify" in result.table() and "no launcher" in result.table()


def test_ladder_without_minify_has_no_stage_5(tmp_path):
    assert LadderResult(out_dir=tmp_path, command=["x"], stages=[]).to_json()["minify"] is None


# --------------------------------------------------------------------------- end to end (torch)


@pytest.mark.torch
@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_minify_end_to_end_on_an_injected_compile_error(tmp_path):
    """A real AOTI compile with cpp.inject_relu_bug_TESTING_ONLY='compile_error'; 2-10 min on a loaded 2-core box."""
    script = REPO / "tests" / "data" / "minify" / "tiny_relu.py"
    result, analysis = minify([sys.executable, str(script), "compile_error"], tmp_path / "m", budget_s=900)
    assert isinstance(result, MinifyResult)
    assert result.status == "reproduced", result.reason
    assert result.nodes_after < result.nodes_before
    assert result.target.rule_id == result.verified.rule_id and analysis.primary.family == "cpp_compile_error"
    assert (tmp_path / "m" / "minimal_repro.py").is_file() and result.rerun.endswith("minimal_repro.py")


# --------------------------------------------------------------------------- the real GPU runs (H200)


def test_gpu_triton_compile_error_is_minified_and_reproduced():
    result, _ = assess(REPO / "fixtures" / "minify" / "cuda_compile_error", budget_s=180)
    assert result.status == "reproduced" and (result.nodes_before, result.nodes_after, result.queries) == (5, 3, 12)
    # the autotuning cause rule (AOTI-T004) names the failure in the full run and again in the minimal repro;
    # a cause match needs no caveat in the reason (a carrier match would be said to be weaker)
    assert result.target.rule_id == result.verified.rule_id == "AOTI-T004" and result.target.role == "cause"
    assert result.reason == ""
    for step in ("dump", "verify"):
        assert "SyntaxError: invalid syntax" in (result.captures[step] / "stderr.txt").read_text()
    env = json.loads((result.captures["dump"] / "manifest.json").read_text())
    assert env["env"]["CXX"] == "/usr/bin/g++" and env["environment"]["torch"].endswith("+cu130")


def test_gpu_device_assert_is_declined_with_the_real_reason():
    out = REPO / "fixtures" / "minify" / "cuda_runtime_error"
    result, _ = assess(out)
    assert result.status == "cannot_minify" and "CUDA context" in result.reason
    stderr = (out / "dump" / "stderr.txt").read_text()
    # what the reason claims, in the real run: the assert fired, and the minifier's own dump then failed
    assert "Assertion `injected assert fail` failed" in stderr
    assert "During handling of the above exception, another exception occurred" in stderr
    assert launcher_path(out / "dump" / "stderr.txt") is None
    assert "CUDA context" in cannot_minify(analyze([CASES / "cuda_illegal_memory_access"]).primary)
    assert cannot_minify(analyze([REPO / "fixtures" / "holdout" / "round2_embedding_index_eq_size"]).primary) is None

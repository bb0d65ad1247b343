"""The message catalogue (rules/catalogue/messages.jsonl) and the coverage harness (aoti_trace.catalogue)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from aoti_trace import catalogue as C
from aoti_trace.model.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
CATALOGUE = ROOT / "rules" / "catalogue" / "messages.jsonl"

PATH_RULE = """\
schema: 1
id: AOTI-L901
name: raised-in-lowering
title: an exception raised in torch/_inductor/lowering.py
description: routes on the raising module only, never on the message
family: lowering_error
severity: error
role: cause
precision: medium
status: test
version: 1
match:
  all:
    - {frame: exceptions, column: torch_file, regex: '^torch/_inductor/lowering\\.py$', anchor: true}
message: "raised in lowering.py"
remedy: "none"
"""


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "aoti_trace", *args], check=False, capture_output=True,
                          text=True, cwd=ROOT, timeout=600)


@pytest.fixture(scope="module")
def messages() -> list[C.Message]:
    return C.load(CATALOGUE)


def _msg(**kw) -> C.Message:
    base = {"id": "M0000000000", "template": "x", "exc_type": "RuntimeError", "kind": "python_raise",
            "files": ["torch/_inductor/lowering.py:10"], "first_version": "2.3.1", "last_version": "2.15.0",
            "versions": 13, "family": "lowering_error", "basis": "path", "internal": False, "carrier": False}
    return C.Message(**{**base, **kw})


def test_every_line_fits_the_schema(messages):
    lines = [ln for ln in CATALOGUE.read_text().splitlines() if ln.strip()]
    assert len(lines) == len(messages) > 1000
    assert len({m.id for m in messages}) == len(messages)
    assert len({(" ".join(m.template.split()), m.exc_type) for m in messages}) == len(messages)
    for m in messages:
        assert m.family in C.CATALOGUE_FAMILIES and m.family != "unexplained", m.id
        assert "{}" in m.template or any(c.isalpha() for c in m.template)
        for f in m.files:
            path, line = f.rsplit(":", 1)
            assert path.startswith("torch/") and int(line) > 0, f
    # both ends of the range of releases the catalogue was made from are present
    firsts = {m.first_version for m in messages}
    assert "2.3.1" in firsts and any(m.last_version.startswith("2.15") for m in messages)
    # every kind but those of the other files (ExecuTorch's log and checks, warnings, platform messages)
    assert {m.kind for m in messages} == set(C.KINDS) - {"et_log", "et_check", "et_return_false", "warning", "platform"}


def test_a_bad_line_is_a_clear_error(tmp_path):
    bad = tmp_path / "messages.jsonl"
    bad.write_text(json.dumps({"id": "M0000000000", "template": "x"}) + "\n")
    with pytest.raises(InputError, match=r"messages\.jsonl:1: not a catalogue line"):
        C.load(bad)


def test_logs_look_like_torch_output(messages):
    m = next(m for m in messages if "unmatched dtype, expected" in m.template and m.kind == "cpp_throw")
    log = C.build_log(m, "message")
    assert log.startswith("Error: input_handles[")
    assert "\nRuntimeError: input_handles[" in log and "at::kFloat" in log
    py = _msg(template="Unsupported fallback {} with type {}")
    assert C.build_log(py, "message").splitlines()[-1] == "RuntimeError: Unsupported fallback x with type x1"
    assert "site-packages/torch/_inductor/lowering.py\", line 10" not in C.build_log(py, "message")
    assert "site-packages/torch/_inductor/lowering.py\", line 10" in C.build_log(py, "frame")
    chk = _msg(kind="torch_check", files=["torch/csrc/inductor/aoti_package/model_package_loader.cpp:77"],
               template="Constant not found: {}", family="constant_loading")
    assert "Exception raised from" not in C.build_log(chk, "message")
    assert "at /pytorch/torch/csrc/inductor/aoti_package/model_package_loader.cpp:77 " in C.build_log(chk, "frame")


def test_a_message_with_a_rule_is_covered(messages):
    m = next(m for m in messages if "unmatched dtype, expected" in m.template and m.kind == "cpp_throw")
    covs = C.analyse([m])
    for mode in C.MODES:
        (r,) = covs[mode].results
        assert r.family == "dtype_mismatch" and r.covered, (mode, r)
        assert covs[mode].share == 1.0


def test_a_path_routed_message_is_covered_only_in_frame_mode(tmp_path):
    rules = tmp_path / "rules" / "lowering_error"
    rules.mkdir(parents=True)
    (rules / "by-path.yaml").write_text(PATH_RULE)
    m = _msg(template="a lowering message no rule knows {}")
    covs = C.analyse([m], rules_path=tmp_path / "rules")
    assert covs["frame"].results[0].covered
    # without the frame only failure detection sees it, and it cannot tell the phase from this text
    assert not covs["message"].results[0].covered and covs["message"].results[0].family != "lowering_error"
    assert covs["message"].share == 0.0 and covs["frame"].share == 1.0
    clusters = C.miss_clusters(covs["message"])
    assert clusters[0]["count"] == 1 and clusters[0]["family"] == "lowering_error"


def test_internal_and_carrier_messages_are_not_counted(tmp_path):
    rules = tmp_path / "rules" / "lowering_error"
    rules.mkdir(parents=True)
    (rules / "by-path.yaml").write_text(PATH_RULE)
    ms = [_msg(id="M0000000001", template="one {}"), _msg(id="M0000000002", template="two {}", internal=True),
          _msg(id="M0000000003", template="Error: {}", carrier=True)]
    cov = C.analyse(ms, ("frame",), rules_path=tmp_path / "rules")["frame"]
    assert len(cov.results) == 3 and len(cov.counted) == 1 and cov.share == 1.0


@pytest.mark.slow
def test_cli_coverage(tmp_path, messages):
    sub = [m for m in messages if "unmatched dtype, expected" in m.template or m.template.startswith("Constant not found")]
    cat = tmp_path / "messages.jsonl"
    cat.write_text("".join(m.model_dump_json() + "\n" for m in sub))
    res = _cli("rules", "coverage", "--catalogue", str(cat), "--mode", "message", "-f", "json", "--misses")
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    e = rep["modes"]["message"]
    assert set(rep["modes"]) == {"message"} and e["counted"] == len(sub)
    assert e["families"]["dtype_mismatch"]["covered"] >= 1
    assert e["covered"] == sum(f["covered"] for f in e["families"].values())
    assert sum(c["count"] for c in e["miss_clusters"]) == e["counted"] - e["covered"]
    assert sum(g["count"] for g in e["miss_groups"]) == e["counted"] - e["covered"]
    res = _cli("rules", "coverage", "--catalogue", str(cat), "--family", "dtype_mismatch")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("mode message: ") and "mode frame: " in res.stdout
    assert "dtype_mismatch" in res.stdout and "constant_loading" not in res.stdout
    proc = _cli("rules", "coverage", "--catalogue", str(tmp_path / "none.jsonl"))
    assert proc.returncode == 2 and "cannot read the message catalogue" in proc.stderr
    assert "Traceback" not in proc.stderr

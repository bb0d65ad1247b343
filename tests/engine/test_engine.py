"""Rule engine: schema + loader errors, matching semantics, evidence, ranking, fingerprints, reasoners, harness, CLI.

Texts are real torch 2.13 output quoted in /work/shared/reference/aoti-signatures.md (section given per test) or
captured here (tests/data/engine/cpp_march_bogus.*: TORCHINDUCTOR_CPP_MARCH=bogus, torch 2.13.0+cpu).
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from aoti_trace.cli import _register, cli
from aoti_trace.engine import evaluate
from aoti_trace.engine.failure_rules import is_failure_rule
from aoti_trace.library.loader import load_rules
from aoti_trace.engine.evaluator import fingerprint, in_torch_range
from aoti_trace.engine.schema import TorchRange
from aoti_trace.model.errors import RuleError
from aoti_trace.model.frames import Frames

DATA = Path(__file__).parents[1] / "data" / "engine"

# aoti-signatures.md §1.1 / §2e (verified on torch 2.13.0 CPU)
DTYPE_ERR = "Error: input_handles[0]: unmatched dtype, expected: 6(at::kFloat), but got: 7"
DTYPE_MSG = "input_handles[0]: unmatched dtype, expected: 6(at::kFloat), but got: 7"
# aoti-signatures.md §2c (verified on torch 2.13.0 CPU): cause on stderr, generic carrier in the exception
CONST_ERR = "Error: Cannot find constants lin_weight in constants_map!"
CARRIER = ("update_constant_buffer_func_( container_handle_, (AOTInductorConstantMapHandle)&const_map, use_inactive, "
           "check_full_update) API call failed at <build-root>/torch/csrc/inductor/aoti_runner/"
           "model_container_runner.cpp, line 289")
# aoti-signatures.md §1.2
OUTDATED = ("W1130 03:46:53.084000 13513 torch/_inductor/package/package.py:120] Loading outdated pt2 file. "
            "Please regenerate your package.")
LEAFSPEC = ("/root/.pyenv/versions/3.11.7/lib/python3.11/copyreg.py:105: FutureWarning: `isinstance(treespec, "
            "LeafSpec)` is deprecated, use `isinstance(treespec, TreeSpec) and treespec.is_leaf()` instead.")


def frames(**tables: list[dict]) -> Frames:
    fr = Frames()
    for name, rows in tables.items():
        rows = [{"run_id": "r1", "path": f"{name}.txt", **row} for row in rows]
        for i, row in enumerate(rows, start=1):
            row.setdefault("lineno", i)
        fr.add(name, pl.DataFrame(rows, infer_schema_length=None))
    return fr


def lines(*texts: str, run_id: str = "r1", kind: str | None = None) -> list[dict]:
    return [{"run_id": run_id, "stream": "stderr", "text": t, "kind": kind} for t in texts]


RULE_HEAD = """\
schema: 1
id: {id}
name: {name}
title: t
description: d
family: {family}
severity: {severity}
role: {role}
precision: high
status: experimental
version: 1
"""


def write_rule(root: Path, body: str, *, id="AOTI-Z901", name="test-rule", family="constant_loading",
               severity="error", role="cause") -> Path:
    path = root / family / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    head = RULE_HEAD.format(id=id, name=name, family=family, severity=severity, role=role)
    path.write_text(head + textwrap.dedent(body), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------- loading errors


def load_error(tmp_path: Path, body: str) -> str:
    write_rule(tmp_path, body)
    with pytest.raises(RuleError) as exc:
        load_rules(tmp_path)
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_unknown_nested_key_points_at_its_line(tmp_path):
    msg = load_error(tmp_path, """\
        match:
          all:
            - {frame: lines, column: text, contains: x}
            - frame: lines
              column: text
              regx: 'Error: '
        message: m
        remedy: r
        """)
    path = tmp_path / "constant_loading" / "test-rule.yaml"
    assert msg.startswith(f"{path}:17:")  # the `regx:` key line
    assert "unknown key 'regx'" in msg and "match.all.1" in msg


def test_bad_family_points_at_family(tmp_path):
    write_rule(tmp_path, "match: {frame: lines, column: text, contains: x}\nmessage: m\nremedy: r\n", family="bogus")
    with pytest.raises(RuleError, match=r"test-rule\.yaml:6:9: family: Input should be"):
        load_rules(tmp_path)


def test_extract_group_missing_points_at_extract(tmp_path):
    msg = load_error(tmp_path, """\
        match: {frame: lines, column: text, regex: 'Cannot find constants (?P<name>\\S+)'}
        extract: {name: nmae}
        message: "{{name}}"
        remedy: r
        """)
    assert ":13:" in msg and "group 'nmae' is not in the anchor regex" in msg


def test_placeholder_must_be_extracted(tmp_path):
    msg = load_error(tmp_path, """\
        match: {frame: lines, column: text, contains: x}
        message: "missing {{field}}"
        remedy: r
        """)
    assert "message uses {{field}}" in msg and ":13:" in msg


def test_unknown_column_and_wrong_value_type(tmp_path):
    assert "has no column 'txt'" in load_error(tmp_path, "match: {frame: lines, column: txt, contains: x}\nmessage: m\nremedy: r\n")
    assert "cannot equal" in load_error(
        tmp_path, "match: {frame: process, column: exit_code, equals: SIGSEGV}\nmessage: m\nremedy: r\n")


def test_yaml_syntax_error_has_position(tmp_path):
    path = write_rule(tmp_path, "match: [unclosed\n")
    with pytest.raises(RuleError, match=rf"^{path}:\d+:\d+: invalid YAML"):
        load_rules(tmp_path)


def test_python_only_regex_rejected(tmp_path):
    # look-ahead: Python accepts, Rust regex rejects
    msg = load_error(tmp_path, "match: {frame: lines, column: text, regex: 'Error(?=:)'}\nmessage: m\nremedy: r\n")
    assert "Polars (Rust regex)" in msg and "look-around" in msg and ":12:" in msg


def test_rust_only_regex_rejected(tmp_path):
    # (?<name>...) : Rust accepts, Python re rejects
    msg = load_error(tmp_path, "match: {frame: lines, column: text, regex: '(?<w>Error)'}\nmessage: m\nremedy: r\n")
    assert "Python re" in msg


def test_duplicate_ids_rejected(tmp_path):
    write_rule(tmp_path, "match: {frame: lines, column: text, contains: x}\nmessage: m\nremedy: r\n")
    write_rule(tmp_path, "match: {frame: lines, column: text, contains: y}\nmessage: m\nremedy: r\n", name="other")
    with pytest.raises(RuleError, match="duplicate rule id AOTI-Z901"):
        load_rules(tmp_path)


def test_fragments_interpolated_and_unknown_fragment_rejected(tmp_path):
    (tmp_path / "fragments.yaml").write_text("fragments:\n  CONST: 'Cannot find constants'\n")
    write_rule(tmp_path, "match: {frame: lines, column: text, regex: '%{CONST} (?P<n>\\S+)'}\nmessage: m\nremedy: r\n")
    rs = load_rules(tmp_path)
    assert rs.rules[0].anchor_leaf().regex == "Cannot find constants (?P<n>\\S+)"
    write_rule(tmp_path, "match: {frame: lines, column: text, regex: '%{NOPE}'}\nmessage: m\nremedy: r\n")
    with pytest.raises(RuleError, match=r"unknown fragment %\{NOPE\}"):
        load_rules(tmp_path)


# ---------------------------------------------------------------------------------------------- matching semantics


def test_run_scope_combines_frames_row_scope_needs_same_row(tmp_path):
    # run scope: 'Cannot find constants' on one line AND 'lin_weight' on another line is enough
    write_rule(tmp_path, """\
        match:
          all:
            - {frame: lines, column: text, contains: 'Cannot find constants'}
            - {frame: lines, column: text, contains: 'lin_bias'}
        message: m
        remedy: r
        """)
    write_rule(tmp_path, """\
        match:
          all:
            - {frame: lines, column: text, contains: 'Cannot find constants'}
            - {frame: lines, column: text, contains: 'lin_bias'}
          scope: row
        message: m
        remedy: r
        """, id="AOTI-Z902", name="row-rule")
    rs = load_rules(tmp_path)
    two_lines = frames(lines=lines(CONST_ERR, "Error: Cannot find constants lin_bias in constants_map!"))
    assert {f.rule_id for f in evaluate(rs, two_lines)} == {"AOTI-Z901", "AOTI-Z902"}
    split = frames(lines=lines(CONST_ERR, "W lin_bias"))
    assert {f.rule_id for f in evaluate(rs, split)} == {"AOTI-Z901"}


def test_not_over_missing_frame_is_true(tmp_path):
    write_rule(tmp_path, """\
        match:
          all:
            - {frame: lines, column: text, contains: 'Cannot find constants'}
            - not: {frame: exceptions, column: exc_type, exists: true}
        message: m
        remedy: r
        """)
    rs = load_rules(tmp_path)
    only_lines = frames(lines=lines(CONST_ERR))  # no exceptions frame at all
    assert [f.rule_id for f in evaluate(rs, only_lines)] == ["AOTI-Z901"]
    with_exc = frames(lines=lines(CONST_ERR), exceptions=[{"exc_type": "RuntimeError", "message": CARRIER}])
    assert evaluate(rs, with_exc) == []


def test_runs_are_independent(tmp_path):
    write_rule(tmp_path, """\
        match:
          all:
            - {frame: lines, column: text, contains: 'Cannot find constants'}
            - {frame: process, column: exit_code, equals: 1}
        message: m
        remedy: r
        """)
    rs = load_rules(tmp_path)
    fr = frames(lines=lines(CONST_ERR, run_id="a") + lines("ok", run_id="b"),
                process=[{"run_id": "a", "exit_code": 0}, {"run_id": "b", "exit_code": 1}])
    # the line is in run a, the exit code in run b: the rule does not fire; run b's exit 1 is still a failure
    assert [(f.run_id, f.rule_id) for f in evaluate(rs, fr)] == [("b", "AOTI-U001")]
    fr = frames(lines=lines(CONST_ERR, run_id="a"), process=[{"run_id": "a", "exit_code": 1}])
    assert [f.run_id for f in evaluate(rs, fr)] == ["a"]


def test_noise_and_output_code_lines_never_anchor(seed_rules):
    rs = load_rules(seed_rules)
    echoed = frames(lines=lines(DTYPE_ERR, kind="output_code"))
    assert not [f for f in evaluate(rs, echoed) if f.rule_id == "AOTI-E001"]
    # the ignore list turns the retry warning into noise; only the noise rule (include: [noise]) sees it
    found = evaluate(rs, frames(lines=lines(LEAFSPEC, OUTDATED)))
    assert [f.rule_id for f in found] == ["AOTI-K001"] and not found[0].primary
    assert found[0].evidence[0].line == 2


def test_occurrence_and_extract(tmp_path):
    write_rule(tmp_path, """\
        match: {frame: lines, column: text, regex: 'Cannot find constants (?P<name>\\S+) in constants_map!'}
        occurrence: {occ}
        extract: {{name: name, where: {{column: path}}}}
        message: "missing {{{{name}}}}"
        remedy: r
        """.replace("{occ}", "first").replace("{{", "{").replace("}}", "}").replace("{name}}", "{name}}"))
    text = (tmp_path / "constant_loading" / "test-rule.yaml").read_text()
    text = text.replace('message: "missing {name}"', 'message: "missing {{name}}"')
    (tmp_path / "constant_loading" / "test-rule.yaml").write_text(text)
    fr = frames(lines=lines("Error: Cannot find constants lin_weight in constants_map!",
                            "Error: Cannot find constants lin_bias in constants_map!"))
    first = evaluate(load_rules(tmp_path), fr)
    assert first[0].fields == {"name": "lin_weight", "where": "lines.txt"} and first[0].message == "missing lin_weight"
    (tmp_path / "constant_loading" / "test-rule.yaml").write_text(text.replace("occurrence: first", "occurrence: last"))
    assert evaluate(load_rules(tmp_path), fr)[0].fields["name"] == "lin_bias"
    (tmp_path / "constant_loading" / "test-rule.yaml").write_text(text.replace("occurrence: first", "occurrence: all"))
    assert sorted(f.fields["name"] for f in evaluate(load_rules(tmp_path), fr)) == ["lin_bias", "lin_weight"]


def test_torch_range_skips_rule(tmp_path):
    write_rule(tmp_path, """\
        torch: {max: "2.12"}
        match: {frame: lines, column: text, contains: 'Cannot find constants'}
        message: m
        remedy: r
        """)
    rs = load_rules(tmp_path)
    base = lines(CONST_ERR)
    assert evaluate(rs, frames(lines=base)) != []  # unknown version: applies
    assert evaluate(rs, frames(lines=base, compiles=[{"pytorch_version": "2.13.0+cpu"}])) == []
    assert evaluate(rs, frames(lines=base, compiles=[{"pytorch_version": "2.12.1"}])) != []
    assert in_torch_range("2.5.0", TorchRange(min="2.5")) and not in_torch_range("2.4.1", TorchRange(min="2.5"))


# ---------------------------------------------------------------------------------------------- evidence


def test_evidence_anchor_plus_other_frame(seed_rules):
    rs = load_rules(seed_rules)
    fr = frames(lines=lines(DTYPE_ERR, "RuntimeError: " + DTYPE_MSG),
                exceptions=[{"lineno": 2, "exc_type": "RuntimeError", "message": DTYPE_MSG + "\n"}])
    (f,) = evaluate(rs, fr)
    assert f.primary and f.family == "dtype_mismatch"
    assert [(e.source, e.line, e.text) for e in f.evidence] == [
        ("lines", 1, DTYPE_ERR), ("exceptions", 2, "RuntimeError: " + DTYPE_MSG)]
    # a run-time failure: TORCH_TRACE would record nothing, so it is not suggested
    assert f.rerun == "AOTI_RUNTIME_CHECK_INPUTS=1 <your command>"


def test_rerun_adds_torch_trace_for_a_compile_failure_without_trace(seed_rules):
    rs = load_rules(seed_rules)
    real = json.loads((DATA / "cpp_march_bogus.compile.json").read_text())
    fr = frames(compiles=[{"status": "failed", "fail_type": real["fail_type"], "fail_reason": real["fail_reason"]}],
                process=[{"command": "python3 cpp_march_bogus.py", "exit_code": 1}])
    (f,) = evaluate(rs, fr)
    assert f.rerun == "TORCH_LOGS=+inductor TORCH_TRACE=./torch_trace python3 cpp_march_bogus.py"


def test_compile_fail_reason_evidence_is_the_matching_line(seed_rules):
    rs = load_rules(seed_rules)
    real = json.loads((DATA / "cpp_march_bogus.compile.json").read_text())
    fr = frames(compiles=[{"status": "failed", "fail_type": real["fail_type"], "fail_reason": real["fail_reason"],
                           "pytorch_version": real["pytorch_version"]}],
                events=[{"event": "compilation_metrics"}],
                process=[{"command": "python3 cpp_march_bogus.py", "exit_code": 1}])
    (f,) = evaluate(rs, fr)
    assert f.rule_id == "AOTI-I001" and f.primary
    assert f.evidence[0].source == "compiles"
    assert f.evidence[0].text == "cc1plus: error: bad value ‘bogus’ for ‘-march=’ switch"
    assert f.fields == {"where": "cc1plus", "msg": "bad value ‘bogus’ for ‘-march=’ switch"}
    assert f.rerun == "TORCH_LOGS=+inductor python3 cpp_march_bogus.py"  # the run has a trace: no TORCH_TRACE


# ---------------------------------------------------------------------------------------------- ranking


def _cause_and_carrier(tmp_path: Path) -> None:
    write_rule(tmp_path, """\
        match: {frame: exceptions, column: message, regex: '(?P<call>\\w+)\\(.*\\) API call failed at'}
        extract: {call: call}
        message: "generic carrier {{call}}"
        remedy: r
        """, id="AOTI-Z001", name="api-call-failed", role="carrier", family="constant_loading")
    write_rule(tmp_path, """\
        match: {frame: lines, column: text, regex: '^Error: Cannot find constants (?P<name>\\S+) in constants_map!'}
        extract: {name: name}
        message: "constant {{name}} missing"
        remedy: r
        """, id="AOTI-C002", name="cannot-find-constants", role="cause", family="constant_loading")


def test_cause_explains_the_carrier_which_is_then_dropped(tmp_path):
    _cause_and_carrier(tmp_path)
    fr = frames(lines=lines(CONST_ERR, "RuntimeError: " + CARRIER),
                exceptions=[{"lineno": 2, "exc_type": "RuntimeError", "message": CARRIER}])
    found = evaluate(load_rules(tmp_path), fr)
    assert [(f.rule_id, f.primary) for f in found] == [("AOTI-C002", True)]
    # without the cause, the carrier is reported (a failure is never silent), with its captures
    alone = evaluate(load_rules(tmp_path), frames(exceptions=[{"exc_type": "RuntimeError", "message": CARRIER}]))
    assert [(f.rule_id, f.primary) for f in alone] == [("AOTI-Z001", True)]
    assert alone[0].fields == {"call": "update_constant_buffer_func_"}


def test_supersedes_drops_the_superseded_rule(tmp_path):
    _cause_and_carrier(tmp_path)
    path = tmp_path / "constant_loading" / "cannot-find-constants.yaml"
    path.write_text(path.read_text() + "supersedes: [AOTI-Z001]\n")
    fr = frames(lines=lines(CONST_ERR), exceptions=[{"exc_type": "RuntimeError", "message": CARRIER}])
    assert [f.rule_id for f in evaluate(load_rules(tmp_path), fr)] == ["AOTI-C002"]
    # without the superseding rule's evidence the carrier still reports
    fr = frames(exceptions=[{"exc_type": "RuntimeError", "message": CARRIER}])
    assert [(f.rule_id, f.primary) for f in evaluate(load_rules(tmp_path), fr)] == [("AOTI-Z001", True)]


def test_only_symptom_warnings_no_primary(tmp_path):
    write_rule(tmp_path, """\
        match: {frame: lines, column: text, contains: 'is deprecated', include: [noise]}
        message: m
        remedy: r
        """, severity="warning", role="symptom", family="deprecated_api")
    found = evaluate(load_rules(tmp_path), frames(lines=lines(LEAFSPEC)))
    assert [f.severity for f in found] == ["warning"] and not any(f.primary for f in found)


def test_warning_cause_is_primary_when_no_error(tmp_path):
    write_rule(tmp_path, """\
        match: {frame: lines, column: text, contains: 'is deprecated', include: [noise]}
        message: m
        remedy: r
        """, severity="warning", role="cause", family="deprecated_api")
    found = evaluate(load_rules(tmp_path), frames(lines=lines(LEAFSPEC)))
    assert [(f.severity, f.primary) for f in found] == [("warning", True)]


def test_exactly_one_primary_across_runs(tmp_path):
    _cause_and_carrier(tmp_path)
    fr = frames(lines=lines(CONST_ERR, run_id="a") + lines(CONST_ERR, run_id="b"))
    found = evaluate(load_rules(tmp_path), fr)
    assert len(found) == 2 and sum(f.primary for f in found) == 1


def test_noise_rule_cannot_be_error(tmp_path):
    write_rule(tmp_path, "match: {frame: lines, column: text, contains: x}\nmessage: m\nremedy: r\n", role="noise")
    with pytest.raises(RuleError, match="noise rule cannot have severity error"):
        load_rules(tmp_path)


# ---------------------------------------------------------------------------------------------- fingerprint


def test_fingerprint_ignores_cache_dirs_hashes_and_addresses():
    # real kernel paths of two captures (fixtures/cases/*/trace, TORCHINDUCTOR_CACHE_DIR differs per capture)
    a = fingerprint("AOTI-A001", {"file": "/tmp/tmp.Gj2qTH6otI/ck6bgx6g3tsroiu3eytbkl3huobqmp4x2c4hymece6bqje3d56to/"
                                          "cmb3nq73ienm2x6xsmjtbvss4nxiqma2xs3g3d2z3uwdcv6ud3p7.kernel.cpp:69",
                                  "ptr": "0x7f12ab34"})
    b = fingerprint("AOTI-A001", {"file": "/tmp/tmp.fneuO2eMw0/ck6bgx6g3tsroiu3eytbkl3huobqmp4x2c4hymece6bqje3d56to/"
                                          "c7f4zt2ecpi7klp4pd4qmdyg5kyoyipqtee2uakecjqzq6y6wnec.kernel.cpp:69",
                                  "ptr": "0x55aa00ff"})
    assert a == b and len(a) == 16
    c = fingerprint("AOTI-A001", {"file": "/tmp/x/cmb3nq73ienm2x6xsmjtbvss4nxiqma2xs3g3d2z3uwdcv6ud3p7.kernel.cpp:70",
                                  "ptr": "0x1"})
    assert c != a  # the line is part of the identity
    assert fingerprint("AOTI-A002", {"file": "x"}) != fingerprint("AOTI-A001", {"file": "x"})


def test_fingerprint_stable_across_runs_and_paths(tmp_path):
    _cause_and_carrier(tmp_path)
    rs = load_rules(tmp_path)
    one = evaluate(rs, frames(lines=lines(CONST_ERR, run_id="capture-1")))
    two = evaluate(rs, frames(lines=lines("noise line", CONST_ERR, run_id="capture-2")))
    assert one[0].fingerprint == two[0].fingerprint


# ---------------------------------------------------------------------------------------------- reasoners


def _rule_of_family(tmp_path: Path, family: str, needle: str, rid: str) -> None:
    write_rule(tmp_path, f"""\
        match: {{frame: lines, column: text, contains: '{needle}'}}
        message: m
        remedy: r
        """, id=rid, name=f"{family.replace('_', '-')}-x", family=family)


def test_illegal_memory_access_possibly_misplaced(tmp_path):
    # aoti-signatures.md §2h (c10 text, from source and public issue reports)
    _rule_of_family(tmp_path, "illegal_memory_access", "an illegal memory access was encountered", "AOTI-H901")
    rs = load_rules(tmp_path)
    text = "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"
    (f,) = evaluate(rs, frames(lines=lines(text), process=[{"command": "python run.py", "env": "PYTHONUNBUFFERED=1"}]))
    assert f.fields["launch_blocking"] == "unset" and "possibly misplaced" in f.message
    assert f.env_flags["CUDA_LAUNCH_BLOCKING"] == "1" and "CUDA_LAUNCH_BLOCKING=1" in f.rerun
    (g,) = evaluate(rs, frames(lines=lines(text), process=[{"env": "CUDA_LAUNCH_BLOCKING=1 PYTHONUNBUFFERED=1"}]))
    assert g.fields["launch_blocking"] == "1" and "possibly misplaced" not in g.message
    (h,) = evaluate(rs, frames(lines=lines(text)))
    assert h.fields["launch_blocking"] == "unknown"


def test_segfault_phase(tmp_path):
    # faulthandler's header line (CPython), as printed for SIGSEGV
    _rule_of_family(tmp_path, "segfault", "Fatal Python error: Segmentation fault", "AOTI-S901")
    rs = load_rules(tmp_path)
    text = "Fatal Python error: Segmentation fault"
    (f,) = evaluate(rs, frames(lines=lines(text), faults=[{"kind": "fatal_signal", "signal": "SIGSEGV", "phase": "load",
                                                          "user_file": "run.py", "user_line": 7}]))
    assert f.fields["phase"] == "load" and f.message.endswith("(during load)")
    assert any("run.py:7" in e.text for e in f.evidence)
    (g,) = evaluate(rs, frames(lines=lines(text), compiles=[{"status": "incomplete"}]))
    assert g.fields["phase"] == "compile"
    (h,) = evaluate(rs, frames(lines=lines(text), compiles=[{"status": "ok"}]))
    assert h.fields["phase"] == "load or run"


# ---------------------------------------------------------------------------------------------- harness + CLI


@pytest.fixture
def runner():
    _register()
    return CliRunner()


SEEDS = ("dtype_mismatch/input-dtype-mismatch", "cpp_compile_error/cpp-compile-error",
         "package_error/outdated-package-warning")


@pytest.fixture
def seed_rules(tmp_path):
    """The three seed rules (with fragments, ignore list, guides) copied out of the library being written."""
    import shutil

    src = Path(__file__).parents[2] / "rules"
    dst = tmp_path / "rules"
    for name in ("fragments.yaml", "ignore.yaml"):
        (dst / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src / name, dst / name)
    for seed in SEEDS:
        for rel in (f"{seed}.yaml", f"guides/{seed}.md"):
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src / rel, dst / rel)
    # The library's seed rules may supersede rules that are not copied here: drop those references.
    for path in dst.rglob("*.yaml"):
        text = path.read_text()
        path.write_text(re.sub(r"(?m)^supersedes:.*\n(?:\s+- .*\n)*", "", text))
    return dst


def test_cli_lint_and_test_on_seed_rules(runner, seed_rules):
    assert runner.invoke(cli, ["rules", "lint", str(seed_rules)]).exit_code == 0
    res = runner.invoke(cli, ["rules", "test", str(seed_rules), "--no-fixtures"])
    assert res.exit_code == 0, res.output
    assert "AOTI-E001" in res.output and "TP" in res.output
    res = runner.invoke(cli, ["rules", "list", "--rules", str(seed_rules), "--no-builtin-rules"])
    assert res.exit_code == 0 and "input-dtype-mismatch" in res.output
    res = runner.invoke(cli, ["rules", "show", "AOTI-E001", "--rules", str(seed_rules), "--no-builtin-rules"])
    assert res.exit_code == 0 and "## Fix" in res.output


def test_wrong_example_fails_rules_test(runner, tmp_path):
    write_rule(tmp_path, """\
        match: {frame: lines, column: text, regex: '^Error: Cannot find constants (?P<name>\\S+) in constants_map!'}
        extract: {name: name}
        message: "constant {{name}} missing"
        remedy: r
        examples:
          - name: real-positive
            expect: match
            origin: aoti-signatures.md §2c
            lines: |
              Error: Cannot find constants lin_weight in constants_map!
            fields: {name: lin_weight}
          - name: wrongly-labelled
            expect: no_match
            origin: aoti-signatures.md §2c
            lines: |
              Error: Cannot find constants lin_weight in constants_map!
        """)
    res = runner.invoke(cli, ["rules", "test", str(tmp_path), "--no-fixtures"])
    assert res.exit_code == 1
    assert "FAIL  AOTI-Z901 wrongly-labelled (no_match): FP" in res.output
    # a wrong expected field is a failure too
    path = tmp_path / "constant_loading" / "test-rule.yaml"
    path.write_text(path.read_text().replace("fields: {name: lin_weight}", "fields: {name: lin_bias}")
                    .replace("expect: no_match", "expect: match"))
    res = runner.invoke(cli, ["rules", "test", str(tmp_path), "--no-fixtures"])
    assert res.exit_code == 1 and "field name: expected 'lin_bias', got 'lin_weight'" in res.output


def test_cli_exit_codes(runner, tmp_path):
    write_rule(tmp_path, "match: {frame: lines, column: text, regex: '(?<w>x)'}\nmessage: m\nremedy: r\n")
    from aoti_trace.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["rules", "lint", str(tmp_path)])
    assert exc.value.code == 2
    good = tmp_path / "good"
    write_rule(good, "match: {frame: lines, column: text, contains: x}\nmessage: m\nremedy: r\n")
    res = runner.invoke(cli, ["rules", "lint", str(good)])  # experimental, no guide: a warning only
    assert res.exit_code == 0 and "warning: no guide" in res.output
    path = good / "constant_loading" / "test-rule.yaml"
    path.write_text(path.read_text().replace("status: experimental", "status: stable"))
    res = runner.invoke(cli, ["rules", "lint", str(good)])
    assert res.exit_code == 1 and "needs at least one `expect: match` example" in res.output


def test_rules_new_writes_skeleton_that_lints_once_filled(runner, tmp_path):
    res = runner.invoke(cli, ["rules", "new", "cannot-find-constants", "--family", "constant_loading",
                              "--rules", str(tmp_path)])
    assert res.exit_code == 0, res.output
    rule = tmp_path / "constant_loading" / "cannot-find-constants.yaml"
    guide = tmp_path / "guides" / "constant_loading" / "cannot-find-constants.md"
    assert runner.invoke(cli, ["rules", "lint", str(tmp_path)]).exit_code == 1  # TODOs left
    text = rule.read_text()
    text = (text.replace("TODO one line saying what went wrong", "A constant is missing from the update")
            .replace("TODO what the rule detects, where the text comes from (torch source file:line), and why it is the cause.",
                     "model_container.h:478-480")
            .replace("TODO a real line, e.g. (?P<what>.+)", "^Error: Cannot find constants (?P<what>\\S+) in constants_map!")
            .replace("TODO one line using {{what}}", "constant {{what}} missing")
            .replace("TODO the short fix.", "Pass every constant.")
            .replace("TODO where the text was copied from", "aoti-signatures.md §2c")
            .replace("TODO paste a real line here", "Error: Cannot find constants lin_weight in constants_map!")
            .replace("TODO paste a similar real line that must not match", "Constant not found: lin.bias"))
    rule.write_text(text)
    guide.write_text(guide.read_text().replace("TODO", "filled"))
    res = runner.invoke(cli, ["rules", "lint", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert runner.invoke(cli, ["rules", "test", str(tmp_path), "--no-fixtures"]).exit_code == 0


def test_row_scope_node_holding_the_anchor_extracts_its_captures(tmp_path):
    # real line: fixtures/cases/constant_loading/stderr.txt (torch 2.13.0 CPU)
    text = "Error: update_constant_buffer: constant 'lin_weight' is on device type 14 but expected device type 0"
    write_rule(tmp_path, """\
        match:
          scope: row
          all:
            - {frame: lines, column: kind, equals: cpp_error}
            - {frame: lines, column: text, regex: 'constant ''(?P<name>[^'']+)'' is on device type (?P<got>\\d+)', anchor: true}
        extract: {name: name, got: got}
        message: "{{name}} on device type {{got}}"
        remedy: r
        """)
    fr = frames(lines=[{"stream": "stderr", "text": "unrelated"},
                       {"stream": "stderr", "text": text, "kind": "cpp_error"}])
    (f,) = evaluate(load_rules(tmp_path), fr)
    assert f.fields == {"name": "lin_weight", "got": "14"} and f.evidence[0].line == 2
    # the same text on a row of another kind does not satisfy the row-scope conjunction (the line, a catalogued
    # torch error, is still failure evidence: the built-in failure rule reports it)
    other = evaluate(load_rules(tmp_path), frames(lines=[{"stream": "stderr", "text": text, "kind": "plain"}]))
    assert [f.rule_id for f in other if not is_failure_rule(f.rule_id)] == []


# ---------------------------------------------------------------------------------------------- skipping rules early


@pytest.mark.parametrize("case", ["cpp_compile_error", "cuda_illegal_memory_access", "export_numpy_in_forward",
                                  "noisy_success", "two_rank_one_fails", "cuda_printer_level2", "corrupt_package"])
def test_rules_decided_by_absent_literals_give_the_same_findings(case, monkeypatch):
    """query.match leaves out predicates on empty frames or whose literal occurs nowhere, and every rule whose tree
    is then false: the findings equal those of evaluating every predicate of every rule."""
    from aoti_trace.engine import query
    from aoti_trace.pipeline import analyze

    def dump(findings):
        return [f.to_json() for f in findings]

    fast = dump(analyze([Path(__file__).parents[2] / "fixtures" / "cases" / case]).findings)
    monkeypatch.setattr(query, "_absent", lambda texts, pred: False)
    rules = load_rules()
    rules._plan_cache = None  # type: ignore[attr-defined]  # a fresh plan
    slow = dump(analyze([Path(__file__).parents[2] / "fixtures" / "cases" / case], rules_path=rules).findings)
    assert fast == slow


def test_fold_is_three_valued():
    from aoti_trace.engine.query import _fold

    value = {"a": False, "b": None, "c": True}.get
    assert _fold(("all", [("pred", "a"), ("pred", "b")]), value) is False
    assert _fold(("all", [("pred", "c"), ("pred", "b")]), value) is None
    assert _fold(("any", [("pred", "a"), ("pred", "b")]), value) is None
    assert _fold(("any", [("pred", "a"), ("pred", "c")]), value) is True
    assert _fold(("not", ("pred", "a")), value) is True
    assert _fold(("not", ("pred", "b")), value) is None
    assert _fold(("all", [("not", ("pred", "c")), ("pred", "b")]), value) is False

"""One spelling for the shared options of every subcommand, and user rule folders that extend the library."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
import pytest

from aoti_trace.cli import _register, cli, main
from aoti_trace.library.loader import RULES_ENV, default_rules_dir, load_library

REPO = Path(__file__).resolve().parents[2]
CASE = REPO / "fixtures" / "cases" / "dtype_mismatch_checked"


def _commands(group: click.Group = cli, prefix: str = "") -> dict[str, click.Command]:
    _register()
    out: dict[str, click.Command] = {}
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            out.update(_commands(cmd, f"{prefix}{name} "))
        else:
            out[f"{prefix}{name}"] = cmd
    return out


def _option(cmd: click.Command, name: str) -> click.Option | None:
    return next((p for p in cmd.params if isinstance(p, click.Option) and p.name == name), None)


def _cli(args: list[str], capsys=None) -> int:
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code


def test_format_and_out_are_spelled_the_same_everywhere():
    commands = _commands()
    assert {"analyze", "frames", "inspect", "run", "ladder", "minify", "scoreboard", "rules coverage"} <= set(commands)
    for name, cmd in commands.items():
        fmt = _option(cmd, "fmt")
        if fmt is not None:
            assert fmt.opts[:2] == ["-f", "--format"], name
        out = _option(cmd, "out")
        if out is not None:
            assert out.opts[:2] == ["-o", "--out"], name
        assert not any(isinstance(p, click.Option) and p.name in ("output", "rules_path") for p in cmd.params), name
    for name in ("analyze", "frames", "inspect", "scoreboard", "rules coverage"):
        assert _option(commands[name], "fmt") and _option(commands[name], "out"), name


def test_every_rules_subcommand_takes_repeatable_rules():
    commands = _commands()
    rules_cmds = [n for n in commands if n.startswith("rules ")]
    assert {"rules list", "rules show", "rules lint", "rules test", "rules new", "rules coverage"} <= set(rules_cmds)
    for name in rules_cmds:
        opt = _option(commands[name], "rules_paths")
        assert opt is not None and opt.multiple, name
        assert _option(commands[name], "no_builtin_rules") is not None, name
    for name in ("analyze", "run", "ladder", "minify", "scoreboard"):
        assert _option(commands[name], "rules_paths").multiple, name


def test_old_output_spelling_is_a_hidden_alias(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert _cli(["analyze", str(CASE), "-f", "json", "--output", str(out), "--fail-on", "never"]) == 0
    assert json.loads(out.read_text())["findings"]
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["analyze", "--help"])
    help_text = capsys.readouterr().out
    assert "-o, --out PATH" in help_text and "--output" not in help_text


def test_frames_takes_several_paths_and_says_what_it_left_out(tmp_path, capsys):
    two = [str(CASE), str(REPO / "fixtures" / "cases" / "cpp_compile_error")]
    assert _cli(["frames", *two, "-o", str(tmp_path / "f"), "-f", "ndjson"]) == 0
    captured = capsys.readouterr()
    written = {Path(p).stem for p in captured.out.split()}
    assert "lines" in written
    assert "empty frames not written:" in captured.err
    skipped = captured.err.split("not written: ", 1)[1].strip().split(", ")
    assert skipped and not set(skipped) & written
    runs = {json.loads(line)["run_id"] for line in (tmp_path / "f" / "lines.ndjson").read_text().splitlines()}
    assert len(runs) == 2


def test_inspect_writes_out(tmp_path):
    pkg = next((REPO / "fixtures" / "packages").rglob("*.pt2"), None)
    if pkg is None:
        pytest.skip("no .pt2 fixture")
    out = tmp_path / "p.json"
    assert _cli(["inspect", str(pkg), "-f", "json", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["models"] is not None


# ------------------------------------------------------------------------------------------------ user rules
def _user_rule(folder: Path, rule_id: str, name: str) -> Path:
    """A copy of a real built-in rule (its regex and its real examples) under a new id and name."""
    src = default_rules_dir() / "runtime" / "input-dtype-mismatch.yaml"
    if not src.is_file():
        src = next(p for p in (default_rules_dir()).rglob("*.yaml") if "guides" not in p.parts
                   and p.name not in ("fragments.yaml", "ignore.yaml"))
    text = src.read_text(encoding="utf-8")
    import yaml

    data = yaml.safe_load(text)
    old_id, old_name = data["id"], data["name"]
    text = text.replace(f"id: {old_id}", f"id: {rule_id}", 1).replace(f"name: {old_name}", f"name: {name}", 1)
    dst = folder / data["family"] / f"{name}.yaml"
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(text, encoding="utf-8")
    return dst


def test_rules_are_added_to_the_library(tmp_path, capsys):
    _user_rule(tmp_path / "mine", "AOTI-Z901", "my-copy")
    builtin = len(load_library(env=False))
    assert _cli(["rules", "list", "--rules", str(tmp_path / "mine")]) == 0
    out = capsys.readouterr().out
    assert "AOTI-Z901" in out and f"{builtin + 1} rules in" in out
    assert _cli(["rules", "list", "--rules", str(tmp_path / "mine"), "--no-builtin-rules"]) == 0
    assert "1 rules in" in capsys.readouterr().out


def test_env_var_adds_folders(tmp_path, monkeypatch, capsys):
    _user_rule(tmp_path / "a", "AOTI-Z901", "copy-a")
    _user_rule(tmp_path / "b", "AOTI-Z902", "copy-b")
    monkeypatch.setenv(RULES_ENV, os.pathsep.join([str(tmp_path / "a"), str(tmp_path / "b")]))
    assert _cli(["rules", "show", "AOTI-Z902"]) == 0
    assert "copy-b" in capsys.readouterr().out
    ids = {r.id for r in load_library()}
    assert {"AOTI-Z901", "AOTI-Z902"} <= ids


def test_id_collision_across_folders_is_one_line(tmp_path, capsys):
    builtin_id = next(iter(load_library(env=False))).id
    _user_rule(tmp_path / "mine", builtin_id, "not-a-builtin-name")
    assert _cli(["analyze", str(CASE), "--rules", str(tmp_path / "mine")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and builtin_id in err and "also defined in" in err


def test_analyze_with_an_added_rule_finds_with_both(tmp_path, capsys):
    _user_rule(tmp_path / "mine", "AOTI-Z901", "my-copy")
    out = tmp_path / "r.json"
    _cli(["analyze", str(CASE), "--rules", str(tmp_path / "mine"), "-f", "json", "-o", str(out), "--fail-on", "never"])
    ids = {f["rule_id"] for f in json.loads(out.read_text())["findings"]}
    base = tmp_path / "b.json"
    _cli(["analyze", str(CASE), "-f", "json", "-o", str(base), "--fail-on", "never"])
    base_ids = {f["rule_id"] for f in json.loads(base.read_text())["findings"]}
    assert base_ids <= ids  # the built-in findings are still there


def test_rules_new_outside_a_checkout_writes_to_the_current_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert _cli(["rules", "new", "my-failure", "--family", "dtype_mismatch"]) == 0
    written = capsys.readouterr().out
    rule = tmp_path / "dtype_mismatch" / "my-failure.yaml"
    assert rule.is_file() and (tmp_path / "guides" / "dtype_mismatch" / "my-failure.md").is_file()
    assert f"--rules {tmp_path}" in written
    import yaml

    new_id = yaml.safe_load(rule.read_text())["id"]
    assert new_id not in {r.id for r in load_library(env=False)}  # not the id of a built-in rule


def test_rules_new_refuses_the_installed_package(tmp_path, monkeypatch, capsys):
    import aoti_trace

    pkg = Path(aoti_trace.__file__).parent
    assert _cli(["rules", "new", "my-failure", "--family", "dtype_mismatch", "--rules", str(pkg / "_rules")]) == 2
    err = capsys.readouterr().err
    assert "refusing to write into the installed package" in err and len(err.strip().splitlines()) == 1
    assert not (pkg / "_rules" / "dtype_mismatch" / "my-failure.yaml").exists()

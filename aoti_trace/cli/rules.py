"""`aoti-trace rules`: list, show, lint, test and scaffold rules.

Every subcommand takes ``--rules DIR`` (repeatable; also ``$AOTI_TRACE_RULES``), added to the built-in library,
and ``--no-builtin-rules``. ``lint`` and ``test`` also take one positional PATH: that folder or file alone (a
maintainer checking one library). Exit codes: 0 all good, 1 lint problems / failing examples or fixture cases,
2 the rules cannot be loaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from aoti_trace.cli import cli
from aoti_trace.cli.options import format_option, out_option, rules_options, ruleset
from aoti_trace.model.vocabulary import FAMILIES

if TYPE_CHECKING:
    from aoti_trace.engine.ruleset import RuleSet

# suggested id letter per family (docs/rule-format.md)
FAMILY_LETTER = {
    "triton_index_oob": "A", "device_mismatch": "B", "constant_loading": "C", "deprecated_api": "D",
    "shape_mismatch": "E", "dtype_mismatch": "E", "dynamic_shape_violation": "F", "nan_assert": "G",
    "illegal_memory_access": "H", "cpp_compile_error": "I", "missing_custom_op": "J", "package_error": "K",
    "lowering_error": "L", "cuda_version_mismatch": "M", "out_of_memory": "O", "segfault": "S",
    "autotune_error": "T", "environment": "V", "export_error": "X", "log_damage": "Y",
    "distributed": "N",
}

RULES_OPTION = rules_options


def _load(path: Path | None = None, rules_paths: Sequence[Path] = (), no_builtin_rules: bool = False) -> RuleSet:
    """PATH alone when given, else the built-in library plus the --rules folders."""
    from aoti_trace.library.loader import load_rules

    if path is not None:
        if rules_paths or no_builtin_rules:
            from aoti_trace.model.errors import RuleError

            raise RuleError("give either PATH (that folder alone) or --rules/--no-builtin-rules, not both")
        return load_rules(path)
    return load_rules(ruleset(rules_paths, no_builtin_rules))


def _folders(rs: RuleSet) -> str:
    roots = sorted({str(rs.root), *(str(r) for r in rs.roots.values())})
    return ", ".join(roots)


def _table(rows: Sequence[Sequence[object]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*map(str, r)) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


@cli.group("rules")
def rules_group() -> None:
    """Maintain the rule library: list, show, lint, test, new."""


@rules_group.command("list")
@RULES_OPTION
def list_cmd(rules_paths: tuple[Path, ...], no_builtin_rules: bool) -> None:
    """Table of the rules: id, name, family, severity, role, status."""
    rs = _load(None, rules_paths, no_builtin_rules)
    rows = [[r.id, r.name, r.family, r.severity, r.role, r.status] for r in sorted(rs.rules, key=lambda r: r.id)]
    click.echo(_table(rows, ["id", "name", "family", "severity", "role", "status"]))
    click.echo(f"\n{len(rows)} rules in {_folders(rs)}")


@rules_group.command("show")
@click.argument("rule_id")
@RULES_OPTION
def show_cmd(rule_id: str, rules_paths: tuple[Path, ...], no_builtin_rules: bool) -> None:
    """Print one rule (by id or name): its file, remedy and guide."""
    from aoti_trace.model.errors import RuleError

    rs = _load(None, rules_paths, no_builtin_rules)
    rule = rs.get(rule_id)
    if rule is None:
        raise RuleError(f"no rule {rule_id!r}; see `aoti-trace rules list`")
    path = rs.paths[rule.id]
    click.echo(f"{rule.id} {rule.name}: {rule.title}")
    click.echo(f"family {rule.family}, severity {rule.severity}, role {rule.role}, precision {rule.precision}, "
               f"status {rule.status}, version {rule.version}")
    click.echo(f"file: {path}\n")
    click.echo(rule.description.strip() + "\n")
    click.echo("Remedy:\n" + rule.remedy.rstrip() + "\n")
    if rule.env_flags:
        click.echo("Rerun with: " + " ".join(f"{k}={v}" for k, v in rule.env_flags.items()) + "\n")
    guide = rs.guide_path(rule)
    if guide is not None and guide.is_file():
        click.echo(f"Guide ({rule.guide}):\n")
        click.echo(guide.read_text(encoding="utf-8").rstrip())
    elif rule.guide:
        click.echo(f"Guide {rule.guide}: missing")


@rules_group.command("lint")
@click.argument("path", required=False, type=click.Path(path_type=Path))
@RULES_OPTION
@click.pass_context
def lint_cmd(ctx: click.Context, path: Path | None, rules_paths: tuple[Path, ...], no_builtin_rules: bool) -> None:
    """Check rules: schema, ids, regex dialects, captures, placeholders, guides, examples. Exit 0/1/2."""
    from aoti_trace.library.lint import lint

    rs = _load(path, rules_paths, no_builtin_rules)
    problems = lint(rs)
    for p in problems:
        click.echo(str(p))
    errors = [p for p in problems if p.level == "error"]
    click.echo(f"{len(rs)} rules, {len(errors)} errors, {len(problems) - len(errors)} warnings")
    ctx.exit(1 if errors else 0)


@rules_group.command("test")
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--fixtures", "fixtures", type=click.Path(path_type=Path), default=None,
              help="fixture cases folder (default: fixtures/cases next to the rules folder, if any)")
@click.option("--no-fixtures", is_flag=True, help="run the inline examples only")
@click.option("-v", "--verbose", is_flag=True, help="list every example, not only failures")
@RULES_OPTION
@click.pass_context
def test_cmd(ctx: click.Context, path: Path | None, fixtures: Path | None, no_fixtures: bool, verbose: bool,
             rules_paths: tuple[Path, ...], no_builtin_rules: bool) -> None:
    """Run inline examples (TP/TN/FP/FN per rule) and the fixture corpus. Exit 1 on any failure."""
    from aoti_trace.corpus import folder_cases, score_case
    from aoti_trace.engine.testing import confusion, run_examples

    rs = _load(path, rules_paths, no_builtin_rules)
    only = None
    if path is not None and path.is_file():
        only = list(rs.rules)
        full = _load(rs.root)  # evaluate a single file together with the library it belongs to
        known = {r.id for r in full.rules}
        rs = full if all(r.id in known for r in only) else rs
    results = run_examples(rs, only)
    failed = [r for r in results if not r.passed]
    table = confusion(results)
    rows = []
    for rule_id in sorted(table):
        c = table[rule_id]
        bad = sum(1 for r in failed if r.rule_id == rule_id)
        rows.append([rule_id, c["TP"], c["TN"], c["FP"], c["FN"], "FAIL" if bad else "ok"])
    click.echo(_table(rows, ["rule", "TP", "TN", "FP", "FN", "result"]))
    for r in results:
        if not r.passed or verbose or (r.xfail and r.outcome in ("TP", "TN")):
            mark = "FAIL" if not r.passed else ("XPASS" if r.xfail and r.outcome in ("TP", "TN") else
                                               "xfail" if r.xfail else "ok")
            click.echo(f"{mark:5} {r.rule_id} {r.example} ({r.expect}): {r.outcome} {r.detail}".rstrip())
    click.echo(f"{len(results)} examples, {len(failed)} failed")

    case_failed = 0
    if not no_fixtures:
        root = fixtures if fixtures is not None else (rs.root.parent / "fixtures" / "cases" if rs.root else None)
        cases = folder_cases(root) if root is not None else []
        if cases:
            rules_for_cases = (rs if rs.roots else rs.root) if only is None else None
            case_rows = []
            for case in cases:
                cr = score_case(case, rules_for_cases)
                case_failed += 0 if cr.passed or cr.xfail else 1
                status = {"PASS": "ok", "XPASS": "XPASS", "XFAIL": "xfail", "FAIL": "FAIL"}[cr.status]
                case_rows.append([cr.name, cr.expected, cr.actual, status, cr.detail or (cr.xfail or "")])
            click.echo("")
            click.echo(_table(case_rows, ["case", "expected", "primary", "result", "detail"]))
            click.echo(f"{len(cases)} fixture cases, {case_failed} failed")
    ctx.exit(1 if failed or case_failed else 0)


RULE_SKELETON = """\
# yaml-language-server: $schema=../rule.schema.json
schema: 1
id: {id}
name: {name}
title: TODO one line saying what went wrong
description: >
  TODO what the rule detects, where the text comes from (torch source file:line), and why it is the cause.
family: {family}
severity: error
role: cause
precision: high
status: experimental
version: 1
match:
  all:
    - frame: lines
      column: text
      regex: 'TODO a real line, e.g. (?P<what>.+)'
      anchor: true
occurrence: last
extract: {{what: what}}
message: "TODO one line using {{{{what}}}}"
remedy: |
  TODO the short fix.
guide: guides/{family}/{name}.md
examples:
  - name: todo-real-positive
    expect: match
    origin: TODO where the text was copied from
    lines: |
      TODO paste a real line here
  - name: todo-real-negative
    expect: no_match
    origin: TODO where the text was copied from
    lines: |
      TODO paste a similar real line that must not match
"""

GUIDE_SKELETON = """\
# {title} ({id})

## What happened
TODO

## Why
TODO

## How to confirm
TODO (the env_flags rerun)

## Fix
TODO

## Known false positives
TODO

## References
TODO
"""


def new_rule_folder(rules_paths: Sequence[Path]) -> Path:
    """Where `rules new` writes: the last --rules folder, else the checkout's rules/ when the working directory is
    inside that checkout, else the working directory; a :class:`RuleError` for a folder inside the installed
    package (pip would overwrite or remove it)."""
    import aoti_trace
    from aoti_trace.library.loader import default_rules_dir
    from aoti_trace.model.errors import RuleError

    package = Path(aoti_trace.__file__).resolve().parent
    if rules_paths:
        root = Path(rules_paths[-1])
    else:
        builtin = default_rules_dir().resolve()
        checkout = builtin.parent
        inside_package = builtin.is_relative_to(package)
        root = builtin if not inside_package and Path.cwd().resolve().is_relative_to(checkout) else Path.cwd()
    if root.resolve().is_relative_to(package):
        raise RuleError(f"refusing to write into the installed package ({root}); give --rules DIR, "
                        "or run it in the folder for your rules")
    return root


@rules_group.command("new")
@click.argument("name")
@click.option("--family", required=True, type=click.Choice(FAMILIES), help="the rule's family")
@click.option("--id", "rule_id", default=None, help="rule id (default: next free AOTI-<letter>NNN)")
@RULES_OPTION
def new_cmd(name: str, family: str, rule_id: str | None, rules_paths: tuple[Path, ...], no_builtin_rules: bool) -> None:
    """Write a rule skeleton <folder>/<family>/<name>.yaml and its guide skeleton.

    \b
    The folder: the last --rules DIR; else the checkout's rules/ when run inside the checkout; else the current
    folder (use it with `--rules .` or $AOTI_TRACE_RULES). Never inside the installed package. The id is the next
    one free across the built-in library and every loaded folder.
    """
    import re

    from aoti_trace.library.loader import load_library
    from aoti_trace.engine.schema import ID_RE, NAME_RE
    from aoti_trace.model.errors import RuleError

    if not re.fullmatch(NAME_RE, name):
        raise RuleError(f"rule name {name!r} must be kebab-case (e.g. input-dtype-mismatch)")
    root = new_rule_folder(rules_paths)
    folders = [p for p in dict.fromkeys([*map(Path, rules_paths), root]) if p.is_dir() and any(p.rglob("*.yaml"))]
    existing = load_library(folders, builtin=not no_builtin_rules) if folders or not no_builtin_rules else None
    if rule_id is None:
        letter = FAMILY_LETTER.get(family, "Z")
        used = {r.id for r in existing.rules} if existing else set()
        rule_id = next(f"AOTI-{letter}{n:03d}" for n in range(1, 1000) if f"AOTI-{letter}{n:03d}" not in used)
    if not re.fullmatch(ID_RE, rule_id):
        raise RuleError(f"rule id {rule_id!r} must look like AOTI-E001")
    if existing and (existing.get(rule_id) or existing.get(name)):
        raise RuleError(f"a rule {rule_id} or {name} already exists")
    rule_file = root / family / f"{name}.yaml"
    guide_file = root / "guides" / family / f"{name}.md"
    for f in (rule_file, guide_file):
        if f.exists():
            raise RuleError(f"{f} already exists")
    rule_file.parent.mkdir(parents=True, exist_ok=True)
    guide_file.parent.mkdir(parents=True, exist_ok=True)
    rule_file.write_text(RULE_SKELETON.format(id=rule_id, name=name, family=family), encoding="utf-8")
    guide_file.write_text(GUIDE_SKELETON.format(id=rule_id, title=name.replace("-", " ").capitalize()), encoding="utf-8")
    from aoti_trace.library.loader import default_rules_dir

    opt = "" if root.resolve() == default_rules_dir().resolve() else f" --rules {root}"
    click.echo(f"wrote {rule_file}\nwrote {guide_file}\n"
               f"fill in every TODO, then: aoti-trace rules lint{opt} && aoti-trace rules test{opt}")


@rules_group.command("coverage")
@click.option("--mode", type=click.Choice(["message", "frame", "both"]), default="both", show_default=True,
              help="message: only the message text can route it; frame: the raising torch file is in the log")
@click.option("--family", type=click.Choice(FAMILIES), default=None, help="only the messages of this family")
@click.option("--misses", is_flag=True, help="list the largest clusters of messages routed to another family")
@click.option("--limit", type=int, default=30, show_default=True, help="how many miss clusters to list")
@format_option(["text", "json"], "text")
@out_option("write the report here instead of stdout")
@click.option("--catalogue", "catalogue_path", type=click.Path(path_type=Path), default=None,
              help="messages.jsonl (default: rules/catalogue/messages.jsonl)")
@RULES_OPTION
def coverage_cmd(mode: str, family: str | None, misses: bool, limit: int, fmt: str, out: Path | None,
                 catalogue_path: Path | None, rules_paths: tuple[Path, ...], no_builtin_rules: bool) -> None:
    """Share of torch's catalogued AOTI error messages that the rules route to the right family."""
    from aoti_trace import catalogue

    messages = catalogue.load(catalogue_path)
    if family:
        messages = [m for m in messages if m.family == family]
    modes = catalogue.MODES if mode == "both" else tuple(m for m in catalogue.MODES if m == mode)
    from aoti_trace.cli.analyze import write_output

    rules_path = ruleset(rules_paths, no_builtin_rules)
    rep = catalogue.report(catalogue.analyse(messages, modes, rules_path), family, misses, limit)
    write_output(catalogue.dumps(rep) + "\n" if fmt == "json" else catalogue.render_text(rep), out)

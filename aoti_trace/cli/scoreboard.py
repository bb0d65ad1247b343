"""`aoti-trace scoreboard`: accuracy of the rule library on the fixture corpus."""

from __future__ import annotations

import json
from pathlib import Path

import click

from aoti_trace.cli import cli
from aoti_trace.cli.analyze import write_output
from aoti_trace.cli.options import format_option, out_option, rules_options, ruleset


@cli.command("scoreboard")
@click.argument("roots", nargs=-1, type=click.Path(path_type=Path))
@rules_options
@format_option(["markdown", "json"], "markdown")
@out_option("write the scoreboard here instead of stdout")
@click.pass_context
def scoreboard_cmd(ctx: click.Context, roots: tuple[Path, ...], rules_paths: tuple[Path, ...], no_builtin_rules: bool,
                   fmt: str, out: Path | None) -> None:
    """Score the primary diagnosis on every case (folders with expected.yaml) below ROOTS (default: fixtures)."""
    from aoti_trace import corpus

    results = corpus.score(list(roots) or [Path("fixtures")], ruleset(rules_paths, no_builtin_rules))
    if fmt == "json":
        text = json.dumps({
            "cases": [{"name": r.name, "path": str(r.path), "origin": r.origin, "device": r.device,
                       "expected": r.expected, "actual": r.actual, "status": r.status,
                       "missing_evidence": r.missing_evidence, "error": r.error} for r in results],
            "families": corpus.family_table(results),
        }, indent=2) + "\n"
    else:
        text = corpus.render_markdown(results)
    write_output(text, out)
    ctx.exit(1 if any(r.status == "FAIL" for r in results) else 0)

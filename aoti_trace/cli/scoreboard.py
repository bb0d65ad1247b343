"""`aoti-trace scoreboard`: accuracy of the rule library on the fixture corpus."""

from __future__ import annotations

import json
from pathlib import Path

import click

from aoti_trace.cli import cli


@cli.command("scoreboard")
@click.argument("roots", nargs=-1, type=click.Path(path_type=Path))
@click.option("--rules", "rules_path", type=click.Path(path_type=Path), help="rule folder (default: built-in)")
@click.option("-f", "--format", "fmt", type=click.Choice(["markdown", "json"]), default="markdown", show_default=True)
@click.pass_context
def scoreboard_cmd(ctx: click.Context, roots, rules_path, fmt) -> None:
    """Score the primary diagnosis on every case (folders with expected.yaml) below ROOTS (default: fixtures)."""
    from aoti_trace import scoreboard

    results = scoreboard.score(list(roots) or [Path("fixtures")], rules_path)
    if fmt == "json":
        click.echo(json.dumps({
            "cases": [{"name": r.name, "path": str(r.path), "origin": r.origin, "device": r.device,
                       "expected": r.expected, "actual": r.actual, "status": r.status,
                       "missing_evidence": r.missing_evidence, "error": r.error} for r in results],
            "families": scoreboard.family_table(results),
        }, indent=2))
    else:
        click.echo(scoreboard.render_markdown(results), nl=False)
    ctx.exit(1 if any(r.status == "FAIL" for r in results) else 0)

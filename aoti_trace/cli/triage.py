"""`aoti-trace triage ROOT...`: analyse every run below the roots and count failure signatures."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from aoti_trace.cli import cli
from aoti_trace.cli.options import format_option, out_option, rules_options


@cli.command("triage")
@click.argument("roots", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--engine", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="local: a process pool here; ray: Ray tasks (--address / RAY_ADDRESS, else a local Ray)")
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="local engine: worker processes (default: CPUs)")
@click.option("--address", help="ray engine: cluster address (auto, ray://host:10001); default RAY_ADDRESS")
@click.option("--since", type=click.Path(path_type=Path), help="an earlier signatures.parquet: mark new/gone/changed")
@format_option(["text", "json", "html"], "text")
@out_option("folder for runs.parquet, findings.parquet, signatures.parquet", file_okay=False)
@rules_options
def triage_cmd(roots: tuple[Path, ...], engine: str, jobs: int | None, address: str | None, since: Path | None,
               fmt: str, out: Path | None, rules_paths: tuple[Path, ...], no_builtin_rules: bool) -> None:
    """Triage every run (capture folder, CI log, rank log) below ROOTS into a table of failure signatures."""
    from aoti_trace.fleet import render
    from aoti_trace.fleet.triage import compare, read_previous, triage, write

    if jobs is not None and engine != "local":
        raise click.UsageError("--jobs is for --engine local (Ray sizes itself from the cluster)")
    if address is not None and engine != "ray":
        raise click.UsageError("--address is for --engine ray")
    previous = read_previous(since) if since is not None else None
    import os

    from aoti_trace.library.loader import RULES_ENV

    # folders and whether to add them to the built-in library: what every worker loads (load_library)
    rules_path = ((tuple(str(p) for p in rules_paths), not no_builtin_rules)
                  if rules_paths or no_builtin_rules or os.environ.get(RULES_ENV, "").strip() else None)
    result = triage(list(roots), engine=engine, jobs=jobs, address=address, rules_path=rules_path,
                    progress=sys.stderr.isatty())
    table = compare(result.signatures, previous) if previous is not None else None
    if out is not None:
        write(result, out)
    if fmt == "html":
        from aoti_trace.fleet.html import render_html

        click.echo(render_html(result, table), nl=False)
    else:
        click.echo(render.render_json(result, table) if fmt == "json" else render.render_text(result, table), nl=False)

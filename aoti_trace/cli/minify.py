"""`aoti-trace minify -- CMD ...`: a minimal repro of CMD's failure from PyTorch's AOTI minifier, checked by aoti-trace."""

from __future__ import annotations

from pathlib import Path

import click

from aoti_trace.run.capture import CaptureFailed, default_out_dir, parse_env_assignments
from aoti_trace.cli import cli
from aoti_trace.cli.options import format_option, out_option, rules_options, ruleset
from aoti_trace.cli.run import CONTEXT, _render, _say
from aoti_trace.model.errors import CaptureError
from aoti_trace.run.minify import DEFAULT_BUDGET_S
from aoti_trace.report import FORMATS


@cli.command("minify", context_settings=CONTEXT)
@out_option("output folder (default: ./aoti-trace-out/<timestamp>)", file_okay=False)
@click.option("--budget", type=float, default=DEFAULT_BUDGET_S, show_default=True,
              help="seconds the minifier may run; when they run out, its last checkpoint is the repro")
@click.option("--timeout", type=float, help="seconds before the command (and the repro's run) is ended")
@click.option("--env", "env", multiple=True, metavar="K=V", help="extra variable for the command (repeatable)")
@click.option("--echo", is_flag=True, help="stream the commands' own output to stderr")
@format_option(FORMATS, "text")
@rules_options
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
def minify_cmd(ctx: click.Context, out: Path | None, budget: float, timeout: float | None, env: tuple[str, ...],
               echo: bool, fmt: str, rules_paths: tuple[Path, ...], no_builtin_rules: bool,
               cmd: tuple[str, ...]) -> None:
    """Rerun CMD with PyTorch's AOTI minifier dump on, shrink the failing graph, and check the minimal repro.

    \b
    Example: aoti-trace minify --budget 900 -- python export.py
    Steps, each a capture folder under --out: dump/ (CMD with DUMP_AOTI_MINIFIER=1: a failing
    aoti_compile_and_package writes minifier_launcher.py), minify/ (the launcher's minify command, at most
    --budget seconds), verify/ (the minimal repro, <out>/minimal_repro.py, run and diagnosed). The report is the
    diagnosis of CMD with the repro attached; <out>/minify.json holds the result. When the minifier cannot help
    (environment, missing custom op, wrong inputs, a segfault at load, ...) it says why and runs nothing more.
    Exit status: 0 the minimal repro fails the same way (same rule id and family), 1 otherwise, 2 the command
    could not be captured.
    """
    from aoti_trace.run.minify import minify

    rules_path = ruleset(rules_paths, no_builtin_rules)
    out = out or default_out_dir()
    if budget <= 0:
        raise CaptureError(f"--budget must be positive, got {budget:g}")
    try:
        result, analysis = minify(list(cmd), out, budget_s=budget, timeout=timeout,
                                  extra_env=parse_env_assignments(list(env)), echo="stderr" if echo else False,
                                  rules_path=rules_path, progress=_say)
    except CaptureFailed as exc:
        raise CaptureError(str(exc)) from None
    if analysis is not None:
        click.echo(_render(analysis, fmt), nl=False)
    else:
        click.echo("\n".join(result.lines()) + "\n", nl=False)
    _say(f"{result.summary()}; written to {result.out_dir / 'minify.json'}")
    ctx.exit(0 if result.reproduced else 1)

"""`aoti-trace analyze`: post-mortem diagnosis of traces, captures, logs and packages."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from aoti_trace.cli import cli, long_lived
from aoti_trace.cli.options import format_option, out_option, rules_options, ruleset
from aoti_trace.model.errors import ReportError
from aoti_trace.model.vocabulary import SEVERITIES
from aoti_trace.report import FORMATS

if TYPE_CHECKING:
    from aoti_trace.model.analysis import Analysis
    from aoti_trace.model.findings import Finding

FAIL_ON = (*SEVERITIES, "never")


def exit_code_for(findings: Iterable[Finding], fail_on: str) -> int:
    """0 when no finding is at or above ``fail_on``, else 1."""
    if fail_on == "never":
        return 0
    worst = SEVERITIES.index(fail_on)
    return 1 if any(SEVERITIES.index(f.severity) <= worst for f in findings) else 0


def use_color(choice: str, output: Path | None) -> bool:
    """--color auto: colour only when writing to a terminal and NO_COLOR is unset (https://no-color.org)."""
    if choice != "auto":
        return choice == "always"
    return output is None and sys.stdout.isatty() and not os.environ.get("NO_COLOR") \
        and os.environ.get("TERM") != "dumb"


def progress(message: str) -> AbstractContextManager[Any]:
    """A spinner on stderr while the analysis runs, only when stderr is a terminal (never in pipes or CI logs)."""
    if not sys.stderr.isatty() or os.environ.get("TERM") == "dumb":
        return contextlib.nullcontext()
    from rich.console import Console

    return Console(stderr=True).status(message, spinner="dots")


def summary_line(analysis: Analysis) -> str:
    from aoti_trace.report.common import severity_counts

    counts = severity_counts(analysis.findings)
    primary = analysis.primary
    return f"aoti-trace: {counts}" + (f"; primary: {primary.rule_id} {primary.rule_name}" if primary else "")


def write_output(text: str, output: Path | None, color: bool = False) -> None:
    if output is None:  # click strips ANSI codes when stdout is not a terminal unless told otherwise
        click.echo(text, nl=not text.endswith("\n"), color=True if color else None)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ReportError(f"cannot write {output}: {exc.strerror}") from None


@cli.command("analyze")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--stderr", "stderr", type=str, help="captured stderr file, or - for standard input")
@click.option("--stdout", "stdout", type=click.Path(path_type=Path), help="captured stdout file")
@click.option("--exit-code", "exit_code", help="how the process ended: -11, 139 or SIGSEGV")
@rules_options
@format_option(FORMATS, "text")
@out_option("write the report here instead of stdout", aliases=("--output",))
@click.option("--html", "html_path", type=click.Path(path_type=Path), help="also write a self-contained HTML report")
@click.option("--perfetto", "perfetto_path", type=click.Path(path_type=Path), metavar="FILE",
              help="also write the trace's chromium events as Chrome Trace Event JSON (open it in ui.perfetto.dev)")
@click.option("--fail-on", type=click.Choice(FAIL_ON), default="error", show_default=True,
              help="exit 1 when a finding at or above this severity exists")
@click.option("--color", "color", type=click.Choice(("auto", "always", "never")), default="auto", show_default=True,
              help="colour the text report (auto: only on a terminal, off with NO_COLOR)")
@click.option("--source-root", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="sarif, github: make paths under this folder repository-relative and place each finding "
                   "inside it when it can (default: the working directory)")
@click.option("--sarif-category", default=None, metavar="NAME",
              help="SARIF automationDetails.id (the code-scanning category)  [default: aoti-trace]")
@click.option("--this-host", is_flag=True,
              help="compare .pt2 packages with this machine, as if loading them here (default: with the machine "
                   "the capture ran on, from its manifest; without one, not at all)")
@click.pass_context
def analyze_cmd(ctx: click.Context, paths: tuple[Path, ...], stderr: str | None, stdout: Path | None,
                exit_code: str | None, rules_paths: tuple[Path, ...], no_builtin_rules: bool, fmt: str,
                out: Path | None, html_path: Path | None, perfetto_path: Path | None, fail_on: str, color: str,
                source_root: Path | None, sarif_category: str | None, this_host: bool) -> None:
    """Diagnose PATHs: TORCH_TRACE folders or files, capture folders, .pt2 packages, or any folder."""
    with long_lived():
        from aoti_trace.pipeline import analyze
        from aoti_trace.report import render

    if not paths and stderr is None and stdout is None:
        raise click.UsageError("give at least one PATH, or --stderr FILE|-")
    with progress("aoti-trace: parsing logs and evaluating rules..."):
        analysis = analyze(list(paths), stderr=stderr, stdout=stdout, exit_code=exit_code,
                           rules_path=ruleset(rules_paths, no_builtin_rules), this_host=this_host)
    output = out
    colored = fmt == "text" and use_color(color, output)
    write_output(render(analysis, fmt, color=colored, source_root=source_root if source_root is not None else Path.cwd(),
                        sarif_category=sarif_category), output, colored)
    if html_path is not None:
        write_output(render(analysis, "html"), html_path)
    if perfetto_path is not None:
        from aoti_trace.model.errors import ReportError
        from aoti_trace.report.chrome_trace import write_chrome_trace

        try:
            with open(perfetto_path, "w", encoding="utf-8") as fh:
                other = write_chrome_trace(analysis.frames, fh)
        except OSError as exc:
            raise ReportError(f"cannot write {perfetto_path}: {exc.strerror}") from None
        click.echo(f"aoti-trace: {other['events']} chromium events written to {perfetto_path}"
                   + (f" ({other['skipped']} unreadable skipped)" if other["skipped"] else "")
                   + ("" if other["events"] else " (no TORCH_TRACE chromium events in the input)"), err=True)
    if fmt != "text" or output is not None:  # the report went elsewhere: a one-line summary for the person / CI log
        click.echo(summary_line(analysis), err=True)
    ctx.exit(exit_code_for(analysis.findings, fail_on))

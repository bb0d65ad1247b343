"""`aoti-trace run -- CMD ...` and `aoti-trace ladder -- CMD ...`: capture a command, then diagnose it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.decorators import FC

from aoti_trace.run.capture import CaptureFailed, capture, default_out_dir, parse_env_assignments
from aoti_trace.cli import cli
from aoti_trace.cli.analyze import exit_code_for
from aoti_trace.cli.options import format_option, out_option, rules_options, ruleset
from aoti_trace.model.errors import CaptureError
from aoti_trace.report import FORMATS

if TYPE_CHECKING:
    from aoti_trace.model.analysis import Analysis

CONTEXT = {"ignore_unknown_options": True, "allow_interspersed_args": False}


def _options(f: FC) -> FC:
    f = click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)(f)
    f = rules_options(f)
    f = format_option(FORMATS, "text")(f)
    f = click.option("--env", "env", multiple=True, metavar="K=V", help="extra variable for the command (repeatable)")(f)
    f = click.option("--timeout", type=float, help="seconds before the command is ended (SIGTERM, then SIGKILL)")(f)
    f = click.option("--check-inputs", is_flag=True, help="set AOTI_RUNTIME_CHECK_INPUTS=1 (run-time input checks)")(f)
    f = click.option("--logs", help="TORCH_LOGS value, e.g. '+inductor,output_code' (validated first)")(f)
    f = out_option("capture folder (default: ./aoti-trace-out/<timestamp>)", file_okay=False)(f)
    return f


def _say(msg: str) -> None:
    click.echo(f"aoti-trace: {msg}", err=True)


def _plain_summary(analysis: Analysis) -> str:
    """Fallback when no report renderer is available: title, message and evidence of each finding."""
    if not analysis.findings:
        return "No problem found.\n"
    lines = []
    for f in analysis.findings:
        lines.append(f"{'PRIMARY ' if f.primary else ''}{f.severity.upper()} {f.title} [{f.family}]")
        lines.append(f"  {f.message}")
        lines += [f"  > {e.path}:{e.line}: {e.text}" if e.path else f"  > {e.text}" for e in f.evidence[:3]]
    return "\n".join(lines) + "\n"


def _render(analysis: Analysis, fmt: str) -> str:
    try:
        from aoti_trace.report import render
    except ImportError:
        return _plain_summary(analysis)
    return render(analysis, fmt, color=sys.stdout.isatty())


def _fallback_exit(failed: bool) -> int:
    return 1 if failed else 0


@cli.command("run", context_settings=CONTEXT)
@click.option("--ladder", "ladder", is_flag=True, help="run the debugging ladder (see `aoti-trace ladder`)")
@_options
@click.pass_context
def run_cmd(ctx: click.Context, ladder: bool, out: Path | None, logs: str | None, check_inputs: bool,
            timeout: float | None, env: tuple[str, ...], fmt: str, rules_paths: tuple[Path, ...],
            no_builtin_rules: bool, cmd: tuple[str, ...]) -> None:
    """Run CMD with TORCH_TRACE and the AOTI debug variables set, capture it crash-safely, then diagnose it.

    \b
    Example: aoti-trace run --timeout 600 -- python repro.py
    The capture folder holds stdout.txt, stderr.txt, trace/ and manifest.json; `aoti-trace analyze DIR`
    re-analyses it. Exit status: 0 no error finding, 1 error findings, 2 the command could not be captured.
    """
    if ladder:
        ctx.invoke(ladder_cmd, out=out, logs=logs, check_inputs=check_inputs, timeout=timeout, env=env, fmt=fmt,
                   rules_paths=rules_paths, no_builtin_rules=no_builtin_rules, cmd=cmd)
        return
    rules_path = ruleset(rules_paths, no_builtin_rules)  # loaded (and checked) before the command runs
    from aoti_trace.run.ladder import analyze_capture

    out = out or default_out_dir()
    try:
        extra = parse_env_assignments(list(env))
        res = capture(list(cmd), out, logs=logs, check_inputs=check_inputs, extra_env=extra, timeout=timeout,
                      echo=True if fmt == "text" else "stderr")
    except CaptureFailed as exc:
        raise CaptureError(str(exc)) from None
    _say(f"captured to {res.out_dir}: {res.describe()}")
    analysis, why = analyze_capture(res.out_dir, rules_path)
    if analysis is None:
        _say(f"analysis unavailable ({why}); the capture is complete: run `aoti-trace analyze {res.out_dir}` later")
        ctx.exit(_fallback_exit(res.exit_code != 0))
    click.echo(_render(analysis, fmt), nl=False)
    ctx.exit(exit_code_for(analysis.findings, "error"))


@cli.command("ladder", context_settings=CONTEXT)
@click.option("--minify", "minify", is_flag=True, help="end with stage 5: a minimal repro (see `aoti-trace minify`)")
@click.option("--minify-budget", type=float, default=None, help="seconds the minifier may run (default 1200)")
@_options
@click.pass_context
def ladder_cmd(ctx: click.Context, minify: bool, minify_budget: float | None, out: Path | None, logs: str | None,
               check_inputs: bool, timeout: float | None, env: tuple[str, ...], fmt: str,
               rules_paths: tuple[Path, ...], no_builtin_rules: bool, cmd: tuple[str, ...]) -> None:
    """Run the AOTI debugging guide's procedure on CMD, one fresh capture per stage, until one gives a diagnosis.

    \b
    Stages (each under <out>/stage-<id>-<name>/; each keeps the flags of the ones before):
      1  baseline
      2  AOTI_RUNTIME_CHECK_INPUTS=1 TORCHINDUCTOR_NAN_ASSERTS=1 (fresh inductor cache)
      3  PYTORCH_NO_CUDA_MEMORY_CACHING=1 CUDA_LAUNCH_BLOCKING=1 (CUDA only, fresh cache)
      4a AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER=3: the last kernel launched
      4b ...PRINTER=2 AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT=<that kernel>: its inputs
      5  with --minify: DUMP_AOTI_MINIFIER=1, the AOTI minifier, the minimal repro checked (`aoti-trace minify`)
    Ends with a table and <out>/ladder.json. Same as `aoti-trace run --ladder`.
    """
    from aoti_trace.run.ladder import run_ladder

    rules_path = ruleset(rules_paths, no_builtin_rules)
    out = out or default_out_dir()
    try:
        extra = parse_env_assignments(list(env))
        if check_inputs:
            extra.setdefault("AOTI_RUNTIME_CHECK_INPUTS", "1")
        result = run_ladder(list(cmd), out, logs=logs, extra_env=extra, timeout=timeout,
                            echo=True if fmt == "text" else "stderr", rules_path=rules_path, progress=_say,
                            minify=minify, minify_budget=minify_budget)
    except CaptureFailed as exc:
        raise CaptureError(str(exc)) from None
    reported = result.reported
    if fmt == "json":
        import json

        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        if reported.analysis is not None:
            click.echo(f"\nDiagnosis (stage {reported.stage.id}, {reported.stage.name}):\n", err=fmt != "text")
            text = _render(reported.analysis, fmt)
            click.echo(text, nl=False)
        click.echo("\n" + result.table(), nl=False, err=fmt != "text")
    _say(f"ladder written to {result.out_dir / 'ladder.json'}")
    if result.analysis_crashed:
        from aoti_trace.cli import BUG_HINT

        _say(f"internal error: the analysis of a stage failed (see the table); {BUG_HINT}")
        ctx.exit(3)
    if reported.analysis is None:
        c = reported.capture
        ctx.exit(_fallback_exit(c is not None and c.exit_code != 0))
    ctx.exit(exit_code_for(reported.analysis.findings, "error"))

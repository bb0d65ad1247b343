"""Command-line interface: a thin layer over the library API.

Each command group lives in its own module and registers itself on :data:`cli`.
Exit codes: 0 nothing at or above --fail-on, 1 findings, 2 usage/input error, 3 internal error.
"""

from __future__ import annotations

import sys

import click

from aoti_trace import __version__
from aoti_trace.errors import AotiTraceError

BUG_HINT = "this is a bug in aoti-trace; please report it with the command line and the traceback above (AOTI_TRACE_DEBUG=1)"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="aoti-trace")
def cli() -> None:
    """Diagnose AOTInductor compile, package, load and run failures."""


def _register() -> None:
    # Imported for their side effect of adding commands to `cli`.
    from aoti_trace.cli import analyze, frames, inspect, minify, rules, run, scoreboard  # noqa: F401
    from aoti_trace.cli import triage  # noqa: F401


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point with aoti-trace's exit-code policy."""
    import os

    _register()
    try:
        code = cli.main(args=argv, prog_name="aoti-trace", standalone_mode=False)
    except AotiTraceError as exc:
        click.echo(f"aoti-trace: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aoti-trace: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:  # usage errors from click itself
        exc.show()
        sys.exit(2)
    except (BrokenPipeError, KeyboardInterrupt):
        sys.exit(130)
    except Exception:
        if os.environ.get("AOTI_TRACE_DEBUG"):
            raise
        import traceback

        last = traceback.format_exc().strip().splitlines()[-1]
        click.echo(f"aoti-trace: internal error: {last}\n{BUG_HINT}", err=True)
        sys.exit(3)
    sys.exit(code if isinstance(code, int) else 0)

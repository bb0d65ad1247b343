"""Command-line interface: a thin layer over the library API.

Each command group lives in its own module and registers itself on :data:`cli`.
Exit codes: 0 nothing at or above --fail-on, 1 findings, 2 usage/input error, 3 internal error.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from aoti_trace import __version__
from aoti_trace.model.errors import AotiTraceError

BUG_HINT = "this is a bug in aoti-trace; please report it with the command line and the traceback above (AOTI_TRACE_DEBUG=1)"


# command -> the module of aoti_trace.cli that defines it; a module is imported when one of its commands is used
# (`aoti-trace analyze` does not pay for the imports of the other commands)
COMMANDS: dict[str, str] = {
    "analyze": "analyze", "frames": "frames", "inspect": "inspect", "ladder": "run", "minify": "minify",
    "rules": "rules", "run": "run", "scoreboard": "scoreboard", "triage": "triage",
}


class UserError(click.ClickException):
    """A library :class:`~aoti_trace.model.errors.AotiTraceError` as click reports it: one line, exit code 2."""

    exit_code = 2


class _LazyGroup(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except AotiTraceError as exc:  # the library knows nothing of click: its user errors become click's here
            raise UserError(str(exc)) from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            import importlib

            importlib.import_module(f"aoti_trace.cli.{COMMANDS[cmd_name]}")  # adds its commands to `cli`
        return super().get_command(ctx, cmd_name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="aoti-trace")
def cli() -> None:
    """Diagnose AOTInductor compile, package, load and run failures."""


def _register() -> None:
    """Import every command module (each adds its commands to `cli`); the CLI itself imports them on first use."""
    import importlib

    for module in sorted(set(COMMANDS.values())):
        importlib.import_module(f"aoti_trace.cli.{module}")


# The cyclic garbage collector's first threshold for the command-line process (CPython's default: 700 allocations).
# Start-up allocates several hundred thousand objects that live to the end (modules, the rule set, Polars
# internals): with the default, ~120 collections, one of them of everything, cost ~70 ms of a ~0.9 s `analyze` of a
# small capture; with 10,000, ~8 and ~25 ms (issue 12). Cyclic garbage is still collected.
GC_THRESHOLD = 10_000


@contextmanager
def long_lived() -> Iterator[None]:
    """Objects made inside live to the end of the process (a command's imports): the cyclic collector is paused
    while they are made, and at the first use in a process they are moved out of its reach after (:func:`gc.freeze`:
    with everything else alive then), so that later collections do not walk them again: ~20 of the ~25 ms the
    collector took in `analyze` of a small capture. Later uses (a second command in one process, e.g. a test) freeze
    nothing more: the objects alive then may include garbage of the earlier commands."""
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
        gc.enable()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point with aoti-trace's exit-code policy."""
    import os

    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    try:
        code = cli.main(args=argv, prog_name="aoti-trace", standalone_mode=False)
    except (AotiTraceError, UserError) as exc:
        click.echo(f"aoti-trace: error: {exc}", err=True)
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

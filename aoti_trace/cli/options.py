"""The options every subcommand spells the same way: ``-f/--format``, ``-o/--out``, ``--rules`` (repeatable,
added to the built-in library) and ``--no-builtin-rules``; old spellings stay accepted as hidden aliases."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.decorators import FC

if TYPE_CHECKING:
    from aoti_trace.engine.ruleset import RuleSet


class AliasedOption(click.Option):
    """A click option whose ``hidden_aliases`` are accepted but left out of ``--help``."""

    def __init__(self, *args: Any, hidden_aliases: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hidden_aliases = set(hidden_aliases)

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        opts = self.opts
        self.opts = [o for o in opts if o not in self.hidden_aliases]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = opts


def format_option(choices: Iterable[str], default: str, help: str | None = None) -> Callable[[FC], FC]:  # noqa: A002
    return click.option("-f", "--format", "fmt", type=click.Choice(list(choices)), default=default,
                        show_default=True, help=help)


def out_option(help: str, *, file_okay: bool = True,  # noqa: A002
               aliases: tuple[str, ...] = ()) -> Callable[[FC], FC]:
    return click.option("-o", "--out", *aliases, "out", cls=AliasedOption, hidden_aliases=aliases,
                        type=click.Path(path_type=Path, file_okay=file_okay), default=None, help=help)


def rules_options(f: FC) -> FC:
    """``--rules DIR`` (repeatable) and ``--no-builtin-rules``; the command receives ``rules_paths`` and
    ``no_builtin_rules``; :func:`ruleset` turns them into what ``rules_path`` arguments accept."""
    f = click.option("--no-builtin-rules", "no_builtin_rules", is_flag=True,
                     help="use only the --rules folders (and $AOTI_TRACE_RULES), not the built-in library")(f)
    return click.option("--rules", "rules_paths", multiple=True, type=click.Path(path_type=Path),
                        help="rule folder or file to add to the built-in library (repeatable; "
                             "also $AOTI_TRACE_RULES, separated by the path separator)")(f)


def ruleset(rules_paths: Iterable[Path], no_builtin_rules: bool) -> RuleSet | None:
    """None (the built-in library) when nothing was asked for, else the loaded :class:`RuleSet`."""
    import os

    from aoti_trace.library.loader import RULES_ENV, load_library

    if not rules_paths and not no_builtin_rules and not os.environ.get(RULES_ENV, "").strip():
        return None
    return load_library(list(rules_paths), builtin=not no_builtin_rules)

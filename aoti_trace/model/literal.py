"""The literal texts that every match of a regex contains: a cheap test that a regex cannot match a column, before
Polars compiles and runs it (start-up, issue 12). Used by the rule engine (computed once per rule regex when rules
are loaded; the rule-set cache keeps them) and by the stderr/stdout reader on small inputs
(:mod:`aoti_trace.ingest.text.prematch`)."""

from __future__ import annotations

import functools
import re
from typing import Any

MIN_LITERAL = 4  # a required literal shorter than this is not worth the pre-check


@functools.lru_cache(maxsize=4096)
def required_literals(pattern: str) -> tuple[str, ...] | None:
    """Literal texts of which every match of ``pattern`` contains at least one, or None (no pre-check).

    Read from Python's parse of the pattern: a run of literal characters, the content of a plain group or of a
    repeat of at least one, and an alternation whose every branch has literals (its branches' literals:
    ``^Error: |: undefined symbol: `` -> ``('Error: ', ': undefined symbol: ')``). Of the candidates of a sequence,
    the one whose shortest literal is longest is taken, fewer literals first; each literal is at least
    :data:`MIN_LITERAL` characters long. A pattern Python reads differently or not at all, or one with a
    case-insensitive or verbose flag anywhere, gives None."""
    try:
        import re._parser as sre  # type: ignore[import-not-found]  # (mypy checks as Python 3.10)
    except ImportError:  # Python < 3.11
        import sre_parse as sre
    try:
        parsed = sre.parse(pattern)
    except Exception:  # noqa: BLE001 (Rust-only syntax, or anything Python rejects: no pre-check)
        return None
    if parsed.state.flags & (re.IGNORECASE | re.VERBOSE) or "(?i" in pattern or "(?x" in pattern:
        return None

    def best(items: Any) -> tuple[str, ...] | None:  # a parsed (sub)pattern: a sequence of (opcode, argument) pairs
        found: list[tuple[str, ...]] = []
        run: list[str] = []
        for op, arg in [*items, (None, None)]:  # the sentinel ends the last run
            if op is sre.LITERAL:
                run.append(chr(arg))
                continue
            if run:
                found.append(("".join(run),))
                run = []
            sub: tuple[str, ...] | None = None
            if op is sre.SUBPATTERN and not arg[1] and not arg[2]:  # a plain group: its content is required
                sub = best(arg[3])
            elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT) and arg[0] >= 1:  # at least once: its content is required
                sub = best(arg[2])
            elif op is sre.BRANCH:  # one of the branches is required: each must have literals
                branches = [best(b) for b in arg[1]]
                if all(branches):
                    sub = tuple(dict.fromkeys(lit for b in branches for lit in b or ()))
            if sub:
                found.append(sub)
        good = [c for c in found if min(map(len, c)) >= MIN_LITERAL]
        return max(good, key=lambda c: (min(map(len, c)), -len(c)), default=None)

    return best(parsed)

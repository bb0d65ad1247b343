r"""Regex columns that cannot match, answered without Polars compiling the regex (start-up, issue 12).

On a small capture most of the classifier's and the failures frame's ~60 patterns match no line, yet Polars compiles
each on first use (~1 ms each, up to ~30 ms for a pattern with a bounded repeat of a Unicode class); compiling them
is most of the cost of reading a few lines. A pattern whose required literals (:func:`aoti_trace.model.literal.
required_literals`) occur in none of the column's values cannot match any of them: its column is false (null where
the value is null), exactly what the regex would give. The values are searched as plain text, and only in columns of
fewer than :data:`MAX_ROWS` rows; larger inputs run every regex (and use the classifier's guard patterns instead).
A pattern that is costly to compile (a bounded repeat of ``\w``) can also be given a guard: a widened pattern
(:func:`aoti_trace.ingest.text.lines.guard_of`) that matches wherever it does; when the guard matches no value, the
pattern is not compiled either.
"""

from __future__ import annotations

import polars as pl

from aoti_trace.model.literal import required_literals

# above this many rows the pre-check is not made (a large input compiles the patterns once and runs them in bulk)
MAX_ROWS = 2048
# False: every regex runs (the tests compare both ways)
ENABLED = True


class Haystack:
    """The values of one string column, joined, to ask whether a pattern can match any of them."""

    def __init__(self, values: pl.Series) -> None:
        self.small = ENABLED and values.len() < MAX_ROWS
        self.values = values
        self.text = "\n".join(values.drop_nulls().to_list()) if self.small else ""

    def can_match(self, pattern: str, guard: str | None = None) -> bool:
        """False only when ``pattern`` matches none of the values: one of its required literals is in every match
        and none is in any value, or ``guard`` (a pattern that matches wherever ``pattern`` does, and compiles
        faster) matches no value; True when it may."""
        if not self.small:
            return True
        literals = required_literals(pattern)
        if literals is not None and not any(lit in self.text for lit in literals):
            return False
        return guard is None or bool(self.values.str.contains(guard).any())

    def contains(self, column: str, pattern: str, guard: str | None = None) -> pl.Expr:
        """``pl.col(column).str.contains(pattern)``, where ``column`` holds these values; when the pattern cannot
        match, the same values without the regex (false, null where the value is null)."""
        if self.can_match(pattern, guard):
            return pl.col(column).str.contains(pattern)
        return pl.when(pl.col(column).is_not_null()).then(False)

"""Rank sets: which ranks of a distributed run a finding came from, and how to write a set of ranks short.

``rank_ranges([0, 1, 2, 3, 7, 9, 10])`` is ``"0-3, 7, 9-10"``: a report stays short for any rank count.
"""

from __future__ import annotations

from typing import Iterable


def rank_ranges(ranks: Iterable[int | None]) -> str:
    """Sorted, de-duplicated ranks as comma-separated ranges (``"0-255"``, ``"0, 2-255"``); '' for none."""
    rs = sorted({int(r) for r in ranks if r is not None})
    out: list[str] = []
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ", ".join(out)

"""The streams of a batch are read together (issue 16: ``text.read_streams``, ``lines.classify_many``): every frame
of every stream equals what reading that stream alone gives (``text.read_stream``), whatever the streams next to it.
Also the rule pass's per-run lookups: analysing runs in one batch equals analysing each alone
(tests/test_fleet.py::test_batch_equals_each_run_alone checks the findings)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from polars.testing import assert_frame_equal

from aoti_trace.ingest.text import lines as L
from aoti_trace.ingest.text import reader as text

ROOT = Path(__file__).resolve().parents[3]


def _streams() -> list[tuple[Path, str, str]]:
    files = sorted(p for p in (ROOT / "fixtures").rglob("*")
                   if p.is_file() and p.name.startswith(("stderr", "stdout")))
    files += sorted(p for p in (ROOT / "tests" / "data" / "text").glob("*.txt"))
    return [(p, "stdout" if "stdout" in p.name else "stderr", str(p.parent)) for p in files]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_read_streams_equals_each_stream_alone(seed: int) -> None:
    items = _streams()
    random.Random(seed).shuffle(items)
    items = items[:100]  # a random sample of the ~650 captured streams, in batches of 25
    alone = [text.read_stream(*item) for item in items]
    for start in range(0, len(items), 25):
        together = text.read_streams(items[start:start + 25])
        for k, frames in enumerate(together):
            want = alone[start + k]
            assert list(frames.tables) == list(want.tables), items[start + k][0]
            for name, df in want.tables.items():
                assert_frame_equal(frames.tables[name], df)


def test_classify_many_shared_indent_per_file() -> None:
    """The indent shared by every line is removed per file (a pasted, indented log next to a normal one), also on
    the sparse path (more than SPARSE_MIN_ROWS lines in all)."""
    pasted = ["    Traceback (most recent call last):", '      File "x.py", line 1, in <module>',
              "        f()", "    RuntimeError: boom"]
    normal = ["plain line"] * (L.SPARSE_MIN_ROWS + 10) + ["Traceback (most recent call last):",
                                                            '  File "y.py", line 2, in g', "ValueError: bad"]
    files = [(pasted, "stderr", "a", "a.txt"), (normal, "stderr", "b", "b.txt"), (pasted, "stdout", "c", "c.txt")]
    many = L.classify_many(files)
    for k, f in enumerate(files):
        alone = L.classify(*f)
        part = many.filter(many["_f"] == k).drop("_f")
        assert_frame_equal(part.select(alone.columns), alone)

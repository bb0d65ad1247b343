"""The shortcuts of the stderr/stdout classifier and of rule matching give the results of the long way (issue 12).

Each shortcut skips work where a widened pattern (a superset) or a required literal shows it cannot change
anything; these tests run both ways on every real capture of the repository and on mixtures of its lines.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import polars as pl
import pytest

from aoti_trace.model.literal import required_literals
from aoti_trace.ingest.text import lines as L, prematch
from aoti_trace.ingest.text.failure import failures_frame
from aoti_trace.ingest.text.reader import read_stream
from aoti_trace.ingest.text.tracebacks import exceptions_frame

REPO = Path(__file__).resolve().parents[3]
CAPTURES = sorted(
    p for p in [*(REPO / "fixtures").glob("**/*"), *(REPO / "tests/data/text").glob("*")]
    if p.is_file() and p.name.split(".")[0] in ("stderr", "stdout") or p.parent.name == "text" and p.suffix == ".txt"
)


def _lines(path: Path) -> list[str]:
    return L.clip_long_lines(L.split_lines(path.read_bytes().decode("utf-8", errors="replace"))[0])[0]


def _both(lines: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``classify`` with every shortcut taken (quiet lines, sparse steps) and with none."""
    monkeypatch.setattr(L, "SPARSE_MIN_ROWS", 0)
    fast = L.classify(lines, "stderr", "r", "p")
    monkeypatch.setattr(L, "SPARSE_MIN_ROWS", 1 << 62)
    monkeypatch.setattr(prematch, "ENABLED", False)
    slow = L.classify(lines, "stderr", "r", "p")
    monkeypatch.setattr(prematch, "ENABLED", True)
    return fast, slow


def _small(lines: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``classify`` the way a small input goes (steps skipped by their guards, patterns by their literals, at any
    size), and with no shortcut."""
    monkeypatch.setattr(L, "SPARSE_MIN_ROWS", 1 << 62)
    monkeypatch.setattr(prematch, "MAX_ROWS", 1 << 62)
    small = L.classify(lines, "stderr", "r", "p")
    monkeypatch.setattr(prematch, "ENABLED", False)
    slow = L.classify(lines, "stderr", "r", "p")
    monkeypatch.setattr(prematch, "ENABLED", True)
    return small, slow


def _same(fast: pl.DataFrame, slow: pl.DataFrame) -> None:
    cols = [c for c in slow.columns if not c.startswith("_") or c in (
        "_msg", "_rk", "_exc", "_exc_owner", "_in_tb", "_tb_file", "_fr_file", "_fr_line", "_fr_func", "_tb_type")]
    assert fast.select(cols).equals(slow.select(cols))
    assert exceptions_frame(fast).equals(exceptions_frame(slow))


@pytest.mark.slow
def test_captures_classify_the_same_with_and_without_shortcuts(monkeypatch):
    assert len(CAPTURES) > 100
    for i in range(0, len(CAPTURES), 25):  # 25 captures one after the other per log
        _same(*_both([line for path in CAPTURES[i:i + 25] for line in _lines(path)], monkeypatch))


SHARDS = 16  # the captures in this many tests, so that a parallel run (pytest -n) can spread them


@pytest.mark.slow
@pytest.mark.parametrize("shard", range(SHARDS))
def test_each_capture_reads_the_same_with_and_without_the_small_input_shortcuts(shard, monkeypatch):
    """Every real capture on its own (the small-input path: guards skip steps, literals skip patterns in the
    classifier and in the failures frame): its classified lines and all its frames, failures included."""
    assert len(CAPTURES) > 100
    for path in CAPTURES[shard::SHARDS]:
        _same(*_small(_lines(path), monkeypatch))
        got = []
        for enabled in (True, False):
            monkeypatch.setattr(prematch, "ENABLED", enabled)
            frames = read_stream(path, "stderr", "r")
            frames.add("failures", failures_frame(frames))
            got.append(frames)
        for name in set(got[0].tables) | set(got[1].tables):
            assert got[0][name].equals(got[1][name]), (path, name)


def test_mixtures_of_real_lines_take_the_small_input_path_the_same(monkeypatch):
    pool = [line for path in CAPTURES for line in _lines(path)]
    rng = random.Random(13)
    for _ in range(40):
        lines = rng.sample(pool, rng.randrange(2, 40))  # a few lines out of any context...
        start = rng.randrange(len(pool))
        lines += pool[start:start + rng.randrange(0, 60)]  # ...and a run of real context
        _same(*_small(lines, monkeypatch))


def test_required_literals_of_the_text_patterns_occur_in_every_match():
    """Every match of a classifier or failures-frame pattern in the real captures contains one of the literals
    found for it (the small-input pre-check relies on it)."""
    from aoti_trace.ingest.text.failure import TEXT_PHASES

    text = "\n".join(line for path in CAPTURES for line in _lines(path))
    patterns = [*L.PATTERNS.values(), *(p for _, p in TEXT_PHASES), L._guard("elsewhere"), r"code:\s*$"]
    checked = 0
    for pattern in patterns:
        literals = required_literals(pattern)
        if literals is None:
            continue
        for m in re.finditer(pattern, text, re.M):
            assert any(lit in m.group(0) for lit in literals), (pattern, m.group(0))
            checked += 1
    assert checked > 1000


def test_mixtures_of_real_lines_classify_the_same(monkeypatch):
    pool = [line for path in CAPTURES for line in _lines(path)]
    rng = random.Random(12)
    for _ in range(8):
        start = rng.randrange(len(pool))
        lines = pool[start:start + rng.randrange(50, 2500)]  # runs of real context...
        lines += rng.sample(pool, 300)  # ...and lines out of any context
        if rng.random() < 0.3:
            rng.shuffle(lines)
        _same(*_both(lines, monkeypatch))


def test_widened_patterns_match_wherever_the_originals_do():
    samples = [line for path in CAPTURES for line in _lines(path)][:60000]
    s = pl.Series(samples, dtype=pl.String)
    for name in L.FLAGS:
        exact = s.str.contains(L.PATTERNS[name])
        assert not (exact & ~s.str.contains(L._widened(L._uncaptured(L.PATTERNS[name])))).any(), name
    exact = s.str.contains(L.PATTERNS["error_report"])  # the failures frame's guarded pattern
    assert exact.any() and not (exact & ~s.str.contains(L.guard_of(L.PATTERNS["error_report"]))).any()
    assert L._widened(r"(?:\S*[^\w\s])?ld\b") == r"(?:\S*[^\w\s])?ld"  # negated classes are left alone
    assert L._widened(r"[\w.]\d") == r"[\S.]\S"


def test_glog_headers_without_capture_equal_the_captured_ones():
    texts = [t for path in CAPTURES for t in _lines(path)]
    texts += ["I1130 05:26:11.592000 26185 a/b.py:12] x", "[W1130 05:06:08.690000000 P.cpp:123] m",
              "E520 19:20:12.15 12 34:1] [0/0] y", "I1130 05:26:11.592 12:3] z", "[C0101 00:00:00.0 a:1]"]
    df = pl.DataFrame({"text": texts}).filter(pl.col("text").str.contains(L._GLOG_PLAIN))
    assert df.height > 100
    cols = ["_header", "level", "src"]
    assert L._glog_headers(df).select(cols).equals(L._any_headers(df).select(cols))


@pytest.mark.parametrize(("pattern", "literals"), [
    (r"Error: (?P<x>\w+) failed", ("Error: ",)),
    (r"(?:abc)?defgh", ("defgh",)),
    (r"x{2}yyyy", ("yyyy",)),
    (r"(?:undefined symbol)+: \S+", ("undefined symbol",)),
    (r"foo(?i:BAR)bazz", None),  # an inline case-insensitive group anywhere: no pre-check
    (r"\p{Greek}+ word", None),  # Rust-only syntax: no pre-check
    (r"ab", None),  # too short to be worth it
    (r"^Error: |: undefined symbol: \S", ("Error: ", ": undefined symbol: ")),
    (r"(?:abcd|efgh)ij", ("abcd", "efgh")),
    (r"a|bcdefg", None),  # a branch without a literal: none
    (r"xyzw(?:abcd|ef)", ("xyzw",)),
    (r"(?:Error|Exception)(?:: .*)?$|^torch\.", ("rror", "xception", "torch.")),  # Python's parse factors out the 'E'
    (r"(?i)Segmentation fault", None),
])
def test_required_literals(pattern, literals):
    assert required_literals(pattern) == literals


@pytest.mark.slow
def test_required_literals_of_the_rule_library_occur_in_every_match():
    """Every match of a library rule's regex in the real captures contains one of the literals found for it."""
    from aoti_trace.library import load_rules
    from aoti_trace.engine.schema import leaves

    text = "\n".join(line for path in CAPTURES for line in _lines(path))
    checked = 0
    for rule in load_rules().rules:
        for leaf, _ in leaves(rule.match):
            literals = required_literals(leaf.regex) if leaf.regex else None
            if literals is None:
                continue
            for m in re.finditer(leaf.regex, text):
                assert any(lit in m.group(0) for lit in literals), (rule.id, leaf.regex)
                checked += 1
    assert checked > 0

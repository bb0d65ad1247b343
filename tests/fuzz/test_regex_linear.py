"""Every module-level Python ``re`` pattern of the package, searched through long runs of one character.

Issue 13 item 7: a pattern that backtracks (``.+?\\s*$``, a lazy ``[\\w./]*?`` under ``finditer``) turns one long log
line into minutes of CPU. Patterns that touch log text run in Polars (Rust regex); what is left in Python ``re``
must stay linear on such input. A super-linear pattern needs seconds here (20,000 characters squared); a linear one
takes milliseconds, so the limit holds on a loaded machine too.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import time

import pytest

import aoti_trace

N = 20_000
LIMIT_S = 3.0
# the run follows a prefix that gets a pattern past its literal start (where the backtracking parts are)
PREFIXES = ["", "# ", "- ", "x = ", '  File "a.py", line 1, in ', "Fatal Python error: ", "Error: ", "a.wrapper.cpp"]
RUNS = [" ", "a", "0", "/", '"', "\\", ".", "-", "_", ":", "\n", "\t", "[", "`", "*", "<", "x.", "a ", "/a", "\x1b["]


def _patterns() -> list[tuple[str, re.Pattern]]:
    found: dict[int, tuple[str, re.Pattern]] = {}
    for info in pkgutil.walk_packages(aoti_trace.__path__, "aoti_trace."):
        if info.name.endswith("__main__"):
            continue
        mod = importlib.import_module(info.name)
        for name, value in vars(mod).items():
            if isinstance(value, re.Pattern) and isinstance(value.pattern, str):
                found.setdefault(id(value), (f"{info.name}.{name}", value))
            elif isinstance(value, (list, tuple)):  # tables of patterns
                for i, item in enumerate(value):
                    for j, v in enumerate(item if isinstance(item, tuple) else (item,)):
                        if isinstance(v, re.Pattern) and isinstance(v.pattern, str):
                            found.setdefault(id(v), (f"{info.name}.{name}[{i}][{j}]", v))
    return sorted(found.values(), key=lambda p: p[0])


PATTERNS = _patterns()


def test_the_package_has_patterns_to_check():
    assert len(PATTERNS) > 20


def _probe(pattern: re.Pattern, text: str) -> float:
    t0 = time.process_time()
    for _ in pattern.finditer(text):
        pass
    pattern.match(text)
    return time.process_time() - t0


@pytest.mark.slow
@pytest.mark.parametrize("name,pattern", PATTERNS, ids=[n for n, _ in PATTERNS])
def test_pattern_is_linear_on_long_runs(name, pattern):
    for prefix in PREFIXES:
        for unit in RUNS:
            for n, limit in ((N // 10, LIMIT_S / 10), (N, LIMIT_S)):  # a short probe first: fail fast
                text = unit * (n // len(unit))
                for probe in (prefix + text, prefix + text + "!", prefix + "x" + text + "\n"):
                    took = _probe(pattern, probe)
                    assert took < limit, f"{name} took {took:.1f} s on {prefix!r} + {len(text)} x {unit!r}"

"""Fuzzing: real fixture captures, mutated (see :mod:`hostile`), through discovery -> frames -> rules -> every report.

Each case copies one seed capture, applies 1-4 mutations to its files and analyses it in-process. A case fails on
any exception (``aoti-trace`` would exit 3), on a report that is not well formed (invalid JSON/SARIF, a control
character in the text report, markup from a log in the markdown report), on more than ``LIMIT_S`` seconds of CPU
time, or on a hang (``HANG_S`` seconds of wall-clock time). Deterministic (``derandomize``).

The normal test run uses a short budget (``-m "not fuzz"`` deselects it)::

    python -m pytest tests/fuzz/test_fuzz.py -m fuzz

100,000 cases, counting every crash and slow case instead of stopping at the first (summary in the log file)::

    AOTI_TRACE_FUZZ_EXAMPLES=100000 AOTI_TRACE_FUZZ_KEEP_GOING=1 AOTI_TRACE_FUZZ_LOG=fuzz-100k.json \\
        python -m pytest tests/fuzz/test_fuzz.py -m fuzz -q -p no:cacheprovider
"""

from __future__ import annotations

import json
import os
import resource
import tempfile
import threading
import time
import traceback
from pathlib import Path

import pytest
from hostile import OPS, SEEDS, CaseTimeout, Mutation, analyse, apply, materialise, terminal_safe, time_limit
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from aoti_trace import library

EXAMPLES = int(os.environ.get("AOTI_TRACE_FUZZ_EXAMPLES", "40"))
LIMIT_S = float(os.environ.get("AOTI_TRACE_FUZZ_LIMIT_S", "10"))  # CPU seconds per case
HANG_S = float(os.environ.get("AOTI_TRACE_FUZZ_HANG_S", "120"))  # wall-clock seconds per case
KEEP_GOING = os.environ.get("AOTI_TRACE_FUZZ_KEEP_GOING") == "1"
LOG = os.environ.get("AOTI_TRACE_FUZZ_LOG")
MAX_RSS_MB = int(os.environ.get("AOTI_TRACE_FUZZ_MAX_RSS_MB", "4000"))
SEED = int(os.environ["AOTI_TRACE_FUZZ_SEED"]) if os.environ.get("AOTI_TRACE_FUZZ_SEED") else None
_WATCHER: list = []

pytestmark = pytest.mark.fuzz

mutations = st.builds(Mutation, op=st.sampled_from(OPS), a=st.integers(0, 2**31), b=st.integers(0, 2**16),
                      c=st.integers(0, 2**20))
cases = st.tuples(st.sampled_from(SEEDS), st.lists(st.tuples(st.integers(0, 999), mutations), min_size=1, max_size=4))

STATS: dict = {"cases": 0, "crashes": 0, "over_limit_cpu": 0, "over_10s_wall": 0, "max_wall_s": 0.0,
               "max_cpu_s": 0.0, "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "failures": [], "slowest": [],
         "peak_rss_mb": 0, "peak_rss_growth": []}


@pytest.fixture(scope="module")
def rules():
    return library.load_rules()


def _peak_rss_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def _save() -> None:
    if LOG:
        STATS["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        STATS["loadavg"] = os.getloadavg()
        Path(LOG).write_text(json.dumps(STATS, indent=1) + "\n")


def _check_markdown(md: str) -> None:
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").enable("table").render(md)
    assert "<img" not in html and "<script" not in html and "<a " not in html, "markup from a log in markdown"
    assert html.count("</details>") == 1, "a log closed the report's <details>"


def run_case(seed: str, plan: list[tuple[int, Mutation]], rules) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="aoti_fuzz_") as tmp:
        target = materialise(seed, Path(tmp) / "in")
        for which, m in plan:
            files = sorted(p for p in ([target] if target.is_file() else target.rglob("*")) if p.is_file())
            if not files:
                break
            changed = apply(files[which % len(files)], m)
            if target.is_file():
                target = changed
        with time_limit(HANG_S):
            out = analyse([target], rules)
        assert out.cpu_s <= LIMIT_S, f"{out.cpu_s:.1f} s of CPU"
        assert terminal_safe(out.reports["text"]), "control character in the text report"
        assert terminal_safe(out.reports["text-color"], colored=True), "control character in the coloured report"
        _check_markdown(out.reports["markdown"])
        assert "<script" not in out.reports["html"].split("<body>", 1)[1]
        return out.wall_s, out.cpu_s


def _watch_memory() -> None:
    """A run that passes MAX_RSS_MB is ended (a Rust allocation cannot be interrupted), naming the case."""
    page = os.sysconf("SC_PAGE_SIZE")
    while True:
        time.sleep(0.5)
        with open("/proc/self/statm") as fh:
            rss_mb = int(fh.read().split()[1]) * page >> 20
        if rss_mb > MAX_RSS_MB:
            STATS["crashes"] += 1
            STATS["failures"].append({**STATS.get("current", {}), "error": f"memory: RSS {rss_mb} MB"})
            _save()
            os.write(2, f"\naoti-trace fuzz: RSS {rss_mb} MB > {MAX_RSS_MB} MB in {STATS.get('current')}\n".encode())
            os._exit(3)


@settings(max_examples=EXAMPLES, derandomize=SEED is None, deadline=None, database=None, print_blob=True,
          suppress_health_check=list(HealthCheck))
@hypothesis_seed(SEED)
@given(case=cases)
def test_fuzz_pipeline(case, rules):
    seed, plan = case
    STATS["cases"] += 1
    described = {"seed": seed, "mutations": [[w, str(m)] for w, m in plan]}
    STATS["current"] = described
    if not _WATCHER:
        _WATCHER.append(threading.Thread(target=_watch_memory, daemon=True))
        _WATCHER[0].start()
    peak_before = _peak_rss_mb()
    try:
        wall, cpu = run_case(seed, plan, rules)
    except (Exception, CaseTimeout) as exc:  # noqa: BLE001 - every failure of a case is a finding
        STATS["crashes"] += 1
        STATS["over_limit_cpu"] += "of CPU" in str(exc)
        if len(STATS["failures"]) < 200:
            STATS["failures"].append({**described, "error": traceback.format_exception_only(exc)[-1].strip()})
        _save()
        if not KEEP_GOING:
            raise
        return
    grew = _peak_rss_mb() - peak_before
    if grew > 100:
        STATS["peak_rss_growth"] = sorted([*STATS["peak_rss_growth"], {**described, "mb": grew}],
                                          key=lambda r: -r["mb"])[:10]
    STATS["peak_rss_mb"] = _peak_rss_mb()
    STATS["max_wall_s"] = max(STATS["max_wall_s"], round(wall, 2))
    STATS["max_cpu_s"] = max(STATS["max_cpu_s"], round(cpu, 2))
    STATS["over_10s_wall"] += wall > 10
    STATS["slowest"] = sorted([*STATS["slowest"], {**described, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}],
                              key=lambda r: -r["wall_s"])[:10]
    if STATS["cases"] % 100 == 0:
        _save()


def test_fuzz_summary():
    """After the cases (file order): in keep-going mode, the run fails here if any case failed."""
    _save()
    assert STATS["crashes"] == 0, STATS["failures"][:5]

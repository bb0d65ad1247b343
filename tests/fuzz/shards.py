"""Run the fuzzing harness as N parallel shards (one pytest process per core) and merge their logs.

Each shard is ``tests/fuzz/test_fuzz.py`` in keep-going mode with its own Hypothesis seed (``--seed-base + i``) and
``--total / --shards`` examples; a shard that is stopped by ``--budget-s`` keeps the cases it finished (its log is
saved every 100 cases). The merged summary (cases, crashes, slow cases, the slowest cases, peak RSS) goes to
``--out``::

    python tests/fuzz/shards.py --total 100000 --shards 16 --out fuzz-100k.json

Standard library only; the shards need aoti-trace's dependencies and Hypothesis.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def merge(logs: list[Path]) -> dict:
    """One summary of the shards' logs (missing or unreadable logs are listed, not skipped silently)."""
    out: dict = {"shards": len(logs), "cases": 0, "crashes": 0, "over_limit_cpu": 0, "over_10s_wall": 0,
                 "max_wall_s": 0.0, "max_cpu_s": 0.0, "peak_rss_mb": 0, "failures": [], "slowest": [],
                 "missing_logs": []}
    for log in logs:
        try:
            d = json.loads(log.read_text())
        except (OSError, ValueError):
            out["missing_logs"].append(log.name)
            continue
        for key in ("cases", "crashes", "over_limit_cpu", "over_10s_wall"):
            out[key] += int(d.get(key, 0))
        for key in ("max_wall_s", "max_cpu_s", "peak_rss_mb"):
            out[key] = max(out[key], d.get(key, 0))
        out["failures"] += d.get("failures", [])
        out["slowest"] = sorted(out["slowest"] + d.get("slowest", []), key=lambda r: -r["wall_s"])[:10]
    out["failures"] = out["failures"][:200]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--total", type=int, default=100_000, help="cases over all shards")
    ap.add_argument("--shards", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed-base", type=int, default=1)
    ap.add_argument("--budget-s", type=float, default=0, help="stop the shards after this many seconds (0: no limit)")
    ap.add_argument("--logs", type=Path, default=Path("fuzz-shards"), help="folder for the shards' logs")
    ap.add_argument("--out", type=Path, default=Path("fuzz-summary.json"))
    a = ap.parse_args()
    a.logs.mkdir(parents=True, exist_ok=True)
    per = -(-a.total // a.shards)
    procs, logs = [], []
    started = time.time()
    for i in range(a.shards):
        seed = a.seed_base + i
        log = a.logs / f"shard-{seed}.json"
        logs.append(log)
        env = {**os.environ, "AOTI_TRACE_FUZZ_EXAMPLES": str(per), "AOTI_TRACE_FUZZ_KEEP_GOING": "1",
               "AOTI_TRACE_FUZZ_SEED": str(seed), "AOTI_TRACE_FUZZ_LOG": str(log.resolve())}
        with open(a.logs / f"shard-{seed}.out", "wb") as fh:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "pytest", str(HERE / "test_fuzz.py"), "-m", "fuzz", "-q", "-p", "no:cacheprovider"],
                cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True))
    while any(p.poll() is None for p in procs):
        if a.budget_s and time.time() - started > a.budget_s:
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGTERM)
            time.sleep(5)
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
            break
        time.sleep(2)
    summary = merge(logs)
    summary.update(wall_s=round(time.time() - started, 1), cpu_count=os.cpu_count(), loadavg=os.getloadavg(),
                   stopped_by_budget=bool(a.budget_s) and any(p.returncode not in (0, 1) for p in procs))
    a.out.write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: summary[k] for k in ("cases", "crashes", "over_10s_wall", "max_cpu_s", "max_wall_s",
                                               "peak_rss_mb", "wall_s")}))
    return 1 if summary["crashes"] else 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: `aoti-trace analyze --stderr` and `aoti-trace frames` on long stderr files, end to end (not a test).

    python3 bench/bench_stderr.py [--sizes 100,1024] [--repeat 1]

Builds ``bench/data/stderr_<N>MB.txt`` (git-ignored) by repeating, byte for byte, the concatenation of every real
captured stderr of the fixture cases (``fixtures/cases/*/stderr.txt``, sorted by case name, a newline added where a
file does not end with one): a traceback-dense log (56 failures every 450 KB). Each command runs in its own child
process; wall time, user + system CPU and peak RSS (``os.wait4``) of that child and the 1-minute load average
before it are printed as a markdown table.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_trace import cli, machine, run_timed  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data"


def build(size_mb: int) -> Path:
    out = DATA / f"stderr_{size_mb}MB.txt"
    if out.exists() and out.stat().st_size >= size_mb << 20:
        return out
    parts = []
    for path in sorted((ROOT / "fixtures" / "cases").glob("*/stderr.txt")):
        data = path.read_bytes()
        parts.append(data if data.endswith(b"\n") else data + b"\n")
    unit = b"".join(parts)
    DATA.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as f:
        written = 0
        while written < size_mb << 20:
            f.write(unit)
            written += len(unit)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    exe = cli()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        log = build(size)
        mb = log.stat().st_size / 1e6
        for label, cmd in (
            ("analyze --stderr", [*exe, "analyze", "--stderr", str(log), "-f", "json", "-o", os.devnull]),
            ("frames", [*exe, "frames", str(log)]),
        ):
            for _ in range(args.repeat):
                load = os.getloadavg()[0]
                wall, rss, rc, cpu = run_timed(cmd)
                rows.append((label, mb, wall, mb / wall, cpu, rss, load, rc))
                print(f"{label} {mb:.0f} MB: {wall:.1f} s, {mb / wall:.1f} MB/s, CPU {cpu:.1f} s, "
                      f"peak RSS {rss:.0f} MB, load {load:.2f}, exit {rc}", flush=True)
    print(f"\n{machine()}\n")
    print("| command | log MB | wall s | MB/s | CPU s | peak RSS MB | load avg 1 min | exit |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, mb, wall, rate, cpu, rss, load, rc in rows:
        print(f"| aoti-trace {label} | {mb:.0f} | {wall:.1f} | {rate:.1f} | {cpu:.1f} | {rss:.0f} | {load:.2f} | {rc} |")


if __name__ == "__main__":
    main()

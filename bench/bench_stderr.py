"""Benchmark: `aoti-trace analyze --stderr` and `aoti-trace frames` on long stderr files, end to end (not a test).

    python3 bench/bench_stderr.py [--sizes 100,1024] [--compositions dense,training] [--repeat 1]
                                  [--commands analyze,frames] [--compare OTHER_CHECKOUT]

Two compositions, both built only from real captured lines of this repository's fixtures (git-ignored files under
``bench/data/``):

* ``dense`` (``stderr_<N>MB.txt``): the concatenation of every real captured stderr of the fixture cases
  (``fixtures/cases/*/stderr.txt``, sorted by case name, a newline added where a file does not end with one)
  repeated byte for byte: a traceback-dense log (56 failures every 450 KB), the worst case.
* ``training`` (``training_<N>MB.txt``): a long run that is mostly ordinary output with a few failures. The
  ordinary part cycles through the ordinary lines of every captured stderr/stdout under ``fixtures/`` (cases,
  public logs, minify, ...; at most 300 per file, in file order): the lines that aoti-trace's classifier (this
  checkout's, when the file is built) calls ``plain`` or ``torch_log`` below level W, that are not blank and do
  not look like an error (``text_stream.ERROR_LOOKING``): glog INFO lines of torch, pip and launcher output,
  progress lines, CSV rows. Every :data:`FAILURE_EVERY` bytes, and at the end, one whole real failing capture is
  inserted (the next ``fixtures/cases/*/stderr.txt`` in name order that holds an error): ~20 failures per GB.

Each command runs in its own child process; wall time, user + system CPU and peak RSS (``os.wait4``) of that child
and the 1-minute load average before it are printed as a markdown table. With ``--compare DIR`` every command also
runs with the aoti-trace of the checkout ``DIR`` (before/after: e.g. the starting commit exported with ``git
archive``), right after this checkout's run and on the same log, so that both see the same load.
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


FAILURE_EVERY = 50 << 20
ORDINARY_PER_FILE = 300


def build(size_mb: int, composition: str = "dense") -> Path:
    if composition == "training":
        return build_training(size_mb)
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


def _captures() -> list[Path]:
    return sorted(p for p in (ROOT / "fixtures").glob("**/*") if p.is_file()
                  and p.name.split(".")[0] in ("stderr", "stdout") and p.suffix in (".txt", ".log"))


def build_training(size_mb: int) -> Path:
    import re

    import polars as pl

    from aoti_trace.ingest.text.lines import classify
    from aoti_trace.ingest.text.stream import ERROR_LOOKING

    out = DATA / f"training_{size_mb}MB.txt"
    if out.exists() and out.stat().st_size >= size_mb << 20:
        return out
    pool = []
    for path in _captures():
        lines = path.read_text(errors="replace").splitlines()
        kinds = classify(lines, "stderr", "", "").select(
            (pl.col("kind").is_in(("plain", "torch_log")) & ~pl.col("level").is_in(("W", "E", "F", "C")).fill_null(False)
             & ~pl.col("text").str.contains(ERROR_LOOKING) & (pl.col("text").str.strip_chars() != "")).alias("ok"))
        kept = [ln for ln, ok in zip(lines, kinds.get_column("ok")) if ok]
        pool.extend(kept[:ORDINARY_PER_FILE])
    ordinary = ("\n".join(pool) + "\n").encode()
    failures = []
    for path in sorted((ROOT / "fixtures" / "cases").glob("*/stderr.txt")):
        data = path.read_bytes()
        if re.search(rb"Traceback|Error|error:", data):
            failures.append(data if data.endswith(b"\n") else data + b"\n")
    DATA.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as f:
        written = since = k = 0
        while written < size_mb << 20:
            f.write(ordinary)
            written += len(ordinary)
            since += len(ordinary)
            if since >= FAILURE_EVERY:
                f.write(failures[k % len(failures)])
                written += len(failures[k % len(failures)])
                since, k = 0, k + 1
        f.write(failures[k % len(failures)])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--compositions", default="dense,training")
    ap.add_argument("--commands", default="analyze,frames")
    ap.add_argument("--compare", type=Path, help="another checkout, run after this one on every log")
    args = ap.parse_args()
    exe = cli()
    here = os.environ["PYTHONPATH"]
    codes = [("this", here)] + ([(args.compare.name, str(args.compare.resolve()))] if args.compare else [])
    rows = []
    sys.path.insert(0, str(ROOT))
    commands = args.commands.split(",")
    for size, comp in ((int(s), c) for s in args.sizes.split(",") for c in args.compositions.split(",")):
        log = build(size, comp)
        mb = log.stat().st_size / 1e6
        for label, cmd in (
            ("analyze --stderr", [*exe, "analyze", "--stderr", str(log), "-f", "json", "-o", os.devnull]),
            ("frames", [*exe, "frames", str(log)]),
        ):
            if label.split()[0] not in commands:
                continue
            for _ in range(args.repeat):
                for code, pythonpath in codes:
                    os.environ["PYTHONPATH"] = pythonpath
                    load = os.getloadavg()[0]
                    wall, rss, rc, cpu = run_timed(cmd)
                    rows.append((comp, label, code, mb, wall, mb / wall, cpu, rss, load, rc))
                    print(f"{comp} {label} ({code}) {mb:.0f} MB: {wall:.1f} s, {mb / wall:.1f} MB/s, CPU {cpu:.1f} s, "
                          f"peak RSS {rss:.0f} MB, load {load:.2f}, exit {rc}", flush=True)
    os.environ["PYTHONPATH"] = here
    print(f"\n{machine()}\n")
    print("| composition | command | code | log MB | wall s | MB/s | CPU s | MB per CPU s | peak RSS MB "
          "| load avg 1 min | exit |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for comp, label, code, mb, wall, rate, cpu, rss, load, rc in rows:
        print(f"| {comp} | aoti-trace {label} | {code} | {mb:.0f} | {wall:.1f} | {rate:.1f} | {cpu:.1f} "
              f"| {mb / cpu:.0f} | {rss:.0f} | {load:.2f} | {rc} |")


if __name__ == "__main__":
    main()

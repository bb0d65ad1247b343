"""Benchmark: aoti-trace's read_trace against tlparse on large valid TORCH_TRACE logs (not a test).

    python3 bench/bench_trace.py [--sizes 100,1000] [--repeat 3] [--skip-tlparse]

1. Builds ``bench/data/trace_<N>MB/dedicated_log_torch_trace_bench.log`` (git-ignored) by replicating the records of
   the real fixture traces (fixtures/cases/*/trace, fixtures/traces/*/trace) round-robin (trace-format.md §10.1):
   the ``str`` tables of all seeds are merged into one table written once at the top, stack ``filename`` ids are
   remapped to it, ``frame_id`` is offset per replica, payloads are copied byte for byte (every MD5 stays valid).
   Timestamps are copied unchanged (not shifted).
2. Times, each in its own subprocess (wall clock; peak RSS from ``os.wait4`` rusage of that child):
   ``read_trace`` (default mode, i.e. the cheap MD5 check above 64 MB), ``read_trace(verify=True)`` (every payload
   MD5 + header JSON) on the 100 MB log only, and ``tlparse --no-browser --overwrite -o DIR`` (output dir removed
   before timing).
   Each variant runs ``--repeat`` times (the machine is shared: the 1-minute load average is recorded before every
   run); user + system CPU seconds of the child are recorded too (less sensitive to load than wall time).
3. Prints every run, then a markdown table of the best run (lowest wall time) per variant, with machine facts and
   load averages, to paste into bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data"
FILENAME_RE = re.compile(rb'"filename": (\d+)')
FRAME_RE = re.compile(rb'"frame_id": (\d+)')
STR_RE = re.compile(rb'\{"str": \[(".*"), (\d+)\]\}$')


def seeds() -> list[Path]:
    return sorted(ROOT.glob("fixtures/cases/*/trace/dedicated_log_torch_trace_*.log")) + sorted(
        ROOT.glob("fixtures/traces/*/trace/dedicated_log_torch_trace_*.log"))


def split_records(data: bytes) -> list[tuple[bytes, bytes]]:
    """(header line, payload lines) pairs, newlines included."""
    recs: list[tuple[bytes, bytes]] = []
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for line in lines:
        if line.startswith(b"\t") and recs:
            h, p = recs[-1]
            recs[-1] = (h, p + line + b"\n")
        elif line:
            recs.append((line + b"\n", b""))
    return recs


def build_log(target_mb: int, sources: list[Path] | None = None, keep=None, name: str = "trace") -> Path:
    """``bench/data/<name>_<N>MB/``: the records of ``sources`` (default: every fixture trace) replicated up to
    ``target_mb``; ``keep(header, payload)`` selects the records to replicate (default: all; the ``str`` table
    records are always merged)."""
    out_dir = DATA / f"{name}_{target_mb}MB"
    out = out_dir / "dedicated_log_torch_trace_bench.log"
    if out.exists() and out.stat().st_size >= target_mb * 1_000_000:
        return out
    out_dir.mkdir(parents=True, exist_ok=True)
    table: dict[bytes, int] = {}  # quoted path -> global id
    str_lines: list[bytes] = []
    bodies: list[list[tuple[bytes, bytes, bool]]] = []  # per seed: (header, payload, has_frame_id)
    for seed in sources if sources is not None else seeds():
        local: dict[int, int] = {}
        body = []
        for header, payload in split_records(seed.read_bytes()):
            m = STR_RE.search(header.rstrip(b"\n"))
            if m:
                path = m[1]
                if path not in table:
                    table[path] = len(table)
                    prefix = header[: header.index(b"] {") + 2]
                    str_lines.append(prefix + b'{"str": [' + path + b", " + str(table[path]).encode() + b"]}\n")
                local[int(m[2])] = table[path]
                continue
            if b'"filename": ' in header:
                header = FILENAME_RE.sub(lambda mm: b'"filename": ' + str(local.get(int(mm[1]), int(mm[1]))).encode(),
                                         header)
            if keep is None or keep(header, payload):
                body.append((header, payload, b'"frame_id": ' in header))
        if body:
            bodies.append(body)
    size = 0
    with open(out, "wb") as fh:
        for line in str_lines:
            fh.write(line)
            size += len(line)
        replica = 0
        while size < target_mb * 1_000_000:
            for body in bodies:
                off = replica * 1000
                for header, payload, has_fid in body:
                    if has_fid:
                        header = FRAME_RE.sub(lambda mm: b'"frame_id": ' + str(int(mm[1]) + off).encode(), header)
                    fh.write(header)
                    fh.write(payload)
                    size += len(header) + len(payload)
            replica += 1
    return out


def run_timed(cmd: list[str]) -> tuple[float, float, int, float]:
    """(wall s, peak RSS MB, exit code, user + system CPU s) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        sys.stderr.write(proc.stderr.read().decode(errors="replace")[-2000:])
    return wall, usage.ru_maxrss / 1024, proc.returncode, usage.ru_utime + usage.ru_stime


def aoti_cmd(log: Path, verify: str) -> list[str]:
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "from pathlib import Path\n"
        "from aoti_trace.ingest.trace.reader import read_trace\n"
        "f = read_trace([Path(%r)], 'bench', verify=%s)\n"
        "print({n: f[n].height for n in ('events','compiles','artifacts','stacks','damage')})\n"
        "assert f['damage'].is_empty(), f['damage']\n"
    ) % (str(ROOT), str(log), verify)
    return [sys.executable, "-c", code]


def cli() -> list[str]:
    """The command line that runs this checkout's aoti-trace (not an installed one): ``python -m aoti_trace`` with
    the repository first on ``PYTHONPATH`` (set in ``os.environ``, so every child process inherits it)."""
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return [sys.executable, "-m", "aoti_trace"]


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown")
    return f"nproc {os.cpu_count()}, {model}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-tlparse", action="store_true")
    args = ap.parse_args()
    rows = []
    for mb in [int(s) for s in args.sizes.split(",")]:
        log = build_log(mb)
        size_mb = log.stat().st_size / 1e6
        variants = [("aoti-trace read_trace (default)", aoti_cmd(log, "None"))]
        if mb <= 100:
            variants.append(("aoti-trace read_trace(verify=True)", aoti_cmd(log, "True")))
        if not args.skip_tlparse and shutil.which("tlparse"):
            variants.append(("tlparse 0.4.3 (default)", ["tlparse", str(log), "--no-browser", "--overwrite", "-o",
                                                          str(DATA / "tl_out")]))
        for name, cmd in variants:
            for _ in range(args.repeat):
                shutil.rmtree(DATA / "tl_out", ignore_errors=True)
                load = os.getloadavg()[0]
                wall, rss, rc, cpu = run_timed(cmd)
                rows.append((name, size_mb, wall, size_mb / wall, rss, load, rc, cpu))
                print(f"{name:38} {size_mb:8.1f} MB {wall:7.2f} s {size_mb / wall:7.1f} MB/s {rss:7.0f} MB "
                      f"cpu {cpu:6.2f} s load {load:.2f} rc {rc}", flush=True)
        shutil.rmtree(DATA / "tl_out", ignore_errors=True)
    print(f"\n{dt.datetime.now().isoformat(timespec='minutes')}; {machine()}\n")
    print(f"best of {args.repeat} (lowest wall time); all runs: wall range, peak RSS range, load range\n")
    print("| tool | log MB | wall s (best) | MB/s (best) | CPU s (best run) | peak RSS MB (best run; max) | "
          "load avg 1 min (best run; range) | all walls s | exit |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    groups: dict[tuple, list] = {}
    for row in rows:
        groups.setdefault((row[0], row[1]), []).append(row)
    for (name, size_mb), runs in groups.items():
        best = min(runs, key=lambda r: r[2])
        loads = [r[5] for r in runs]
        print(f"| {name} | {size_mb:.1f} | {best[2]:.2f} | {best[3]:.1f} | {best[7]:.2f} | {best[4]:.0f}; "
              f"{max(r[4] for r in runs):.0f} | {best[5]:.2f}; {min(loads):.2f}-{max(loads):.2f} | "
              f"{', '.join(f'{r[2]:.2f}' for r in runs)} | {max(r[6] for r in runs)} |")


if __name__ == "__main__":
    main()

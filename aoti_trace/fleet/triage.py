"""Triage many runs at once: analyse each run on its own, reduce its findings to signatures, count them.

Pipeline (``triage()``):

1. **find runs** below the roots with :func:`aoti_trace.discover.discover`: every capture folder, CI log folder or
   rank log folder is one run;
2. **analyse each run independently** with :func:`analyse_batch` (frames -> rules -> findings; the rules are loaded
   once per worker process and kept in a module global), on one of two engines:

   * ``local``: a :class:`concurrent.futures.ProcessPoolExecutor` whose initializer loads the rules (``jobs=1``
     runs in this process); a rich progress bar on stderr when it is a terminal;
   * ``ray``: the same function as Ray tasks (``ray.remote``), on the cluster at ``address`` / ``RAY_ADDRESS``,
     else a local Ray instance. The inputs must be on a file system every worker reads at the same path.

   Runs travel in batches (``BATCH`` runs per task) so that the scheduling cost is paid per batch, not per run.
3. **per-run frames**: ``runs`` (one row per run: host, model, rank, start time, exit code, primary rule, analysis
   error) and ``findings`` (one row per finding, with its signature: :mod:`aoti_trace.fleet.signatures`);
4. **the signature table** (:func:`signature_table`): per signature, runs affected, share of all runs, runs where it
   was the primary finding, first/last seen, hosts/models/ranks affected, one example run and the remedy;
   optionally compared with an earlier table (:func:`compare`, ``--since``).

Where a run's host, model and rank come from: ``key=value`` folders in its path (``host=h01/model=resnet/...``, the
Hive-partition convention Polars and DuckDB read), else the manifest (``host``/``hostname``, ``model``,
``env.RANK``; ``environment.hostname``), else torchrun's ``attempt_N/<rank>/`` folders for the rank.
The start time is the manifest's ``started_at``, else the newest modification time of the run's files.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, cast

import polars as pl

from aoti_trace.discover import RunInputs, discover
from aoti_trace.model.errors import InputError
from aoti_trace.fleet.signatures import KEY_COLUMNS, add_signatures
from aoti_trace.model.ranks import rank_ranges

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

    from aoti_trace.model.findings import Finding
    from rich.console import Console
    from rich.progress import Progress

ENGINES = ("local", "ray")
BATCH = 32
SIGNATURE_SEVERITIES = ("error", "warning")  # info findings describe, they do not fail a run

RUN_SCHEMA: dict[str, PolarsDataType] = {
    "run_id": pl.Utf8, "root": pl.Utf8, "host": pl.Utf8, "model": pl.Utf8, "rank": pl.Int32,
    "started": pl.Datetime("us", "UTC"), "exit_code": pl.Int32, "findings": pl.Int32, "primary_rule": pl.Utf8,
    "error": pl.Utf8,
}
FINDING_SCHEMA: dict[str, PolarsDataType] = {
    "run_id": pl.Utf8, "rule_id": pl.Utf8, "rule_name": pl.Utf8, "family": pl.Utf8, "severity": pl.Utf8,
    "primary": pl.Boolean, "title": pl.Utf8, "message": pl.Utf8, "remedy": pl.Utf8, "kernel": pl.Utf8,
    "op": pl.Utf8, "exc_type": pl.Utf8, "evidence": pl.Utf8, "ranks": pl.List(pl.Int32), "first_rank": pl.Int32,
}

_RULES: Any = None  # the worker's rule set (loaded once per process by init_worker)


def init_worker(rules_path: str | tuple[Any, ...] | None = None) -> None:
    """Load the rules into this process (ProcessPoolExecutor initializer; called lazily on Ray workers).
    ``rules_path``: None (the built-in library), a rules folder, or ``(folders, builtin)`` as the CLI's repeatable
    ``--rules`` / ``--no-builtin-rules`` give it (:func:`aoti_trace.library.loader.load_library`)."""
    global _RULES
    from aoti_trace import library

    if isinstance(rules_path, tuple):
        from aoti_trace.library.loader import load_library

        folders, builtin = rules_path
        _RULES = (rules_path, load_library(list(folders), builtin=builtin))
    else:
        _RULES = (rules_path, library.load_rules(rules_path))


def _rules(rules_path: str | tuple[Any, ...] | None) -> Any:
    if _RULES is None or _RULES[0] != rules_path:
        init_worker(rules_path)
    return _RULES[1]


# ---------------------------------------------------------------------------------------------- one run


def analyse_batch(runs: list[RunInputs], rules_path: str | tuple[Any, ...] | None = None) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Per run of ``runs``: its row for the ``runs`` frame and its findings' rows (the unit of work of both engines).

    The batch is parsed into one set of frames keyed by ``run_id`` and evaluated in one pass of the rules (the
    engine computes every finding from its own run's rows; only the choice of the primary is global there, so it
    is made again per run here, with the engine's own criterion: the first error, else the first warning whose
    role is cause, in rank order). ``tests/fleet/test_fleet.py`` checks that this equals analysing each run alone.
    Never raises for a bad run: if the batch fails, each run is analysed alone and the one that fails gets its
    error in the ``error`` column.
    """
    try:
        return _analyse(runs, rules_path)
    except Exception:
        if len(runs) == 1:
            exc = sys.exc_info()[1]
            return [({**run_facts(runs[0]), "findings": 0, "primary_rule": None, "exit_code": None,
                      "error": f"{type(exc).__name__}: {exc}"[:500]}, [])]
        return [r for run in runs for r in analyse_batch([run], rules_path)]


def analyse_run(run: RunInputs, rules_path: str | tuple[Any, ...] | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One run alone (:func:`analyse_batch` of one run)."""
    return analyse_batch([run], rules_path)[0]


def _analyse(runs: list[RunInputs], rules_path: str | tuple[Any, ...] | None) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    from aoti_trace import engine
    from aoti_trace.pipeline import build_frames

    # this process is already one of the engine's workers: its traces are read here, not on a pool of its own
    frames = build_frames(runs, processes=1)
    findings = engine.evaluate(_rules(rules_path), frames)
    proc = frames["process"].filter(pl.col("exit_code").is_not_null())
    codes = dict(zip(proc["run_id"].to_list(), proc["exit_code"].to_list()))
    by_run: dict[str, list[Finding]] = {r.run_id: [] for r in runs}
    for f in findings:
        by_run[f.run_id].append(f)
    out = []
    for run in runs:
        facts = run_facts(run)
        rows, primary = [], None
        for f in by_run[run.run_id]:
            is_primary = primary is None and (f.severity == "error" or (f.severity == "warning" and f.role == "cause"))
            if is_primary:
                primary = f.rule_id
            ranks = sorted(getattr(f, "ranks", None) or ([facts["rank"]] if facts["rank"] is not None else []))
            first = getattr(f, "first_rank", None)
            ev = f.evidence[0] if f.evidence else None
            rows.append({
                "run_id": run.run_id, "rule_id": f.rule_id, "rule_name": f.rule_name, "family": f.family,
                "severity": f.severity, "primary": is_primary, "title": f.title, "message": f.message,
                "remedy": f.remedy.strip().split("\n\n")[0], "kernel": f.fields.get("kernel"),
                "op": f.fields.get("op"), "exc_type": f.fields.get("exc_type"),
                "evidence": (ev.text.split("\n")[0][:400] if ev is not None else None),
                "ranks": ranks, "first_rank": first if first is not None else (ranks[0] if ranks else None),
            })
        out.append(({**facts, "findings": len(rows), "primary_rule": primary,
                     "exit_code": codes.get(run.run_id), "error": None}, rows))
    return out


def _hive(parts: Iterable[str]) -> dict[str, str]:
    out = {}
    for p in parts:
        k, sep, v = p.partition("=")
        if sep and k in ("host", "model", "rank") and v:
            out[k] = v
    return out


def _int(v: Any) -> int | None:
    try:
        return int(str(v).strip())
    except (TypeError, ValueError):
        return None


def run_facts(run: RunInputs) -> dict[str, Any]:
    """Host, model, rank and start time of a run (see the module docstring for where each comes from)."""
    root = run.root if run.root is not None else Path(run.run_id)
    parts = Path(run.run_id).parts + tuple(root.parts)
    hive = _hive(parts)
    man = _manifest(run.manifest)
    # dict.get() twice: the isinstance() check does not narrow the second call's result
    env = cast("dict[str, Any]", man.get("env") if isinstance(man.get("env"), dict) else {})
    environment = cast("dict[str, Any]", man.get("environment") if isinstance(man.get("environment"), dict) else {})
    rank = _int(hive.get("rank"))
    if rank is None:
        rank = _int(env.get("RANK"))
    if rank is None:
        rank = torchrun_rank(root)
    host = hive.get("host") or man.get("host") or man.get("hostname") or environment.get("hostname")
    model = hive.get("model") or man.get("model")
    return {"run_id": run.run_id, "root": str(root), "host": _str(host), "model": _str(model), "rank": rank,
            "started": _started(man, run)}


def torchrun_rank(path: Path) -> int | None:
    """The rank of a torchrun log folder ``.../attempt_N/<rank>/`` (``torchrun --log-dir``), else None."""
    if path.parent.name.startswith("attempt_") and path.name.isdigit():
        return int(path.name)
    return None


def _str(v: Any) -> str | None:
    return str(v) if v not in (None, "") else None


def _manifest(path: Path | None) -> dict[str, Any]:
    if path is None or path.name != "manifest.json":
        return {}
    from aoti_trace.ingest import safe_json

    try:
        with path.open("rb") as fh:
            data = safe_json.loads(fh.read(1 << 20))
    except (OSError, ValueError):
        return {}  # the run's own analysis reports a bad manifest as damage
    return data if isinstance(data, dict) else {}


def _started(man: dict[str, Any], run: RunInputs) -> datetime | None:
    raw = man.get("started_at")
    if isinstance(raw, str):
        try:
            return datetime.strptime(raw, "%Y-%m-%dT%H:%M:%S%z").astimezone(timezone.utc)
        except ValueError:
            pass
    files = [*run.trace_files, *run.stderr, *run.stdout, *run.packages] + ([run.manifest] if run.manifest else [])
    times = []
    for f in files:
        try:
            times.append(f.stat().st_mtime)
        except OSError:
            continue
    return datetime.fromtimestamp(max(times), timezone.utc) if times else None


# ---------------------------------------------------------------------------------------------- engines


@dataclass
class Triage:
    """The result of a triage: per-run and per-finding frames, and the signature table."""

    runs: pl.DataFrame
    findings: pl.DataFrame
    signatures: pl.DataFrame
    engine: str = "local"
    workers: int = 1
    seconds: float = 0.0
    roots: list[str] = field(default_factory=list)


def find_runs(roots: list[str | Path]) -> list[RunInputs]:
    """Every run below the roots (discovery), in a stable order."""
    runs: list[RunInputs] = []
    for root in roots:
        found = discover([root])
        base = Path(root)
        for r in found:
            if len(roots) > 1:  # keep run ids unique across roots
                r.run_id = str(base / r.run_id) if r.run_id != base.name else str(base)
        runs += [r for r in found if not r.is_empty()]
    return sorted(runs, key=lambda r: r.run_id)


def _batches(runs: list[RunInputs], workers: int) -> list[list[RunInputs]]:
    """At most ``BATCH`` runs per batch, and at least four batches per worker when there are enough runs."""
    size = max(1, min(BATCH, -(-len(runs) // (4 * max(workers, 1)))))
    return [runs[i:i + size] for i in range(0, len(runs), size)]


def run_local(runs: list[RunInputs], jobs: int, rules_path: str | tuple[Any, ...] | None = None,
              progress: bool = False) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Analyse ``runs`` with ``jobs`` worker processes (1: in this process)."""
    batches = _batches(runs, jobs)
    results: list[list[tuple[dict[str, Any], list[dict[str, Any]]]] | None] = [None] * len(batches)
    with _progress(len(runs), progress) as advance:
        if jobs <= 1:
            init_worker(rules_path)
            for i, b in enumerate(batches):
                results[i] = analyse_batch(b, rules_path)
                advance(len(b))
        else:
            # spawn, not fork: a forked child of a process whose Polars thread pool is running can deadlock
            ctx = multiprocessing.get_context("spawn")
            # one Polars thread per worker (the workers already use the cores; as aoti_trace.ingest.parallel does): the
            # workers inherit the environment (an explicit POLARS_MAX_THREADS is kept)
            from aoti_trace.ingest.parallel import POLARS_THREADS_ENV

            saved = os.environ.get(POLARS_THREADS_ENV)
            os.environ.setdefault(POLARS_THREADS_ENV, "1")
            try:
                with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=init_worker,
                                         initargs=(rules_path,)) as pool:
                    futures = {pool.submit(analyse_batch, b, rules_path): i for i, b in enumerate(batches)}
                    for fut in as_completed(futures):
                        i = futures[fut]
                        results[i] = fut.result()
                        advance(len(batches[i]))
            finally:
                if saved is None:
                    os.environ.pop(POLARS_THREADS_ENV, None)
    return [r for batch in results for r in (batch or [])]


def run_ray(runs: list[RunInputs], address: str | None = None, rules_path: str | tuple[Any, ...] | None = None,
            progress: bool = False) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Analyse ``runs`` as Ray tasks on the cluster at ``address`` (``auto``, ``ray://...``; default
    ``RAY_ADDRESS``, else a local Ray instance). Uses the Ray session already initialised, if any."""
    try:
        import ray
    except ImportError:
        raise InputError("--engine ray needs Ray: pip install 'aoti-trace[ray]'") from None
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        address = address or os.environ.get("RAY_ADDRESS")
        if address:
            kwargs["address"] = address
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:  # no cluster there, a bad address
            raise InputError(f"cannot start or reach Ray at {address or 'a new local instance'}: "
                             f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}") from None
    task = ray.remote(analyse_batch)
    batches = _batches(runs, int(ray.cluster_resources().get("CPU", 1)))
    refs = [task.remote(b, rules_path) for b in batches]
    index = {ref: i for i, ref in enumerate(refs)}
    results: list[list[tuple[dict[str, Any], list[dict[str, Any]]]] | None] = [None] * len(batches)
    pending = list(refs)
    with _progress(len(runs), progress) as advance:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                i = index[ref]
                results[i] = ray.get(ref)
                advance(len(batches[i]))
    return [r for batch in results for r in (batch or [])]


class _progress:
    """A rich progress bar on stderr when ``show``; otherwise a no-op. Used as ``with _progress(n, show) as adv``."""

    bar: Progress | None

    def __init__(self, total: int, show: bool):
        self.total, self.show, self.bar = total, show, None

    def __enter__(self) -> Callable[[int], None]:
        if not self.show:
            return lambda n: None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        bar = self.bar = Progress("triage", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), transient=True,
                                  console=_stderr_console())
        bar.start()
        task = bar.add_task("runs", total=self.total)
        return lambda n: bar.advance(task, n)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


def _stderr_console() -> Console:
    from rich.console import Console

    return Console(file=sys.stderr)


# ---------------------------------------------------------------------------------------------- tables


def triage(roots: list[str | Path], *, engine: str = "local", jobs: int | None = None, address: str | None = None,
           rules_path: str | Path | tuple[Any, ...] | None = None, progress: bool = False) -> Triage:
    """Find the runs below ``roots``, analyse each, and build the frames and the signature table."""
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}: use one of {', '.join(ENGINES)}")
    if rules_path is not None and not isinstance(rules_path, tuple):
        rules_path = str(rules_path)
    if rules_path is not None:  # a bad rule file is a user error: report it once, here, not in every worker
        init_worker(rules_path)
    runs = find_runs(roots)
    if not runs:
        raise InputError(f"no runs found under {', '.join(map(str, roots))}")
    start = time.perf_counter()
    if engine == "ray":
        results = run_ray(runs, address, rules_path, progress)
        workers = 0
    else:
        workers = jobs or min(len(os.sched_getaffinity(0)), 32)
        results = run_local(runs, workers, rules_path, progress)
    seconds = time.perf_counter() - start
    run_df, find_df = frames_of(results)
    if engine == "ray":
        import ray

        workers = int(ray.cluster_resources().get("CPU", 0))
    return Triage(run_df, find_df, signature_table(find_df, run_df), engine, workers, seconds,
                  [str(r) for r in roots])


def frames_of(results: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The ``runs`` and ``findings`` frames from the per-run results (findings with signature columns)."""
    runs = pl.DataFrame([r for r, _ in results], schema=RUN_SCHEMA, orient="row" if not results else None) \
        if results else pl.DataFrame(schema=RUN_SCHEMA)
    rows = [f for _, fs in results for f in fs]
    findings = pl.DataFrame(rows, schema=FINDING_SCHEMA) if rows else pl.DataFrame(schema=FINDING_SCHEMA)
    findings = add_signatures(findings)
    return runs.sort("run_id"), findings.sort("run_id", "rule_id", "message")


def signature_table(findings: pl.DataFrame, runs: pl.DataFrame) -> pl.DataFrame:
    """One row per signature of error/warning findings: most runs where it is the primary finding first, then most
    runs (see the module docstring)."""
    total = max(runs.height, 1)
    f = findings.filter(pl.col("severity").is_in(SIGNATURE_SEVERITIES)).join(
        runs.select("run_id", "host", "model", "rank", "started"), on="run_id", how="left")
    if f.is_empty():
        return pl.DataFrame(schema={"signature": pl.Utf8, "runs": pl.UInt32, "share": pl.Float64})
    f = f.with_columns(
        pl.when(pl.col("ranks").list.len() > 0).then(pl.col("ranks"))
        .otherwise(pl.concat_list(pl.col("rank"))).alias("ranks"))
    example = pl.col("run_id").sort_by(["started", "run_id"], nulls_last=True).first()
    table = f.group_by("signature").agg(
        *(pl.col(c).first() for c in ("rule_id", "family", "severity", *KEY_COLUMNS[1:])),
        pl.col("run_id").n_unique().alias("runs"),
        pl.col("run_id").filter(pl.col("primary")).n_unique().alias("primary"),
        pl.col("started").min().alias("first_seen"),
        pl.col("started").max().alias("last_seen"),
        pl.col("host").drop_nulls().n_unique().alias("hosts"),
        pl.col("model").drop_nulls().n_unique().alias("models"),
        pl.col("ranks").list.explode(keep_nulls=False, empty_as_null=False).drop_nulls().unique().sort().alias("rank_set"),
        example.alias("example_run"),
        pl.col("title").sort_by("run_id").first(),
        pl.col("remedy").sort_by("run_id").first(),
    )
    table = table.with_columns(
        (pl.col("runs") / total).alias("share"),
        pl.col("rank_set").map_elements(lambda s: rank_ranges(list(s)), return_dtype=pl.Utf8).alias("ranks"),
    ).drop("rank_set")
    order = ["signature", "runs", "share", "primary", "rule_id", "family", "severity", "kernel", "op", "exc_type",
             "template", "first_seen", "last_seen", "hosts", "models", "ranks", "example_run", "title", "remedy"]
    return table.select(order).sort(["primary", "runs", "signature"], descending=[True, True, False])


def compare(current: pl.DataFrame, previous: pl.DataFrame) -> pl.DataFrame:
    """``current`` with ``previous_runs`` and ``change`` (new | gone | changed | same); signatures only in
    ``previous`` are appended with 0 runs and change ``gone``."""
    if "signature" not in previous.columns or "runs" not in previous.columns:
        raise InputError("--since: not a signature table (no 'signature' and 'runs' columns); give the "
                         "signatures.parquet written by an earlier `aoti-trace triage -o DIR`")
    prev = previous.select("signature", pl.col("runs").cast(pl.UInt32).alias("previous_runs"))
    cur = current.join(prev, on="signature", how="left")
    gone = previous.join(current.select("signature"), on="signature", how="anti")
    if not gone.is_empty():
        keep = [c for c in current.columns if c in gone.columns and c not in ("runs", "share", "primary")]
        gone = gone.select(*keep, pl.col("runs").cast(pl.UInt32).alias("previous_runs")).with_columns(
            pl.lit(0, pl.UInt32).alias("runs"), pl.lit(0.0).alias("share"), pl.lit(0, pl.UInt32).alias("primary"))
        cur = pl.concat([cur, gone], how="diagonal_relaxed")
    change = (pl.when(pl.col("previous_runs").is_null()).then(pl.lit("new"))
              .when(pl.col("runs") == 0).then(pl.lit("gone"))
              .when(pl.col("runs") != pl.col("previous_runs")).then(pl.lit("changed"))
              .otherwise(pl.lit("same")))
    return cur.with_columns(change.alias("change"))


def write(result: Triage, out: str | Path) -> list[Path]:
    """Write ``runs.parquet``, ``findings.parquet`` and ``signatures.parquet`` into ``out``."""
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create {out}: {exc.strerror}") from None
    paths = []
    for name, df in (("runs", result.runs), ("findings", result.findings), ("signatures", result.signatures)):
        p = out / f"{name}.parquet"
        df.write_parquet(p)
        paths.append(p)
    return paths


def read_previous(path: str | Path) -> pl.DataFrame:
    """An earlier signature table (``signatures.parquet``), for :func:`compare`."""
    p = Path(path)
    if p.is_dir():
        p = p / "signatures.parquet"
    try:
        return pl.read_parquet(p)
    except FileNotFoundError:
        raise InputError(f"--since: no such file: {p}") from None
    except Exception as exc:  # polars raises its own errors for a file that is not Parquet
        raise InputError(f"--since: cannot read {p} as Parquet: {str(exc).splitlines()[0]}") from None

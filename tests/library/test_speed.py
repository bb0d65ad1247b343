"""Start-up: the on-disk rule-set cache and lazy imports (issue 12). Behaviour only; timings live in bench/."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aoti_trace.library import cache
from aoti_trace.library.loader import default_rules_dir, load_rules
from aoti_trace.model.errors import RuleError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def rules_copy(tmp_path: Path) -> Path:
    """A private copy of two rule families plus the fragments and ignore list (editable by the test)."""
    src = default_rules_dir()
    dst = tmp_path / "rules"
    dst.mkdir()
    for name in ("fragments.yaml", "ignore.yaml"):
        shutil.copy(src / name, dst / name)
    for family in ("out_of_memory", "segfault"):
        shutil.copytree(src / family, dst / family)
    return dst


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "cache"
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(where))
    monkeypatch.delenv(cache.NO_CACHE_ENV, raising=False)
    monkeypatch.setattr(cache, "_MEMO", {})
    return where


def _entries(where: Path) -> list[Path]:
    return sorted(where.glob("rules-*.pickle")) if where.is_dir() else []


def _ids(rs) -> list[str]:
    return [r.id for r in rs]


def test_second_load_comes_from_the_cache_and_equals_the_first(rules_copy, cache_dir, monkeypatch):
    first = load_rules(rules_copy)
    assert len(_entries(cache_dir)) == 1
    import aoti_trace.library.loader as loader

    def fail(*_a, **_k):
        raise AssertionError("parsed YAML although the cache holds the rule set")

    monkeypatch.setattr(loader, "_load_rules", fail)
    cache._MEMO.clear()  # a new process: from the disk entry
    second = load_rules(rules_copy)
    assert _ids(second) == _ids(first) and len(first) > 0
    assert second.rules == first.rules
    assert second.paths == first.paths and second.ignore == first.ignore and second.fragments == first.fragments


def test_editing_a_rule_file_makes_a_new_entry(rules_copy, cache_dir):
    before = load_rules(rules_copy)
    rule = sorted((rules_copy / "segfault").glob("*.yaml"))[0]
    text = rule.read_text()
    rule.write_text(text.replace("title: ", "title: EDITED ", 1))
    after = load_rules(rules_copy)
    assert len(_entries(cache_dir)) == 2
    changed = [r for r in after if r.title.startswith("EDITED ")]
    assert len(changed) == 1 and not any(r.title.startswith("EDITED ") for r in before)


def test_a_corrupt_entry_is_ignored_and_rewritten(rules_copy, cache_dir):
    good = load_rules(rules_copy)
    (entry,) = _entries(cache_dir)
    for garbage in (b"", b"not a pickle", entry.read_bytes()[: 40]):
        entry.write_bytes(garbage)
        cache._MEMO.clear()  # a new process
        again = load_rules(rules_copy)
        assert _ids(again) == _ids(good)
        assert entry.read_bytes() not in (b"", b"not a pickle") and len(entry.read_bytes()) > 40


def test_an_entry_of_another_type_is_not_trusted(rules_copy, cache_dir):
    import pickle

    good = load_rules(rules_copy)
    (entry,) = _entries(cache_dir)
    entry.write_bytes(pickle.dumps({"rules": []}))
    cache._MEMO.clear()
    assert _ids(load_rules(rules_copy)) == _ids(good)


def test_disabled_cache_writes_nothing(rules_copy, cache_dir, monkeypatch):
    monkeypatch.setenv(cache.NO_CACHE_ENV, "1")
    assert cache.cache_dir() is None
    assert len(load_rules(rules_copy)) > 0
    assert not cache_dir.exists()


def test_within_a_process_the_same_rules_load_once(rules_copy, cache_dir):
    first = load_rules(rules_copy)
    assert load_rules(rules_copy) is first
    rule = sorted((rules_copy / "segfault").glob("*.yaml"))[0]
    rule.write_text(rule.read_text().replace("title: ", "title: EDITED ", 1))
    assert load_rules(rules_copy) is not first


def test_an_unwritable_cache_folder_is_not_an_error(rules_copy, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(blocker / "sub"))
    monkeypatch.delenv(cache.NO_CACHE_ENV, raising=False)
    assert len(load_rules(rules_copy)) > 0


def test_rule_errors_are_reported_and_not_cached(rules_copy, cache_dir):
    bad = rules_copy / "segfault" / "broken.yaml"
    bad.write_text("id: [unclosed\n")
    with pytest.raises(RuleError, match=r"broken\.yaml:\d+:\d+: invalid YAML"):
        load_rules(rules_copy)
    assert _entries(cache_dir) == []
    with pytest.raises(RuleError):  # and again: nothing was cached in between
        load_rules(rules_copy)


def test_key_depends_on_content_not_on_modification_time(rules_copy):
    key = cache.rules_key([rules_copy])
    for path in rules_copy.rglob("*.yaml"):
        path.touch()
    assert cache.rules_key([rules_copy]) == key
    (rules_copy / "fragments.yaml").write_text((rules_copy / "fragments.yaml").read_text() + "\n# comment\n")
    assert cache.rules_key([rules_copy]) != key


def test_old_entries_are_pruned(rules_copy, cache_dir):
    cache_dir.mkdir()
    for i in range(cache.KEEP + 5):
        (cache_dir / f"rules-old{i:02}.pickle").write_bytes(b"x")
    load_rules(rules_copy)
    assert len(_entries(cache_dir)) == cache.KEEP


def test_help_does_not_import_polars_pydantic_or_yaml():
    code = (
        "import sys\n"
        "from aoti_trace.cli import main\n"
        "sys.argv = ['aoti-trace', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('polars', 'pydantic', 'yaml', 'rich', 'torch') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert "analyze" in out.stdout  # the help was printed
    assert out.stdout.strip().splitlines()[-1] == "[]"


# ---------------------------------------------------------------------------------------------- many files


def _copies(folder: Path, count: int) -> list[Path]:
    seeds = [REPO / "fixtures/cases/missing_custom_op/trace/dedicated_log_torch_trace_cskortti.log",
             REPO / "fixtures/cases/cpp_compile_error/trace"]
    sources = [seeds[0], *sorted(seeds[1].glob("dedicated_log_torch_trace*.log"))]
    folder.mkdir(parents=True)
    out = []
    for i in range(count):
        src = sources[i % len(sources)]
        out.append(folder / f"dedicated_log_torch_trace_rank_{i}_{src.stem[-8:]}.log")
        shutil.copy(src, out[-1])
    return out


def test_parallel_reading_gives_the_frames_of_sequential_reading(tmp_path, monkeypatch):
    from aoti_trace.ingest import parallel
    from aoti_trace.ingest.trace.reader import read_trace

    a = _copies(tmp_path / "a", 7)
    b = _copies(tmp_path / "b", 5)
    jobs = [(a, "ra"), (b, "rb")]
    monkeypatch.setattr(parallel, "PARALLEL_MIN_CPU_S", 0.0)
    monkeypatch.setenv(parallel.WORKERS_ENV, "2")
    got = list(parallel.read_traces(jobs))
    for (files, run_id), frames in zip(jobs, got, strict=True):
        want = read_trace(files, run_id)
        assert set(frames.tables) == set(want.tables)
        for name, df in want.tables.items():
            assert frames.tables[name].equals(df), name
        assert frames["events"].height > 0 and set(frames["events"]["path"].unique()) == {str(f) for f in files}


def test_a_folder_of_many_traces_analyses_the_same_with_and_without_workers(tmp_path, monkeypatch):
    from aoti_trace.ingest import parallel
    from aoti_trace.pipeline import analyze

    _copies(tmp_path / "many", 20)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_CPU_S", 0.0)
    monkeypatch.setenv(parallel.WORKERS_ENV, "1")
    one = analyze([tmp_path / "many"])
    monkeypatch.setenv(parallel.WORKERS_ENV, "2")
    two = analyze([tmp_path / "many"])
    assert one.findings == two.findings
    for name in ("events", "compiles", "artifacts", "stacks", "damage"):
        assert one.frames[name].equals(two.frames[name]), name


def test_without_worker_processes_the_files_are_read_here(tmp_path, monkeypatch):
    from aoti_trace.ingest import parallel
    from aoti_trace.ingest.trace.reader import read_trace

    files = _copies(tmp_path / "a", 5)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_CPU_S", 0.0)
    monkeypatch.setenv(parallel.WORKERS_ENV, "2")

    def no_processes(*_a, **_k):
        raise OSError("cannot start processes here")

    monkeypatch.setattr(parallel, "_read_parallel", no_processes)
    (frames,) = parallel.read_traces([(files, "r")])
    assert frames["events"].equals(read_trace(files, "r")["events"])

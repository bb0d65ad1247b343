"""Input discovery: which files form which run. Discovery goes by file names and layout, so empty files suffice."""

from pathlib import Path

import pytest

from aoti_trace.discover import discover
from aoti_trace.model.errors import InputError


def touch(p: Path, data: bytes = b"") -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p


def test_capture_folders_become_runs_and_traces_join_their_capture(tmp_path):
    a = tmp_path / "caps" / "a"
    touch(a / "manifest.json")
    touch(a / "stderr.txt")
    touch(a / "stdout.txt")
    t = touch(a / "trace" / "dedicated_log_torch_trace_rank_0_ab.log")
    touch(tmp_path / "caps" / "b" / "stderr.log")
    pkg = touch(tmp_path / "caps" / "b" / "pkgs" / "model.pt2")
    runs = discover([tmp_path / "caps"])
    assert [r.run_id for r in runs] == ["a", "b"]
    assert runs[0].trace_files == [t] and runs[0].manifest == a / "manifest.json"
    assert runs[1].packages == [pkg] and runs[1].trace_files == []


def test_bare_trace_folder_is_one_run(tmp_path):
    d = tmp_path / "tr"
    f1 = touch(d / "dedicated_log_torch_trace_x.log")
    f2 = touch(d / "dedicated_log_torch_trace_y.log.gz")
    touch(d / "unrelated.txt")
    (run,) = discover([d])
    assert run.run_id == "tr" and sorted(run.trace_files) == [f1, f2]


def test_explicit_stderr_and_exit_code_join_the_single_run(tmp_path):
    d = tmp_path / "tr"
    touch(d / "dedicated_log_torch_trace_x.log")
    log = touch(tmp_path / "ci.log")
    (run,) = discover([d], stderr=log, exit_code="139")
    assert run.stderr == [log] and run.exit_code == "139"


def test_stdin_only(tmp_path):
    (run,) = discover([], stderr="-")
    assert run.stderr == [Path("-")]


def test_explicit_file_is_sniffed(tmp_path):
    pkg = touch(tmp_path / "weird_name", b"PK\x03\x04rest")
    log = touch(tmp_path / "job-output", b"Traceback (most recent call last):\n")
    runs = discover([pkg, log])
    assert runs[0].packages == [pkg]
    assert runs[1].stderr == [log]


def test_missing_path_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no such file or folder"):
        discover([tmp_path / "nope"])
    with pytest.raises(InputError, match="no such file"):
        discover([], stderr=tmp_path / "nope.txt")


def test_nothing_given_is_an_input_error():
    with pytest.raises(InputError):
        discover([])

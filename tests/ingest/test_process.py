"""The process frame: exit status from manifests, exit-code files and --exit-code values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aoti_trace.discover import RunInputs
from aoti_trace.model.errors import InputError
from aoti_trace.model.frames import schema
from aoti_trace.ingest.process import parse_exit, read_process

CASES = Path(__file__).parents[2] / "fixtures" / "cases"


@pytest.mark.parametrize("value, expected", [
    ("-11", (-11, "SIGSEGV")),
    ("139", (139, "SIGSEGV")),
    ("135", (135, "SIGBUS")),
    ("134", (134, "SIGABRT")),
    ("-9", (-9, "SIGKILL")),
    (1, (1, None)),
    ("0", (0, None)),
    ("11", (11, None)),
    ("SIGSEGV", (-11, "SIGSEGV")),
    ("segv", (-11, "SIGSEGV")),
    ("segfault", (-11, "SIGSEGV")),
    ("Segmentation fault (core dumped)", (-11, "SIGSEGV")),
    ("Bus error", (-7, "SIGBUS")),
    ("Aborted (core dumped)", (-6, "SIGABRT")),
    ("Killed", (-9, "SIGKILL")),
    (" 2\n", (2, None)),
    ("", (None, None)),
    (None, (None, None)),
])
def test_parse_exit(value, expected):
    assert parse_exit(value) == expected


@pytest.mark.parametrize("value", ["banana", "1.5", "exit"])
def test_parse_exit_rejects(value):
    with pytest.raises(ValueError, match="not an exit status"):
        parse_exit(value)


def test_manifest_of_a_real_capture():
    man = CASES / "export_error" / "manifest.json"
    if not man.exists():
        pytest.skip("fixture corpus not present")
    f = read_process(RunInputs(run_id="export_error", manifest=man))
    p = f["process"]
    assert p.schema == schema("process") and p.height == 1
    row = p.row(0, named=True)
    data = json.loads(man.read_text())
    assert row["exit_code"] == data["exit_code"] == 1 and row["signal"] is None
    assert row["command"] == "python3 repro.py" and row["timed_out"] is False
    assert row["duration_s"] == pytest.approx(data["duration_s"])
    assert "PYTHONFAULTHANDLER=1" in row["env"].split() and row["path"] == str(man)
    assert row["lineno"] is None


def test_manifest_signal_and_timeout(tmp_path):
    man = tmp_path / "manifest.json"
    man.write_text(json.dumps({"schema": "aoti-trace.capture/v1", "command": ["python3", "a b.py"],
                               "exit_code": -11, "signal": "SIGSEGV", "timed_out": True, "env": {"X": "1 2"}}))
    row = read_process(RunInputs(run_id="r", manifest=man))["process"].row(0, named=True)
    assert (row["exit_code"], row["signal"], row["timed_out"]) == (-11, "SIGSEGV", True)
    assert row["command"] == "python3 'a b.py'" and row["env"] == "X='1 2'"


def test_exit_code_file_and_cli_override(tmp_path):
    ec = tmp_path / "exit_code"
    ec.write_text("139\n")
    run = RunInputs(run_id="r", manifest=ec)
    row = read_process(run)["process"].row(0, named=True)
    assert (row["exit_code"], row["signal"], row["path"]) == (139, "SIGSEGV", str(ec))
    run.exit_code = "SIGBUS"
    row = read_process(run)["process"].row(0, named=True)
    assert (row["exit_code"], row["signal"], row["path"]) == (-7, "SIGBUS", "--exit-code")


def test_bad_cli_value_is_a_user_error():
    with pytest.raises(InputError, match="--exit-code"):
        read_process(RunInputs(run_id="r", exit_code="banana"))


def test_damaged_manifest_is_damage_not_error(tmp_path):
    man = tmp_path / "manifest.json"
    man.write_text('{"exit_code": -11, "comm')  # cut mid-write
    f = read_process(RunInputs(run_id="r", manifest=man))
    assert f["process"].height == 0
    d = f["damage"].row(0, named=True)
    assert d["kind"] == "bad_json" and d["path"] == str(man)
    f = read_process(RunInputs(run_id="r", manifest=man, exit_code="-11"))
    assert f["process"].row(0, named=True)["signal"] == "SIGSEGV"


def test_nothing_known_gives_empty_frame():
    f = read_process(RunInputs(run_id="r"))
    assert f["process"].height == 0 and f["process"].schema == schema("process")

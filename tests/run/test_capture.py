"""aoti_trace.run.capture (and its command, python -m aoti_trace.capture): real child processes (a real AOTI compile+load, a segfault, a hang, Ctrl-C) and pure helpers."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest

from aoti_trace.run.capture import (
    SCHEMA,
    CaptureFailed,
    capture,
    default_out_dir,
    glibcxx_version,
    parse_env_assignments,
    python_of,
    signal_name,
)

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = [pytest.mark.torch, pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")]
DATA = Path(__file__).parents[1] / "data" / "capture"
REPO = Path(__file__).resolve().parents[2]


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


# --------------------------------------------------------------------------- real processes


@pytest.mark.torch
@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_successful_compile_and_load_writes_a_complete_capture(tmp_path):
    out = tmp_path / "cap"
    pkg = out / "tiny.pt2"
    res = capture([sys.executable, str(DATA / "tiny_aoti.py"), "compile-run", str(pkg)], out, echo=False)

    assert res.exit_code == 0 and res.signal is None and not res.timed_out
    assert pkg.is_file()
    traces = list((out / "trace").glob("dedicated_log_torch_trace*.log"))
    assert traces and traces[0].stat().st_size > 0
    assert "output shape (2, 4)" in (out / "stdout.txt").read_text()

    m = manifest(out)
    assert m["schema"] == SCHEMA
    assert m["command"][-2:] == ["compile-run", str(pkg)]
    assert m["exit_code"] == 0 and m["signal"] is None and m["timed_out"] is False
    assert m["duration_s"] > 0 and m["capture"]["complete"] is True
    assert m["env"]["TORCH_TRACE"] == str(out / "trace")
    assert m["env"]["PYTHONFAULTHANDLER"] == "1" and m["env"]["TORCH_SHOW_CPP_STACKTRACES"] == "1"
    assert "AOTI_RUNTIME_CHECK_INPUTS" not in m["env"]
    env = m["environment"]
    assert env["torch"] == metadata.version("torch")
    assert env["python"] == ".".join(map(str, sys.version_info[:3]))
    assert env["cxx"] and env["cxx_version"]  # the compile worked, so a compiler was found
    assert env["libstdcxx"].startswith("GLIBCXX_3.4.")
    if not env["cuda_available"]:
        assert env["gpus"] == [] or all(g.startswith("GPU") for g in env["gpus"])


def test_segfaulting_child_leaves_faulthandler_dump_and_manifest(tmp_path):
    out = tmp_path / "segv"
    code = "import ctypes, sys; print('before crash'); sys.stderr.write('stderr before crash\\n'); ctypes.string_at(0)"
    res = capture([sys.executable, "-c", code], out, echo=False, environment=False)

    assert res.signal == "SIGSEGV" and res.exit_code == -signal.SIGSEGV
    err = (out / "stderr.txt").read_text()
    assert "stderr before crash" in err
    assert "Fatal Python error: Segmentation fault" in err
    assert 'File "<string>", line 1 in <module>' in err
    assert (out / "stdout.txt").read_text() == "before crash\n"
    m = manifest(out)
    assert m["signal"] == "SIGSEGV" and m["exit_code"] == -11 and m["capture"]["complete"] is True


@pytest.mark.torch  # runs `aoti-trace run` / capture: its environment probe imports torch
def test_hanging_child_is_ended_by_timeout(tmp_path):
    # Outcome, not speed: the child would sleep 600 s; it must be ended by the 3 s limit (SIGTERM, exit 124),
    # which any machine load leaves far below 600 s.
    out = tmp_path / "hang"
    cmd = [sys.executable, "-m", "aoti_trace.capture", "--out", str(out), "--timeout", "3", "--",
           sys.executable, "-c", "import time; print('sleeping', flush=True); time.sleep(600)"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=590)

    assert proc.returncode == 124
    assert "timed out" in proc.stderr
    m = manifest(out)
    assert m["timed_out"] is True and m["signal"] == "SIGTERM"
    assert 3 <= m["duration_s"] < 600
    assert (out / "stdout.txt").read_text() == "sleeping\n"


@pytest.mark.torch  # runs `aoti-trace run` / capture: its environment probe imports torch
def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.slow
@pytest.mark.parametrize("started_with_sigint_ignored", [False, True], ids=["sigint-default", "sigint-ignored"])
def test_ctrl_c_is_forwarded_to_the_child_and_the_manifest_is_written(tmp_path, started_with_sigint_ignored):
    # A capture started in the background of a script inherits SIGINT ignored; its command must still get the
    # forwarded Ctrl-C with the default disposition (a fresh-clone CI run failed that way: the child slept on).
    out = tmp_path / "int"
    code = "import time; print('started', flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-m", "aoti_trace.capture", "--out", str(out), "--quiet", "--",
                             sys.executable, "-c", code], cwd=REPO, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_ignore_sigint if started_with_sigint_ignored else None)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "started" not in _read(out / "stdout.txt"):
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    # generous: after forwarding, the capture finishes its environment probe (which imports torch: ~5 s warm, over
    # 30 s with a cold disk cache in a fresh CI venv, where 30 s once failed); a hang still fails the test
    _, err = proc.communicate(timeout=180)

    assert "forwarding SIGINT" in err
    m = manifest(out)
    assert m["interrupted"] is True and m["signal"] == "SIGINT" and m["timed_out"] is False
    assert "KeyboardInterrupt" in (out / "stderr.txt").read_text()
    assert proc.returncode == 128 + signal.SIGINT


def _read(p: Path) -> str:
    try:
        return p.read_text()
    except FileNotFoundError:
        return ""


# --------------------------------------------------------------------------- errors


def test_missing_command_is_a_capture_error_and_leaves_nothing(tmp_path):
    out = tmp_path / "x"
    with pytest.raises(CaptureFailed, match="cannot start 'no-such-command-aoti'"):
        capture(["no-such-command-aoti"], out, echo=False)
    with pytest.raises(CaptureFailed, match="no command given"):
        capture([], out, echo=False)
    assert not out.exists()


def test_out_folder_holding_a_capture_is_refused(tmp_path):
    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(CaptureFailed, match="already holds a capture"):
        capture([sys.executable, "-c", "pass"], tmp_path, echo=False, environment=False)


@pytest.mark.torch
@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_invalid_torch_logs_is_refused_before_running(tmp_path):
    marker = tmp_path / "ran"
    with pytest.raises(CaptureFailed, match=r"invalid --logs value '\+inductorr'.*did you mean inductor"):
        capture([sys.executable, "-c", f"open({str(marker)!r}, 'w')"], tmp_path / "c", logs="+inductorr", echo=False)
    assert not marker.exists() and not (tmp_path / "c").exists()


# --------------------------------------------------------------------------- pure helpers


def test_signal_name():
    assert signal_name(-11) == "SIGSEGV"
    assert signal_name(-9) == "SIGKILL"
    assert signal_name(0) is None and signal_name(1) is None and signal_name(None) is None
    assert signal_name(-200) == "SIG200"


def test_parse_env_assignments():
    assert parse_env_assignments(["A=1", "B=x=y", "C="]) == {"A": "1", "B": "x=y", "C": ""}
    for bad in ("NOEQUALS", "=1", "1A=2"):
        with pytest.raises(CaptureFailed):
            parse_env_assignments([bad])


def test_glibcxx_version_picks_the_highest_numerically():
    data = b"\0GLIBCXX_3.4.9\0GLIBCXX_3.4.30\0GLIBCXX_3.4.29\0GLIBCXX_DEBUG_MESSAGE_LENGTH\0"
    assert glibcxx_version(data) == "GLIBCXX_3.4.30"
    assert glibcxx_version(b"nothing here") is None


def test_python_of_uses_the_commands_python(tmp_path):
    fake = tmp_path / "python3.99"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert python_of(["python3.99", "x.py"], str(tmp_path)) == str(fake)
    assert python_of(["bash", "-c", "python3 x.py"], str(tmp_path)) == sys.executable
    assert python_of(["python3.99"], "/nonexistent") == sys.executable


def test_default_out_dir_is_unique(tmp_path):
    first = default_out_dir(tmp_path)
    first.mkdir()
    second = default_out_dir(tmp_path)
    assert second != first and second.parent == tmp_path and not second.exists()
    assert os.path.basename(first)[:8].isdigit()


# --------------------------------------------------------------------------- the CLI (`aoti-trace run`)

RULES = DATA / "rules"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "aoti_trace", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


@pytest.mark.torch  # runs `aoti-trace run` / capture: its environment probe imports torch
def test_cli_run_json_keeps_stdout_clean_and_exit_code_follows_the_findings(tmp_path):
    out = tmp_path / "cap"
    code = "import ctypes; print('child stdout'); ctypes.string_at(0)"
    proc = _cli("run", "--out", str(out), "-f", "json", "--rules", str(RULES), "--", sys.executable, "-c", code,
                cwd=tmp_path)
    doc = json.loads(proc.stdout)  # the child's output went to stderr, not into the report
    # the child's two streams are relayed to this stderr as they come, so their pieces may interleave
    # ('Fatal Python error: child stdout\nSegmentation fault'); each captured file holds its stream whole
    assert all(piece in proc.stderr for piece in ("child stdout", "Fatal Python error: ", "Segmentation fault"))
    assert "Fatal Python error: Segmentation fault" in (out / "stderr.txt").read_text()
    assert "child stdout" in (out / "stdout.txt").read_text()
    assert f"captured to {out}: killed by SIGSEGV" in proc.stderr
    assert proc.returncode == (1 if any(f["severity"] == "error" for f in doc["findings"]) else 0)
    assert manifest(out)["signal"] == "SIGSEGV"
    assert (out / "stdout.txt").read_text() == "child stdout\n"


@pytest.mark.torch  # runs `aoti-trace run` / capture: its environment probe imports torch
def test_cli_run_default_out_and_capture_errors(tmp_path):
    proc = _cli("run", "--rules", str(RULES), "--", sys.executable, "-c", "print('ok')", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    caps = list((tmp_path / "aoti-trace-out").iterdir())
    assert len(caps) == 1 and manifest(caps[0])["exit_code"] == 0
    assert proc.stdout.startswith("ok\n")  # text format: the child's stdout streams to ours

    bad = _cli("run", "--", "no-such-command-aoti", cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.strip() == "aoti-trace: error: cannot start 'no-such-command-aoti': not an executable file (or not on PATH)"
    assert _cli("run", "--env", "NOEQUALS", "--", "true", cwd=tmp_path).returncode == 2


def test_capture_module_imports_only_the_standard_library():
    # It must run where only python + torch are installed (e.g. a GPU machine without polars/pydantic/click).
    code = ("import sys, aoti_trace.capture; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'polars', 'pydantic', 'click', 'yaml', 'rich', "
            "'torch', 'numpy'}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"

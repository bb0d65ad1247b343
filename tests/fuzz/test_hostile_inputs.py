"""Regressions for the 15 defects of issue 13 (hostile and damaged inputs).

Every input here is a minimal reproduction *derived from a real fixture capture* (named in each test's docstring):
a copy of genuine torch output with one described change. None is hand-written log text presented as real.
Each case must finish without an exception (``aoti-trace`` would exit 3), within its time limit (a hang or a
super-linear blow-up fails it), and with the damage reported.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
import zlib
from pathlib import Path

import pytest
from hostile import FIXTURES, analyse, encrypt_flag, replace_entry, terminal_safe, time_limit

from aoti_trace import library
from aoti_trace.ingest import files
from aoti_trace.ingest.trace import reader as trace
from aoti_trace.ingest.package.reader import package_frames

LIMIT_S = 30.0  # wall clock per case; the defects took from 85 s to forever, the fixed code well under 5 s
DTYPE = FIXTURES / "cases" / "dtype_mismatch_checked"
CPP = FIXTURES / "cases" / "cpp_compile_error"


@pytest.fixture(scope="module")
def rules():
    return library.load_rules()


def trace_of(case: Path) -> Path:
    return next((case / "trace").glob("dedicated_log_torch_trace_*.log"))


def damage(outcome, kind: str | None = None) -> list[dict]:
    rows = outcome.analysis.frames["damage"].rows(named=True)
    return [r for r in rows if kind is None or r["kind"] == kind]


def run_analysis(paths, rules, **kw):
    with time_limit(LIMIT_S):
        return analyse([Path(p) for p in paths], rules, **kw)


def copy_case(case: Path, dest: Path) -> Path:
    shutil.copytree(case, dest, ignore=shutil.ignore_patterns("repro.py", "expected.yaml", "*.pt2"))
    return dest


# ---------------------------------------------------------------------------------------------- 1
def test_01_unreadable_trace_file_is_damage(tmp_path, rules, monkeypatch):
    """Derived from fixtures/cases/dtype_mismatch_checked: its trace log, unreadable (open() raises
    PermissionError, as for mode 000 and a non-root user). The reader reports ``unreadable``; discovery skips a
    file it may not read and reports it too."""
    case = copy_case(DTYPE, tmp_path / "c")
    log = trace_of(case)
    real_open = open

    def denied(path, *a, **kw):
        if Path(path) == log:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *a, **kw)

    monkeypatch.setattr(trace, "open", denied, raising=False)
    frames = trace.read_trace([log], "r")
    assert [r["kind"] for r in frames["damage"].rows(named=True)] == ["unreadable"]
    assert "Permission denied" in frames["damage"]["detail"][0]

    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != log)
    out = run_analysis([case], rules)
    (row,) = damage(out, "unreadable")
    assert row["path"] == str(log) and "permission denied" in row["detail"]
    assert out.analysis.runs[0].stderr  # the rest of the capture is still analysed
    assert out.analysis.primary is not None and out.analysis.primary.family == "dtype_mismatch"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads mode-000 files")
def test_01_mode_000_trace_file_for_real(tmp_path):
    """Derived from fixtures/cases/dtype_mismatch_checked: its trace log with mode 000; the CLI exits 1 with the
    diagnosis (not 3) and lists the unreadable file."""
    case = copy_case(DTYPE, tmp_path / "c")
    trace_of(case).chmod(0)
    res = subprocess.run([sys.executable, "-m", "aoti_trace", "analyze", str(case)], capture_output=True, text=True)
    assert res.returncode == 1, res.stderr
    assert "unreadable" in res.stdout


# ---------------------------------------------------------------------------------------------- 2
def test_02_corrupt_gzip_body_is_damage_and_leaves_no_temp_file(tmp_path, rules, monkeypatch):
    """Derived from fixtures/cases/cpp_compile_error: its trace gzip-compressed, then 64 bytes in the middle of the
    deflate stream overwritten (valid magic, corrupt body). The records decompressed before the damage are kept,
    ``bad_gzip`` is reported, and the temporary file is removed."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    packed = bytearray(gzip.compress(trace_of(CPP).read_bytes(), mtime=0))
    mid = len(packed) // 2
    packed[mid:mid + 64] = b"\xff" * 64
    d = tmp_path / "t"
    d.mkdir()
    (d / "dedicated_log_torch_trace_x.log.gz").write_bytes(bytes(packed))
    out = run_analysis([d], rules)
    (row,) = damage(out, "bad_gzip")
    assert "damaged" in row["detail"]
    assert out.analysis.frames["events"].height > 100  # what came before the corruption
    assert list((tmp_path / "tmp").iterdir()) == []


# ---------------------------------------------------------------------------------------------- 3
def _nested(n: int = 50_000) -> str:
    return "[" * n


def _edit_trace_line(src: Path, dest: Path, marker: str, edit) -> Path:
    lines = src.read_text(encoding="utf-8").split("\n")
    i = next(k for k, ln in enumerate(lines) if marker in ln)
    lines[i] = edit(lines[i])
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / "dedicated_log_torch_trace_x.log"
    out.write_text("\n".join(lines), encoding="utf-8")
    return out


@pytest.mark.parametrize("where", ["str", "stack", "compilation_metrics"])
def test_03_deeply_nested_json_in_trace_headers(tmp_path, rules, where):
    """Derived from fixtures/cases/cpp_compile_error: 50,000 ``[`` inserted into the JSON of the first ``str``
    record / the first ``"stack": [`` / the ``compilation_metrics`` record. Reported as ``bad_json``."""
    marker, edit = {
        "str": ('{"str": [', lambda ln: ln.replace('{"str": [', '{"str": [' + _nested(), 1)),
        "stack": ('"stack": [', lambda ln: ln.replace('"stack": [', '"stack": [' + _nested(), 1)),
        "compilation_metrics": ('{"compilation_metrics": {', lambda ln: ln.replace(
            '"compile_id": null', '"compile_id": ' + _nested(), 1)),
    }[where]
    _edit_trace_line(trace_of(CPP), tmp_path / "t", marker, edit)
    out = run_analysis([tmp_path / "t"], rules)
    assert damage(out, "bad_json")


def test_03_deeply_nested_manifest(tmp_path, rules):
    """Derived from fixtures/cases/dtype_mismatch_checked: manifest.json's ``command`` replaced by 50,000 nested
    lists. The manifest is ``bad_json``; the capture's stderr still gives the diagnosis."""
    case = copy_case(DTYPE, tmp_path / "c")
    (case / "manifest.json").write_text('{"command": ' + _nested() + "]" * 50_000 + "}")
    out = run_analysis([case], rules)
    assert damage(out, "bad_json")
    assert out.analysis.primary is not None and out.analysis.primary.family == "dtype_mismatch"


@pytest.mark.parametrize("entry", ["wrapper_metadata.json", "weights_config.json"])
def test_03_deeply_nested_package_json(tmp_path, rules, entry):
    """Derived from fixtures/packages/pickle_weights.pt2: its ``wrapper_metadata.json`` / ``weights_config.json``
    entry replaced by 50,000 ``[``. Reported as ``bad_json`` (``inspect`` and ``analyze`` both)."""
    pkg = tmp_path / "model.pt2"
    shutil.copy(FIXTURES / "packages" / "pickle_weights.pt2", pkg)
    replace_entry(pkg, entry, lambda _: _nested().encode())
    out = run_analysis([pkg], rules)
    assert any(entry in r["detail"] for r in damage(out, "bad_json"))


def test_03_deeply_nested_chromium_event_in_the_html_timeline(tmp_path, rules):
    """Derived from fixtures/cases/cpp_compile_error: the payload of its first ``chromium_event`` replaced by an
    event whose ``tid`` is 50,000 nested lists (MD5 updated to match). The HTML timeline skips the event."""
    lines = trace_of(CPP).read_text(encoding="utf-8").split("\n")
    i = next(k for k, ln in enumerate(lines) if '{"chromium_event": {}' in ln)
    j = i + 1
    while j < len(lines) and lines[j].startswith("\t"):
        j += 1
    payload = '{"name": "x", "ts": 1, "ph": "B", "tid": ' + _nested() + "}"
    md5 = hashlib.md5(payload.encode()).hexdigest()
    lines[i:j] = [re.sub(r'"has_payload": "[0-9a-f]+"', f'"has_payload": "{md5}"', lines[i]), "\t" + payload]
    d = tmp_path / "t"
    d.mkdir()
    (d / "dedicated_log_torch_trace_x.log").write_text("\n".join(lines), encoding="utf-8")
    out = run_analysis([d], rules)
    assert "Compile phases" in out.reports["html"]  # the other events still make a timeline


# ---------------------------------------------------------------------------------------------- 4
def test_04_lone_surrogate_in_a_str_record(tmp_path, rules):
    """Derived from fixtures/cases/cpp_compile_error: ``\\ud800`` (JSON escape of a lone surrogate) put at the start
    of the first interned file name. It becomes U+FFFD; frames and every report build."""
    _edit_trace_line(trace_of(CPP), tmp_path / "t", '{"str": ["', lambda ln: ln.replace(
        '{"str": ["', '{"str": ["\\ud800', 1))
    out = run_analysis([tmp_path / "t"], rules)
    files_seen = out.analysis.frames["stacks"]["filename"].drop_nulls().to_list()
    assert any(f.startswith("\ufffd") for f in files_seen)


# ---------------------------------------------------------------------------------------------- 5
def test_05_encrypted_package_entry(tmp_path, rules):
    """Derived from fixtures/packages/linear.pt2: the 'encrypted' flag set on its wrapper_metadata.json entry.
    ``inspect`` exits 2 with one line; ``analyze`` reports the package as ``unreadable``."""
    pkg = tmp_path / "model.pt2"
    shutil.copy(FIXTURES / "packages" / "linear.pt2", pkg)
    encrypt_flag(pkg, "wrapper_metadata.json")
    frames = package_frames(pkg, "r")
    (row,) = frames["damage"].rows(named=True)
    assert row["kind"] == "unreadable" and "encrypted" in row["detail"]
    res = subprocess.run([sys.executable, "-m", "aoti_trace", "inspect", str(pkg)], capture_output=True, text=True)
    assert res.returncode == 2 and "encrypted" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    run_analysis([pkg], rules)


def test_05_weights_config_with_a_string_for_a_number(tmp_path, rules):
    """Derived from fixtures/packages/pickle_weights.pt2: in weights_config.json the shape ``[4, 8]`` became
    ``["4", 8]``. That weight entry is ``bad_json``; the rest of the package is read."""
    pkg = tmp_path / "model.pt2"
    shutil.copy(FIXTURES / "packages" / "pickle_weights.pt2", pkg)
    replace_entry(pkg, "weights_config.json", lambda b: b.replace(b"[4, 8]", b'["4", 8]'))
    out = run_analysis([pkg], rules)
    assert any("bad entry" in r["detail"] for r in damage(out, "bad_json"))
    keys = out.analysis.frames["package"]["key"].to_list()
    assert "weights_format" in keys and "input_sizes" in keys


def test_05_five_thousand_digit_integer_in_wrapper_metadata(tmp_path, rules):
    """Derived from fixtures/packages/linear.pt2: the value ``"cpu"`` in wrapper_metadata.json replaced by a
    5,000-digit integer (over Python's int conversion limit). Reported as ``bad_json``."""
    pkg = tmp_path / "model.pt2"
    shutil.copy(FIXTURES / "packages" / "linear.pt2", pkg)
    replace_entry(pkg, "wrapper_metadata.json", lambda b: b.replace(b'"cpu"', b"9" * 5000))
    out = run_analysis([pkg], rules)
    assert damage(out, "bad_json")


# ---------------------------------------------------------------------------------------------- 6
def test_06_fifo_named_stderr_is_damage_not_a_hang(tmp_path, rules):
    """Derived from fixtures/cases/dtype_mismatch_checked: its stderr.txt replaced by a FIFO nobody writes to.
    Discovery never opens it (``not_regular_file``); the manifest and the trace are still analysed."""
    case = copy_case(DTYPE, tmp_path / "c")
    (case / "stderr.txt").unlink()
    os.mkfifo(case / "stderr.txt")
    out = run_analysis([case], rules)
    (row,) = damage(out, "not_regular_file")
    assert "FIFO" in row["detail"] and row["path"].endswith("stderr.txt")
    assert out.analysis.runs[0].manifest is not None and out.analysis.runs[0].trace_files


def test_06_stderr_from_a_pipe_is_read_as_a_stream(tmp_path, rules):
    """Derived from fixtures/cases/dtype_mismatch_checked: its stderr.txt fed through a pipe given as
    ``/dev/fd/N`` (what ``--stderr <(cat stderr.txt)`` passes). Read as a stream, diagnosed as the file is."""
    data = (DTYPE / "stderr.txt").read_bytes()
    r, w = os.pipe()

    def feed():
        with os.fdopen(w, "wb") as fh:
            fh.write(data)

    t = threading.Thread(target=feed)
    t.start()
    try:
        out = run_analysis([], rules, stderr=f"/dev/fd/{r}")
    finally:
        t.join()
        os.close(r)
    assert out.analysis.primary is not None and out.analysis.primary.family == "dtype_mismatch"


def test_06_cli_refuses_a_fifo_path_with_one_line(tmp_path):
    """A FIFO given as a PATH (derived: an empty named pipe) is a user error: exit 2, one line, no hang."""
    fifo = tmp_path / "stderr.txt"
    os.mkfifo(fifo)
    res = subprocess.run([sys.executable, "-m", "aoti_trace", "analyze", str(fifo)], capture_output=True, text=True,
                         timeout=LIMIT_S)
    assert res.returncode == 2 and "FIFO" in res.stderr and len(res.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------------------------------------- 7
@pytest.mark.parametrize("line", [
    '  File "a.py", line 1, in f' + " " * 100_000,
    '  File "a.py", line 1, in f' + " " * 100_000 + "x",
    "Fatal Python error: Segmentation fault" + " " * 100_000 + "x",
    '  File "a.py", line 1 in f' + " " * 100_000 + "x",
    "a" * 100_000 + ".wrapper.cpp:" + "b" * 10,
], ids=["traceback-frame", "traceback-frame-x", "faulthandler-fatal", "faulthandler-frame", "generated-ref"])
def test_07_long_lines_take_linear_time(tmp_path, rules, line):
    """Derived from fixtures/cases/dtype_mismatch_checked: its stderr.txt with one line (a traceback frame, a
    faulthandler header or frame, a generated-source reference) padded to 100,000 characters, inserted after its
    ``Traceback`` line. Took 85 s and more with the backtracking patterns."""
    case = copy_case(DTYPE, tmp_path / "c")
    text = (case / "stderr.txt").read_text()
    (case / "stderr.txt").write_text(text.replace("Traceback (most recent call last):\n",
                                                  "Traceback (most recent call last):\n" + line + "\n", 1))
    out = run_analysis([case], rules)
    assert out.analysis.primary is not None


# ---------------------------------------------------------------------------------------------- 8
def test_08_catastrophic_user_rule_regex_does_not_run_for_minutes(tmp_path):
    """Derived from fixtures/cases/dtype_mismatch_checked: its stderr.txt with a line of 30 ``a`` and a ``c``
    followed by ``aab`` appended to the exception message's cell, and a user rule matching ``(a+)+b`` on the
    exception message. The evidence line comes from Polars (Rust regex), not from Python's backtracking ``re``
    (2**30 steps)."""
    rules_dir = tmp_path / "rules" / "export_error"
    rules_dir.mkdir(parents=True)
    (rules_dir / "user-rule.yaml").write_text(textwrap.dedent("""\
        schema: 1
        id: AOTI-Z950
        name: user-catastrophic-regex
        title: t
        description: d
        family: export_error
        severity: error
        role: cause
        precision: high
        status: experimental
        version: 1
        match:
          frame: exceptions
          column: message
          regex: '(a+)+b'
        message: m
        remedy: r
        """))
    user_rules = library.load_rules(tmp_path / "rules")
    case = copy_case(DTYPE, tmp_path / "c")
    text = (case / "stderr.txt").read_text()
    (case / "stderr.txt").write_text(text.rstrip("\n") + "\n" + "a" * 30 + "c aab\n")
    out = run_analysis([case], user_rules)
    (finding,) = [f for f in out.analysis.findings if f.rule_id == "AOTI-Z950"]
    assert finding.evidence[0].text.endswith("c aab")


# ---------------------------------------------------------------------------------------------- 9
def _bomb(path: Path, head: bytes, zeros: int) -> None:
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    with path.open("wb") as fh:
        fh.write(comp.compress(head))
        block = b"\0" * (1 << 20)
        for _ in range(zeros >> 20):
            fh.write(comp.compress(block))
        fh.write(comp.flush())


@pytest.mark.slow
def test_09_gzip_bomb_trace_is_bounded(tmp_path, rules, monkeypatch):
    """Derived from fixtures/cases/cpp_compile_error: its trace followed by 400 MB of zero bytes, gzip-compressed
    (~400 KB, ratio ~1000). Decompression stops past 64 MB at ratio 200 (``bad_gzip``, 'gzip bomb'); the records
    before it are kept; memory stays bounded; no temporary file is left."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    d = tmp_path / "t"
    d.mkdir()
    _bomb(d / "dedicated_log_torch_trace_x.log.gz", trace_of(CPP).read_bytes(), 400 << 20)
    tracemalloc.start()
    try:
        frames = trace.read_trace([d / "dedicated_log_torch_trace_x.log.gz"], "r")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    (row,) = [r for r in frames["damage"].rows(named=True) if r["kind"] == "bad_gzip"]
    assert "gzip bomb" in row["detail"]
    assert frames["events"].height == trace.read_trace([trace_of(CPP)], "r")["events"].height
    assert peak < 200 << 20, peak  # chunks of at most files.OUT_CHUNK, not the whole stream
    assert list((tmp_path / "tmp").iterdir()) == []
    run_analysis([d], rules)


def test_09_inflater_limits(tmp_path):
    """The size limit and the ratio limit of :class:`aoti_trace.ingest.files.Inflater`, on a gzip of the
    cpp_compile_error trace followed by zeros (derived, as above, but small)."""
    path = tmp_path / "x.gz"
    _bomb(path, trace_of(CPP).read_bytes(), 8 << 20)
    with path.open("rb") as fh:
        inf = files.Inflater(fh, limit=1 << 20)
        assert sum(len(c) for c in inf) == 1 << 20 and "limit" in inf.problem
    with path.open("rb") as fh:
        inf = files.Inflater(fh, max_ratio=50, ratio_min=2 << 20)
        total = sum(len(c) for c in inf)
        assert 2 << 20 < total < 8 << 20 and "gzip bomb" in inf.problem


# ---------------------------------------------------------------------------------------------- 10
def test_10_truncated_log_gz_keeps_what_decompressed(tmp_path, rules):
    """Derived from fixtures/cases/cpp_compile_error: its trace gzip-compressed and cut to 2/3 of its bytes. The
    records before the cut are analysed (previously: 'the 0 bytes decompressed before it')."""
    full = trace.read_trace([trace_of(CPP)], "r")["events"].height
    packed = gzip.compress(trace_of(CPP).read_bytes(), mtime=0)
    d = tmp_path / "t"
    d.mkdir()
    (d / "dedicated_log_torch_trace_x.log.gz").write_bytes(packed[: len(packed) * 2 // 3])
    out = run_analysis([d], rules)
    (row,) = damage(out, "bad_gzip")
    kept = int(re.search(r"the (\d+) bytes", row["detail"])[1])
    assert kept > 100_000
    assert full // 3 < out.analysis.frames["events"].height < full
    # payloads of a damaged .gz are read through the same tolerant inflater
    arts = out.analysis.frames["artifacts"].rows(named=True)
    assert all(isinstance(trace.payload_text(a), str) for a in arts[-5:])


# ---------------------------------------------------------------------------------------------- 11
@pytest.mark.torch  # runs `aoti-trace run` / capture: its environment probe imports torch
def test_11_run_timeout_is_not_no_problem_found(tmp_path):
    """A command ended by ``run --timeout`` (a sleep, standing in for a hung repro) must not be reported as
    'No problem found.' with exit 0: non-zero exit and an error finding."""
    res = subprocess.run([sys.executable, "-m", "aoti_trace", "run", "--out", str(tmp_path / "out"), "--timeout",
                          "1", "-f", "json", "--", sys.executable, "-c", "import time; time.sleep(60)"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode != 0
    assert any(f["severity"] == "error" for f in json.loads(res.stdout)["findings"])


@pytest.mark.torch  # runs `aoti-trace run` / capture: its environment probe imports torch
def test_11_sigterm_during_run_is_not_no_problem_found(tmp_path):
    """SIGTERM to ``aoti-trace run`` (forwarded to the command): non-zero exit and an error finding."""
    import signal

    proc = subprocess.Popen([sys.executable, "-m", "aoti_trace", "run", "--out", str(tmp_path / "out"), "-f", "json",
                             "--", sys.executable, "-c", "import time; time.sleep(60)"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "out" / "stdout.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert any(f["severity"] == "error" for f in json.loads(out)["findings"])


# ---------------------------------------------------------------------------------------------- 12
GRANDCHILD = """\
import subprocess, sys
# a grandchild in its own session: the capture's kill of the command's process group does not reach it
p = subprocess.Popen([sys.executable, "-c", "import time\\nfor i in range(3000):\\n    print(f'line {i}', flush=True)\\n"
                      "    time.sleep(0.02)\\n"], start_new_session=True)
print(f"grandchild {p.pid}", flush=True)
"""


@pytest.mark.torch  # runs `aoti-trace run` / capture: its environment probe imports torch
def test_12_grandchild_holding_the_pipes(tmp_path, monkeypatch):
    """A command whose grandchild (own session, writing 3000 lines over ~60 s, so that it outlives the capture's
    drain and stop waits, ~11 s, also on a loaded machine) outlives it; drain time cut to 1 s.
    No file is closed under a reader thread (no exception in a thread), every line written before the stop is
    complete, and the streams left open are in the manifest and in the damage frame (``lost_output``)."""
    from aoti_trace.run import capture as cap
    from aoti_trace.discover import discover
    from aoti_trace.ingest.process import read_process

    monkeypatch.setattr(cap, "READER_DRAIN_S", 1.0)
    errors: list = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args))
    script = tmp_path / "parent.py"
    script.write_text(GRANDCHILD)
    res = cap.capture([sys.executable, str(script)], tmp_path / "out", echo=False, environment=False)
    out = (tmp_path / "out" / "stdout.txt").read_text()
    pid = int(re.search(r"grandchild (\d+)", out)[1])
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
    assert errors == []
    assert res.exit_code == 0
    # the parent's line and the grandchild's first lines race for the shared pipe: the parent's is anywhere among them
    lines = [ln for ln in out.splitlines() if not ln.startswith("grandchild ")]
    assert lines == [f"line {i}" for i in range(len(lines))]  # no torn or lost line before the stop
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["capture"]["streams_left_open"] == ["stdout", "stderr"]
    (run,) = discover([tmp_path / "out"])
    dmg = read_process(run)["damage"].rows(named=True)
    assert [d["kind"] for d in dmg] == ["lost_output"]


# ---------------------------------------------------------------------------------------------- 13
HOSTILE_FQN = "lin.weight`</details><img/src=x/onerror=alert(1)>[click](http://evil.example)![i](http://e.x/i.png)"


def _rendered_markdown(md: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").render(md)


def test_13_markdown_report_escapes_log_text(tmp_path, rules):
    """Derived from fixtures/cases/constant_not_found: in its stderr the constant name of ``Constant not found:
    lin.weight`` extended with a backtick, ``</details>``, an ``<img>`` tag, a link and an image. Rendered as
    CommonMark (with tables), the report holds none of them as markup."""
    case = copy_case(FIXTURES / "cases" / "constant_not_found", tmp_path / "c")
    text = (case / "stderr.txt").read_text()
    assert "Constant not found: lin.weight" in text
    (case / "stderr.txt").write_text(text.replace("Constant not found: lin.weight", "Constant not found: "
                                                  + HOSTILE_FQN))
    out = run_analysis([case], rules)
    assert out.analysis.primary is not None and HOSTILE_FQN in out.analysis.primary.remedy
    html = _rendered_markdown(out.reports["markdown"])
    assert "<img" not in html and "<a " not in html
    assert html.count("</details>") == 1  # the report's own
    assert "&lt;img/src=x/onerror=alert(1)&gt;" in html  # shown, as text


def test_13_markdown_remedy_keeps_its_own_markup():
    """The escaping keeps a remedy's code spans, fenced blocks and lists (rule markdown) intact."""
    from aoti_trace.report.markdown import _remedy

    rule_md = "Use `x <y>` here.\n\n1. a list\n2. **bold** <b>\n\n```python\nif a < b: pass\n```"
    html = _rendered_markdown(_remedy(rule_md))
    assert "<code>x &lt;y&gt;</code>" in html and "<ol>" in html and "<strong>bold</strong>" in html
    assert "&lt;b&gt;" in html and "if a &lt; b: pass" in html


# ---------------------------------------------------------------------------------------------- 14
def test_14_terminal_control_sequences_never_reach_the_terminal(tmp_path, rules):
    """Derived from fixtures/cases/dtype_mismatch_checked: its ``Error: input_handles[0]: unmatched dtype`` line
    and run id carrying ``ESC c`` (reset), ``ESC (0`` (line-drawing charset), U+009B (CSI), BEL, backspace and a
    bidi override. The text report, plain and coloured, shows them as visible escapes."""
    evil = "\x1bc\x1b(0\u009b31m\x07\x08\u202e"
    case = copy_case(DTYPE, tmp_path / ("run" + evil.replace("\x1b", "")))
    text = (case / "stderr.txt").read_text()
    (case / "stderr.txt").write_text(text.replace("but got: 7\n", "but got: 7" + evil + "\n", 1))
    out = run_analysis([case], rules)
    assert terminal_safe(out.reports["text"]) and terminal_safe(out.reports["text-color"], colored=True)
    assert "\\x1bc\\x1b(0\\x9b31m\\x07\\x08\\u202e" in out.reports["text"]
    assert out.analysis.primary is not None and out.analysis.primary.family == "dtype_mismatch"


# ---------------------------------------------------------------------------------------------- 15
def test_15_symlinks_inside_the_folder_are_followed(tmp_path, rules):
    """Derived from fixtures/cases/dtype_mismatch_checked: stderr.txt and trace/ moved to ``logs/`` inside the same
    folder and replaced by symbolic links to them; plus a link loop (``trace/again -> ..``). Analysed as the
    original capture, each file once, no hang."""
    case = copy_case(DTYPE, tmp_path / "c")
    (case / "logs").mkdir()
    (case / "stderr.txt").rename(case / "logs" / "job_err.txt")
    (case / "trace").rename(case / "logs" / "trace_real")
    (case / "stderr.txt").symlink_to(Path("logs") / "job_err.txt")
    (case / "trace").symlink_to(Path("logs") / "trace_real")
    (case / "logs" / "trace_real" / "again").symlink_to("..")
    out = run_analysis([case], rules)
    (run,) = out.analysis.runs
    assert [p.name for p in run.stderr] == ["stderr.txt"] and len(run.trace_files) == 1
    assert out.analysis.primary is not None and out.analysis.primary.family == "dtype_mismatch"
    assert damage(out, "symlink_skipped") == []


def test_15_symlinks_out_of_the_folder_are_reported(tmp_path, rules):
    """Derived from fixtures/cases/dtype_mismatch_checked: its stderr.txt replaced by a link to a copy outside the
    analysed folder. Not read (a report must not quote files from elsewhere) and reported as
    ``symlink_skipped``."""
    case = copy_case(DTYPE, tmp_path / "c")
    outside = tmp_path / "elsewhere.txt"
    (case / "stderr.txt").rename(outside)
    (case / "stderr.txt").symlink_to(outside)
    out = run_analysis([case], rules)
    (row,) = damage(out, "symlink_skipped")
    assert "outside the analysed folder" in row["detail"]
    assert out.analysis.runs[0].stderr == []


def test_14_inspect_shows_package_control_characters_as_escapes(tmp_path):
    """Derived from fixtures/packages/linear.pt2: its user metadata value ``"linear"`` replaced by ESC c + U+009B
    (JSON escapes). ``aoti-trace inspect`` prints them as visible escapes."""
    pkg = tmp_path / "model.pt2"
    shutil.copy(FIXTURES / "packages" / "linear.pt2", pkg)
    replace_entry(pkg, "wrapper_metadata.json", lambda b: b.replace(b'"linear"', b'"\\u001bc\\u009b31m evil"'))
    res = subprocess.run([sys.executable, "-m", "aoti_trace", "inspect", str(pkg)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "\\x1bc\\x9b31m evil" in res.stdout and terminal_safe(res.stdout)


# ---------------------------------------------------------------------------------------------- found by the fuzzer
@pytest.mark.parametrize("gz", [False, True])
def test_giant_line_is_clipped_not_scanned(tmp_path, rules, gz):
    """Found by the fuzzing harness (a run of bytes inserted into a gzipped stderr inflated it to 100 MB, mostly one
    line; the analysis took 17-20 s of CPU). Derived from fixtures/public/litgpt_774_triton_oob: its stderr followed
    by one 40 MB line of ':' and the last line again. Long lines are analysed on their first
    ``lines.MAX_LINE_CHARS`` characters (damage ``line_clipped``); the device assert before the long line is still
    found. CPU time (not wall time) is bounded, so the check does not depend on an idle machine."""
    import resource

    from aoti_trace.ingest.text import lines as L

    real = (FIXTURES / "public" / "litgpt_774_triton_oob" / "stderr.txt").read_bytes()
    data = real + b":" * (40 << 20) + b"\n" + real.splitlines(keepends=True)[-1]
    case = tmp_path / "case"
    case.mkdir()
    if gz:
        (case / "stderr.txt.gz").write_bytes(gzip.compress(data, compresslevel=1))
    else:
        (case / "stderr.txt").write_bytes(data)
    before = resource.getrusage(resource.RUSAGE_SELF)
    out = run_analysis([case], rules)
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    damage = out.analysis.frames["damage"]
    (row,) = damage.filter(damage["kind"] == "line_clipped").rows(named=True)
    assert str(L.MAX_LINE_CHARS) in row["detail"]
    assert out.analysis.frames["lines"]["text"].str.len_chars().max() <= L.MAX_LINE_CHARS
    assert out.analysis.primary is not None and out.analysis.primary.family == "triton_index_oob"
    assert cpu < 10, f"{cpu:.1f} s of CPU"


def test_overlong_integer_in_trace_header_is_damage_not_a_crash(tmp_path, rules):
    """Found by the fuzzing harness (a run of '0' inserted into a glog header's pid: Polars' strict cast to Int64
    raised InvalidOperationError). Derived from fixtures/cases/cpp_compile_error: its trace with the first header's
    pid made 3,000 digits long; the header's integer fields read as null and the analysis completes."""
    src = trace_of(CPP)
    text = src.read_text()
    head, rest = text.split("\n", 1)
    fields = head.split(" ")
    fields[2] = "1" + "0" * 3000  # 'V1201 10:00:00.000000 <pid> torch/...'
    d = tmp_path / "case" / "trace"
    d.mkdir(parents=True)
    (d / src.name).write_text(" ".join(fields) + "\n" + rest)
    out = run_analysis([tmp_path / "case"], rules)
    assert out.analysis.frames["events"].height == trace.read_trace([src], "r")["events"].height

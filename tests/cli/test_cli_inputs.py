"""`aoti-trace analyze` accepts every input form (real captures), with one clear error line for a wrong one."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "fixtures" / "cases"


def analyze(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "aoti_trace", "analyze", *args], input=stdin, capture_output=True,
                          cwd=ROOT, timeout=300)


def primary_family(proc: subprocess.CompletedProcess) -> str | None:
    return json.loads(proc.stdout)["summary"]["primary_family"]


def test_trace_folder_and_trace_file():
    trace = CASES / "cpp_compile_error" / "trace"
    assert primary_family(analyze(str(trace), "-f", "json")) == "cpp_compile_error"
    (log,) = trace.glob("dedicated_log_torch_trace_*.log")
    assert primary_family(analyze(str(log), "-f", "json")) == "cpp_compile_error"


def test_capture_folder_and_any_folder_above_it(tmp_path):
    assert primary_family(analyze(str(CASES / "dtype_mismatch_checked"), "-f", "json")) == "dtype_mismatch"
    nested = tmp_path / "ci-artifacts" / "job-17"
    shutil.copytree(CASES / "dtype_mismatch_checked", nested / "dtype")
    shutil.copytree(CASES / "cpp_compile_error", nested / "build")
    doc = json.loads(analyze(str(tmp_path), "-f", "json").stdout)
    assert sorted(r["run_id"] for r in doc["runs"]) == ["ci-artifacts/job-17/build", "ci-artifacts/job-17/dtype"]
    assert {f["family"] for f in doc["findings"] if f["severity"] == "error"} >= {"dtype_mismatch", "cpp_compile_error"}


def test_package_alone_is_compared_with_a_host_only_when_asked():
    pkg = str(CASES / "cuda_package_on_cpu_host" / "model.pt2")
    alone = json.loads(analyze(pkg, "-f", "json").stdout)  # no manifest: which machine would load it is unknown
    assert not {f["rule_id"] for f in alone["findings"]} & {"AOTI-B014", "AOTI-B015", "AOTI-M003"}
    here = json.loads(analyze(pkg, "--this-host", "-f", "json").stdout)
    assert {f["rule_id"] for f in here["findings"]} >= {"AOTI-B014"}  # this CPU-only host cannot run a CUDA package


def test_package_is_compared_with_the_machine_its_capture_ran_on():
    """The capture's manifest, not the machine running the analysis, says where the package was loaded: the CUDA
    package of a capture made on the H200 is not "unsupported here", the one loaded by CPU-only torch is."""
    h200 = json.loads(analyze(str(CASES / "cuda_triton_index_oob"), "-f", "json").stdout)
    assert "AOTI-B014" not in {f["rule_id"] for f in h200["findings"]}
    cpu = json.loads(analyze(str(CASES / "cuda_package_on_cpu_host"), "-f", "json").stdout)
    b014 = [f for f in cpu["findings"] if f["rule_id"] == "AOTI-B014"]
    assert b014 and "built without CUDA" in b014[0]["message"]


def test_pasted_log_on_stdin_with_exit_code():
    text = (CASES / "cuda_default_cxx_load_segfault" / "stderr.txt").read_bytes()
    proc = analyze("--stderr", "-", "--exit-code", "139", "-f", "json", stdin=text)
    doc = json.loads(proc.stdout)
    assert doc["summary"]["primary_family"] == "segfault" and doc["runs"][0]["signal"] == "SIGSEGV"
    assert proc.returncode == 1


def test_empty_folder_is_reported_not_silently_clean(tmp_path):
    doc = json.loads(analyze(str(tmp_path), "-f", "json").stdout)
    assert doc["runs"][0]["damage"][0]["kind"] == "no_inputs"
    assert [f["rule_id"] for f in doc["findings"]] == ["AOTI-Y005"]


@pytest.mark.parametrize("args, message", [
    (["/no/such/dir"], "no such file or folder: /no/such/dir"),
    (["--stderr", "/no/such/log.txt"], "no such file: /no/such/log.txt"),
    (["--stderr", "-", "--exit-code", "bogus"], "--exit-code: not an exit status: 'bogus'"),
])
def test_wrong_input_is_one_line_and_exit_2(args, message):
    proc = analyze(*args, stdin=b"")
    assert proc.returncode == 2
    err = proc.stderr.decode().strip().splitlines()
    assert len(err) == 1 and message in err[0] and "Traceback" not in proc.stderr.decode()

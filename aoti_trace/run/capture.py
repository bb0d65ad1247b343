"""Run a command and capture everything aoti-trace needs to diagnose it, crash-safely.

Standard library only: this module also runs on machines where only python + torch are installed::

    python3 -m aoti_trace.capture --out DIR [--timeout S] [--check-inputs] [--logs VALUE] [--env K=V ...] -- CMD ...

It writes the capture folder described in ``docs/architecture.md``:

* ``stdout.txt`` / ``stderr.txt``: the child's streams, read from the pipes in two threads and written (and
  flushed) as they arrive, so a child killed by SIGSEGV or SIGKILL still leaves complete logs;
* ``trace/``: the TORCH_TRACE folder;
* ``manifest.json``: command, cwd, exit code / signal, timeout, duration, the debug variables set and the
  environment (python, torch, triton, CUDA, GPUs and their compute capabilities, machine and CPU flags, C++ compiler,
  libstdc++). A first manifest (``exit_code``
  null) is written before the child starts, so even a capture that is itself killed leaves one.

Ctrl-C (SIGINT) and SIGTERM are forwarded to the child's process group; a second Ctrl-C kills it. ``timeout``
ends a hung child: SIGTERM to its process group, SIGKILL after :data:`KILL_GRACE_S` seconds.

A process the command started in its own session (outside the group) can keep the pipes open after the command
has ended: the readers wait :data:`READER_DRAIN_S` seconds (and 2 more after SIGKILL to the group), then copy what
the pipes still hold and stop; the files are closed only after their readers have returned. The streams that
were still open are listed in the manifest (``capture.streams_left_open``): what was written to them after that
is not in the capture, and the analysis reports it as ``lost_output`` damage.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import platform
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any

SCHEMA = "aoti-trace.capture/v1"
PROBE_SCRIPT = Path(__file__).with_name("probe.py")  # run with the command's own Python
KILL_GRACE_S = 5.0
PROBE_TIMEOUT_S = 120.0
READER_DRAIN_S = 10.0
MAX_DRAIN_READS = 256  # reads of up to 64 KiB each after the readers are told to stop
# The child gets its own process group, so a timeout or a second Ctrl-C can end it with all its workers.
_NEW_GROUP: dict[str, Any] = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}

# Always set for a capture.
BASE_ENV = {
    "TORCH_SHOW_CPP_STACKTRACES": "1",
    "PYTHONFAULTHANDLER": "1",
    "PYTHONUNBUFFERED": "1",
}

# Debug variables that are recorded in the manifest when the user's environment already sets them
# (aoti-signatures.md section 4).
DEBUG_VARS = (
    "AOTI_RUNTIME_CHECK_INPUTS", "TORCHINDUCTOR_NAN_ASSERTS", "TORCHINDUCTOR_RUNTIME_TRITON_NAN_ASSERTS",
    "TORCHINDUCTOR_SIZE_ASSERTS", "TORCHINDUCTOR_SCALAR_ASSERTS", "TORCHINDUCTOR_ALIGNMENT_ASSERTS",
    "PYTORCH_NO_CUDA_MEMORY_CACHING", "CUDA_LAUNCH_BLOCKING", "AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER",
    "AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT", "AOT_INDUCTOR_DEBUG_COMPILE", "TORCHINDUCTOR_DEBUG_COMPILE",
    "AOT_INDUCTOR_DEBUG_SYMBOLS", "TORCHINDUCTOR_DEBUG_SYMBOL", "DUMP_AOTI_MINIFIER", "AOTINDUCTOR_REPRO_LEVEL",
    "TORCH_COMPILE_DEBUG", "TORCH_COMPILE_DEBUG_DIR", "TORCH_TRACE", "TORCH_DTRACE", "TORCH_LOGS",
    "TORCH_CPP_LOG_LEVEL", "TORCH_SHOW_CPP_STACKTRACES", "TORCHINDUCTOR_CACHE_DIR",
    "TORCHINDUCTOR_FORCE_DISABLE_CACHES", "TORCH_COMPILE_FORCE_DISABLE_CACHES", "TORCHINDUCTOR_CPP_MARCH", "CXX",
    "AOT_INDUCTOR_WEIGHT_USE_CACHING_ALLOCATOR", "TRITON_DEBUG", "CUDA_VISIBLE_DEVICES", "PYTHONFAULTHANDLER",
    "PYTHONUNBUFFERED",
    # a rank of a distributed job (torchrun / torch.distributed.elastic set them for each worker): the analysis
    # puts this rank on the run's findings
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "TORCHELASTIC_RESTART_COUNT",
)


class CaptureFailed(Exception):
    """The command could not be captured (cannot start, bad TORCH_LOGS value, unusable output folder).

    Plain exception on purpose (this module is standard-library only); the CLI turns it into
    ``aoti_trace.model.errors.CaptureError``.
    """


@dataclass
class CaptureResult:
    """How the captured command ended, and where its capture folder is."""

    out_dir: Path
    command: list[str]
    exit_code: int
    signal: str | None
    timed_out: bool
    interrupted: bool
    duration_s: float
    env: dict[str, str]
    environment: dict[str, object] = field(default_factory=dict)

    @property
    def manifest_path(self) -> Path:
        return self.out_dir / "manifest.json"

    def describe(self) -> str:
        """One line: how the command ended."""
        if self.timed_out:
            how = f"timed out after {self.duration_s:.1f}s"
        elif self.signal:
            how = f"killed by {self.signal}"
        else:
            how = f"exit code {self.exit_code}"
        if self.interrupted:
            how += " (interrupted)"
        return how


# --------------------------------------------------------------------------- helpers (pure)


def signal_name(returncode: int | None) -> str | None:
    """Name of the signal that ended a process, from a ``subprocess`` return code (negative = signal)."""
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"SIG{-returncode}"


def parse_env_assignments(items: list[str]) -> dict[str, str]:
    """``["K=V", ...]`` -> ``{K: V}``; raises :class:`CaptureFailed` for an item without ``=`` or name."""
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise CaptureFailed(f"--env expects NAME=VALUE, got {item!r}")
        env[key] = value
    return env


def python_of(cmd: list[str], path: str | None) -> str:
    """The interpreter to ask about torch: the command's own if it is a python, else this one."""
    exe = cmd[0] if cmd else ""
    if re.fullmatch(r"python[0-9.]*", os.path.basename(exe)):
        found = shutil.which(exe, path=path)
        if found:
            return found
    return sys.executable


def glibcxx_version(data: bytes) -> str | None:
    """Highest ``GLIBCXX_3.4.N`` version named in the bytes of a libstdc++.so."""
    found = {tuple(int(x) for x in m.group(1).split(b".")) for m in re.finditer(rb"GLIBCXX_(\d+(?:\.\d+)+)\b", data)}
    return "GLIBCXX_" + ".".join(map(str, max(found))) if found else None


def _suggest(logs: str, facts: dict[str, Any]) -> str:
    valid = facts.get("logs_valid") or []
    names = [n.strip().lstrip("+-") for n in logs.split(",")]
    bad = [n for n in names if n and n not in valid and "." not in n]
    if not valid or not bad:
        return ""
    import difflib

    close = difflib.get_close_matches(bad[0], valid, n=3)
    return f" ({bad[0]!r} is not a registered name" + (f"; did you mean {', '.join(close)}?)" if close else ")")


def default_out_dir(base: str | Path = "aoti-trace-out") -> Path:
    """``<base>/<YYYYmmdd-HHMMSS>`` (with a suffix when that exists already)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(base) / stamp
    n = 1
    while out.exists():
        n += 1
        out = Path(base) / f"{stamp}-{n}"
    return out


# --------------------------------------------------------------------------- environment probe

# Runs in the command's own python. Prints one JSON object. Imports torch only if it is installed.
def _run_quiet(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 20.0) -> str | None:
    try:
        res = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             env=env, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.decode("utf-8", "replace") if res.returncode == 0 else None


def probe_python(python: str, env: dict[str, str], logs: str | None = None) -> dict[str, object]:
    """Ask ``python`` (in ``env``, without TORCH_TRACE/TORCH_LOGS) for its python/torch/triton/CUDA/cxx facts.

    When ``logs`` is given it is also validated with torch's own TORCH_LOGS parser (``logs_ok``, ``logs_error``).
    Fails soft: returns ``{"probe_error": ...}`` when the probe cannot run.
    """
    penv = {k: v for k, v in env.items() if k not in ("TORCH_TRACE", "TORCH_LOGS", "TORCH_DTRACE")}
    if logs is not None:
        penv["AOTI_TRACE_PROBE_LOGS"] = logs
    try:
        res = subprocess.run([python, "-c", PROBE_SCRIPT.read_text(encoding="utf-8")], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=penv, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return {"probe_error": f"{type(exc).__name__}: {exc}"[:300]}
    lines = res.stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        facts: dict[str, object] = json.loads(lines[-1])
        return facts
    except (IndexError, ValueError):
        err = res.stderr.decode("utf-8", "replace").strip().splitlines()
        return {"probe_error": (err[-1] if err else f"probe exited {res.returncode}")[:300]}


def system_facts(facts: dict[str, object], env: dict[str, str]) -> dict[str, object]:
    """Add the machine's facts to ``facts`` (fail soft): GPUs (``nvidia-smi -L`` lines) and their compute
    capabilities, the machine and CPU flags (:mod:`aoti_trace.run.host`: what a package is compared with), the C++
    compiler and its version, the libstdc++ version."""
    from aoti_trace.run import host

    out = dict(facts)
    gpus = host.gpu_facts(env.get("PATH"))
    out["gpus"] = gpus["gpus"] if gpus else []
    out["gpu_compute_capability"] = gpus["gpu_compute_capability"] if gpus else []
    out["machine"] = platform.machine() or None
    out["cpu_flags"] = host.read_cpu_flags()
    cxx = env.get("CXX") or out.get("cxx_configured")
    out["cxx"] = cxx
    if cxx:
        exe = shutil.which(str(cxx), path=env.get("PATH"))
        out["cxx_path"] = exe
        text = _run_quiet([exe, "--version"], timeout=20.0) if exe else None
        out["cxx_version"] = text.strip().splitlines()[0] if text and text.strip() else None
    lib = out.get("libstdcxx_path")
    if not lib:
        text = _run_quiet(["ldconfig", "-p"], timeout=10.0) or _run_quiet(["/sbin/ldconfig", "-p"], timeout=10.0)
        if text:
            m = re.search(r"libstdc\+\+\.so\.6 .*=> (\S+)", text)
            lib = m.group(1) if m else None
            out["libstdcxx_path"] = lib
    if lib:
        try:
            out["libstdcxx"] = glibcxx_version(Path(str(lib)).read_bytes())
        except OSError:
            out["libstdcxx"] = None
    return out


# --------------------------------------------------------------------------- capture


def _pump(src: IO[bytes], sink: IO[bytes], echo_to: IO[bytes] | None, stop: threading.Event,
          state: dict[str, Any]) -> None:
    """Copy bytes from a pipe to a file (and a terminal), flushing each chunk as it arrives.

    Returns at end of file, or soon after ``stop`` is set (having first copied whatever the pipe still holds);
    ``state["eof"]`` says which. The caller closes ``sink`` only after this returns."""
    fd = src.fileno()
    poller = select.poll()  # not select.select: that fails for descriptors above FD_SETSIZE (1024)
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    drained = 0
    while True:
        if stop.is_set():
            os.set_blocking(fd, False)  # drain what is already in the pipe, then give up on the writer
            drained += 1
            if drained > MAX_DRAIN_READS:  # a writer that keeps the pipe full must not keep us here
                break
        elif not poller.poll(200):
            continue
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break  # stop was set and the pipe is empty; a process still holds its write end
        except OSError:
            state["eof"] = True
            break
        if not chunk:
            state["eof"] = True
            break
        sink.write(chunk)
        sink.flush()
        if echo_to is not None:
            try:
                echo_to.write(chunk)
                echo_to.flush()
            except (OSError, ValueError):
                echo_to = None  # the terminal went away; keep capturing to the file


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _note(msg: str) -> None:
    try:
        sys.stderr.write(f"aoti-trace: {msg}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def capture(
    cmd: list[str],
    out_dir: str | Path,
    *,
    logs: str | None = None,
    check_inputs: bool = False,
    extra_env: dict[str, str] | None = None,
    timeout: float | None = None,
    echo: bool | str = True,
    cwd: str | Path | None = None,
    environment: bool = True,
) -> CaptureResult:
    """Run ``cmd`` with the debug variables set and write a capture folder to ``out_dir``.

    ``logs``: TORCH_LOGS value, validated first with torch's parser when torch is importable (an invalid value
    would make ``import torch`` itself fail). ``check_inputs``: set ``AOTI_RUNTIME_CHECK_INPUTS=1``.
    ``extra_env``: more variables (they win over the defaults). ``timeout``: seconds before the child's process
    group gets SIGTERM (then SIGKILL). ``echo``: also stream the output to this process's stdout/stderr
    (``"stderr"``: both streams to stderr, to keep stdout clean for a machine-readable report).
    ``environment``: probe python/torch/compiler facts for the manifest (in parallel with the run).

    Raises :class:`CaptureFailed` when the command cannot be started or the arguments are unusable; a command that
    fails or crashes is a normal result.
    """
    if not cmd:
        raise CaptureFailed("no command given: put it after --, e.g. aoti-trace run -- python repro.py")
    if timeout is not None and timeout <= 0:
        raise CaptureFailed(f"--timeout must be positive, got {timeout}")
    out = Path(out_dir).absolute()
    run_cwd = str(Path(cwd).absolute()) if cwd is not None else os.getcwd()
    if (out / "manifest.json").exists():
        raise CaptureFailed(f"{out} already holds a capture (manifest.json); choose another --out")

    set_env: dict[str, str] = {"TORCH_TRACE": str(out / "trace"), **BASE_ENV}
    if logs is not None:
        set_env["TORCH_LOGS"] = logs
    if check_inputs:
        set_env["AOTI_RUNTIME_CHECK_INPUTS"] = "1"
    set_env.update(extra_env or {})
    env = {**os.environ, **set_env}
    recorded_env = {k: os.environ[k] for k in DEBUG_VARS if k in os.environ}
    recorded_env.update(set_env)

    exe = cmd[0] if os.sep in cmd[0] else shutil.which(cmd[0], path=env.get("PATH"))
    if not exe or not os.path.isfile(os.path.join(run_cwd, exe)) or not os.access(os.path.join(run_cwd, exe), os.X_OK):
        raise CaptureFailed(f"cannot start {cmd[0]!r}: not an executable file (or not on PATH)")

    python = python_of(cmd, env.get("PATH"))
    facts: dict[str, object] = {}
    if logs is not None:
        # Must know before the run: an invalid TORCH_LOGS makes `import torch` raise in the child.
        facts = probe_python(python, env, logs=logs)
        if facts.get("logs_ok") is False:
            raise CaptureFailed(f"invalid --logs value {logs!r}: {facts.get('logs_error')}{_suggest(logs, facts)}")
        facts.pop("logs_valid", None)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "trace").mkdir(exist_ok=True)
    except OSError as exc:
        raise CaptureFailed(f"cannot create output folder {out}: {exc.strerror}") from None
    probe_thread = None
    if logs is None and environment:
        def _probe() -> None:
            facts.update(probe_python(python, env))
        probe_thread = threading.Thread(target=_probe, name="aoti-trace-probe", daemon=True)
        probe_thread.start()

    manifest: dict[str, Any] = {
        "schema": SCHEMA,
        "command": list(cmd),
        "cwd": run_cwd,
        "exit_code": None,
        "signal": None,
        "timed_out": False,
        "interrupted": False,
        "duration_s": None,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "env": recorded_env,
        "environment": {},
        "capture": {"python": sys.executable, "complete": False},
    }
    _write_json(out / "manifest.json", manifest)

    stdout_f = open(out / "stdout.txt", "wb", buffering=0)
    stderr_f = open(out / "stderr.txt", "wb", buffering=0)
    state: dict[str, Any] = {"interrupted": False, "signals": 0, "pgid": None}

    def _forward(signum: int, _frame: FrameType | None) -> None:
        state["interrupted"] = True
        state["signals"] += 1
        if state["pgid"] is None:
            return  # not started yet: the command is ended as soon as it is
        if state["signals"] == 1:
            _note(f"forwarding {signal.Signals(signum).name} to the command (again to kill it)")
            _killpg(state["pgid"], signum)
        else:
            _killpg(state["pgid"], signal.SIGKILL)

    # Installed before the command starts: exec resets a handled signal to its default in the child, whereas an
    # ignored one stays ignored (a capture started in the background of a script inherits SIGINT ignored, and a
    # Python command would then sleep through the forwarded Ctrl-C).
    old_handlers = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            old_handlers[sig] = signal.signal(sig, _forward)

    start = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, cwd=run_cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, bufsize=0, **_NEW_GROUP)
    except OSError as exc:
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)
        stdout_f.close()
        stderr_f.close()
        (out / "manifest.json").unlink(missing_ok=True)
        raise CaptureFailed(f"cannot start {cmd[0]!r}: {exc.strerror or exc}") from None
    pgid = state["pgid"] = proc.pid
    if state["interrupted"]:
        _note("interrupted while starting: ending the command")
        _killpg(pgid, signal.SIGTERM)

    echo_err = getattr(sys.stderr, "buffer", None) if echo else None
    echo_out = echo_err if echo == "stderr" else getattr(sys.stdout, "buffer", None) if echo else None
    stop = threading.Event()
    pumped: dict[str, dict[str, Any]] = {"stdout": {"eof": False}, "stderr": {"eof": False}}
    readers = [
        threading.Thread(target=_pump, args=(proc.stdout, stdout_f, echo_out, stop, pumped["stdout"]), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, stderr_f, echo_err, stop, pumped["stderr"]), daemon=True),
    ]
    for t in readers:
        t.start()

    timed_out = False
    try:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _note(f"command still running after --timeout {timeout:g}s: sending SIGTERM to its process group")
            _killpg(pgid, signal.SIGTERM)
            try:
                proc.wait(timeout=KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                _note(f"still running {KILL_GRACE_S:g}s after SIGTERM: sending SIGKILL")
                _killpg(pgid, signal.SIGKILL)
                proc.wait()
        duration = time.monotonic() - start
        # Leftover members of the group (e.g. compile workers) may hold the pipes open.
        for t in readers:
            t.join(READER_DRAIN_S)
        if any(t.is_alive() for t in readers):
            _killpg(pgid, signal.SIGKILL)
            for t in readers:
                t.join(2.0)
    finally:
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)
        # A process outside the group (started in its own session) may still hold the pipes open: the readers
        # copy what the pipes hold and stop; a file is closed only once its reader has returned.
        stop.set()
        for t in readers:
            t.join(5.0)
        for t, f in zip(readers, (stdout_f, stderr_f)):
            if not t.is_alive():
                f.close()
    left_open = [name for name, st in pumped.items() if not st["eof"]]
    for pipe in (proc.stdout, proc.stderr):
        if pipe is None:  # never: both are pipes
            continue
        try:
            pipe.close()  # the writer that is left gets EPIPE / SIGPIPE from now on
        except OSError:
            pass
    if left_open:
        _note(f"{' and '.join(left_open)} still held open {READER_DRAIN_S + 2:g}s after the command ended (by a "
              "process it started outside its process group): output written after that was not captured")

    if probe_thread is not None:
        probe_thread.join(PROBE_TIMEOUT_S)
    environment_facts = system_facts(facts, env) if (environment or facts) else {}

    rc = proc.returncode
    result = CaptureResult(
        out_dir=out, command=list(cmd), exit_code=rc, signal=signal_name(rc), timed_out=timed_out,
        interrupted=state["interrupted"], duration_s=round(duration, 3), env=recorded_env,
        environment=environment_facts,
    )
    manifest.update(
        exit_code=rc, signal=result.signal, timed_out=timed_out, interrupted=result.interrupted,
        duration_s=result.duration_s, environment=environment_facts,
        capture={"python": sys.executable, "complete": True, "streams_left_open": left_open},
    )
    _write_json(out / "manifest.json", manifest)
    if timed_out:
        _note(f"timed out: the command was ended after {result.duration_s:.1f}s (killed by {result.signal})")
    return result

"""How a captured process ended (the ``process`` frame), from a capture manifest, an exit-code file or ``--exit-code``.

Exit statuses are accepted in the forms users paste: ``-11`` (Python's subprocess: killed by signal 11),
``139`` (a shell's 128+N), ``SIGSEGV`` or ``SEGV``, and words such as ``segfault``,
``Segmentation fault (core dumped)``, ``Bus error``, ``Aborted``, ``Killed``. A bare ``11`` is a plain exit status.
"""

from __future__ import annotations

import re
import shlex
import signal
from pathlib import Path
from typing import Any

import polars as pl

from aoti_trace.discover import RunInputs
from aoti_trace.model.errors import InputError
from aoti_trace.model.frames import Frames
from aoti_trace.ingest import safe_json

# words a shell or a user uses for a fatal signal
SIGNAL_WORDS: list[tuple[str, str]] = [
    (r"seg(?:mentation)?[ _-]?fault|segv", "SIGSEGV"),
    (r"bus[ _-]?error|sigbus", "SIGBUS"),
    (r"abort(?:ed)?|sigabrt", "SIGABRT"),
    (r"illegal[ _-]instruction|sigill", "SIGILL"),
    (r"floating[ _-]point[ _-]exception|sigfpe", "SIGFPE"),
    (r"killed|sigkill|oom[ _-]?kill", "SIGKILL"),
    (r"terminated|sigterm", "SIGTERM"),
    (r"interrupt(?:ed)?|sigint", "SIGINT"),
]


def _signum(name: str) -> int | None:
    try:
        return int(signal.Signals[name])
    except KeyError:
        return None


def _signame(num: int) -> str | None:
    try:
        return signal.Signals(num).name
    except ValueError:
        return None


def parse_exit(value: str | int | None) -> tuple[int | None, str | None]:
    """``(exit_code, signal)`` from an exit status in any accepted form; ``(None, None)`` when empty.

    Raises :class:`ValueError` when the value cannot be understood.
    """
    if value is None:
        return None, None
    if isinstance(value, bool):
        raise ValueError(f"not an exit status: {value!r}")
    if isinstance(value, int):
        text = str(value)
    else:
        text = value.strip()
    if not text:
        return None, None
    if re.fullmatch(r"[+-]?\d+", text):
        code = int(text)
        if code < 0:
            return code, _signame(-code)
        if 128 < code < 128 + 65:  # a shell's 128+N
            return code, _signame(code - 128)
        return code, None
    low = text.lower()
    m = re.fullmatch(r"(?:sig)?([a-z]+[0-9]*)", low)
    if m and _signum("SIG" + m.group(1).upper()) is not None:
        name = "SIG" + m.group(1).upper()
        return -_signum(name), name  # type: ignore[operator]
    for pattern, name in SIGNAL_WORDS:
        if re.search(pattern, low):
            return -_signum(name), name  # type: ignore[operator]
    raise ValueError(f"not an exit status: {text!r} (expected e.g. 1, -11, 139, SIGSEGV or 'segfault')")


def _env_text(env: object) -> str | None:
    if isinstance(env, dict):
        return " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env.items()) or None
    return None


def _command_text(cmd: object) -> str | None:
    if isinstance(cmd, list):
        return shlex.join(str(c) for c in cmd)
    if isinstance(cmd, str):
        return cmd
    return None


def read_process(run: RunInputs) -> Frames:
    """The ``process`` frame of ``run`` (one row), plus ``damage`` for an unreadable manifest. Empty when nothing
    is known. An ``--exit-code`` value overrides the manifest's; an invalid one raises :class:`InputError`."""
    frames = Frames()
    row: dict[str, Any] = {}
    damage: list[dict[str, Any]] = []
    if run.manifest is not None:
        row, damage = _read_manifest(run.manifest, run.run_id)
    if run.exit_code is not None:
        try:
            code, sig = parse_exit(run.exit_code)
        except ValueError as exc:
            raise InputError(f"--exit-code: {exc}") from None
        row.update(path="--exit-code", exit_code=code, signal=sig)
    if damage:
        frames.add("damage", pl.DataFrame(damage, infer_schema_length=None))
    if any(row.get(k) is not None for k in ("exit_code", "signal", "timed_out", "command", "duration_s", "env")):
        row.update(run_id=run.run_id, lineno=None)
        frames.add("process", pl.DataFrame([row], infer_schema_length=None))
    return frames


def manifest_environment(run: RunInputs) -> dict[str, Any] | None:
    """The ``environment`` a capture's manifest records about the machine it ran on (None without one; an unreadable
    manifest is reported as damage by :func:`read_process`)."""
    if run.manifest is None or run.manifest.name != "manifest.json":
        return None
    try:
        man = safe_json.loads(run.manifest.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return None
    env = man.get("environment") if isinstance(man, dict) else None
    return env if isinstance(env, dict) and env else None


def _damage(run_id: str, path: Path, kind: str, detail: str) -> dict[str, Any]:
    return {"run_id": run_id, "path": str(path), "lineno": None, "kind": kind, "count": 1, "detail": detail}


def _seconds(value: object) -> float | None:
    """A JSON number as seconds; None for anything else (a bool, a string, an integer too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def _read_manifest(path: Path, run_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return {}, [_damage(run_id, path, "unreadable", f"cannot read {path}: {exc.strerror}")]
    row: dict[str, Any] = {"path": str(path)}
    if path.name != "manifest.json":  # a bare exit-code file: '139', '-11', 'SIGSEGV', ...
        try:
            row["exit_code"], row["signal"] = parse_exit(text.strip().splitlines()[0] if text.strip() else "")
        except ValueError as exc:
            return {}, [_damage(run_id, path, "bad_json", f"exit-code file: {exc}")]
        return row, []
    try:
        man = safe_json.loads(text)
    except ValueError as exc:
        return {}, [_damage(run_id, path, "bad_json", f"manifest is not valid JSON: {exc}")]
    if not isinstance(man, dict):
        return {}, [_damage(run_id, path, "bad_json", "manifest is not a JSON object")]
    damage: list[dict[str, Any]] = []
    code, sig = None, None
    try:
        code, sig = parse_exit(man.get("exit_code"))
    except ValueError as exc:
        damage.append(_damage(run_id, path, "schema_drift", f"manifest exit_code: {exc}"))
    if isinstance(man.get("signal"), str) and man["signal"]:
        sig = man["signal"] if man["signal"].startswith("SIG") else sig
    timed_out = man.get("timed_out")
    interrupted = man.get("interrupted")
    duration = man.get("duration_s")
    row.update(
        command=_command_text(man.get("command")),
        exit_code=code,
        signal=sig,
        timed_out=timed_out if isinstance(timed_out, bool) else None,
        interrupted=interrupted if isinstance(interrupted, bool) else None,
        duration_s=_seconds(duration),
        env=_env_text(man.get("env")),
    )
    environment = man.get("environment")
    if not isinstance(environment, dict):
        environment = {}
    for column, key in (("torch", "torch"), ("cuda", "cuda"), ("cxx", "cxx"), ("cxx_version", "cxx_version"),
                        ("libstdcxx", "libstdcxx")):
        value = environment.get(key)
        row[column] = str(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None
    cap = man.get("capture")
    left_open = cap.get("streams_left_open") if isinstance(cap, dict) else None
    if isinstance(left_open, list) and left_open:
        streams = " and ".join(str(x) for x in left_open[:2])
        damage.append(_damage(run_id, path, "lost_output", f"{streams} still held open by a process the command "
                              "started (outside its process group) after the command ended: the capture stopped "
                              "reading, so output written after that is missing"))
    gpus = environment.get("gpus")
    row["gpus"] = "; ".join(map(str, gpus)) if isinstance(gpus, list) and gpus else None
    return row, damage

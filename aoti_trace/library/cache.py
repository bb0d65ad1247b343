"""On-disk cache of loaded rule sets: YAML parsing, fragment interpolation and validation happen once per rule content.
(The message catalogue's lookup texts are cached the same way, keyed by the catalogue files: ``ingest.text.known_messages``.)

An entry is a pickle in the user cache folder, named by a SHA-256 over

* the content (relative path and bytes) of every ``*.yaml`` / ``*.yml`` file under each rule folder, and the
  folders' absolute paths (a :class:`~aoti_trace.engine.ruleset.RuleSet` records where each rule came from);
* the versions of aoti-trace, Python, Polars, pydantic and PyYAML, and the source of the modules that define what
  is stored and how it is validated (the rule schema, its pydantic models and the loader), so an entry is never used
  by another version of the code.

Any change gives a new name; nothing is ever updated in place. Within one process, a rule set with the same key is
loaded once (callers treat it as read-only). The cache is safe to delete at any time. An entry
that cannot be read or unpickled, or holds something else than expected, is ignored and written again. Writes are
atomic (a temporary file renamed into place) and their failures (read-only home, full disk) are ignored.

Environment:

* ``AOTI_TRACE_NO_CACHE=1`` disables the cache (nothing is read or written);
* ``AOTI_TRACE_CACHE_DIR`` sets the folder (default: ``$XDG_CACHE_HOME/aoti-trace`` or ``~/.cache/aoti-trace``;
  ``~/Library/Caches/aoti-trace`` on macOS; ``%LOCALAPPDATA%\\aoti-trace\\Cache`` on Windows).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterable, TypeVar

T = TypeVar("T")

NO_CACHE_ENV = "AOTI_TRACE_NO_CACHE"
CACHE_DIR_ENV = "AOTI_TRACE_CACHE_DIR"
RULE_SUFFIXES = (".yaml", ".yml")
FORMAT = b"aoti-trace.rule-cache/1"
KEEP = 16  # entries kept (newest first); older ones are removed when a new one is written
MEMO_SIZE = 8
# Within one process, the same content key returns the same object (the rule engine keeps its compiled plan on a
# RuleSet): callers treat a loaded rule set as read-only. The key is still computed, so an edited file is seen.
_MEMO: dict[str, object] = {}


def cache_dir() -> Path | None:
    """The folder entries live in, or None when the cache is disabled (``AOTI_TRACE_NO_CACHE``)."""
    if os.environ.get(NO_CACHE_ENV, "").strip() not in ("", "0"):
        return None
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV])
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "aoti-trace" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "aoti-trace"
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache") / "aoti-trace"


def _versions() -> bytes:
    import importlib.util

    import polars

    import aoti_trace
    from aoti_trace.engine import ruleset, schema
    from aoti_trace.model import literal
    from aoti_trace.library import loader

    parts = [FORMAT, aoti_trace.__version__.encode(), sys.version.encode(), f"polars={polars.__version__}".encode()]
    # pydantic (it validates what is stored) and PyYAML are not imported when the cache answers (start-up): a file of
    # each that states its version stands for it
    for name, file in (("pydantic", "version.py"), ("yaml", "__init__.py")):
        spec = importlib.util.find_spec(name)
        where = Path(spec.origin).with_name(file) if spec and spec.origin else None
        parts.append(name.encode() + b"=" + (where.read_bytes() if where and where.is_file() else b"?"))
    # what a cached RuleSet is made of and what validated it: a source edit invalidates it
    for module in (schema, ruleset, loader, literal):
        parts.append(Path(module.__file__).read_bytes())  # type: ignore[arg-type]
    for name in ("engine/validation.py", "model/derive.py"):  # not imported here (they import pydantic)
        parts.append((Path(aoti_trace.__file__).parent / name).read_bytes())
    return b"\0".join(parts)


def rules_key(folders: Iterable[Path], extra: str = "", suffixes: tuple[str, ...] = RULE_SUFFIXES) -> str:
    """SHA-256 (hex) of the rule files (``suffixes``) under ``folders`` (each a folder or one file) and of the code
    versions."""
    h = hashlib.sha256(_versions())
    h.update(extra.encode())
    for folder in folders:
        folder = Path(folder).resolve()
        h.update(b"\0folder\0" + str(folder).encode())
        files = [folder] if folder.is_file() else sorted(
            p for p in folder.rglob("*") if p.suffix in suffixes and p.is_file())
        for path in files:
            h.update(b"\0file\0" + str(path.relative_to(folder) if path != folder else path.name).encode())
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def cached(folders: Iterable[Path], build: Callable[[], T], expect: type[T], extra: str = "",
           suffixes: tuple[str, ...] = RULE_SUFFIXES) -> T:
    """``build()``'s result for the files (``suffixes``: rule files by default) under ``folders``, from the cache
    when an entry exists.

    ``expect`` is the type the entry must hold (anything else is treated as corrupt); ``extra`` distinguishes
    results built differently from the same folders (e.g. which path of them was loaded, or what is built from them).
    """
    folders = list(folders)
    where = cache_dir()
    if where is None:
        return build()
    try:
        key = rules_key(folders, extra, suffixes)
    except OSError:  # a rule file vanished or is unreadable: the loader reports it
        return build()
    if key in _MEMO:
        return _MEMO[key]  # type: ignore[return-value]
    entry = where / f"rules-{key}.pickle"
    value: T
    try:
        value = pickle.loads(entry.read_bytes())
        if not isinstance(value, expect):
            raise TypeError(type(value))
    except Exception:  # noqa: BLE001 - missing, truncated or from another world: rebuild
        value = build()
        _write(entry, value)
    if len(_MEMO) >= MEMO_SIZE:
        _MEMO.pop(next(iter(_MEMO)))
    _MEMO[key] = value
    return value


def _write(entry: Path, value: object) -> None:
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".rules-", suffix=".tmp", dir=entry.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                pickle.dump(value, out, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, entry)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _prune(entry.parent)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        pass


def _prune(folder: Path) -> None:
    """Remove all but the :data:`KEEP` newest entries (stale code or rule versions)."""
    entries = []
    for path in folder.glob("rules-*.pickle"):
        try:
            entries.append((path.stat().st_mtime, path))
        except OSError:
            continue
    for _, path in sorted(entries, reverse=True)[KEEP:]:
        path.unlink(missing_ok=True)

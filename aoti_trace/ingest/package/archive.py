"""Bounded, read-only access to a ``.pt2`` zip archive: nothing is extracted, loaded or executed.

:func:`open_archive` classifies what the path is before anything else (missing, folder, Git LFS pointer, not a zip,
truncated zip) and refuses hostile archives (too many entries, oversized or over-compressed entries, names that
escape the extraction folder, symbolic-link entries). Every refusal is a :class:`aoti_trace.model.errors.PackageError`
whose ``kind`` attribute names the problem (see :data:`ERROR_KINDS`).

:class:`Archive` then reads text entries with caps on per-entry and total bytes, and the first bytes of binary
entries (ELF headers) without reading the rest.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from aoti_trace.model.errors import PackageError

MAX_ENTRIES = 100_000
MAX_TEXT_BYTES = 256 << 20  # one text entry we read fully (wrapper.cpp, kernel.cpp, json)
MAX_TOTAL_READ = 1 << 30  # all entries read fully, together
MAX_DECLARED_TOTAL = 1 << 40  # sum of declared uncompressed sizes
MAX_RATIO = 200  # uncompressed / compressed, checked for entries above RATIO_MIN_BYTES
RATIO_MIN_BYTES = 16 << 20
LFS_MAGIC = b"version https://git-lfs.github.com/spec/v1"

# PackageError.kind values (they double as `damage` kinds and `package_error` items in frames)
ERROR_KINDS = {
    "missing_file": "the path does not exist",
    "not_a_file": "the path is a folder or a special file",
    "unreadable": "the file or an entry cannot be read (permissions, I/O error, encrypted or undecodable entry)",
    "empty_file": "the file is empty",
    "lfs_pointer": "a Git LFS pointer text file instead of the package",
    "not_a_zip": "not a zip archive at all",
    "truncated_archive": "a zip whose end (central directory) is missing: cut short by a copy or download",
    "hostile_archive": "entry names escaping the folder, symlink entries, zip bombs, too many entries",
    "bad_crc": "an entry's data does not match its CRC",
    "exported_program": "a torch.export.save archive (ExportedProgram), no AOTInductor model inside",
    "no_aoti_model": "a zip with no data/aotinductor/<model>/ entries",
}


def package_error(kind: str, message: str) -> PackageError:
    """A :class:`PackageError` carrying ``kind`` (one of :data:`ERROR_KINDS`)."""
    err = PackageError(message)
    err.kind = kind  # type: ignore[attr-defined]
    return err


def error_kind(exc: PackageError) -> str:
    return getattr(exc, "kind", "unreadable")


def _unsafe_name(name: str) -> str | None:
    """Why an entry name is unsafe to extract, or None."""
    if "\x00" in name:
        return "contains a NUL byte"
    norm = name.replace("\\", "/")
    if norm.startswith("/") or (len(norm) > 1 and norm[1] == ":"):
        return "is an absolute path"
    if ".." in norm.split("/"):
        return "escapes the extraction folder ('..')"
    return None


def _is_symlink(info: zipfile.ZipInfo) -> bool:
    return ((info.external_attr >> 16) & 0o170000) == 0o120000  # S_IFLNK in the unix mode bits


@dataclass
class Archive:
    """An opened, vetted archive. Use :func:`open_archive`; close with :meth:`close` (or ``with``)."""

    path: Path
    zf: zipfile.ZipFile
    infos: dict[str, zipfile.ZipInfo]
    names: list[str]
    read_total: int = 0
    crc_errors: list[str] = field(default_factory=list)

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.zf.close()

    def size(self, name: str) -> int:
        return self.infos[name].file_size

    def read_bytes(self, name: str, limit: int = MAX_TEXT_BYTES) -> bytes:
        """Read a whole entry (CRC-checked) if it is at most ``limit`` bytes; raises PackageError otherwise."""
        info = self.infos[name]
        if info.file_size > limit:
            raise package_error("hostile_archive", f"{self.path}: entry {name} is {info.file_size} bytes, over the "
                                f"{limit}-byte limit for entries aoti-trace reads")
        if self.read_total + info.file_size > MAX_TOTAL_READ:
            raise package_error("hostile_archive", f"{self.path}: reading {name} would exceed {MAX_TOTAL_READ} "
                                "bytes read from one package")
        try:
            with self.zf.open(info) as fh:
                data = fh.read(limit + 1)
        except zipfile.BadZipFile as exc:
            if "CRC" in str(exc):
                raise package_error("bad_crc", f"{self.path}: entry {name} is corrupt ({exc})") from None
            raise package_error("truncated_archive", f"{self.path}: entry {name} cannot be read ({exc})") from None
        except Exception as exc:  # noqa: BLE001 - only zipfile runs here: whatever a hostile entry makes it raise
            # (zlib.error, RuntimeError for encryption, NotImplementedError, EOFError, ...) is an unreadable entry
            raise package_error("unreadable", f"{self.path}: entry {name} cannot be read ({exc})") from None
        if len(data) > limit:  # the header lied about the size
            raise package_error("hostile_archive", f"{self.path}: entry {name} inflates past its declared size")
        self.read_total += len(data)
        return data

    def read_text(self, name: str) -> str:
        return self.read_bytes(name).decode("utf-8", errors="replace")

    def read_head(self, name: str, n: int = 64) -> bytes:
        """The first ``n`` bytes of an entry (no CRC check: the rest is never read)."""
        try:
            with self.zf.open(self.infos[name]) as fh:
                return fh.read(n)
        except Exception as exc:  # noqa: BLE001 - only zipfile runs here (see read_bytes)
            raise package_error("unreadable", f"{self.path}: entry {name} cannot be read ({exc})") from None


def sniff(path: Path) -> None:
    """Raise PackageError if ``path`` is not even a candidate zip (missing, folder, LFS pointer, other text)."""
    if not path.exists():
        raise package_error("missing_file", f"no such package: {path}")
    if not path.is_file():
        raise package_error("not_a_file", f"{path} is not a file (give the .pt2 file itself)")
    try:
        with path.open("rb") as fh:
            head = fh.read(512)
    except OSError as exc:
        raise package_error("unreadable", f"cannot read {path}: {exc.strerror}") from None
    if not head:
        raise package_error("empty_file", f"{path} is empty (0 bytes), not a .pt2 package")
    if head.startswith(LFS_MAGIC):
        raise package_error("lfs_pointer", f"{path} is a Git LFS pointer file, not the package: run `git lfs pull` "
                            "(or install git-lfs and re-clone) to fetch the real file")
    if not head.startswith(b"PK"):
        what = "an ELF shared library" if head.startswith(b"\x7fELF") else "text" if _is_text(head) else "binary data"
        raise package_error("not_a_zip", f"{path} is not a .pt2 package (a zip archive): it starts with {what}")


def _is_text(head: bytes) -> bool:
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def open_archive(path: str | Path) -> Archive:
    """Open and vet a ``.pt2``. Raises PackageError (with ``kind``) for anything that is not a safe zip."""
    path = Path(path)
    sniff(path)
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise package_error("truncated_archive", f"{path} is a damaged zip archive ({exc}): the file was probably "
                            f"cut short while copying or downloading ({path.stat().st_size} bytes)") from None
    except Exception as exc:  # noqa: BLE001 - only zipfile runs here: any failure on hostile bytes is unreadable
        raise package_error("unreadable", f"cannot read {path} as a zip archive: {exc}") from None
    try:
        infos = zf.infolist()
        if len(infos) > MAX_ENTRIES:
            raise package_error("hostile_archive", f"{path} has {len(infos)} entries (limit {MAX_ENTRIES}); refusing it")
        total = 0
        for info in infos:
            why = _unsafe_name(info.filename)
            if why:
                raise package_error("hostile_archive", f"{path}: entry {info.filename!r} {why}; refusing a package "
                                    "that would write outside its folder when extracted")
            if _is_symlink(info):
                raise package_error("hostile_archive", f"{path}: entry {info.filename!r} is a symbolic link; refusing it")
            if info.flag_bits & 0x1:
                raise package_error("unreadable", f"{path}: entry {info.filename!r} is encrypted (a password-"
                                    "protected zip): neither aoti-trace nor torch's package loader can read it")
            total += info.file_size
            if (info.file_size > RATIO_MIN_BYTES
                    and info.file_size > MAX_RATIO * max(info.compress_size, 1)):
                raise package_error("hostile_archive", f"{path}: entry {info.filename!r} inflates {info.compress_size} "
                                    f"bytes to {info.file_size} (ratio over {MAX_RATIO}): a zip bomb; refusing it")
        if total > MAX_DECLARED_TOTAL:
            raise package_error("hostile_archive", f"{path} declares {total} uncompressed bytes; refusing it")
    except PackageError:
        zf.close()
        raise
    names = [i.filename for i in infos]
    return Archive(path=path, zf=zf, infos={i.filename: i for i in infos}, names=names)


def archive_prefix(names: list[str]) -> str:
    """The top-level folder of the archive, like the C++ loader: shared by the first two entries ('' if none)."""
    heads = [n.split("/", 1)[0] for n in names[:2] if "/" in n]
    if len(heads) == 2 and heads[0] == heads[1]:
        return heads[0] + "/"
    if len(names) == 1 and "/" in names[0]:
        return names[0].split("/", 1)[0] + "/"
    return ""

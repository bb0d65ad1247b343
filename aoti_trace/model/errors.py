"""Exceptions raised by aoti-trace.

Every user-facing error derives from :class:`AotiTraceError`, which the CLI (:mod:`aoti_trace.cli`, the only
module that knows click) turns into one line on stderr and exit code 2. Anything else that escapes is a bug: the
CLI exits 3 with a short bug-report hint.

    AotiTraceError                 exit code 2
    ├── InputError                 a path is missing, unreadable, or not something we can analyse
    ├── RuleError                  a rule file is invalid (carries file:line)
    ├── PackageError               a .pt2 cannot be inspected (not a zip, hostile, LFS pointer, ...)
    ├── CaptureError               `aoti-trace run` could not start or capture the command
    └── ReportError                an output cannot be written
"""

from __future__ import annotations


class AotiTraceError(Exception):
    """Base class: a user or input error, reported as one line with exit code 2."""

    exit_code = 2


class InputError(AotiTraceError):
    """A path to analyse is missing, unreadable or of an unknown kind."""


class RuleError(AotiTraceError):
    """A rule file cannot be loaded. The message starts with ``file:line:column``."""


class PackageError(AotiTraceError):
    """A ``.pt2`` package cannot be inspected."""


class CaptureError(AotiTraceError):
    """The command given to ``aoti-trace run`` could not be started or captured."""


class ReportError(AotiTraceError):
    """A report cannot be written."""

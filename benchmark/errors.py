"""Errors that reach the user as one clear line: what is wrong, where, and what to do.

Every error raised on bad input derives from :class:`BenchmarkError`; the command line prints
``str(err)`` on one line and exits non-zero, with no traceback.
"""

from __future__ import annotations


class BenchmarkError(Exception):
    """Base class. ``what`` says what went wrong (naming the file or field); ``fix`` what to do."""

    def __init__(self, what: str, fix: str = "") -> None:
        self.what = what
        self.fix = fix
        super().__init__(f"{what} -- {fix}" if fix else what)


class DataMissingError(BenchmarkError):
    """Dataset or weight files are absent and cannot be downloaded."""


class ChecksumError(BenchmarkError):
    """A file's checksum does not match the expected value (nothing was unpickled or loaded)."""


class UnknownNameError(BenchmarkError, KeyError):
    """A registry (dataset, backbone, method, partition) has no entry of that name."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return Exception.__str__(self)


class ConfigError(BenchmarkError, ValueError):
    """A configuration value is missing or invalid."""


class CacheCorruptError(BenchmarkError):
    """A cached artefact cannot be read back or does not match its metadata."""


class CorruptFileError(ChecksumError):
    """A file the suite wrote and now reads back is damaged: its checksum does not match, it is truncated or
    it does not parse. Nothing of it was used; the fix says how to re-create it."""


class DiskFullError(BenchmarkError):
    """A write failed for lack of space (ENOSPC / EDQUOT); nothing half-written was kept."""


class NotWritableError(BenchmarkError):
    """A write failed because the folder is read-only or not writable (EROFS / EACCES / EPERM)."""

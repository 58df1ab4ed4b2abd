"""Errors of the durable store; each message names the agent id, file or field involved."""

from __future__ import annotations


class StoreError(Exception):
    """Base of every store error, so a caller can treat the store as one failure domain."""


class UnknownAgentError(StoreError, LookupError):
    """No sidecar exists for the agent id (or it is not visible to this store)."""


class DuplicateAgentError(StoreError):
    """``create`` was given an id that already has a sidecar: ids are never reused."""


class TerminalStatusError(StoreError):
    """An update tried to move a terminal record (completed/failed/killed) to another status."""


class InvalidRecordError(StoreError, ValueError):
    """A sidecar (on disk or in an update) does not match the schema; names file and field."""


class SchemaVersionError(InvalidRecordError):
    """A sidecar written by a newer (or unknown) schema version than this code reads."""


class UnsafePathError(StoreError):
    """A sidecar or lease path is a symlink (or otherwise not a plain file we created)."""


class StoreUnavailableError(StoreError, ValueError):
    """The configured store cannot be used (an unknown ``SUBAGENTS_STORE``, a database that
    does not answer, a missing driver); the message names the setting, never a password."""

"""Fast compact JSON for the durable hot path (transcript lines, sidecar records).

Every model call appends a message or two to a transcript and every child writes its sidecar
twice, so encoding is on the critical CPU path of a fan-out. ``orjson`` encodes these values
about 15 times faster than the standard library (measured: a 1.5 KB sidecar 9.6 µs → 0.65 µs, a
transcript message 2.2 µs → 0.15 µs). Its output is plain UTF-8 JSON that ``json.loads``
reads back unchanged; the values it refuses (integers beyond 64 bits, non-string keys) are
encoded by the standard library instead, so nothing a caller could pass fails here that would
not fail there. A string holding a lone surrogate (which no UTF-8 can carry) is written as a
``\\uXXXX`` escape, so one odd character from a model never stops a transcript write.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_FALLBACK = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_ASCII_FALLBACK = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"))


def dumps(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON bytes (no trailing newline)."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        text = _FALLBACK.encode(value)
    try:
        return text.encode()
    except UnicodeEncodeError:
        # A lone surrogate ("\ud800" from a model, a non-UTF-8 byte kept by surrogateescape) is
        # not UTF-8; as a JSON escape it is plain ASCII and reads back as the same string.
        return _ASCII_FALLBACK.encode(value).encode()

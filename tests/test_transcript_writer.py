"""``TranscriptWriter``: the line format, turn markers, private modes and symlink refusal."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from subagents.messages import Message
from subagents.store.transcript import TranscriptWriter, _encode, read_messages, read_records

REFERENCE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

VALUES: list[Any] = [
    "plain",
    'quote " backslash \\ newline \n tab \t nul \x00 line-sep \u2028',
    "é ü 😀 中文",
    0,
    -7,
    10**30,
    1.5,
    1e16,
    -0.0,
    float("nan"),
    float("inf"),
    True,
    None,
    [],
    {},
    (1, "two"),
    {"a": [1, {"b": "ü"}], 1: 2, 2.5: 3, None: 1},
    {False: 0},
]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_encoding_matches_the_compact_json_encoder(value: Any) -> None:
    assert _encode(value) == REFERENCE(value)


def test_an_unserialisable_value_fails_and_later_encodes_still_work() -> None:
    with pytest.raises(TypeError):
        _encode({"x": object()})
    assert _encode({"x": [1]}) == '{"x":[1]}'


def message(text: str) -> Message:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def test_lines_markers_and_modes(tmp_path: Path) -> None:
    path = tmp_path / "agents" / "a1.jsonl"
    writer = TranscriptWriter(path)
    writer.append(message("one"))
    writer.flush()
    writer.append(message("two"))
    writer.record({"type": "note", "n": 1})
    writer.flush()
    writer.flush()  # nothing buffered: no marker
    writer.append(message("lost"))  # a turn never flushed before a crash is not durable...
    os.close(writer._fd)  # ... (simulated: the descriptor goes away without a flush)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines == [
        '{"type":"message","message":{"role":"user","content":[{"type":"text","text":"one"}]}}',
        '{"type":"turn_completed","turn":1}',
        '{"type":"message","message":{"role":"user","content":[{"type":"text","text":"two"}]}}',
        '{"type":"note","n":1}',
        '{"type":"turn_completed","turn":2}',
    ]
    assert [r["type"] for r in read_records(path)][-1] == "turn_completed"
    assert read_messages(path) == [message("one"), message("two")]
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert oct(path.parent.stat().st_mode & 0o777) == "0o700"


def test_close_flushes_the_last_turn(tmp_path: Path) -> None:
    path = tmp_path / "a2.jsonl"
    writer = TranscriptWriter(path)
    writer.append(message("é"))
    writer.close()
    writer.close()
    assert read_messages(path) == [message("é")]
    assert path.read_text(encoding="utf-8").endswith('{"type":"turn_completed","turn":1}\n')


def test_a_removed_folder_is_made_again_private(tmp_path: Path) -> None:
    folder = tmp_path / "agents"
    TranscriptWriter(folder / "a1.jsonl").close()
    shutil.rmtree(folder)
    writer = TranscriptWriter(folder / "a2.jsonl")
    writer.append(message("again"))
    writer.close()
    assert read_messages(folder / "a2.jsonl") == [message("again")]
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    assert oct((folder / "a2.jsonl").stat().st_mode & 0o777) == "0o600"


def test_a_planted_symlink_is_not_followed(tmp_path: Path) -> None:
    folder = tmp_path / "agents"
    TranscriptWriter(folder / "a1.jsonl").close()  # the folder is known to this process now
    target = tmp_path / "elsewhere.txt"
    target.write_text("untouched", encoding="utf-8")
    (folder / "a3.jsonl").symlink_to(target)
    with pytest.raises(OSError):
        TranscriptWriter(folder / "a3.jsonl")
    assert target.read_text(encoding="utf-8") == "untouched"

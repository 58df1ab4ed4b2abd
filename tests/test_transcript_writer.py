"""``TranscriptWriter``: the line format, turn markers, private modes and symlink refusal."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from subagents.messages import Message
from subagents.store.transcript import TranscriptWriter, read_messages, read_records

REFERENCE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

ODD_MESSAGES: list[Message] = [
    {"role": "user", "content": 'quote " backslash \\ newline \n tab \t nul \x00 sep \u2028'},
    {"role": "user", "content": "é ü 😀 中文"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": ""},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "Note",
                "input": {"n": [0, -7, 1.5, 1e16, -0.0, True, None, {}], "big": 10**30},
            },
        ],
    },
    {  # a key that is not a string
        "role": "user",
        "content": [{"type": "text", "text": "x"}],
        "extra": {1: "int key"},  # type: ignore[typeddict-unknown-key]
    },
]


def test_lines_are_the_compact_json_of_each_message(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    writer = TranscriptWriter(path)
    for item in ODD_MESSAGES:
        writer.append(item)
    writer.close()
    lines = path.read_text(encoding="utf-8").split("\n")  # not splitlines: it splits at U+2028
    for line, item in zip(lines, ODD_MESSAGES, strict=False):
        assert json.loads(line) == json.loads(REFERENCE({"type": "message", "message": item}))
    assert read_messages(path) == json.loads(REFERENCE(ODD_MESSAGES))


def test_an_unserialisable_message_fails_and_the_writer_still_works(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    writer = TranscriptWriter(path)
    with pytest.raises(TypeError):
        writer.append({"role": "user", "content": [object()]})  # type: ignore[list-item]
    writer.append(message("fine"))
    writer.close()
    assert read_messages(path) == [message("fine")]


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


def test_a_short_write_is_finished_without_repeating_or_losing_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def write_turns(writer: TranscriptWriter) -> None:
        for message in ODD_MESSAGES:
            writer.append(message)
        writer.flush()
        writer.append(ODD_MESSAGES[0])
        writer.flush()

    reference = TranscriptWriter(tmp_path / "reference.jsonl")
    write_turns(reference)
    reference.close()
    path = tmp_path / "t.jsonl"
    writer = TranscriptWriter(path)
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data[:7])))
    write_turns(writer)
    monkeypatch.undo()
    writer.close()
    assert path.read_bytes() == (tmp_path / "reference.jsonl").read_bytes()
    assert [r["turn"] for r in read_records(path) if r["type"] == "turn_completed"] == [1, 2]

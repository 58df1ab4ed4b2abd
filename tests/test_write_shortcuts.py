"""Two system-call wrappers without their Python helpers on the hot path, compared with the
plain forms: a record's bytes written by one ``os.write`` unless it comes back short
(``atomic._write_all``), and a transcript's folder cut from its path by slicing unless the path
has no folder part or starts at the root (``transcript._open_private``, ``os.path.dirname``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from subagents.store import atomic, transcript
from subagents.store.atomic import stage_write
from subagents.store.transcript import TranscriptWriter


@pytest.mark.parametrize("chunk", [None, 1, 7, 4096])
def test_a_staged_record_is_written_whole_however_short_the_writes(
    tmp_path: Path, chunk: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = bytes(range(256)) * 37  # 9,472 bytes
    real = os.write
    calls: list[int] = []

    def short(fd: int, buffer: bytes | memoryview) -> int:
        calls.append(len(buffer))
        return real(fd, buffer[:chunk] if chunk else buffer)

    monkeypatch.setattr(atomic.os, "write", short)
    staged = stage_write(str(tmp_path / "a.json"), data)
    atomic.release_fd(staged)
    assert Path(staged.temp).read_bytes() == data
    assert len(calls) == (1 if chunk is None or chunk >= len(data) else -(-len(data) // chunk))


@pytest.mark.parametrize(
    "name", ["t.jsonl", "sub/t.jsonl", "sub//t.jsonl", "a/./b/t.jsonl", "ROOT", "REL"]
)
def test_a_transcripts_folder_is_made_private_as_dirname_names_it(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    made: list[Path] = []
    monkeypatch.setattr(transcript, "ensure_private_dir", lambda folder: made.append(folder))
    monkeypatch.setattr(transcript, "_PRIVATE_FOLDERS", set())
    if name == "ROOT":
        # A path right under the root: its folder is "/" (slicing would give ""); no file is
        # made there (the open is refused here, after the folder's check).
        def refused(*_: object) -> int:
            raise PermissionError("not here")

        monkeypatch.setattr(transcript.os, "open", refused)
        with pytest.raises(PermissionError):
            TranscriptWriter("/subagents-no-such-transcript.jsonl")
        assert made == [Path("/")]
        return
    path = str(tmp_path / "x" / "t.jsonl") if name == "REL" else name
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    writer = TranscriptWriter(path)
    writer.close()
    assert made == [Path(os.path.dirname(path))]
    assert os.path.exists(path)

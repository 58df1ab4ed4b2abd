"""Read, Write, Edit, Glob and Grep on real files in tmp_path, called directly and via the loop's
input validation."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.loop.scheduling import execute_call, prepare_calls
from subagents.messages import ToolUseBlock
from subagents.tools.base import CallInfo, Tool, ToolContext, ToolError, ToolOutput
from subagents.tools.edit import EditTool
from subagents.tools.glob import GlobTool
from subagents.tools.grep import GrepTool
from subagents.tools.inputs.grep import GrepInput
from subagents.tools.read import ReadTool
from subagents.tools.write import WriteTool

ALL_TOOLS: list[Tool[Any]] = [ReadTool(), WriteTool(), EditTool(), GlobTool(), GrepTool()]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET\n")
    return root


@pytest.fixture
def ctx(repo: Path) -> ToolContext:
    return ToolContext(
        cwd=repo,
        roots=(repo,),
        abort=AbortSignal(),
        agent=AgentRef(agent_id="a", agent_type="main"),
    )


async def run(tool: Tool[Any], ctx: ToolContext, **raw: Any) -> ToolOutput:
    args = tool.input_model.model_validate(raw)
    info = CallInfo(tool_use_id="toolu_1", progress=lambda data: None)
    return await tool.call(args, ctx, info)


async def fails(tool: Tool[Any], ctx: ToolContext, **raw: Any) -> str:
    with pytest.raises(ToolError) as info:
        await run(tool, ctx, **raw)
    return str(info.value)


def set_mtime(path: Path, seconds: int) -> None:
    os.utime(path, ns=(seconds * 10**9, seconds * 10**9))


# --- flags, schemas, validation -------------------------------------------------------------


def test_read_only_and_concurrency_flags() -> None:
    flags = {t.name: (t.is_read_only(None), t.is_concurrency_safe(None)) for t in ALL_TOOLS}
    assert flags == {
        "Read": (True, True),
        "Glob": (True, True),
        "Grep": (True, True),
        "Write": (False, False),
        "Edit": (False, False),
    }


def test_schemas_use_claude_code_field_names() -> None:
    props = {t.name: set(t.schema().input_schema["properties"]) for t in ALL_TOOLS}
    assert props == {
        "Read": {"file_path", "offset", "limit"},
        "Write": {"file_path", "content"},
        "Edit": {"file_path", "old_string", "new_string", "replace_all"},
        "Glob": {"pattern", "path"},
        "Grep": {"pattern", "path", "glob", "output_mode", "-i", "-n", "head_limit"},
    }


def block(name: str, raw: dict[str, Any], call_id: str = "toolu_1") -> ToolUseBlock:
    return {"type": "tool_use", "id": call_id, "name": name, "input": raw}


def test_invalid_inputs_become_errors_naming_the_field() -> None:
    tools = {t.name: t for t in ALL_TOOLS}
    prepared = prepare_calls(
        [
            block("Read", {"path": "x"}, "c1"),
            block("Read", {"file_path": "x", "limit": 0}, "c2"),
            block("Grep", {"pattern": "x", "output_mode": "lines"}, "c3"),
            block("Edit", {"file_path": "x", "old_string": "a"}, "c4"),
            block("Grep", {"pattern": "x", "-i": True, "-n": False}, "c5"),
        ],
        tools,
    )
    errors = [p.error or "" for p in prepared]
    assert "`file_path`" in errors[0] and "`path`" in errors[0]
    assert "`limit`" in errors[1]
    assert "`output_mode`" in errors[2]
    assert "`new_string`" in errors[3]
    assert prepared[4].error is None
    args = prepared[4].args
    assert isinstance(args, GrepInput)
    assert args.case_insensitive is True and args.line_numbers is False


async def test_tool_error_reaches_the_model_as_error_result(ctx: ToolContext) -> None:
    tools = {t.name: t for t in ALL_TOOLS}
    [call] = prepare_calls([block("Read", {"file_path": "../outside/secret.txt"})], tools)
    result = await execute_call(call, ctx)
    assert result.block.get("is_error") is True
    assert "outside the working directory" in str(result.block["content"])


# --- Read ------------------------------------------------------------------------------------


async def test_read_numbers_lines_like_cat_n(repo: Path, ctx: ToolContext) -> None:
    (repo / "f.txt").write_text("alpha\nbeta\n\ngamma\n")
    out = await run(ReadTool(), ctx, file_path="f.txt")
    assert out.content == "     1\talpha\n     2\tbeta\n     3\t\n     4\tgamma"


async def test_read_records_mtime(repo: Path, ctx: ToolContext) -> None:
    path = repo / "f.txt"
    path.write_text("x\n")
    await run(ReadTool(), ctx, file_path=str(path))
    assert ctx.read_files == {str(path.resolve()): path.stat().st_mtime_ns}


async def test_read_line_range(repo: Path, ctx: ToolContext) -> None:
    (repo / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 51)))
    out = await run(ReadTool(), ctx, file_path="f.txt", offset=10, limit=3)
    lines = out.content.split("\n")
    assert lines[:3] == ["    10\tline 10", "    11\tline 11", "    12\tline 12"]
    assert "offset=13" in out.content
    tail = await run(ReadTool(), ctx, file_path="f.txt", offset=49)
    assert tail.content == "    49\tline 49\n    50\tline 50"


async def test_read_default_limit_is_2000_lines(repo: Path, ctx: ToolContext) -> None:
    (repo / "f.txt").write_text("".join(f"{i}\n" for i in range(1, 2501)))
    out = await run(ReadTool(), ctx, file_path="f.txt")
    numbered = [line for line in out.content.split("\n") if "\t" in line]
    assert len(numbered) == 2000
    assert numbered[-1] == "  2000\t2000"
    assert "continue with offset=2001" in out.content


async def test_read_offset_past_end_is_a_notice(repo: Path, ctx: ToolContext) -> None:
    (repo / "f.txt").write_text("a\nb\n")
    out = await run(ReadTool(), ctx, file_path="f.txt", offset=10)
    assert "has 2 lines" in out.content and "offset 10" in out.content


async def test_read_cuts_long_lines(repo: Path, ctx: ToolContext) -> None:
    (repo / "f.txt").write_text("x" * 5000 + "\nshort\n")
    out = await run(ReadTool(), ctx, file_path="f.txt")
    first, second = out.content.split("\n")
    assert first.startswith("     1\t" + "x" * 2000) and "x" * 2001 not in first
    assert "3000 more characters" in first
    assert second == "     2\tshort"


async def test_read_size_cap_needs_offset_or_limit(repo: Path, ctx: ToolContext) -> None:
    (repo / "big.txt").write_text("y" * 99 + "\n" + ("z" * 99 + "\n") * 3000)  # ~300 KB
    message = await fails(ReadTool(), ctx, file_path="big.txt")
    assert "big.txt" in message and "offset" in message and "limit" in message
    part = await run(ReadTool(), ctx, file_path="big.txt", offset=1, limit=2)
    assert part.content.startswith("     1\t" + "y" * 99 + "\n     2\t" + "z" * 99)


async def test_read_output_cap_stops_with_continuation(repo: Path, ctx: ToolContext) -> None:
    (repo / "wide.txt").write_text(("w" * 999 + "\n") * 200)  # 200 KB, under the size cap
    out = await run(ReadTool(), ctx, file_path="wide.txt")
    assert len(out.content) <= ReadTool.max_result_chars
    assert "More lines follow: continue with offset=" in out.content


async def test_read_refuses_binary_directory_and_missing(repo: Path, ctx: ToolContext) -> None:
    (repo / "blob.bin").write_bytes(b"\x89PNG\x00\x00data")
    (repo / "sub").mkdir()
    assert "binary" in await fails(ReadTool(), ctx, file_path="blob.bin")
    assert "directory" in await fails(ReadTool(), ctx, file_path="sub")
    missing = await fails(ReadTool(), ctx, file_path="nope.txt")
    assert missing == f"File does not exist: {(repo / 'nope.txt').resolve()}"


async def test_read_refuses_a_fifo_instead_of_blocking(repo: Path, ctx: ToolContext) -> None:
    os.mkfifo(repo / "pipe")
    assert "not a regular file" in await fails(ReadTool(), ctx, file_path="pipe")


async def test_read_empty_file_is_a_notice(repo: Path, ctx: ToolContext) -> None:
    (repo / "empty.txt").write_text("")
    out = await run(ReadTool(), ctx, file_path="empty.txt")
    assert "empty" in out.content and not out.is_error


async def test_read_crlf_lines_have_no_carriage_returns(repo: Path, ctx: ToolContext) -> None:
    (repo / "dos.txt").write_bytes(b"one\r\ntwo\r\n")
    out = await run(ReadTool(), ctx, file_path="dos.txt")
    assert out.content == "     1\tone\n     2\ttwo"


async def test_read_escape_by_dotdot_and_symlink_refused(repo: Path, ctx: ToolContext) -> None:
    (repo / "link.txt").symlink_to(repo.parent / "outside" / "secret.txt")
    for path in ("../outside/secret.txt", "link.txt", str(repo.parent / "outside/secret.txt")):
        message = await fails(ReadTool(), ctx, file_path=path)
        assert "outside the working directory" in message
        assert "TOP SECRET" not in message
    assert ctx.read_files == {}


# --- Write -----------------------------------------------------------------------------------


async def test_write_creates_parents_and_reports_change(repo: Path, ctx: ToolContext) -> None:
    out = await run(WriteTool(), ctx, file_path="a/b/c.txt", content="hello\r\nworld")
    target = (repo / "a" / "b" / "c.txt").resolve()
    assert target.read_bytes() == b"hello\r\nworld"
    assert out.metadata == {"files_changed": [str(target)]}
    assert "created" in out.content
    again = await run(WriteTool(), ctx, file_path=str(target), content="new\n")
    assert "overwritten" in again.content and target.read_text() == "new\n"
    assert ctx.read_files[str(target)] == target.stat().st_mtime_ns


async def test_write_refuses_escape_and_symlinked_dir(repo: Path, ctx: ToolContext) -> None:
    outside = repo.parent / "outside"
    (repo / "escape").symlink_to(outside, target_is_directory=True)
    for path in ("../outside/new.txt", "escape/new.txt", "escape/deep/new.txt"):
        assert "outside" in await fails(WriteTool(), ctx, file_path=path, content="x")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


async def test_write_through_inside_symlink_is_fine(repo: Path, ctx: ToolContext) -> None:
    (repo / "real").mkdir()
    (repo / "alias").symlink_to(repo / "real", target_is_directory=True)
    await run(WriteTool(), ctx, file_path="alias/f.txt", content="ok")
    assert (repo / "real" / "f.txt").read_text() == "ok"


async def test_write_to_directory_is_an_error(repo: Path, ctx: ToolContext) -> None:
    (repo / "d").mkdir()
    assert "directory" in await fails(WriteTool(), ctx, file_path="d", content="x")


# --- Edit ------------------------------------------------------------------------------------

SOURCE = "def f():\n    return 1\n\n\ndef g():\n    return 1\n"


async def test_edit_unique_match_with_snippet(repo: Path, ctx: ToolContext) -> None:
    path = repo / "m.py"
    path.write_text(SOURCE)
    out = await run(
        EditTool(),
        ctx,
        file_path="m.py",
        old_string="def g():\n    return 1",
        new_string="def g():\n    return 2",
    )
    assert path.read_text() == SOURCE.replace("def g():\n    return 1", "def g():\n    return 2")
    assert "     6\t    return 2" in out.content
    assert out.metadata == {"files_changed": [str(path.resolve())]}
    assert ctx.read_files[str(path.resolve())] == path.stat().st_mtime_ns


async def test_edit_ambiguous_match_fails_and_leaves_file(repo: Path, ctx: ToolContext) -> None:
    path = repo / "m.py"
    path.write_text(SOURCE + "x = 1\n")
    message = await fails(EditTool(), ctx, file_path="m.py", old_string="1\n", new_string="2\n")
    assert "Found 3 matches" in message
    assert "replace_all" in message and "context" in message
    assert path.read_text() == SOURCE + "x = 1\n"


async def test_edit_replace_all(repo: Path, ctx: ToolContext) -> None:
    path = repo / "m.py"
    path.write_text(SOURCE)
    out = await run(
        EditTool(),
        ctx,
        file_path="m.py",
        old_string="return 1",
        new_string="return 0",
        replace_all=True,
    )
    assert path.read_text() == SOURCE.replace("return 1", "return 0")
    assert "All 2 occurrences" in out.content


async def test_edit_errors(repo: Path, ctx: ToolContext) -> None:
    (repo / "m.py").write_text(SOURCE)
    same = await fails(EditTool(), ctx, file_path="m.py", old_string="f", new_string="f")
    assert "exactly the same" in same
    missing = await fails(EditTool(), ctx, file_path="m.py", old_string="zzz", new_string="y")
    assert "not found" in missing and "m.py" in missing
    gone = await fails(EditTool(), ctx, file_path="gone.py", old_string="a", new_string="b")
    assert gone.startswith("File does not exist:")
    escape = await fails(
        EditTool(), ctx, file_path="../outside/secret.txt", old_string="TOP", new_string="NO"
    )
    assert "outside" in escape
    assert (repo.parent / "outside" / "secret.txt").read_text() == "TOP SECRET\n"


async def test_edit_empty_old_string_creates_file(repo: Path, ctx: ToolContext) -> None:
    await run(EditTool(), ctx, file_path="new/n.py", old_string="", new_string="x = 1\n")
    assert (repo / "new" / "n.py").read_text() == "x = 1\n"
    message = await fails(EditTool(), ctx, file_path="new/n.py", old_string="", new_string="y")
    assert "already has content" in message


async def test_edit_keeps_crlf_and_undecodable_bytes(repo: Path, ctx: ToolContext) -> None:
    path = repo / "dos.txt"
    path.write_bytes(b"caf\xe9\r\nold line\r\nend\r\n")
    await run(
        EditTool(), ctx, file_path="dos.txt", old_string="old line\nend", new_string="new\nend"
    )
    assert path.read_bytes() == b"caf\xe9\r\nnew\r\nend\r\n"


# --- Glob ------------------------------------------------------------------------------------


async def test_glob_orders_by_mtime_newest_first(repo: Path, ctx: ToolContext) -> None:
    for name, when in [("a.py", 100), ("sub/b.py", 300), ("sub/deep/c.py", 200), ("d.txt", 400)]:
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
        set_mtime(path, when)
    out = await run(GlobTool(), ctx, pattern="**/*.py")
    assert out.content.split("\n") == ["sub/b.py", "sub/deep/c.py", "a.py"]
    top = await run(GlobTool(), ctx, pattern="*.py")
    assert top.content == "a.py"
    scoped = await run(GlobTool(), ctx, pattern="*.py", path="sub")
    assert scoped.content == "sub/b.py"
    prefixed = await run(GlobTool(), ctx, pattern="sub/**/*.{py,txt}")
    assert prefixed.content.split("\n") == ["sub/b.py", "sub/deep/c.py"]


async def test_glob_caps_at_100_with_note(repo: Path, ctx: ToolContext) -> None:
    for i in range(105):
        path = repo / f"f{i:03}.txt"
        path.write_text("x")
        set_mtime(path, 1000 + i)
    out = await run(GlobTool(), ctx, pattern="*.txt")
    lines = out.content.split("\n")
    assert lines[0] == "f104.txt" and lines[99] == "f005.txt"
    assert "truncated" in lines[100] and "105" in lines[100]
    assert len(lines) == 101


async def test_glob_skips_git_and_outside_links(repo: Path, ctx: ToolContext) -> None:
    (repo / ".git" / "objects").mkdir(parents=True)
    (repo / ".git" / "objects" / "x.py").write_text("x")
    (repo / "ok.py").write_text("x")
    (repo / "out.py").symlink_to(repo.parent / "outside" / "secret.txt")
    (repo / "outdir").symlink_to(repo.parent / "outside", target_is_directory=True)
    out = await run(GlobTool(), ctx, pattern="**/*")
    assert out.content == "ok.py"


async def test_glob_no_match_and_bad_path(repo: Path, ctx: ToolContext) -> None:
    assert (await run(GlobTool(), ctx, pattern="*.rs")).content == "No files found"
    assert "outside" in await fails(GlobTool(), ctx, pattern="*", path="..")
    assert "outside" in await fails(GlobTool(), ctx, pattern="../outside/*.txt")
    assert "does not exist" in await fails(GlobTool(), ctx, pattern="*", path="missing")


# --- Grep ------------------------------------------------------------------------------------


@pytest.fixture
def tree(repo: Path) -> Path:
    files = {
        "src/app.py": "import os\nTODO: fix\nprint('todo later')\n",
        "src/util.ts": "// TODO one\nexport const x = 1\n",
        "src/view.tsx": "const TODO = 2\n",
        "docs/readme.md": "nothing here\n",
        ".git/config": "TODO in git\n",
    }
    for when, (name, text) in enumerate(files.items()):
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        set_mtime(path, 1000 + when)
    (repo / "data.bin").write_bytes(b"TODO\x00binary")
    (repo / "leak.txt").symlink_to(repo.parent / "outside" / "secret.txt")
    return repo


async def test_grep_files_with_matches_newest_first(tree: Path, ctx: ToolContext) -> None:
    out = await run(GrepTool(), ctx, pattern="TODO")
    assert out.content.split("\n") == ["Found 3 files", "src/view.tsx", "src/util.ts", "src/app.py"]


async def test_grep_content_mode_line_numbers(tree: Path, ctx: ToolContext) -> None:
    out = await run(GrepTool(), ctx, pattern="TODO", output_mode="content", glob="*.py")
    assert out.content == "src/app.py:2:TODO: fix"
    plain = await run(
        GrepTool(), ctx, pattern="TODO", output_mode="content", glob="*.py", **{"-n": False}
    )
    assert plain.content == "src/app.py:TODO: fix"


async def test_grep_case_insensitive(tree: Path, ctx: ToolContext) -> None:
    out = await run(
        GrepTool(), ctx, pattern="todo", output_mode="content", path="src/app.py", **{"-i": True}
    )
    assert out.content == "src/app.py:2:TODO: fix\nsrc/app.py:3:print('todo later')"


async def test_grep_count_mode(tree: Path, ctx: ToolContext) -> None:
    out = await run(GrepTool(), ctx, pattern="todo", output_mode="count", **{"-i": True})
    lines = out.content.split("\n")
    assert set(lines[:3]) == {"src/app.py:2", "src/util.ts:1", "src/view.tsx:1"}
    assert "Found 4 total occurrences across 3 files." in out.content


async def test_grep_head_limit(tree: Path, ctx: ToolContext) -> None:
    files = await run(GrepTool(), ctx, pattern="TODO", head_limit=1)
    assert files.content.split("\n")[:2] == ["Found 3 files", "src/view.tsx"]
    assert "head_limit=1" in files.content
    lines = await run(GrepTool(), ctx, pattern="o", output_mode="content", head_limit=2)
    shown, note = lines.content.split("\n\n")
    assert shown.split("\n") == ["docs/readme.md:1:nothing here", "src/app.py:1:import os"]
    assert "head_limit=2" in note
    exact = await run(GrepTool(), ctx, pattern="TODO", glob="*.py", head_limit=1)
    assert "head_limit" not in exact.content


@pytest.mark.parametrize(
    ("glob", "expected"),
    [
        ("*.py", {"src/app.py"}),
        ("**/*.ts", {"src/util.ts"}),
        ("*.{ts,tsx}", {"src/util.ts", "src/view.tsx"}),
        ("src/*.tsx", {"src/view.tsx"}),
        ("*.md", set()),
    ],
)
async def test_grep_glob_filter(
    tree: Path, ctx: ToolContext, glob: str, expected: set[str]
) -> None:
    out = await run(GrepTool(), ctx, pattern="TODO", glob=glob)
    found = set(out.content.split("\n")[1:]) if expected else set()
    assert found == expected
    if not expected:
        assert out.content == "No files found"


async def test_grep_skips_binary_git_and_outside_links(tree: Path, ctx: ToolContext) -> None:
    out = await run(GrepTool(), ctx, pattern="TODO|SECRET", output_mode="content")
    assert ".git" not in out.content and "data.bin" not in out.content
    assert "SECRET" not in out.content and "leak.txt" not in out.content
    assert "outside" in await fails(GrepTool(), ctx, pattern="SECRET", path="leak.txt")


async def test_grep_anchors_are_per_line(tree: Path, ctx: ToolContext) -> None:
    out = await run(GrepTool(), ctx, pattern="^export .*1$", output_mode="content")
    assert out.content == "src/util.ts:2:export const x = 1"


async def test_grep_invalid_300_char_pattern_message(tree: Path, ctx: ToolContext) -> None:
    pattern = "a" * 150 + "(unclosed" + "b" * 141
    assert len(pattern) == 300
    message = await fails(GrepTool(), ctx, pattern=pattern)
    assert "\n" not in message
    assert "Invalid regular expression" in message
    assert "missing ), unterminated subpattern" in message
    assert "position 150" in message
    assert "300 characters" in message
    assert pattern not in message
    assert "(unclosed" in message  # the excerpt is centred on the error
    assert len(message) < 600

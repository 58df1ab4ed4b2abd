"""MCP servers end to end through the CLI: a scripted model calls their tools, and what it
receives is read back from the ``record`` of its requests (docs/mcp.md).

Servers: the demo server (written with the ``mcp`` SDK, tests/mcp_fixtures) over stdio and over
streamable HTTP on 127.0.0.1, and the published ``mcp-server-time`` and ``mcp-server-git``.
Each run covers several behaviours, because every server start costs an interpreter start.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import agent_call, run_cli, run_script, script_args, tool_call, write_script
from mcp_helpers import (
    DEMO,
    all_dead,
    demo,
    env_for,
    git_repo,
    pids,
    project,
    published,
    requests_of,
    tool_results,
    wait_for_pids,
)


def _texts(request: dict[str, Any]) -> list[str]:
    return [str(b["content"]) for b in tool_results(request)]


def test_published_servers_and_the_demo_server_reach_the_model(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    root = project(tmp_path, {"demo": demo(), "git": published("mcp_server_git")})
    extra = tmp_path / "time.json"
    extra.write_text(json.dumps({"mcpServers": {"time": published("mcp_server_time")}}))
    (root / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"allow": ["mcp__demo", "mcp__git__*",
                                              "mcp__time__get_current_time"]}})
    )  # fmt: skip
    script = write_script(root, [{"agent_type": "main", "turns": [
        {"tool_calls": [
            tool_call("mcp__time__get_current_time", timezone="Etc/UTC"),
            tool_call("mcp__git__git_log", repo_path=str(repo)),
            tool_call("mcp__demo__echo", text="ping", times=2),
            tool_call("mcp__demo__add", a=2, b="three"),
            tool_call("mcp__demo__picture"),
            tool_call("ListMcpResources", server="demo"),
            tool_call("ReadMcpResource", server="demo", uri="memo://greeting"),
            tool_call("mcp__demo__big", size=200_000),
        ]},
        {"text": "done"},
    ]}])  # fmt: skip

    run = run_script(
        script, root, "--mcp-config", str(extra), output_format="stream-json",
        env=env_for(tmp_path, MAX_MCP_OUTPUT_TOKENS="1000"),
    )  # fmt: skip

    assert run.code == 0, run.stderr
    init = run.events()[0]
    assert {"name": "time", "status": "connected"} in init["mcp_servers"]
    main = requests_of(root, "main")
    names = [t["name"] for t in main[0]["tools"]]
    assert {"mcp__time__get_current_time", "mcp__git__git_status", "mcp__demo__echo"} <= set(names)
    echo = next(t for t in main[0]["tools"] if t["name"] == "mcp__demo__echo")
    assert echo["input_schema"]["properties"]["text"]["type"] == "string"  # the server's schema
    when, log, echoed, invalid, picture, listed, read, big = tool_results(main[1])
    assert '"timezone": "Etc/UTC"' in when["content"] and not when.get("is_error")
    assert "first commit of the test repo" in log["content"]
    assert echoed["content"] == "pingping"
    assert invalid["is_error"] and "field `b`" in invalid["content"]
    assert "a one-pixel picture" in picture["content"] and "[image: image/png" in picture["content"]
    assert json.loads(listed["content"])[0]["uri"] == "memo://greeting"
    assert json.loads(read["content"])["contents"][0]["text"] == "hello from a resource"
    assert len(big["content"]) < 5000 and "output truncated" in big["content"]


def test_a_denied_a_crashing_and_a_hanging_tool_are_clear_errors_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "demo.pids"
    root = project(tmp_path, {"demo": demo(pid_file)})
    settings = {"permissions": {"allow": ["mcp__demo"], "deny": ["mcp__demo__cwd"]}}
    (root / ".claude" / "settings.json").write_text(json.dumps(settings))
    script = write_script(root, [{"agent_type": "main", "turns": [
        {"tool_calls": [tool_call("mcp__demo__cwd")]},
        {"tool_calls": [tool_call("mcp__demo__crash")]},
        {"tool_calls": [tool_call("mcp__demo__echo", text="after the crash")]},
        {"tool_calls": [tool_call("mcp__demo__hang")]},
        {"tool_calls": [tool_call("mcp__demo__echo", text="after the hang")]},
        {"text": "still here"},
    ]}])  # fmt: skip

    run = run_script(script, root, env=env_for(tmp_path, MCP_TOOL_TIMEOUT="1500"))

    assert run.code == 0, run.stderr
    assert run.json()["result"] == "still here"
    main = requests_of(root, "main")
    denied, crashed, recovered, hung, after = (tool_results(r)[0] for r in main[1:6])
    assert denied["is_error"] and "mcp__demo__cwd" in denied["content"]
    assert "denied" in denied["content"]
    assert crashed["is_error"]
    assert "MCP server 'demo' stopped during mcp__demo__crash" in crashed["content"]
    assert "exited with status 3" in crashed["content"]
    assert "crashing on purpose" in crashed["content"]  # its stderr
    assert recovered["content"] == "after the crash"  # restarted
    assert hung["is_error"] and "timed out after 1500 ms (MCP_TOOL_TIMEOUT)" in hung["content"]
    assert after["content"] == "after the hang"
    started = pids(pid_file)
    assert len(started) == 2  # the first start and one restart
    assert all_dead(started)


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The demo server over streamable HTTP on 127.0.0.1 (one for the module)."""
    folder = tmp_path_factory.mktemp("http")
    port_file = folder / "port"
    process = subprocess.Popen([sys.executable, str(DEMO), "--http", str(port_file)])
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():
            assert process.poll() is None and time.monotonic() < deadline, "no HTTP server"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text()}/mcp"
    finally:
        process.terminate()
        process.wait(10)


def test_streamable_http_and_sse_with_expanded_headers_and_mcp_list(
    tmp_path: Path, http_server: str
) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    port = http_server.split(":")[-1].split("/")[0]
    config = {"mcpServers": {
        "web": {"type": "http", "url": "http://127.0.0.1:${DEMO_PORT}/mcp",
                "headers": {"X-Token": "${DEMO_TOKEN:-none}"}},
        "events": {"type": "sse", "url": "http://127.0.0.1:${DEMO_PORT}/sse"},
        "broken": {"command": "${NO_SUCH_VARIABLE}"},
    }}  # fmt: skip
    inline = json.dumps(config)
    script = write_script(root, [{"agent_type": "main", "turns": [
        {"tool_calls": [tool_call("mcp__web__echo", text="over http"),
                        tool_call("mcp__events__echo", text=" and sse")]},
        {"text": "{{tool_results}}"},
    ]}])  # fmt: skip
    env = env_for(tmp_path, DEMO_PORT=port)

    run = run_script(
        script, root, "--mcp-config", inline, "--strict-mcp-config",
        "--permission-mode", "bypassPermissions", output_format="text", env=env,
    )  # fmt: skip

    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "over http\n and sse"
    assert "NO_SUCH_VARIABLE" in run.stderr and "'broken'" in run.stderr
    listed = run_cli("mcp", "list", "--json", "--mcp-config", inline, cwd=root, env=env)
    assert listed.code == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows["web"]["status"] == "connected" and rows["web"]["transport"] == "http"
    assert {"name": "echo", "readOnly": True} in rows["web"]["tools"]
    assert rows["events"]["status"] == "connected" and rows["events"]["transport"] == "sse"
    assert rows["broken"]["status"] == "failed"
    assert "missing environment variables: NO_SUCH_VARIABLE" in rows["broken"]["error"]


SCOPED_AGENT = """---
name: scoped
description: Uses its own MCP server.
tools: Read
mcpServers:
  - own: {server}
requiredMcpServers: [own]
---
You have your own server.
"""

NEEDY_AGENT = """---
name: needy
description: Needs a server nobody configured.
requiredMcpServers: [github]
---
You need GitHub.
"""


NAMED_AGENT = """---
name: named
description: Reaches the session's server by name.
tools: Read
mcpServers: [shared]
requiredMcpServers: [shar]
---
You use the shared server.
"""


def _agents(root: Path, pid_file: Path, **env: str) -> None:
    folder = root / ".claude" / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    server = json.dumps(demo(pid_file, **env))
    (folder / "scoped.md").write_text(SCOPED_AGENT.format(server=server))
    (folder / "needy.md").write_text(NEEDY_AGENT)
    (folder / "named.md").write_text(NAMED_AGENT)


def test_an_agent_scoped_server_is_its_childs_only_and_gone_when_it_ends(tmp_path: Path) -> None:
    pid_file, shared_pids = tmp_path / "scoped.pids", tmp_path / "shared.pids"
    root = project(tmp_path, {"shared": demo(shared_pids)}, allow=["mcp__own", "mcp__shared"])
    _agents(root, pid_file)
    script = write_script(root, [
        {"agent_type": "main", "turns": [
            {"tool_calls": [agent_call("use your server", "scoped"),
                            agent_call("use github", "needy"),
                            agent_call("use the shared server", "named")]},
            {"text": "main: {{tool_results}}"},
        ]},
        {"agent_type": "scoped", "turns": [
            {"tool_calls": [tool_call("mcp__own__echo", text="scoped echo")]},
            {"text": "child saw {{tool_results}}"},
        ]},
        {"agent_type": "named", "turns": [
            {"tool_calls": [tool_call("mcp__shared__echo", text="shared echo")]},
            {"text": "named saw {{tool_results}}"},
        ]},
    ])  # fmt: skip

    run = run_script(script, root, env=env_for(tmp_path))

    assert run.code == 0, run.stderr
    main = requests_of(root, "main")
    assert not any(t["name"].startswith("mcp__own") for t in main[0]["tools"])
    child = requests_of(root, "scoped")
    child_tools = {t["name"] for t in child[0]["tools"]}
    assert {"mcp__own__echo", "Read"} <= child_tools
    assert not any(name.startswith("mcp__shared") for name in child_tools)  # tools: Read
    assert _texts(child[1]) == ["scoped echo"]
    named = requests_of(root, "named")
    assert "mcp__shared__echo" in {t["name"] for t in named[0]["tools"]}  # named in mcpServers
    assert _texts(named[1]) == ["shared echo"]
    spawned, refused, reached = tool_results(main[1])
    assert "child saw scoped echo" in spawned["content"]
    assert "named saw shared echo" in reached["content"]
    assert refused["is_error"]
    assert "Agent 'needy' requires MCP servers matching: github" in refused["content"]
    assert "no configured server matches" in refused["content"]
    assert all_dead(wait_for_pids(pid_file))
    assert len(pids(shared_pids)) == 1  # the session's server, started once, shared
    assert all_dead(pids(shared_pids))


def test_task_stop_and_kill_9_leave_no_server_behind(tmp_path: Path) -> None:
    stop_pids, crash_pids = tmp_path / "stopped.pids", tmp_path / "crash.pids"
    root = project(tmp_path, {"shared": demo(crash_pids)}, allow=["mcp__own", "mcp__shared"])
    _agents(root, stop_pids)
    stop_script = write_script(root, [
        {"agent_type": "main", "turns": [
            {"tool_calls": [agent_call("hang", "scoped", run_in_background=True)]},
            {"tool_calls": [tool_call("TaskStop", task_id="{{capture.id}}")],
             "capture": {"id": "agentId: (\\w+)"}, "delay_ms": 300},
            {"text": "stopped"},
            {"text": "told it was stopped"},
        ]},
        {"agent_type": "scoped", "turns": [{"tool_calls": [tool_call("mcp__own__hang")]},
                                           {"text": "never"}]},
    ], name="stop.json")  # fmt: skip
    env = env_for(tmp_path)

    stopped = run_script(stop_script, root, env=env)

    assert stopped.code == 0, stopped.stderr
    assert all_dead(wait_for_pids(stop_pids))
    stop_pids.unlink()
    # A stdio server may exit by itself once its client's pipe closes; these do not, so only
    # recovery can end them after the SIGKILL below.
    (root / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"shared": demo(crash_pids, DEMO_LINGER_S="120")}})
    )
    _agents(root, stop_pids, DEMO_LINGER_S="120")
    crash_script = write_script(root, [
        {"agent_type": "main", "turns": [
            {"tool_calls": [agent_call("hang", "scoped", run_in_background=True)]},
            {"tool_calls": [tool_call("mcp__shared__hang")]},
            {"text": "never"},
        ]},
        {"agent_type": "scoped", "turns": [{"tool_calls": [tool_call("mcp__own__hang")]},
                                           {"text": "never"}]},
    ], name="crash.json")  # fmt: skip
    process = subprocess.Popen(
        [sys.executable, "-m", "subagents", *script_args(crash_script, output_format="json",
                                                          prompt="go")],
        cwd=root, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    servers = [*wait_for_pids(stop_pids), *wait_for_pids(crash_pids)]
    time.sleep(0.3)  # the servers run; the hang calls are (about to be) in flight
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=10)
    # Whether they outlived the runtime depends on the server and the machine (some exit on the
    # closed pipe, some are killed with it); either way none may be left after the recovery.
    all_dead(servers, timeout_s=0.5)

    after = run_script(write_script(root, [{"turns": [{"text": "recovered"}]}], name="r.json"),
                       root, "--strict-mcp-config", env=env)  # fmt: skip

    assert after.code == 0, after.stderr
    assert all_dead(servers)

"""MCP server configuration: `mcp_servers` in the config file and `--mcp-config FILE` (the `mcpServers`
object MCP clients use); every mistake stops Maya with a message naming the server and field."""

from __future__ import annotations

import json

import pytest

from maya_server.cli import load
from maya_server.errors import ConfigError
from maya_server.mcp.config import McpServerSpec


def _load(argv, environ=None):
    return load(argv, "maya", "glm", environ=environ or {})


def test_both_sources_and_both_transports(tmp_path):
    servers = tmp_path / "mcp.json"
    servers.write_text(json.dumps({"mcpServers": {
        "files": {"command": "python", "args": ["-m", "files"], "env": {"ROOT": "/srv"}, "cwd": "/tmp"},
        "search": {"url": "http://127.0.0.1:9000/mcp", "headers": {"Authorization": "Bearer s3cret"}},
    }}))
    config_file = tmp_path / "maya.json"
    config_file.write_text(json.dumps({"engine": "scripted", "mcp_servers": {"local": {"command": "srv"}},
                                       "mcp_max_rounds": 3}))
    config = _load(["--config", str(config_file), "--mcp-config", str(servers), "--mcp-call-timeout", "2.5"])
    assert [(s.name, s.transport) for s in config.mcp_servers] == [
        ("local", "stdio"), ("files", "stdio"), ("search", "streamable-http")]
    files = config.mcp_servers[1]
    assert (files.command, files.args, dict(files.env), files.cwd) == ("python", ("-m", "files"), {"ROOT": "/srv"}, "/tmp")
    assert config.mcp_max_rounds == 3 and config.mcp_call_timeout == 2.5
    assert "s3cret" not in repr(config.mcp_servers)


def test_the_environment_takes_the_servers_as_json():
    config = _load(["--engine", "scripted"], {"MAYA_MCP_SERVERS": '{"a": {"url": "https://tools.example/mcp"}}'})
    assert config.mcp_servers == (McpServerSpec("a", url="https://tools.example/mcp"),)


@pytest.mark.parametrize(("servers", "field"), [
    ({"a": {"command": "x", "url": "http://h/mcp"}}, "mcp_servers.a"),
    ({"a": {}}, "mcp_servers.a"),
    ({"a": {"command": ""}}, "mcp_servers.a.command"),
    ({"a": {"command": "x", "args": "-v"}}, "mcp_servers.a.args"),
    ({"a": {"command": "x", "env": {"K": 1}}}, "mcp_servers.a.env"),
    ({"a": {"command": "x", "headers": {}}}, "mcp_servers.a.headers"),
    ({"a": {"url": "ftp://h/mcp"}}, "mcp_servers.a.url"),
    ({"a": {"url": "http://user:pw@h/mcp"}}, "mcp_servers.a.url"),
    ({"bad name": {"command": "x"}}, "mcp_servers.bad name"),
    (["a"], "mcp_servers"),
])
def test_bad_servers_name_the_field(tmp_path, servers, field):
    path = tmp_path / "maya.json"
    path.write_text(json.dumps({"engine": "scripted", "mcp_servers": servers}))
    with pytest.raises(ConfigError) as caught:
        _load(["--config", str(path)])
    assert caught.value.name == field


def test_a_server_named_twice_or_an_unreadable_file_is_refused(tmp_path):
    servers = tmp_path / "mcp.json"
    servers.write_text(json.dumps({"mcpServers": {"a": {"command": "x"}}}))
    with pytest.raises(ConfigError, match="configured twice"):
        _load(["--engine", "scripted", "--mcp-config", str(servers)], {"MAYA_MCP_SERVERS": '{"a": {"command": "y"}}'})
    with pytest.raises(ConfigError) as caught:
        _load(["--engine", "scripted", "--mcp-config", str(tmp_path / "missing.json")])
    assert caught.value.name == "mcp_config"

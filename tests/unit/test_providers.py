"""Provider registry: built-in launch specs, providers.toml overrides, availability
(docs/api.md §7)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from c2.api.errors import status_of
from c2.core.errors import DomainError, ProviderUnavailableError, UnknownProviderError
from c2.core.protocol.values import BUILTIN_PROVIDERS, CustomProvider, provider_key
from c2.core.providers import (
    DEMO_KEY,
    ProviderConfigError,
    ProviderRegistry,
)

BUILTIN_ARGV = {
    "claude_code": ["npx", "-y", "@zed-industries/claude-code-acp"],
    "codex": ["npx", "-y", "@zed-industries/codex-acp"],
    "grok": ["grok", "agent", "stdio"],
    "cursor": ["cursor-agent", "--acp"],
    "opencode": ["opencode", "acp"],
    "opencode2": ["opencode2", "acp"],
    "pi": ["npx", "-y", "pi-acp"],
    "kimi": ["kimi", "acp"],
    "zcode": ["npx", "-y", "glm-acp-agent"],
}


def write_toml(home: Path, text: str) -> None:
    (home / "providers.toml").write_text(text, encoding="utf-8")


def test_providers_builtins_have_the_documented_launch_specs(tmp_path: Path) -> None:
    """The nine built-ins launch exactly as docs/api.md §7 says, with display names."""
    registry = ProviderRegistry.load(tmp_path)
    assert set(BUILTIN_ARGV) == set(BUILTIN_PROVIDERS)
    for key, argv in BUILTIN_ARGV.items():
        entry = registry.get(key)
        spec = entry.launch("/work")
        assert [spec.command, *spec.args] == argv
        assert spec.cwd == "/work" and entry.display_name


def test_providers_echo_is_a_builtin_custom_provider(tmp_path: Path) -> None:
    """{"custom":"echo"} runs the demo agent with this interpreter."""
    registry = ProviderRegistry.load(tmp_path)
    spec = registry.get(provider_key(CustomProvider(custom="echo"))).launch(str(tmp_path))
    assert [spec.command, *spec.args] == [sys.executable, "-P", "-m", "c2.core.agents.demo_agent"]
    assert spec.env["DEMO_AGENT_STATE_DIR"] == str(tmp_path / "demo-agent")
    assert registry.get(DEMO_KEY).info().available


def test_providers_launch_env_is_merged_over_os_environ(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider's env is laid over the server's environment."""
    monkeypatch.setenv("C2_TEST_INHERITED", "yes")
    monkeypatch.setenv("MY_FLAG", "0")
    write_toml(tmp_path, '[providers.mine]\ncommand = "python3"\nenv = { MY_FLAG = "1" }\n')
    env = ProviderRegistry.load(tmp_path).get("custom:mine").launch("/").env
    assert env["C2_TEST_INHERITED"] == "yes" and env["MY_FLAG"] == "1"


def test_providers_toml_registers_a_custom_provider(tmp_path: Path) -> None:
    """[providers.NAME] registers {"custom": NAME} after the built-ins."""
    write_toml(
        tmp_path,
        """
[providers.myagent]
command = "python3"
args = ["/path/to/agent.py", "--flag"]
env = { MY_FLAG = "1" }
display_name = "My agent"
""",
    )
    registry = ProviderRegistry.load(tmp_path)
    entry = registry.get("custom:myagent")
    assert (entry.command, entry.args, entry.display_name) == (
        "python3",
        ("/path/to/agent.py", "--flag"),
        "My agent",
    )
    rows = [row.wire() for row in registry.list()]
    assert rows[-1]["id"] == {"custom": "myagent"}
    assert rows[-1]["args"] == ["/path/to/agent.py", "--flag"]
    assert [row["id"] for row in rows[: len(BUILTIN_PROVIDERS)]] == list(BUILTIN_PROVIDERS)


def test_providers_toml_overrides_merge_into_a_builtin(tmp_path: Path) -> None:
    """A table named like a built-in overrides only the fields it sets."""
    write_toml(tmp_path, '[providers.codex]\nargs = ["-y", "@zed-industries/codex-acp@0.3"]\n')
    entry = ProviderRegistry.load(tmp_path).get("codex")
    assert entry.command == "npx" and entry.display_name == "Codex"
    assert entry.args == ("-y", "@zed-industries/codex-acp@0.3")


def test_providers_custom_display_name_defaults_to_the_name(tmp_path: Path) -> None:
    """A custom provider without display_name is shown by its name."""
    write_toml(tmp_path, '[providers.bare]\ncommand = "bare-agent"\n')
    assert ProviderRegistry.load(tmp_path).get("custom:bare").display_name == "bare"


def test_providers_list_reports_missing_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """available/reason come from looking the command up on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "kimi"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    rows = {str(row.id): row for row in ProviderRegistry.load(tmp_path).list()}
    assert rows["grok"].available is False
    assert rows["grok"].reason == "command not found: grok"
    assert rows["kimi"].available is True and rows["kimi"].reason is None
    with pytest.raises(ProviderUnavailableError) as info:
        ProviderRegistry.load(tmp_path).get("grok").check_available()
    assert info.value.code == "provider_unavailable" and status_of(info.value) == 503


def test_providers_get_unknown_raises_a_domain_error(tmp_path: Path) -> None:
    """An unregistered key is UnknownProviderError (422 unknown_provider)."""
    with pytest.raises(UnknownProviderError) as info:
        ProviderRegistry.load(tmp_path).get("custom:nope")
    assert isinstance(info.value, DomainError)
    assert (info.value.code, status_of(info.value)) == ("unknown_provider", 422)
    assert "custom:nope" in str(info.value)


def test_providers_get_accepts_serde_aliases(tmp_path: Path) -> None:
    """open_code / z_code resolve to the documented ids."""
    registry = ProviderRegistry.load(tmp_path)
    assert registry.get("open_code").key == "opencode"
    assert registry.get("z_code").key == "zcode"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[providers.x\n", "invalid TOML"),
        ('[providers.x]\ncommand = "a"\nshell = "sh -c"\n', "unknown key 'shell'"),
        ("[providers.x]\nargs = []\n", "command is required"),
        ('[providers.x]\ncommand = "a"\nargs = "b c"\n', "args must be an array of strings"),
        ('[providers.x]\ncommand = "a"\nenv = { A = 1 }\n', "env must be a table of strings"),
        ('[providers.x]\ncommand = ""\n', "command must be a non-empty string"),
        ('providers = "x"\n', "[providers] must be a table"),
        ("[other]\n", "unknown top-level key 'other'"),
        ("[providers]\nx = 1\n", "providers.x must be a table"),
    ],
)
def test_providers_invalid_file_fails_loading_clearly(
    tmp_path: Path, text: str, problem: str
) -> None:
    """An invalid providers.toml raises ProviderConfigError naming the file and the problem."""
    write_toml(tmp_path, text)
    with pytest.raises(ProviderConfigError) as info:
        ProviderRegistry.load(tmp_path)
    assert str(tmp_path / "providers.toml") in str(info.value)
    assert problem in str(info.value)


def test_providers_missing_file_means_builtins_only(tmp_path: Path) -> None:
    """No providers.toml: the nine built-ins plus echo."""
    rows = ProviderRegistry.load(tmp_path).list()
    assert len(rows) == len(BUILTIN_PROVIDERS) + 1
    assert rows[-1].id == {"custom": "echo"}
    assert os.path.isabs(rows[-1].command)


def _fake_npx(tmp_path: Path) -> Path:
    """A directory holding an executable `npx` (never run: availability only looks)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    npx = bin_dir / "npx"
    npx.write_text("#!/bin/sh\nexit 1\n")
    npx.chmod(0o755)
    return bin_dir


def test_providers_npx_spec_unavailable_when_package_not_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An `npx -y pkg` spec whose package is in no node_modules nor the npx cache is
    unavailable with a reason naming the package; it becomes available once cached."""
    monkeypatch.setenv("PATH", str(_fake_npx(tmp_path)))
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))
    monkeypatch.chdir(tmp_path)
    rows = {str(row.id): row for row in ProviderRegistry.load(tmp_path).list()}
    claude = rows["claude_code"]
    assert claude.available is False
    assert claude.reason is not None and "@zed-industries/claude-code-acp" in claude.reason
    assert "not installed" in claude.reason
    with pytest.raises(ProviderUnavailableError):
        ProviderRegistry.load(tmp_path).get("claude_code").check_available()
    package = tmp_path / "npm-cache" / "_npx" / "0a1b2c" / "node_modules" / "@zed-industries"
    (package / "claude-code-acp").mkdir(parents=True)
    (package / "claude-code-acp" / "package.json").write_text("{}")
    rows = {str(row.id): row for row in ProviderRegistry.load(tmp_path).list()}
    assert rows["claude_code"].available is True and rows["claude_code"].reason is None
    assert rows["codex"].available is False  # another package, still not there


def test_providers_npx_spec_found_in_local_node_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A versioned spec resolves by name from a node_modules above the working directory."""
    monkeypatch.setenv("PATH", str(_fake_npx(tmp_path)))
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))
    (tmp_path / "node_modules" / "pi-acp").mkdir(parents=True)
    (tmp_path / "node_modules" / "pi-acp" / "package.json").write_text("{}")
    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    monkeypatch.chdir(inner)
    write_toml(tmp_path, '[providers.pinned]\ncommand = "npx"\nargs = ["--yes", "pi-acp@1.2.3"]\n')
    rows = {str(row.id): row for row in ProviderRegistry.load(tmp_path).list()}
    assert rows["pi"].available is True
    assert rows["{'custom': 'pinned'}"].available is True


def test_providers_toml_mcp_servers_are_validated_and_listed(tmp_path: Path) -> None:
    """providers.toml mcp_servers are parsed in ACP's shape; the listing shows name and type
    only; a relative command is a config error naming the entry."""
    write_toml(
        tmp_path,
        '[providers.tools]\ncommand = "tools-agent"\n'
        'mcp_servers = [{ name = "fs", command = "/bin/cat", args = [],'
        ' env = [{ name = "TOKEN", value = "hidden" }] }]\n',
    )
    registry = ProviderRegistry.load(tmp_path)
    [server] = registry.get("custom:tools").mcp_servers
    assert server.acp()["env"] == [{"name": "TOKEN", "value": "hidden"}]
    row = {str(r.id): r for r in registry.list()}["{'custom': 'tools'}"]
    assert row.wire()["mcp_servers"] == [{"name": "fs", "type": "stdio"}]
    assert "hidden" not in str(row.wire())
    write_toml(
        tmp_path,
        '[providers.tools]\ncommand = "x"\nmcp_servers = [{ name = "fs", command = "cat" }]\n',
    )
    with pytest.raises(ProviderConfigError, match=r"mcp_servers\[0\].*absolute path"):
        ProviderRegistry.load(tmp_path)

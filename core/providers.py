"""Provider registry: built-in launch specs, `$C2_HOME/providers.toml`, availability
(docs/api.md §7).

Launch specs are argv lists from configuration only; nothing from a request ever becomes part of
a command line, and nothing runs through a shell.

Over 300 lines: one registry and its two sources (the built-ins, providers.toml) with the
availability checks both share; split, a provider's life would be read in three places.
"""

from __future__ import annotations

import os
import shutil
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from c2.core.agents.port import LaunchSpec
from c2.core.errors import InvalidMcpServerError, ProviderUnavailableError, UnknownProviderError
from c2.core.mcp_servers import McpServer, parse_mcp_servers
from c2.core.protocol.state import AuthMethodInfo, McpServerSummary
from c2.core.protocol.values import (
    BUILTIN_PROVIDERS,
    PROVIDER_ALIASES,
    DocumentedProvider,
    provider_wire,
)

PROVIDERS_FILE = "providers.toml"
DEMO_KEY = "custom:echo"
_TABLE_KEYS = frozenset({"command", "args", "env", "display_name", "mcp_servers"})
# npx options that take no value; anything else starting with "-" is not understood here.
_NPX_FLAGS = frozenset({"-y", "--yes", "-q", "--quiet", "--no-install", "--prefer-offline"})
_MAX_NAME = 128


class ProviderConfigError(Exception):
    """providers.toml is unreadable or invalid; the message names the file and the problem."""


class ProviderInfo(BaseModel):
    """One row of GET /v1/providers."""

    id: str | dict[str, str]
    display_name: str
    command: str
    args: list[str]
    available: bool
    reason: str | None
    mcp_servers: list[McpServerSummary] = Field(default_factory=list)
    # What is known about the agent's auth: its `authMethods` from the last initialize (null
    # until one ran), and whether its last session/new or prompt answered "auth required".
    auth_methods: list[AuthMethodInfo] | None = None
    auth_required: bool | None = None

    def wire(self) -> dict[str, Any]:
        """JSON form of the row."""
        return self.model_dump(mode="json")


@dataclass(frozen=True)
class ProviderEntry:
    """A registered provider: registry key ("codex", "custom:NAME") and its launch spec."""

    key: str
    display_name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    mcp_servers: tuple[McpServer, ...] = ()

    def launch(self, cwd: str) -> LaunchSpec:
        """The launch spec for a session in `cwd`; env is merged over os.environ."""
        return LaunchSpec(
            command=self.command, args=list(self.args), env={**os.environ, **self.env}, cwd=cwd
        )

    def unavailable_reason(self) -> str | None:
        """Why the command can't be started here (e.g. "command not found: grok"), or None."""
        path = self.env.get("PATH", os.environ.get("PATH"))
        found = shutil.which(self.command, path=path)
        if found is None:
            return f"command not found: {self.command}"
        if Path(self.command).name == "npx":
            return _npx_unavailable_reason(Path(found), self.args, {**os.environ, **self.env})
        return None

    def check_available(self) -> None:
        """Raise ProviderUnavailableError when the command can't be found."""
        if reason := self.unavailable_reason():
            raise ProviderUnavailableError(f"{self.display_name} is unavailable: {reason}")

    def info(self) -> ProviderInfo:
        """The GET /v1/providers row for this provider."""
        reason = self.unavailable_reason()
        return ProviderInfo(
            id=provider_wire(self.key),
            display_name=self.display_name,
            command=self.command,
            args=list(self.args),
            available=reason is None,
            reason=reason,
            mcp_servers=[server.summary() for server in self.mcp_servers],
        )


def _builtin(key: DocumentedProvider, display_name: str, command: str, *args: str) -> ProviderEntry:
    return ProviderEntry(key=key, display_name=display_name, command=command, args=args)


def builtin_entries(home: Path) -> list[ProviderEntry]:
    """The nine documented agents plus the scripted demo agent `{"custom":"echo"}`."""
    package_root = str(Path(__file__).resolve().parent.parent)
    python_path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    return [
        _builtin("claude_code", "Claude Code", "npx", "-y", "@zed-industries/claude-code-acp"),
        _builtin("codex", "Codex", "npx", "-y", "@zed-industries/codex-acp"),
        _builtin("grok", "Grok", "grok", "agent", "stdio"),
        _builtin("cursor", "Cursor", "cursor-agent", "--acp"),
        _builtin("opencode", "OpenCode", "opencode", "acp"),
        _builtin("opencode2", "OpenCode 2", "opencode2", "acp"),
        _builtin("pi", "Pi", "npx", "-y", "pi-acp"),
        _builtin("kimi", "Kimi", "kimi", "acp"),
        _builtin("zcode", "Z Code", "npx", "-y", "glm-acp-agent"),
        ProviderEntry(
            key=DEMO_KEY,
            display_name="Echo (demo agent)",
            command=sys.executable,
            # -P: the session folder is not put on sys.path, so a project with its own `core`
            # package (or core.py) cannot shadow c2's. PYTHONPATH then finds c2's `core`
            # whatever the cwd; its sessions survive restarts (session/load) by living under
            # the home directory.
            args=("-P", "-m", "c2.core.agents.demo_agent"),
            env={"PYTHONPATH": python_path, "DEMO_AGENT_STATE_DIR": str(home / "demo-agent")},
        ),
    ]


class ProviderRegistry:
    """Providers by registry key, in listing order (built-ins first, then providers.toml)."""

    def __init__(self, entries: list[ProviderEntry]) -> None:
        self._entries = {entry.key: entry for entry in entries}
        self._auth_methods: dict[str, list[AuthMethodInfo]] = {}
        self._auth_required: dict[str, bool] = {}

    def observe_auth(
        self,
        key: str,
        *,
        methods: tuple[AuthMethodInfo, ...] | None = None,
        required: bool | None = None,
    ) -> None:
        """Remember what an agent said about auth (shown by GET /v1/providers)."""
        key = PROVIDER_ALIASES.get(key, key)
        if methods is not None:
            self._auth_methods[key] = list(methods)
        if required is not None:
            self._auth_required[key] = required

    @classmethod
    def load(cls, home: Path) -> ProviderRegistry:
        """Built-ins overlaid with `home/providers.toml`; raises ProviderConfigError."""
        entries = {entry.key: entry for entry in builtin_entries(home)}
        path = home / PROVIDERS_FILE
        for name, table in _read_tables(path).items():
            key = name if name in BUILTIN_PROVIDERS else f"custom:{name}"
            entries[key] = _entry_from_table(path, name, key, table, entries.get(key))
        return cls(list(entries.values()))

    def get(self, key: str) -> ProviderEntry:
        """The provider for a registry key (`provider_key(...)`); raises UnknownProviderError."""
        entry = self._entries.get(PROVIDER_ALIASES.get(key, key))
        if entry is None:
            raise UnknownProviderError(f"unknown provider: {key}")
        return entry

    def list(self) -> list[ProviderInfo]:
        """Every provider with its availability on this machine and what is known of its auth."""
        return [
            entry.info().model_copy(
                update={
                    "auth_methods": self._auth_methods.get(entry.key),
                    "auth_required": self._auth_required.get(entry.key),
                }
            )
            for entry in self._entries.values()
        ]


def _read_tables(path: Path) -> dict[str, dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ProviderConfigError(f"{path}: cannot read: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProviderConfigError(f"{path}: invalid TOML: {exc}") from None
    unknown = sorted(set(data) - {"providers"})
    if unknown:
        raise ProviderConfigError(f"{path}: unknown top-level key {unknown[0]!r}")
    providers = data.get("providers", {})
    if not isinstance(providers, dict):
        raise ProviderConfigError(f"{path}: [providers] must be a table")
    for name, table in providers.items():
        if not 1 <= len(name) <= _MAX_NAME or not name.strip():
            raise ProviderConfigError(f"{path}: provider name {name!r} must be 1-128 characters")
        if not isinstance(table, dict):
            raise ProviderConfigError(f"{path}: providers.{name} must be a table")
    return providers


def _entry_from_table(
    path: Path, name: str, key: str, table: dict[str, Any], base: ProviderEntry | None
) -> ProviderEntry:
    where = f"{path}: providers.{name}"
    unknown = sorted(set(table) - _TABLE_KEYS)
    if unknown:
        raise ProviderConfigError(f"{where}: unknown key {unknown[0]!r}")
    command, args = table.get("command"), table.get("args")
    env, display_name = table.get("env"), table.get("display_name")
    if command is not None and (not isinstance(command, str) or not command.strip()):
        raise ProviderConfigError(f"{where}.command must be a non-empty string")
    if args is not None and (
        not isinstance(args, list) or not all(isinstance(a, str) for a in args)
    ):
        raise ProviderConfigError(f"{where}.args must be an array of strings")
    if env is not None and (
        not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values())
    ):
        raise ProviderConfigError(f"{where}.env must be a table of strings")
    if display_name is not None and (not isinstance(display_name, str) or not display_name):
        raise ProviderConfigError(f"{where}.display_name must be a non-empty string")
    try:
        servers = parse_mcp_servers(table.get("mcp_servers"), where=f"{where}.mcp_servers")
    except InvalidMcpServerError as exc:
        raise ProviderConfigError(exc.message) from None
    if base is None:
        if command is None:
            raise ProviderConfigError(f"{where}.command is required for a custom provider")
        base = ProviderEntry(key=key, display_name=name, command=command)
    return replace(
        base,
        command=command if command is not None else base.command,
        args=tuple(args) if args is not None else base.args,
        env={**base.env, **(env or {})},
        display_name=display_name if display_name is not None else base.display_name,
        mcp_servers=servers if "mcp_servers" in table else base.mcp_servers,
    )


def _npx_unavailable_reason(npx: Path, args: tuple[str, ...], env: Mapping[str, str]) -> str | None:
    """Why `npx ARGS` can't start offline: its package is neither in a node_modules npx
    would use (the current directory and its parents, the global npm root) nor in the npx
    cache. None when it is found, or when the spec is not a plain registry package name."""
    name = _npx_package_name(args)
    if name is None:
        return None
    roots = [d / "node_modules" for d in (Path.cwd(), *Path.cwd().parents)]
    resolved = npx.resolve()
    roots += [p for p in resolved.parents if p.name == "node_modules"][:1]
    if prefix := env.get("npm_config_prefix") or env.get("NPM_CONFIG_PREFIX"):
        roots.append(Path(prefix) / "lib" / "node_modules")
    cache = env.get("npm_config_cache") or env.get("NPM_CONFIG_CACHE")
    cache_dir = Path(cache) if cache else Path(env.get("HOME", str(Path.home()))) / ".npm"
    try:
        roots += sorted((cache_dir / "_npx").glob("*/node_modules"))
        if any((root / name / "package.json").is_file() for root in roots):
            return None
    except OSError:
        return None  # can't tell: don't claim it is missing
    return (
        f"npm package {name} is not installed (not in node_modules, the global npm root or "
        f"the npx cache), so npx would have to download it; install it (npm install -g {name}) "
        "or point providers.toml at its binary"
    )


def _npx_package_name(args: tuple[str, ...]) -> str | None:
    """The registry package name an npx argv runs (`-y @scope/pkg@1.2` → `@scope/pkg`)."""
    spec = None
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg in ("-p", "--package") and rest:
            spec = rest.pop(0)
            break
        if arg.startswith("--package="):
            spec = arg.split("=", 1)[1]
            break
        if arg in _NPX_FLAGS:
            continue
        if arg.startswith("-"):
            return None
        spec = arg
        break
    if not spec or ":" in spec or spec.startswith((".", "/")):
        return None
    scope, slash, rest_name = spec.partition("/") if spec.startswith("@") else ("", "", spec)
    name = rest_name.split("@", 1)[0]
    if spec.startswith("@"):
        return f"{scope}/{name}" if slash and name else None
    return name if "/" not in name and name else None

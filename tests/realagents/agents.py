"""Launch specs for the real agents under test: Claude Code (claude-code-acp) and OpenCode.

Both run from the repository's `node_modules` (package.json pins them; `make test` installs
them), each with a throwaway HOME and XDG folders, pointed at the fake model server, with
update checks, telemetry and any other outside traffic turned off: nothing leaves the machine
(an unreachable loopback proxy catches whatever still tries). `write_providers` overrides the
built-in `claude_code` and `opencode` providers in a c2 home's `providers.toml`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.e2e.harness import REPO
from tests.fakemodel.server import MODEL, FakeModel

NODE_BIN = REPO / "node_modules" / ".bin"
CLAUDE_CODE_ACP = NODE_BIN / "claude-code-acp"
OPENCODE = NODE_BIN / "opencode"
AGENTS = ("claude_code", "opencode")
# Nothing listens on the discard port: a client that honours proxy settings cannot get out.
DEAD_PROXY = "http://127.0.0.1:9"
MODEL_2 = "fake-model-2"


def missing_reason() -> str | None:
    """Why the real agents can't run here (None when they can)."""
    if shutil.which("node") is None:
        return "node is not installed"
    for binary in (CLAUDE_CODE_ACP, OPENCODE):
        if not binary.exists():
            return f"{binary.relative_to(REPO)} is missing: run `make agents` (npm ci)"
    return None


def _isolated_env(home: Path) -> dict[str, str]:
    """A throwaway HOME and XDG folders, no proxy escape, loopback exempt."""
    for sub in ("config", "data", "cache", "state"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_STATE_HOME": str(home / "state"),
        "HTTP_PROXY": DEAD_PROXY,
        "HTTPS_PROXY": DEAD_PROXY,
        "http_proxy": DEAD_PROXY,
        "https_proxy": DEAD_PROXY,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


def claude_code_env(home: Path, model: FakeModel) -> dict[str, str]:
    """Claude Code against the fake Anthropic API; IS_SANDBOX lets it run as root."""
    return {
        **_isolated_env(home),
        "CLAUDE_CONFIG_DIR": str(home / "claude"),
        "ANTHROPIC_BASE_URL": model.origin,
        "ANTHROPIC_API_KEY": "fake",
        "IS_SANDBOX": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


def opencode_config(model: FakeModel) -> dict[str, object]:
    """An openai-compatible provider on the fake model; tools that change things ask first
    (OpenCode's own default allows them, and then there is nothing for c2 to mediate)."""
    return {
        "$schema": "https://opencode.ai/config.json",
        "model": f"fake/{MODEL}",
        "small_model": f"fake/{MODEL}",
        "autoupdate": False,
        "share": "disabled",
        "permission": {"edit": "ask", "bash": "ask", "webfetch": "ask"},
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake model",
                "options": {"baseURL": f"{model.origin}/v1", "apiKey": "fake"},
                "models": {
                    name: {
                        "name": title,
                        "tool_call": True,
                        "limit": {"context": 200000, "output": 8192},
                    }
                    # A second model so switching models can be seen at the model server.
                    for name, title in ((MODEL, "Fake model"), (MODEL_2, "Fake model 2"))
                },
            }
        },
    }


def opencode_env(home: Path, model: FakeModel) -> dict[str, str]:
    """OpenCode with its config in the throwaway home; no downloads of models, plugins, LSPs."""
    config = home / "opencode.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps(opencode_config(model), indent=2), encoding="utf-8")
    return {
        **_isolated_env(home),
        "OPENCODE_CONFIG": str(config),
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "OPENCODE_DISABLE_CLAUDE_CODE": "1",
        "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
        "OPENCODE_PURE": "1",
    }


def toml_table(name: str, command: str, args: list[str], env: dict[str, str]) -> str:
    """A `[providers.NAME]` table for providers.toml."""
    # JSON strings are valid TOML basic strings for the paths and values used here.
    inline = ", ".join(f"{key} = {json.dumps(value)}" for key, value in sorted(env.items()))
    return (
        f"\n[providers.{name}]\ncommand = {json.dumps(command)}\n"
        f"args = {json.dumps(args)}\nenv = {{ {inline} }}\n"
    )


def launch_specs(
    agent_homes: Path, model: FakeModel
) -> dict[str, tuple[str, list[str], dict[str, str]]]:
    """Provider name → (command, args, env) of each real agent, homes under `agent_homes`."""
    return {
        "claude_code": (
            str(CLAUDE_CODE_ACP),
            [],
            claude_code_env(agent_homes / "claude_code", model),
        ),
        "opencode": (str(OPENCODE), ["acp"], opencode_env(agent_homes / "opencode", model)),
    }


def write_providers(c2_home: Path, agent_homes: Path, model: FakeModel) -> None:
    """Append the `claude_code` and `opencode` overrides to `c2_home/providers.toml`."""
    with (c2_home / "providers.toml").open("a", encoding="utf-8") as out:
        for name, (command, args, env) in launch_specs(agent_homes, model).items():
            out.write(toml_table(name, command, args, env))

"""Clients generated from openapi/openapi.json build cleanly and run a real flow against c2.

TypeScript: @hey-api/openapi-ts (clients/typescript, pinned in its package-lock.json), compiled
under `tsc --strict` with the typed event stream, then run with node. Python:
openapi-python-client (pinned in the dev extra), generated with zero warnings. Each flow pairs,
creates a demo session, prompts, reads typed frames until `turn_ended`, pages the transcript,
and gets a typed Problem for a 404 and a 409.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import REPO, C2Process

DOCUMENT = REPO / "openapi" / "openapi.json"
TS_PACKAGE = REPO / "clients" / "typescript"
FLOW = REPO / "tests" / "clients" / "python_flow.py"
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def c2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[C2Process]:
    server = C2Process(tmp_path_factory.mktemp("c2home"))
    server.start()
    yield server
    server.stop()


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, f"{args[:3]} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def _pair_url(server: C2Process) -> str:
    out = _run(
        [sys.executable, "-m", "c2.api.cli", "pair-url", "--home", str(server.home)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    return out.strip().splitlines()[-1]


README_URL = "http://127.0.0.1:4599"


def _readme_block(marker: str, language: str) -> str:
    """The README code block that follows `<!-- marker -->`."""
    after = (REPO / "README.md").read_text(encoding="utf-8").split(f"<!-- {marker} -->", 1)[1]
    match = re.match(rf"\s*```{language}\n(.*?)```", after, re.S)
    assert match is not None, f"a {language} block follows <!-- {marker} -->"
    return match.group(1)


def _summary(output: str) -> dict[str, object]:
    summary: dict[str, object] = json.loads(output.strip().splitlines()[-1])
    return summary


def _assert_flow(summary: dict[str, object]) -> None:
    events = summary["events"]
    assert isinstance(events, list) and "agent_text" in events and events[-1] == "turn_ended"
    assert summary["transcript_roles"][0] == "user"  # type: ignore[index]
    assert summary["problems"] == [[404, "no_such_session"], [409, "permission_not_pending"]]


def _ts_deps() -> Path:
    """clients/typescript/node_modules as locked (`make test` installs it; so does this)."""
    if not (TS_PACKAGE / "node_modules" / ".package-lock.json").exists():
        npm = shutil.which("npm")
        assert npm is not None, "npm is required for the TypeScript client test"
        _run([npm, "ci", "--no-audit", "--no-fund"], cwd=TS_PACKAGE)
    return TS_PACKAGE / "node_modules"


def test_generated_typescript_client_runs_the_flow(c2: C2Process, tmp_path: Path):
    """hey-api's client compiles under tsc --strict and drives pair→prompt→stream→problems."""
    node_modules = _ts_deps()
    work = tmp_path / "ts"
    (work / "src").mkdir(parents=True)
    (work / "test").mkdir()
    for name in ("package.json", "tsconfig.json", "openapi-ts.config.mjs"):
        shutil.copy(TS_PACKAGE / name, work / name)
    shutil.copy(TS_PACKAGE / "src" / "events.ts", work / "src" / "events.ts")
    shutil.copy(TS_PACKAGE / "test" / "flow.ts", work / "test" / "flow.ts")
    (work / "node_modules").symlink_to(node_modules)
    env = {**os.environ, "C2_OPENAPI": str(DOCUMENT), "C2_CLIENT_OUT": "src/generated"}
    _run(["node", "node_modules/@hey-api/openapi-ts/bin/run.js"], cwd=work, env=env)
    assert json.loads((work / "tsconfig.json").read_text())["compilerOptions"]["strict"] is True
    _run(["node", "node_modules/typescript/bin/tsc", "-p", "tsconfig.json"], cwd=work)
    out = _run(["node", "dist/test/flow.js", c2.base_url, _pair_url(c2)], cwd=work)
    # The README's quick start, as written (its URL pointed at this server, its bearer given).
    (work / "quickstart.ts").write_text(
        "declare const process: { env: Record<string, string | undefined> };\n"
        "const bearer: string = process.env.C2_BEARER ?? '';\n"
        + _readme_block("typescript-quickstart", "ts").replace(README_URL, c2.base_url),
        encoding="utf-8",
    )
    config = json.loads((work / "tsconfig.json").read_text())
    config["include"].append("quickstart.ts")
    (work / "tsconfig.json").write_text(json.dumps(config))
    _run(["node", "node_modules/typescript/bin/tsc", "-p", "tsconfig.json"], cwd=work)
    said = _run(["node", "dist/quickstart.js"], cwd=work, env={**env, "C2_BEARER": c2.bearer})
    assert "stream open" in said and "stream closed" in said, said
    summary = _summary(out)
    _assert_flow(summary)
    # The second turn came over a reconnect that resumed after the first turn's last event.
    assert summary["stop_reasons"] == ["end_turn", "end_turn"]
    assert summary["states"] == ["open", "reconnecting", "open", "closed"]
    assert summary["events"].count("turn_started") == 2  # type: ignore[attr-defined]


def test_generated_python_client_runs_the_flow(c2: C2Process, tmp_path: Path):
    """openapi-python-client generates with zero warnings; its client runs the same flow."""
    generator = Path(sys.executable).parent / "openapi-python-client"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    out = _run(
        [
            str(generator),
            "generate",
            "--path",
            str(DOCUMENT),
            "--output-path",
            str(tmp_path / "c2_client"),
            "--meta",
            "none",
            "--fail-on-warning",
        ],
        cwd=tmp_path,
        env=env,
    )
    assert "warning" not in out.lower(), out
    env["PYTHONPATH"] = str(tmp_path)
    flow = _run([sys.executable, str(FLOW), c2.base_url, _pair_url(c2)], cwd=tmp_path, env=env)
    summary = _summary(flow)
    _assert_flow(summary)
    assert summary["stop_reason"] == "end_turn"
    # The optional bodies left out (UNSET): each call answered, none failed to send.
    assert summary["bodiless"] == [
        ["cancel", False],
        ["resume_queue", False],
        ["remove_queued", "no_such_queue_item"],
    ]

"""The container's build context, checked without a container engine (none runs in CI).

The Dockerfile's final stage is read: exactly the files its COPY lines name are laid out as
in the image, c2 is installed from them as its RUN line installs it, and the installed copy
(not this checkout) serves `--version`, migrates a fresh home and prints the committed OpenAPI
document. The npm agents' step is checked for what c2 relies on: the lock matches
package.json, npm's global root (NPM_CONFIG_PREFIX) is where `npm ci` installs, its `.bin` is
on PATH, and c2 then reports the preinstalled agents available.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest

from c2.core.providers import ProviderRegistry

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(300)


@dataclasses.dataclass
class Stage:
    copies: list[tuple[list[str], PurePosixPath]]  # sources (repo paths), image destination
    runs: list[tuple[PurePosixPath, str]]  # working directory, shell command
    env: dict[str, str]


def _instructions(text: str) -> list[tuple[str, str]]:
    joined = text.replace("\\\n", " ")
    lines = [line.strip() for line in joined.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "")
        for line in lines
        if line and not line.startswith("#")
    ]


def final_stage(text: str) -> Stage:
    """The last stage's COPY (from the build context), RUN and ENV instructions."""
    stage = Stage([], [], {})
    workdir = PurePosixPath("/")
    for keyword, rest in _instructions(text):
        if keyword == "FROM":
            stage, workdir = Stage([], [], {}), PurePosixPath("/")
        elif keyword == "WORKDIR":
            workdir = workdir / rest
        elif keyword == "ENV":
            for pair in shlex.split(rest):
                name, _, value = pair.partition("=")
                stage.env[name] = value.replace("$PATH", os.environ["PATH"])
        elif keyword == "COPY" and not rest.startswith("--from"):
            *sources, dest = shlex.split(rest)
            stage.copies.append((sources, workdir / dest))
        elif keyword == "RUN":
            stage.runs.append((workdir, rest))
    return stage


@pytest.fixture(scope="module")
def stage() -> Stage:
    return final_stage((REPO / "Dockerfile").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def image_root(stage: Stage, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The image's files from the build context, at their image paths under a temp root."""
    root = tmp_path_factory.mktemp("image")
    ignored = {
        line.strip()
        for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    for sources, dest in stage.copies:
        for source in sources:
            assert source not in ignored, f"{source} is excluded by .dockerignore"
            path = REPO / source
            assert path.exists(), f"COPY {source}: no such file in the repository"
            into = root / dest.relative_to("/")
            target = into / path.name if str(dest).endswith("/") or len(sources) > 1 else into
            if path.is_dir():
                shutil.copytree(path, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
    return root


def test_c2_installs_and_runs_from_exactly_what_the_dockerfile_copies(
    stage: Stage, image_root: Path, tmp_path: Path
):
    """`pip install -c constraints.txt .` from the copied files only; the installed c2 runs."""
    [(workdir, command)] = [(w, c) for w, c in stage.runs if c.startswith("pip install")]
    args = shlex.split(command)[2:]
    assert args[:2] == ["-c", "constraints.txt"], "the image installs at the locked versions"
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site)]
    subprocess.run(
        [*pip, *args],
        cwd=image_root / workdir.relative_to("/"),
        check=True,
        timeout=240,
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("C2_DATABASE_URL", None)
    probe = (
        "import api, sys; assert api.__file__.startswith(sys.argv[1]), api.__file__;"
        "from api.cli import main; sys.exit(main(sys.argv[2:]))"
    )

    def c2(*argv: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", probe, str(site), *argv],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert c2("--version").strip() == "c2 0.1.0"
    paired = json.loads(c2("pair", "--name", "probe", "--home", str(tmp_path / "home")))
    assert paired["bearer"]  # the packaged migrations ran on a fresh home
    assert c2("openapi") == (REPO / "openapi" / "openapi.json").read_text(encoding="utf-8")


def test_npm_agents_are_preinstalled_where_c2_and_npx_find_them(
    stage: Stage, image_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The lock matches package.json; `npm ci` runs in the global root; its .bin is on PATH;
    with the image's environment c2 reports the preinstalled agents available."""
    [(_, command)] = [(w, c) for w, c in stage.runs if "npm ci" in c]
    npm_dir = PurePosixPath(command.split("cd ", 1)[1].split()[0])
    prefix = PurePosixPath(stage.env["NPM_CONFIG_PREFIX"])
    assert npm_dir == prefix / "lib", "npm ci must install into npm's global root"
    assert str(prefix / "lib" / "node_modules" / ".bin") in stage.env["PATH"].split(":")
    assert stage.env["HOME"].startswith("/data/") and stage.env["C2_HOME"] == "/data"
    assert stage.env["NPM_CONFIG_CACHE"].startswith("/data/")
    lib = image_root / npm_dir.relative_to("/")
    manifest = json.loads((lib / "package.json").read_text(encoding="utf-8"))
    lock = json.loads((lib / "package-lock.json").read_text(encoding="utf-8"))
    assert lock["packages"][""]["dependencies"] == manifest["dependencies"]
    assert {"@zed-industries/claude-code-acp", "opencode-ai"} <= set(manifest["dependencies"])

    if shutil.which("npx") is None:
        pytest.skip("npx is not installed here")
    # What `npm ci` leaves: each package's manifest in the global root, its binaries in .bin.
    modules = lib / "node_modules"
    for name in manifest["dependencies"]:
        (modules / name).mkdir(parents=True)
        (modules / name / "package.json").write_text(json.dumps({"name": name}))
    (modules / ".bin").mkdir()
    (modules / ".bin" / "opencode").write_text("#!/bin/sh\n")
    (modules / ".bin" / "opencode").chmod(0o755)
    monkeypatch.chdir(tmp_path)  # not the checkout, whose node_modules npx would also use
    registry = ProviderRegistry.load(tmp_path)
    image_env = {
        "NPM_CONFIG_PREFIX": str(image_root / prefix.relative_to("/")),
        "NPM_CONFIG_CACHE": str(tmp_path / "npm-cache"),
        "PATH": f"{modules / '.bin'}:{os.environ['PATH']}",
    }
    bare_env = {**image_env, "NPM_CONFIG_PREFIX": str(tmp_path / "nowhere")}
    for key in ("claude_code", "opencode"):
        entry = registry.get(key)
        in_image = dataclasses.replace(entry, env={**entry.env, **image_env})
        assert in_image.unavailable_reason() is None, key
    claude = registry.get("claude_code")
    without = dataclasses.replace(claude, env={**claude.env, **bare_env})
    assert without.unavailable_reason() is not None  # the check can fail

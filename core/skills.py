"""The skill library: Agent Skills folders (`<root>/<id>/SKILL.md`) read from disk on demand.

Roots are `$C2_HOME/skills/` and the project's `.agents/skills/`; on an id clash the project's
skill wins, so a repository can pin the behaviour its own prompts rely on. A malformed SKILL.md
is skipped with a warning and never fails a listing. Ids are folder names, never paths.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path

import yaml
from pydantic import BaseModel

log = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
PROJECT_SKILLS = Path(".agents") / "skills"
# Bounds what one request can make the server read; real skills are a few KiB.
MAX_SKILL_BYTES = 1_000_000
# A folder name, never a path: no separators, no leading dot, no `..` (traversal is "unknown").
_SKILL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_FRONT_MATTER = re.compile(
    r"\A\ufeff?---[ \t]*\r?\n(.*?)^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S | re.M
)
_PLACEHOLDER = re.compile(r"\{\{\s*([^{}\s]+)\s*\}\}")


class InvalidSkillError(ValueError):
    """A SKILL.md without usable front matter."""


class SkillInfo(BaseModel):
    """One entry of `GET /v1/skills`."""

    id: str
    name: str
    description: str
    params: dict[str, str]


class Skill(SkillInfo):
    """A parsed skill: its listing metadata plus the template body."""

    body: str

    def info(self) -> SkillInfo:
        """The listing projection (no body)."""
        return SkillInfo(
            id=self.id, name=self.name, description=self.description, params=self.params
        )

    def compile(self, params: Mapping[str, str]) -> str:
        """Body with `{{param}}` filled (block params over defaults), trimmed."""
        values = {**self.params, **params}

        def fill(match: re.Match[str]) -> str:
            # Unknown placeholders stay verbatim; one pass, so values are never re-expanded.
            return values.get(match.group(1), match.group(0))

        return _PLACEHOLDER.sub(fill, self.body).strip()


def is_skill_id(skill_id: str) -> bool:
    """Whether `skill_id` can name a skill folder (rejects separators and traversal)."""
    return _SKILL_ID.fullmatch(skill_id) is not None and ".." not in skill_id


def _scalar(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"  # YAML spelling, not Python's
    if isinstance(value, str | int | float):
        return str(value)
    raise InvalidSkillError(f"parameter default must be a scalar, got {type(value).__name__}")


def parse_skill(skill_id: str, text: str) -> Skill:
    """Parse SKILL.md text: YAML front matter (`name`, `description`, `params`) then the body."""
    match = _FRONT_MATTER.match(text)
    if match is None:
        raise InvalidSkillError("missing YAML front matter")
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise InvalidSkillError(f"invalid YAML front matter: {exc}") from exc
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise InvalidSkillError("front matter is not a mapping")
    name = meta.get("name", skill_id)
    description = meta.get("description", "")
    if not isinstance(name, str) or not isinstance(description, str):
        raise InvalidSkillError("`name` and `description` must be strings")
    raw_params = meta.get("params") or {}
    if not isinstance(raw_params, dict):
        raise InvalidSkillError("`params` must map parameter names to defaults")
    params = {str(key): _scalar(value) for key, value in raw_params.items()}
    return Skill(
        id=skill_id,
        name=name.strip() or skill_id,
        description=description.strip(),
        params=params,
        body=text[match.end() :],
    )


class SkillLibrary:
    """Skills under the home root and a project's `.agents/skills/` (project wins on a clash)."""

    def __init__(self, home_skills: Path) -> None:
        self.home_skills = home_skills
        self._warned: set[tuple[Path, int]] = set()

    def _roots(self, cwd: str | None) -> list[Path]:
        # Precedence order: the project first, so its skill shadows a home skill of the same id.
        roots = [Path(cwd) / PROJECT_SKILLS] if cwd else []
        roots.append(self.home_skills)
        return roots

    def _load(self, root: Path, skill_id: str) -> Skill | None:
        path = root / skill_id / SKILL_FILE
        try:
            stat = path.stat()
            if stat.st_size > MAX_SKILL_BYTES:
                raise InvalidSkillError(f"larger than {MAX_SKILL_BYTES} bytes")
            return parse_skill(skill_id, path.read_text(encoding="utf-8"))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (OSError, UnicodeDecodeError, InvalidSkillError) as exc:
            self._warn(path, exc)
            return None

    def _warn(self, path: Path, exc: Exception) -> None:
        # Listing runs on every request; say it once per file version, not on every call.
        try:
            version = path.stat().st_mtime_ns
        except OSError:
            version = 0
        if (path, version) not in self._warned:
            self._warned.add((path, version))
            log.warning("skipping skill %s: %s", path, exc)

    def get(self, skill_id: str, cwd: str | None) -> Skill | None:
        """The skill with this exact id, or None when unknown, invalid or not a folder name."""
        if not is_skill_id(skill_id):
            return None
        for root in self._roots(cwd):
            skill = self._load(root, skill_id)
            if skill is not None:
                return skill
        return None

    def list(self, cwd: str | None) -> list[SkillInfo]:
        """Every valid skill visible from `cwd`, sorted by id."""
        found: dict[str, SkillInfo] = {}
        for root in self._roots(cwd):
            try:
                children = sorted(root.iterdir())
            except OSError:
                continue  # a missing root is simply empty
            for child in children:
                if child.name in found or not is_skill_id(child.name) or not child.is_dir():
                    continue
                skill = self._load(root, child.name)
                if skill is not None:
                    found[child.name] = skill.info()
        return [found[key] for key in sorted(found)]

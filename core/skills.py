"""The skill library: Agent Skills folders (`<root>/<id>/SKILL.md`) read from disk on demand.

Roots are `$C2_HOME/skills/` and the project's `.agents/skills/`; on an id clash the project's
skill wins, so a repository can pin the behaviour its own prompts rely on. A malformed SKILL.md
is skipped with a warning and never fails a listing. Ids are folder names, never paths.
A repository is untrusted: its skill files are read through core.safe_files (regular files
only, bounded, never through a symlink that leaves the project).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from itertools import islice
from pathlib import Path

from pydantic import BaseModel

from c2.core.safe_files import UnsafeFileError, is_dir_within, read_bounded

log = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
PROJECT_SKILLS = Path(".agents") / "skills"
# Bounds what one request can make the server read; real skills are a few KiB.
MAX_SKILL_BYTES = 1_000_000
# Bounds a listing: a skills folder symlinked to a huge directory is not walked to its end.
MAX_SKILL_ENTRIES = 1000
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
    import yaml  # at the first skill read, not at every start (~10 ms): most use none

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

    def _roots(self, cwd: str | None) -> list[tuple[Path, Path | None]]:
        """(skills folder, the folder its files must stay inside) in precedence order: the
        project first, so its skill shadows a home skill of the same id. The home folder is
        the user's own; its skills may be symlinked from anywhere."""
        roots: list[tuple[Path, Path | None]] = []
        if cwd:
            project = Path(cwd)
            folder = project / PROJECT_SKILLS
            if is_dir_within(folder, project):
                roots.append((folder, project))
            elif os.path.lexists(folder):
                self._warn(folder, UnsafeFileError("not a folder inside the project"))
        roots.append((self.home_skills, None))
        return roots

    def _load(self, root: Path, skill_id: str, confine: Path | None) -> Skill | None:
        path = root / skill_id / SKILL_FILE
        try:
            raw = read_bounded(path, limit=MAX_SKILL_BYTES, root=confine)
            return parse_skill(skill_id, raw.decode("utf-8"))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (OSError, UnicodeDecodeError, InvalidSkillError) as exc:
            self._warn(path, exc)
            return None

    def _warn(self, path: Path, exc: Exception) -> None:
        # Listing runs on every request; say it once per file version, not on every call.
        try:
            version = path.lstat().st_mtime_ns
        except OSError:
            version = 0
        if (path, version) not in self._warned:
            self._warned.add((path, version))
            log.warning("skipping skill %s: %s", path, exc)

    def get(self, skill_id: str, cwd: str | None) -> Skill | None:
        """The skill with this exact id, or None when unknown, invalid or not a folder name."""
        if not is_skill_id(skill_id):
            return None
        for root, confine in self._roots(cwd):
            skill = self._load(root, skill_id, confine)
            if skill is not None:
                return skill
        return None

    def list(self, cwd: str | None) -> list[SkillInfo]:
        """Every valid skill visible from `cwd`, sorted by id."""
        found: dict[str, SkillInfo] = {}
        for root, confine in self._roots(cwd):
            try:
                with os.scandir(root) as entries:
                    children = sorted(e.name for e in islice(entries, MAX_SKILL_ENTRIES))
            except OSError:
                continue  # a missing root is simply empty
            for name in children:
                if name in found or not is_skill_id(name):
                    continue
                skill = self._load(root, name, confine)
                if skill is not None:
                    found[name] = skill.info()
        return [found[key] for key in sorted(found)]

"""The skill library: SKILL.md parsing, roots and precedence, safety, and compilation."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest

from c2.core.skills import MAX_SKILL_BYTES, SkillInfo, SkillLibrary, is_skill_id, parse_skill

COMMIT = (
    "---\n"
    "name: Commit message\n"
    "description: Writes a commit message\n"
    "params:\n"
    "  scope: the change\n"
    "  style: conventional\n"
    "---\n"
    "\n"
    "Write a commit message for {{scope}} in {{style}} style.\n"
)


def write_skill(root: Path, skill_id: str, text: str) -> Path:
    folder = root / skill_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "c2-home" / "skills"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


def test_skills_macro_substitutes_params(home: Path) -> None:
    """Block params override defaults inside {{param}} placeholders; the body is trimmed."""
    write_skill(home, "commit", COMMIT)
    skill = SkillLibrary(home).get("commit", None)
    assert skill is not None
    assert skill.compile({"scope": "auth module"}) == (
        "Write a commit message for auth module in conventional style."
    )
    assert skill.compile({}) == "Write a commit message for the change in conventional style."


def test_skills_unknown_placeholders_stay_verbatim() -> None:
    """Placeholders without a value are kept; values are never expanded a second time."""
    skill = parse_skill("x", "---\nparams: {a: '{{b}}'}\n---\n{{a}} {{ b }} {{c}} {x}")
    assert skill.compile({}) == "{{b}} {{ b }} {{c}} {x}"
    assert skill.compile({"b": "B"}) == "{{b}} B {{c}} {x}"


def test_skills_list_reports_metadata_and_param_defaults(home: Path) -> None:
    """GET /v1/skills entries: id (folder), name, description and params with defaults."""
    write_skill(home, "commit", COMMIT)
    write_skill(home, "bare", "---\n---\nJust a body.\n")
    listed = SkillLibrary(home).list(None)
    assert [info.model_dump() for info in listed] == [
        {"id": "bare", "name": "bare", "description": "", "params": {}},
        {
            "id": "commit",
            "name": "Commit message",
            "description": "Writes a commit message",
            "params": {"scope": "the change", "style": "conventional"},
        },
    ]
    assert all(type(info) is SkillInfo for info in listed)


def test_skills_project_skill_overrides_home_skill(home: Path, project: Path) -> None:
    """On an id clash the project's .agents/skills/ wins, for listing and for compiling."""
    write_skill(home, "commit", COMMIT)
    write_skill(home, "home-only", "---\nname: Home\n---\nhome")
    write_skill(project / ".agents" / "skills", "commit", "---\nname: Project\n---\nproject")
    library = SkillLibrary(home)
    assert {i.id: i.name for i in library.list(str(project))} == {
        "commit": "Project",
        "home-only": "Home",
    }
    skill = library.get("commit", str(project))
    assert skill is not None and skill.compile({}) == "project"
    home_skill = library.get("commit", None)
    assert home_skill is not None and home_skill.name == "Commit message"


def test_skills_bad_skill_files_are_skipped_with_a_warning(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Missing or invalid front matter skips that skill (logged once); the list still works."""
    write_skill(home, "good", COMMIT)
    write_skill(home, "no-front-matter", "Just text\n")
    write_skill(home, "bad-yaml", "---\nname: [unclosed\n---\nbody")
    write_skill(home, "not-mapping", "---\n- a\n- b\n---\nbody")
    write_skill(home, "bad-params", "---\nparams: [a, b]\n---\nbody")
    write_skill(home, "nested-default", "---\nparams: {a: {b: c}}\n---\nbody")
    write_skill(home, "bad-name", "---\nname: 3\n---\nbody")
    (home / "binary").mkdir()
    (home / "binary" / "SKILL.md").write_bytes(b"---\n\xff\xfe\n---\n")
    (home / "empty-folder").mkdir()
    (home / "stray-file.md").write_text("not a folder")
    library = SkillLibrary(home)
    with caplog.at_level(logging.WARNING, logger="c2.core.skills"):
        assert [i.id for i in library.list(None)] == ["good"]
        assert [i.id for i in library.list(None)] == ["good"]
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 7 and all(m.startswith("skipping skill ") for m in warned)
    assert library.get("bad-yaml", None) is None


def test_skills_ids_are_folder_names_never_paths(home: Path, tmp_path: Path) -> None:
    """Ids with separators, traversal or a leading dot are simply unknown."""
    write_skill(tmp_path / "c2-home", "outside", COMMIT)  # sibling of the skills root
    write_skill(home, ".hidden", COMMIT)
    library = SkillLibrary(home)
    for bad in ["../outside", "..", ".", "a/b", "a\\b", ".hidden", "/etc", "", "x" * 200]:
        assert not is_skill_id(bad)
        assert library.get(bad, None) is None
    assert library.list(None) == []
    assert is_skill_id("code-review_v2.1")


def test_skills_missing_roots_list_nothing(tmp_path: Path) -> None:
    """No home skills folder and no project folder is an empty library, not an error."""
    library = SkillLibrary(tmp_path / "absent")
    assert library.list(str(tmp_path / "no-project")) == []
    assert library.get("commit", str(tmp_path)) is None


def test_skills_scalar_defaults_use_yaml_spelling() -> None:
    """Non-string scalar defaults become strings: true/false, numbers, null as empty."""
    skill = parse_skill("x", "---\nparams:\n  a: true\n  b: 3\n  c:\n  d: 1.5\n---\nbody")
    assert skill.params == {"a": "true", "b": "3", "c": "", "d": "1.5"}


def test_skills_front_matter_tolerates_bom_and_crlf() -> None:
    """A UTF-8 BOM and Windows line endings still parse."""
    skill = parse_skill("x", "\ufeff---\r\nname: Win\r\n---\r\nBody\r\n")
    assert skill.name == "Win" and skill.compile({}) == "Body"


# -- hostile repositories ----------------------------------------------------------------------


def test_skills_project_symlink_to_a_device_is_skipped(
    home: Path, project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A SKILL.md symlinked to /dev/zero is skipped with a warning, never read to its end."""
    folder = project / ".agents" / "skills" / "zero"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").symlink_to("/dev/zero")
    write_skill(project / ".agents" / "skills", "ok", COMMIT)
    with caplog.at_level(logging.WARNING, logger="c2.core.skills"):
        listed = SkillLibrary(home).list(str(project))
    assert [s.id for s in listed] == ["ok"]
    assert "zero" in caplog.text


def test_skills_project_fifo_does_not_block(home: Path, project: Path) -> None:
    """A SKILL.md that is a FIFO is skipped at once (no writer is ever waited for)."""
    folder = project / ".agents" / "skills" / "pipe"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "SKILL.md")
    library = SkillLibrary(home)
    results: list[object] = []
    # A daemon thread: without the guard the read would block forever on the FIFO.
    worker = threading.Thread(
        target=lambda: results.extend(
            [library.list(str(project)), library.get("pipe", str(project))]
        ),
        daemon=True,
    )
    worker.start()
    worker.join(timeout=10)
    assert results == [[], None]


def test_skills_project_symlink_out_of_the_project_is_not_followed(
    home: Path, project: Path, tmp_path: Path
) -> None:
    """A skill file or skills folder symlinked outside the project is never read."""
    outside = write_skill(tmp_path / "elsewhere", "secret", COMMIT)
    skills = project / ".agents" / "skills"
    (skills / "leak").mkdir(parents=True)
    (skills / "leak" / "SKILL.md").symlink_to(outside / "SKILL.md")
    (skills / "dir-leak").symlink_to(outside)
    inside = write_skill(project / "docs", "shared", COMMIT)
    (skills / "shared").symlink_to(inside)  # a symlink that stays inside the project is fine
    library = SkillLibrary(home)
    assert [s.id for s in library.list(str(project))] == ["shared"]
    assert library.get("leak", str(project)) is None
    other = tmp_path / "other"
    other.mkdir()
    (other / ".agents").mkdir()
    (other / ".agents" / "skills").symlink_to(tmp_path / "elsewhere")
    assert library.list(str(other)) == []


def test_skills_oversized_file_is_skipped(home: Path, project: Path) -> None:
    """A SKILL.md over the size limit is skipped, whatever its front matter."""
    big = COMMIT + "x" * (MAX_SKILL_BYTES + 1)
    write_skill(project / ".agents" / "skills", "big", big)
    assert SkillLibrary(home).list(str(project)) == []

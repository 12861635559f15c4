"""Projects made with cruft from a git copy of the template can be checked and updated."""

import shutil
from pathlib import Path

from conftest import TEMPLATE, run

GIT = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}
IGNORED = shutil.ignore_patterns(".git", ".venv", "build", "__pycache__", ".pytest_cache", ".ruff_cache")


def git(*args: str, cwd: Path) -> None:
    result = run("git", *args, cwd=cwd, **GIT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_cruft_check_and_update_follow_a_template_change(tmp_path: Path) -> None:
    template = tmp_path / "template"
    shutil.copytree(TEMPLATE, template, ignore=IGNORED)
    git("init", "-q", "-b", "main", cwd=template)
    git("add", "-A", cwd=template)
    git("commit", "-q", "-m", "template", cwd=template)
    # cookiecutter leaves its hook copies in TMPDIR (cookiecutter#886): here, not in /tmp.
    cruft_env = {**GIT, "TMPDIR": str(tmp_path)}

    result = run(
        "cruft", "create", "--no-input", "--output-dir", tmp_path / "out", template, cwd=tmp_path, **cruft_env
    )
    assert result.returncode == 0, result.stdout + result.stderr
    project = tmp_path / "out" / "my-project"
    assert (project / ".cruft.json").is_file()
    git("init", "-q", "-b", "main", cwd=project)
    git("add", "-A", cwd=project)
    git("commit", "-q", "-m", "generated", cwd=project)
    assert run("cruft", "check", cwd=project, **cruft_env).returncode == 0

    makefile = template / "{{ cookiecutter.project_slug.replace(cookiecutter.__slash, '_') }}" / "Makefile"
    makefile.write_text(
        makefile.read_text() + "\nhello:  ## a target added to the template later\n\techo hello\n"
    )
    git("commit", "-q", "-am", "add a make target", cwd=template)
    assert run("cruft", "check", cwd=project, **cruft_env).returncode != 0

    result = run("cruft", "update", "--skip-apply-ask", "--allow-untracked-files", cwd=project, **cruft_env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "a target added to the template later" in (project / "Makefile").read_text()
    git("add", "-A", cwd=project)
    git("commit", "-q", "-m", "update", cwd=project)
    assert run("cruft", "check", cwd=project, **cruft_env).returncode == 0

"""Commit subjects a reader can scan: a type prefix and at most 72 characters, for every
commit after the rule's base, merges included (``make lint`` runs ``local.commits``)."""

from __future__ import annotations

from pathlib import Path
import subprocess

import pytest

from local import commits


def test_a_subject_of_72_characters_is_accepted_and_one_of_73_refused() -> None:
    # Given
    at_limit = "fix: " + "a" * 67
    over = at_limit + "b"
    # Then
    assert len(at_limit) == 72
    assert commits.problem(at_limit) is None
    assert commits.problem(over) == "73 characters, over 72"


@pytest.mark.parametrize(
    "subject",
    [
        "Keep a thread's state on its own item",
        "feature: keep a thread's state on its own item",
        "fix:keep a thread's state on its own item",
        "fix : keep a thread's state on its own item",
        "fix(): keep a thread's state",
        "Merge branch 'h-build'",
        'Revert "fix: keep a thread\'s state on its own item"',
        ": keep a thread's state on its own item",
    ],
)
def test_a_subject_without_a_type_prefix_is_refused(subject: str) -> None:
    assert commits.problem(subject) is not None
    assert "no type prefix" in str(commits.problem(subject))


@pytest.mark.parametrize(
    "subject",
    [
        *(f"{kind}: keep a thread's state on its own item" for kind in commits.TYPES),
        "test(e2e): wait for the server's ready line only",
    ],
)
def test_each_type_with_or_without_a_scope_is_accepted(subject: str) -> None:
    assert commits.problem(subject) is None


def _git(repo: Path, *arguments: str) -> str:
    return subprocess.run(  # noqa: S603 (git, fixed arguments)
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *arguments],  # noqa: S607
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def _commit(repo: Path, subject: str) -> str:
    _git(repo, "commit", "--allow-empty", "--quiet", "-m", subject)
    return _git(repo, "rev-parse", "HEAD")


def _repository(tmp_path: Path) -> Path:
    _git(tmp_path, "init", "--quiet", "-b", "main")
    return tmp_path


def test_the_check_names_each_commit_after_the_base_that_breaks_the_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a base whose own subject is an essay, then one good and one bad commit after it
    repo = _repository(tmp_path)
    base = _commit(repo, "An essay of a subject that the rule does not look at " * 3)
    _commit(repo, "fix: answer 404 for a thread that was deleted")
    bad = _commit(repo, "Answer 404 for a thread that was deleted")
    # When
    status = commits.check(repo, base)
    # Then only the commit after the base that breaks the rule is named
    said = capsys.readouterr().err
    assert status == 1
    assert f"commit {bad[:12]} 'Answer 404 for a thread that was deleted': no type prefix" in said
    assert "1 of 2 commit subjects" in said


def test_a_merge_commit_after_the_base_is_checked_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a branch merged with git's own subject
    repo = _repository(tmp_path)
    base = _commit(repo, "build: start")
    _git(repo, "checkout", "--quiet", "-b", "side")
    _commit(repo, "feat: list a member's sessions")
    _git(repo, "checkout", "--quiet", "main")
    _commit(repo, "docs: say what a session is")
    _git(repo, "merge", "--no-ff", "--quiet", "--no-edit", "side")
    # When
    status = commits.check(repo, base)
    # Then
    assert status == 1
    assert "Merge branch 'side'" in capsys.readouterr().err


def test_every_subject_keeping_the_rule_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given
    repo = _repository(tmp_path)
    base = _commit(repo, "Not checked: the base itself")
    _commit(repo, "test: refuse a subject of 73 characters")
    # When / Then
    assert commits.check(repo, base) == 0
    assert "1 commit subjects" in capsys.readouterr().out


def test_a_clone_without_the_base_fails_saying_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a history that does not hold the base (a shallow or foreign clone)
    repo = _repository(tmp_path)
    _commit(repo, "build: start")
    # When / Then
    assert commits.check(repo, commits.BASE) == 1
    assert "is not in this clone: the check needs the full history" in capsys.readouterr().err

"""Commit subjects a reader can scan: after issue 28's first commit, every subject (merge
commits included) is a type, an optional scope and ``: ``, in at most 72 characters, such
as ``fix: answer 404 for a thread that was deleted``. ``make lint`` runs it
(``python -m local.commits``); it reads the history from ``BASE``, which a full clone
has, and names each commit that breaks the rule."""

from __future__ import annotations

from pathlib import Path
import re
import subprocess
import sys

BASE = "5a25a5ce1a8f26b189792ad9656dd54ee2d2215e"  # the rule holds for what comes after it
TYPES = ("feat", "fix", "perf", "refactor", "test", "docs", "build", "ci")
MAX_SUBJECT = 72
PREFIX = re.compile(rf"(?:{'|'.join(TYPES)})(?:\([^()\s]+\))?: \S")
ROOT = Path(__file__).resolve().parent.parent


def problem(subject: str) -> str | None:
    """What is wrong with a commit subject, or None when it keeps the rule."""
    if len(subject) > MAX_SUBJECT:
        return f"{len(subject)} characters, over {MAX_SUBJECT}"
    if not PREFIX.match(subject):
        return f"no type prefix: start with one of {'|'.join(TYPES)}, then ': ' or '(scope): '"
    return None


def _git(root: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 (git, fixed arguments)
        ["git", *arguments],  # noqa: S607 (git from PATH, as a developer runs it)
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )


def subjects(root: Path, base: str) -> list[tuple[str, str]]:
    """``(hash, subject)`` of every commit in ``base..HEAD`` of the repository at ``root``."""
    if _git(root, "cat-file", "-e", f"{base}^{{commit}}").returncode != 0:
        raise LookupError(f"commit {base} is not in this clone: the check needs the full history")
    listed = _git(root, "log", "--format=%H%x00%s", f"{base}..HEAD")
    if listed.returncode != 0:
        raise LookupError(listed.stderr.strip())
    return [
        (commit, subject)
        for commit, _, subject in (line.partition("\0") for line in listed.stdout.splitlines())
    ]


def check(root: Path = ROOT, base: str = BASE) -> int:
    """0 when every subject after ``base`` keeps the rule, else 1, each breaker named."""
    try:
        found = subjects(root, base)
    except LookupError as missing:
        print(f"commit subjects: {missing}", file=sys.stderr)
        return 1
    broken = [(commit, subject, why) for commit, subject in found if (why := problem(subject))]
    for commit, subject, why in broken:
        print(f"commit {commit[:12]} {subject!r}: {why}", file=sys.stderr)
    if broken:
        print(
            f"{len(broken)} of {len(found)} commit subjects since {base[:12]} break the rule "
            "(type: imperative summary, at most 72 characters; a merge too, e.g. "
            "'build: merge h-build'); reword them with git rebase -i or git commit --amend",
            file=sys.stderr,
        )
        return 1
    print(f"{len(found)} commit subjects since {base[:12]}: each typed, at most 72 characters")
    return 0


if __name__ == "__main__":
    sys.exit(check())

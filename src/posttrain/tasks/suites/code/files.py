"""Files of one code task: the bugged git repository, the hidden tests, the oracle patch.

Everything here is deterministic: git commits carry fixed names and dates and the index
is rebuilt with `git read-tree` (no stat data), archives have fixed mtimes and owners.
"""

from __future__ import annotations

import ast
import difflib
import gzip
import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

GIT_ENV = {"GIT_AUTHOR_NAME": "posttrain", "GIT_AUTHOR_EMAIL": "suite@posttrain.invalid",
           "GIT_COMMITTER_NAME": "posttrain", "GIT_COMMITTER_EMAIL": "suite@posttrain.invalid",
           "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+0000",
           "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+0000", "GIT_CONFIG_NOSYSTEM": "1",
           "HOME": "/nonexistent", "PATH": "/usr/bin:/bin", "LANG": "C"}


def _base_name(test_id: str) -> tuple[str | None, str]:
    """(class or None, function) of a pytest JUnit id such as mod.Class::test_x[1]."""
    classname, _, name = test_id.partition("::")
    name = name.split("[")[0]
    last = classname.rsplit(".", 1)[-1]
    return (last if last[:1].isupper() else None), name


def remove_tests(source: str, test_ids: list[str]) -> str:
    """The test file without the named test functions (a class left empty goes too)."""
    wanted = {_base_name(t) for t in test_ids}
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    spans = []

    def span(node: ast.AST) -> tuple[int, int]:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        return first - 1, node.end_lineno

    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and (None, node.name) in wanted:
            spans.append(span(node))
        elif isinstance(node, ast.ClassDef):
            gone = [m for m in node.body if isinstance(m, ast.FunctionDef)
                    and (node.name, m.name) in wanted]
            if gone and len(gone) == len(node.body):
                spans.append(span(node))
            else:
                spans += [span(m) for m in gone]
    for a, b in sorted(spans, reverse=True):
        del lines[a:b]
    out = "".join(lines)
    compile(out, "<tests>", "exec")
    return out


def patch(rel: str, old: str, new: str) -> str:
    """A unified diff that `git apply` takes, turning old into new at rel."""
    diff = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                f"a/{rel}", f"b/{rel}", n=3)
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                   for line in diff)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, check=True, capture_output=True,
                   timeout=60)


def make_repo(repo: Path, message: str) -> None:
    """One commit of everything under repo, with fixed identity and dates, and nothing
    else in .git that could differ between runs or leak anything."""
    _git(repo, "-c", "init.defaultBranch=main", "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "commit.gpgsign=false", "commit", "-q", "-m", message)
    git = repo / ".git"
    for name in ("hooks", "logs", "info", "description", "COMMIT_EDITMSG", "index"):
        p = git / name
        shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
    _git(repo, "read-tree", "HEAD")


def tar_gz(root: Path, members: list[str]) -> bytes:
    """A reproducible .tar.gz of root/<member> files."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w") as tar:
            for rel in sorted(members):
                data = (root / rel).read_bytes()
                info = tarfile.TarInfo(rel)
                info.size, info.mode, info.mtime = len(data), 0o644, 0
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_sh() -> str:
    # The reward is written on every path: grade.py writes reward.json; if it could not
    # (it crashed), reward 0 with the reason in grade.log.
    return ("#!/bin/bash\nmkdir -p /logs/verifier\n"
            "/usr/bin/python3 -I /tests/grade.py > /logs/verifier/grade.log 2>&1\n"
            "[ -s /logs/verifier/reward.json ] || echo 0 > /logs/verifier/reward.txt\n")


def solve_sh(diff: str) -> str:
    return ("#!/bin/bash\nset -e\ncd /app/repo\n"
            f"git apply --whitespace=nowarn <<'POSTTRAIN_PATCH'\n{diff}POSTTRAIN_PATCH\n")


def copy_tree(src: Path, dest: Path) -> None:
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for top, dirs, files in os.walk(dest):
        for name in files:
            os.chmod(Path(top) / name, 0o644)

"""The size of a source tree per directory: raw lines and code lines.

Code lines leave out blank lines, comment-only lines and docstrings (the first string statement of
a module, class or function); a statement spanning several lines counts each line it spans.  Used
to state the size of lazytorch/ before and after a change (docs/architecture.md):

    python -m benchmarks.line_count [ROOT] [--against REV]

--against REV prints the same table for the tree at git revision REV beside it (extracted with
`git archive`, so the working tree is not touched).
"""
from __future__ import annotations

import argparse
import ast
import io
import subprocess
import tarfile
import tokenize
from collections import defaultdict
from pathlib import Path

SKIPPED_TOKENS = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                  tokenize.ENDMARKER}


def docstring_lines(tree: ast.AST) -> set[int]:
    """The line numbers of every docstring in a parsed module."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def code_lines(source: str) -> int:
    """Lines holding code: not blank, not only a comment, not part of a docstring."""
    docs = docstring_lines(ast.parse(source))
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in SKIPPED_TOKENS:
            lines.update(n for n in range(tok.start[0], tok.end[0] + 1) if n not in docs)
    return len(lines)


def count(files: dict[str, str]) -> dict[str, tuple[int, int]]:
    """directory -> (raw lines, code lines) of the given {path: source} Python files."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for path, source in files.items():
        d = str(Path(path).parent)
        out[d][0] += len(source.splitlines())
        out[d][1] += code_lines(source)
    return {d: (raw, code) for d, (raw, code) in out.items()}


def tree_files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root.parent)): p.read_text() for p in sorted(root.rglob("*.py"))}


def revision_files(root: Path, rev: str) -> dict[str, str]:
    """The Python files under root at git revision rev."""
    top = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip())
    rel = root.resolve().relative_to(top)
    data = subprocess.run(["git", "archive", rev, str(rel)], cwd=top, capture_output=True, check=True).stdout
    files = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.endswith(".py"):
                name = str(Path(member.name).relative_to(rel.parent))
                files[name] = tar.extractfile(member).read().decode()
    return files


def table(now: dict[str, tuple[int, int]], before: dict[str, tuple[int, int]] | None = None) -> str:
    dirs = sorted(set(now) | set(before or {}))
    rows = [("directory", "raw", "code") + (("raw before", "code before") if before is not None else ())]
    for d in dirs + ["TOTAL"]:
        pick = (lambda t: tuple(map(sum, zip(*t.values()))) if t else (0, 0)) if d == "TOTAL" \
            else (lambda t: t.get(d, (0, 0)))
        rows.append((d, *map(str, pick(now))) + (tuple(map(str, pick(before))) if before is not None else ()))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                     for r in rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default="lazytorch")
    parser.add_argument("--against", metavar="REV", help="also count the tree at this git revision")
    args = parser.parse_args(argv)
    root = Path(args.root)
    before = count(revision_files(root, args.against)) if args.against else None
    print(table(count(tree_files(root)), before))


if __name__ == "__main__":
    main()

"""The text literals of the app's own modules (trainer_core/, ui/, api/, server.py), for tests that
keep a fact in one place: a title, a message or a bound typed a second time shows up here."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("trainer_core", "ui", "api", "server.py", "app.py")


@cache
def _modules() -> tuple[tuple[str, ast.Module], ...]:
    """(path relative to the repository, parsed module) of every source module, parsed once."""
    paths = [
        p for top in SOURCES for p in (sorted((ROOT / top).rglob("*.py")) if (ROOT / top).is_dir() else [ROOT / top])
    ]
    return tuple((str(path.relative_to(ROOT)), ast.parse(path.read_text(encoding="utf-8"))) for path in paths)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes of a module and its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def string_literals() -> Iterator[tuple[str, str]]:
    """(module path relative to the repository, text) of every string literal that is not a
    docstring (f-strings give their literal parts)."""
    for path, tree in _modules():
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                yield path, node.value


def names_used(name: str) -> set[str]:
    """The modules (paths relative to the repository) that mention the identifier ``name``."""
    return {
        path
        for path, tree in _modules()
        if any(
            (isinstance(n, ast.Name) and n.id == name) or (isinstance(n, ast.alias) and n.name == name)
            for n in ast.walk(tree)
        )
    }

"""The README's map of the code, made from the packages' own docstrings: one line a package (the
first sentence of its ``__init__`` docstring) with its modules, so the map cannot drift from the
code. ``python3 scripts/file_map.py`` prints it; ``--write`` puts it into README.md between the
``file-map`` markers; ``--check`` exits 1 when README.md's copy is out of date (the test does)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- file-map:begin (scripts/file_map.py --write) -->", "<!-- file-map:end -->"
FACES = ("api", "ui")  # packages beside the engine
TOP_FILES = ("app.py", "server.py")


def first_sentence(path: Path, stops: str = ".:;") -> str:
    """The first sentence (up to one of ``stops``) of ``path``'s module docstring, on one line (""
    without one)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    text = " ".join(doc.split())
    match = re.match(rf"(.+?[{re.escape(stops)}])(\s|$)", text)
    return (match.group(1) if match else text).rstrip(":;").rstrip(".") + "." if text else ""


def _package_line(folder: Path, depth: int) -> list[str]:
    modules = sorted(p.name for p in folder.glob("*.py") if p.name != "__init__.py")
    init = folder / "__init__.py"
    name = folder.relative_to(REPO).as_posix()
    lines = [f"{'  ' * depth}- `{name}/` — {first_sentence(init) if init.is_file() else ''} "]
    if modules:
        lines[0] += "Modules: " + ", ".join(f"`{m}`" for m in modules) + "."
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").is_file()):
        lines += _package_line(sub, depth + 1)
    return lines


def file_map() -> str:
    """The map as Markdown: the engine's packages, then the two faces and the top-level files."""
    engine = REPO / "trainer_core"
    lines = [f"- `trainer_core/` — {first_sentence(engine / '__init__.py')} Top-level modules: "
             + ", ".join(f"`{p.name}`" for p in sorted(engine.glob("*.py")) if p.name != "__init__.py") + "."]  # fmt: skip
    for folder in sorted(p for p in engine.iterdir() if p.is_dir() and (p / "__init__.py").is_file()):
        lines += _package_line(folder, 1)
    for face in FACES:
        lines += _package_line(REPO / face, 0)
    lines += [f"- `{name}` — {first_sentence(REPO / name, '.')}" for name in TOP_FILES]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def with_map(readme: str) -> str:
    """``readme`` with the text between the markers replaced by the current map. Raises ValueError
    when the markers are missing."""
    start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
    return readme[:start] + "\n" + file_map() + readme[end:]


def main(argv: list[str]) -> int:
    """Print, ``--write`` or ``--check`` the map (see the module)."""
    readme = REPO / "README.md"
    if "--write" in argv:
        readme.write_text(with_map(readme.read_text(encoding="utf-8")), encoding="utf-8")
        return 0
    if "--check" in argv:
        current = readme.read_text(encoding="utf-8")
        if with_map(current) != current:
            print("README.md's map of the code is out of date: python3 scripts/file_map.py --write", file=sys.stderr)
            return 1
        return 0
    print(file_map(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

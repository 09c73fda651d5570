"""The package's own source, read with `ast`: which modules a module imports, and each module's code key.

`imports(path)` is the one import reader: the layer test checks the floor plan with it, and `code_version`
follows it to key cached results. A module's key hashes its syntax tree without docstrings (comments and
blank lines never reach the tree) together with the keys of the package modules it imports, so a docstring
or comment edit keeps every cached result, and a code edit invalidates that module's results and those of
everything that imports it, and nothing else.
"""
from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
PACKAGE = PACKAGE_DIR.name  # "bertlook_utils"


@dataclass(frozen=True)
class Import:
    """One import statement's target: `module` is dotted and absolute ("bertlook_utils.core.cache", "numpy");
    `own` says whether it is a module of this package."""
    line: int
    module: str
    own: bool


def module_name(path: Path, package_dir: Path = PACKAGE_DIR) -> str:
    """Dotted name of the module at `path` inside the package: ".../core/cache.py" -> "bertlook_utils.core.cache",
    ".../analyses/patterns/__init__.py" -> "bertlook_utils.analyses.patterns"."""
    parts = path.resolve().relative_to(package_dir.resolve()).with_suffix("").parts
    return ".".join((package_dir.name, *parts[:-1], *([] if parts[-1] == "__init__" else parts[-1:])))


def module_path(name: str, package_dir: Path = PACKAGE_DIR) -> Path | None:
    """The file of package module `name` (dotted, absolute), or None when it is no module of the package."""
    first, _, rest = name.partition(".")
    if first != package_dir.name:
        return None
    base = package_dir.joinpath(*rest.split(".")) if rest else package_dir
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def imports(path: Path, package_dir: Path = PACKAGE_DIR) -> list[Import]:
    """Every import in the module at `path`, inside functions too, in source order. Relative imports are
    resolved; `from X import a, b` names X.a and X.b where those are package modules, else X itself."""
    return list(_imports(Path(path), package_dir, Path(path).read_text()))


@lru_cache(maxsize=None)
def _imports(path: Path, package_dir: Path, text: str) -> tuple[Import, ...]:
    """`imports` of the module at `path` whose source is `text`: cached by the text, so an edited module is
    read afresh and an unchanged one is parsed once per process."""
    here = module_name(path, package_dir)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if isinstance(node, ast.Import):
            found += [Import(node.lineno, alias.name, alias.name.partition(".")[0] == package_dir.name)
                      for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.partition(".")[0] != package_dir.name:
                found.append(Import(node.lineno, module, False))
                continue
            submodules = [f"{module}.{alias.name}" for alias in node.names
                          if module_path(f"{module}.{alias.name}", package_dir)]
            found += [Import(node.lineno, name, True) for name in submodules or [module]]
    return tuple(sorted(found, key=lambda i: i.line))


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:]
    return tree


@lru_cache(maxsize=None)
def code_version(name: str, package_dir: Path = PACKAGE_DIR) -> str:
    """sha256 key of package module `name` (dotted, e.g. `__name__`): its code without docstrings and comments,
    and the keys of the package modules it imports, directly or not. Presentation code stays out of every
    analysis's key, since no analysis imports it (tests/test_layers.py)."""
    todo, texts = [name], {}
    while todo:
        module = todo.pop()
        if module in texts:
            continue
        path = module_path(module, package_dir)
        if path is None:
            raise ValueError(f"code_version: {module!r} is no module of the package {package_dir.name}")
        texts[module] = path.read_text()
        todo += [i.module for i in _imports(path, package_dir, texts[module]) if i.own]
    digest = hashlib.sha256()
    for module in sorted(texts):
        digest.update(f"{module}\0{_code(texts[module])}\0".encode())
    return digest.hexdigest()


@lru_cache(maxsize=None)
def _code(text: str) -> str:
    """A module's syntax tree without docstrings, dumped (what its key hashes): cached by the text."""
    return ast.dump(_strip_docstrings(ast.parse(text)))

"""source: the one import reader, and cache keys from the syntax tree that survive docstrings and comments."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bertlook_utils.core import source
from bertlook_utils.core.source import Import, code_version, imports, module_name, module_path

PACKAGE = source.PACKAGE_DIR


@pytest.fixture
def package_copy(tmp_path) -> Path:
    """A copy of the real package, to edit."""
    copy = tmp_path / PACKAGE.name
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def every_module(package: Path) -> list[str]:
    return sorted(module_name(path, package) for path in package.rglob("*.py"))


def keys(package: Path) -> dict[str, str]:
    code_version.cache_clear()
    return {name: code_version(name, package) for name in every_module(package)}


def importers(package: Path, target: str) -> set[str]:
    """Every module that imports `target`, directly or not (read here from the import statements by hand)."""
    direct = {name: {i.module for i in imports(module_path(name, package), package) if i.own}
              for name in every_module(package)}
    found, grew = {target}, True
    while grew:
        more = {name for name, targets in direct.items() if targets & found} - found
        found |= more
        grew = bool(more)
    return found


def test_a_key_is_a_stable_sha256():
    assert code_version("bertlook_utils.analyses.surface") == code_version("bertlook_utils.analyses.surface")
    int(code_version("bertlook_utils.analyses.surface"), 16)
    assert len(code_version("bertlook_utils.analyses.surface")) == 64


def test_an_unknown_module_is_refused_by_name():
    with pytest.raises(ValueError, match="'bertlook_utils.nowhere' is no module"):
        code_version("bertlook_utils.nowhere")


def test_docstring_and_comment_edits_keep_every_key(package_copy):
    before = keys(package_copy)
    models = package_copy / "core" / "models.py"
    text = models.read_text()
    docstring = text.index('    """', text.index("\ndef "))  # the first function's docstring
    text = text[:docstring] + "    # a new comment\n" + text[docstring:].replace('"""', '"""Reworded: ', 1)
    text = text.replace('"""', '"""A new first line of the module docstring.\n\n', 1)
    models.write_text(text + "\n# a trailing comment\n\n")
    assert models.read_text() != (PACKAGE / "core" / "models.py").read_text()
    assert keys(package_copy) == before


def test_a_code_edit_changes_that_module_and_its_importers_only(package_copy):
    before = keys(package_copy)
    threads = package_copy / "core" / "threads.py"
    threads.write_text(threads.read_text() + "\nEDITED = True\n")
    after = keys(package_copy)
    changed = {name for name in before if after[name] != before[name]}
    assert changed == importers(package_copy, "bertlook_utils.core.threads")
    # what that means, named: the modules that run small computations on one thread, and what uses them
    assert {"bertlook_utils.core.threads", "bertlook_utils.analyses.finetune", "bertlook_utils.analyses.patterns.net",
            "bertlook_utils.analyses.patterns.learn", "bertlook_utils.analyses.disabling"} <= changed
    assert not {"bertlook_utils.analyses.surface", "bertlook_utils.analyses.syntax", "bertlook_utils.core.models",
                "bertlook_utils.engine.extract"} & changed


def test_keys_follow_package_imports_only(tmp_path):
    """A synthetic package with a known graph: a figure that imports an analysis is not part of its key; an
    import inside a function is; parenthesised imports and `from . import a, b` are read."""
    package = tmp_path / "pkg"
    sources = {"__init__.py": "", "core/__init__.py": "", "core/engine.py": "x = 1\n", "core/deep.py": "z = 1\n",
               "core/wordlevel.py": "def f():\n    from .deep import z\n",
               "analyses/__init__.py": "", "analyses/surface.py": "from ..core.engine import (\n    x,\n)\n",
               "analyses/syntax.py": "from ..core import engine, wordlevel\n",
               "present/__init__.py": "", "present/viz.py": "from ..analyses.surface import x\nimport numpy\n"}
    for name, text in sources.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)

    def versions():
        code_version.cache_clear()
        return {name: code_version(f"pkg.analyses.{name}", package) for name in ("surface", "syntax")}

    assert imports(package / "present" / "viz.py", package) == [Import(1, "pkg.analyses.surface", True),
                                                                 Import(2, "numpy", False)]
    base = versions()
    (package / "present" / "viz.py").write_text("from ..analyses.surface import x\ny = 2\n")
    assert versions() == base
    (package / "core" / "deep.py").write_text("z = 2\n")
    changed = versions()
    assert changed["surface"] == base["surface"] and changed["syntax"] != base["syntax"]
    (package / "core" / "engine.py").write_text("x = 2\n")
    assert all(versions()[name] != changed[name] for name in changed)
    code_version.cache_clear()


@pytest.mark.parametrize("text, expected", [
    ("from . import viz, figures", ["bertlook_utils.present.viz", "bertlook_utils.present.figures"]),
    ("from .viz import PALETTE", ["bertlook_utils.present.viz"]),
    ("from ..analyses.syntax import HeadScores", ["bertlook_utils.analyses.syntax"]),
    ("from ..analyses import patterns", ["bertlook_utils.analyses.patterns"]),
    ("from ..analyses.patterns import net", ["bertlook_utils.analyses.patterns.net"]),
    ("import bertlook_utils.present.viz as v", ["bertlook_utils.present.viz"]),
    ("from bertlook_utils.present.compare import show", ["bertlook_utils.present.compare"]),
    ("def f():\n    from matplotlib import pyplot", ["matplotlib"]),
    ("import numpy as np, IPython.display", ["numpy", "IPython.display"]),
])
def test_imports_are_read_in_every_form(package_copy, text, expected):
    path = package_copy / "present" / "probe_module.py"
    path.write_text(text + "\n")
    assert [i.module for i in imports(path, package_copy)] == expected

"""The package's floor plan: every module sits on one layer and imports only from its own layer or below, and
nothing below the presentation layer imports a plotting or widget library — not even inside a function.

Read from the source with `ast` (every `import` and `from ... import` anywhere in a module), so it needs no
import of the package. Since the cache keys a result by the source of its module and of what that imports
(`cache.code_version`), this is also what keeps a figure's colour out of the analyses' cache keys.
"""
from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "bertlook_utils"

LAYERS = {  # bottom up
    "ground": {"conventions", "cache", "packaged", "models", "intervals", "trees", "intervene", "wordlevel", "threads"},
    "data": {"corpora", "parses", "corefdata", "tasks", "parsecheck"},
    "engine": {"extract"},
    "analyses": {"surface", "syntax", "coref", "probes", "clustering", "patterns", "gradients", "finetune", "disabling",
                 "relations", "tokentypes", "patternnet", "patternlearn", "norms", "identifiability", "attribution",
                 "importance"},
    "presentation": {"paper", "claims", "assets", "viz", "figures", "compare", "widgets", "views", "talk", "report",
                     "classroom", "exercises"},
    "entry points": {"cli", "__init__"},
}
ORDER = list(LAYERS)
DRAWING_LIBRARIES = {"matplotlib", "ipywidgets", "IPython", "bertviz", "plotly", "seaborn"}


def imports(path: Path) -> list[tuple[int, str, bool]]:
    """(line, name, is_package_module) of every import in a module's source, inside functions too: package
    modules by their name ("viz"), other imports by their top-level package ("matplotlib")."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top, _, rest = alias.name.partition(".")
                own = top == PACKAGE.name
                found.append((node.lineno, rest.partition(".")[0] if own else top, own))
        elif isinstance(node, ast.ImportFrom):
            if node.level or (node.module or "").partition(".")[0] == PACKAGE.name:
                module = (node.module or "") if node.level else (node.module or "").partition(".")[2]
                names = [module.partition(".")[0]] if module else [alias.name for alias in node.names]
                found += [(node.lineno, name, True) for name in names]
            else:
                found.append((node.lineno, (node.module or "").partition(".")[0], False))
    return found


def violations(package: Path = PACKAGE, layers: dict[str, set[str]] = LAYERS) -> list[str]:
    """Every breach of the floor plan, one line each (empty when the package keeps it)."""
    layer_of = {module: ORDER.index(layer) for layer, modules in layers.items() for module in modules}
    presentation = ORDER.index("presentation")
    found = []
    for path in sorted(package.glob("*.py")):
        module = path.stem
        if module not in layer_of:
            found.append(f"{module}: on no layer; place it in LAYERS")
            continue
        for line, name, own in imports(path):
            if own and name in layer_of and layer_of[name] > layer_of[module]:
                found.append(f"{module}:{line}: imports {name} ({ORDER[layer_of[name]]}) from below, on the "
                             f"{ORDER[layer_of[module]]} layer")
            elif not own and name in DRAWING_LIBRARIES and layer_of[module] < presentation:
                found.append(f"{module}:{line}: imports {name}, a drawing library, on the "
                             f"{ORDER[layer_of[module]]} layer")
    return found


def test_the_package_keeps_its_layers():
    assert violations() == []


def test_every_module_of_the_package_is_on_a_layer():
    placed = set().union(*LAYERS.values())
    assert {p.stem for p in PACKAGE.glob("*.py")} == placed


def test_a_bad_import_anywhere_in_an_analysis_is_caught(tmp_path):
    """The check can fail: an analysis that draws (inside a function), imports a figure module, or a module on
    no layer are each reported, with the line."""
    copy = tmp_path / PACKAGE.name
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    surface = copy / "surface.py"
    source = surface.read_text()
    n = source.count("\n")
    surface.write_text(source + "\n\ndef draw_it():\n    import matplotlib.pyplot as plt\n"
                                "    from .figures import entropy_by_layer\n    return plt, entropy_by_layer\n")
    (copy / "stray.py").write_text("from . import viz\n")
    (copy / "syntax.py").write_text((copy / "syntax.py").read_text() + "\nfrom bertlook_utils import widgets\n")
    found = violations(copy)
    assert f"surface:{n + 4}: imports matplotlib, a drawing library, on the analyses layer" in found
    assert f"surface:{n + 5}: imports figures (presentation) from below, on the analyses layer" in found
    assert any(line.startswith("syntax:") and "imports widgets (presentation)" in line for line in found)
    assert "stray: on no layer; place it in LAYERS" in found
    assert len(found) == 4


@pytest.mark.parametrize("source, expected", [
    ("from . import viz, figures", [(1, "viz", True), (1, "figures", True)]),
    ("from .syntax import HeadScores", [(1, "syntax", True)]),
    ("import bertlook_utils.viz as v", [(1, "viz", True)]),
    ("from bertlook_utils.compare import table", [(1, "compare", True)]),
    ("def f():\n    from matplotlib import pyplot", [(2, "matplotlib", False)]),
    ("import numpy as np, IPython.display", [(1, "numpy", False), (1, "IPython", False)]),
])
def test_imports_are_read_in_every_form(tmp_path, source, expected):
    path = tmp_path / "module.py"
    path.write_text(source + "\n")
    assert imports(path) == expected

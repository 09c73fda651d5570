"""The package's floor plan, read from its folders: every module sits in one layer's folder and imports only
from its own layer or below, and nothing below `present` imports a drawing library — not even inside a function.

The order of the layers is `bertlook_utils.LAYERS`; the modules of a layer are the files under its folder; the
imports come from `core.source.imports` (the same reader that keys the cache). Since no analysis imports
presentation code, a figure's colour stays out of every analysis's cache key. The package docstring and the
README's architecture section are checked against the same folders, so neither can drift.
"""
from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import bertlook_utils
from bertlook_utils import DRAWING_LAYER, LAYERS
from bertlook_utils.core.source import PACKAGE_DIR, imports, module_name

README = PACKAGE_DIR.parent / "README.md"
DRAWING_LIBRARIES = {"matplotlib", "ipywidgets", "IPython", "bertviz", "plotly", "seaborn"}
ENTRY = "entry"  # modules beside the layer folders (cli, the package's face) sit above every layer


def layer_of(path: Path, package: Path = PACKAGE_DIR) -> str | None:
    """The layer folder a module file sits in; ENTRY for a file directly in the package; None for a folder
    that is no layer."""
    parts = path.relative_to(package).parts
    if len(parts) == 1:
        return ENTRY
    return parts[0] if parts[0] in LAYERS else None


def violations(package: Path = PACKAGE_DIR) -> list[str]:
    """Every breach of the floor plan, one line each (empty when the package keeps it)."""
    order = [*LAYERS, ENTRY]
    found = []
    for path in sorted(package.rglob("*.py")):
        here, name = layer_of(path, package), module_name(path, package).removeprefix(f"{package.name}.")
        if here is None:
            found.append(f"{name}: in no layer's folder ({', '.join(LAYERS)})")
            continue
        for target in imports(path, package):
            top = target.module.partition(".")[0]
            if target.own:
                parts = target.module.split(".")
                there = parts[1] if len(parts) > 1 and parts[1] in LAYERS else ENTRY
                if order.index(there) > order.index(here):
                    found.append(f"{name}:{target.line}: imports {target.module.removeprefix(package.name + '.')} "
                                 f"({there}) from below, in {here}")
            elif top in DRAWING_LIBRARIES and order.index(here) < order.index(DRAWING_LAYER):
                found.append(f"{name}:{target.line}: imports {top}, a drawing library, in {here}")
    return found


def test_the_package_keeps_its_layers():
    assert violations() == []


def test_every_layer_is_a_folder_with_a_docstring():
    for layer in LAYERS:
        init = PACKAGE_DIR / layer / "__init__.py"
        assert init.is_file(), f"{layer} has no folder with an __init__.py"
        assert ast.get_docstring(ast.parse(init.read_text())).startswith(f"{layer}: ")
    strays = [p.name for p in PACKAGE_DIR.iterdir() if p.is_dir() and p.name not in LAYERS and p.name != "__pycache__"]
    assert strays == []


def test_a_bad_import_anywhere_is_caught(tmp_path):
    """The check can fail: an analysis that draws (inside a function), imports a figure module or the lab, a
    module in no layer's folder, and an engine module that imports an analysis are each reported, with the line."""
    copy = tmp_path / PACKAGE_DIR.name
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    surface = copy / "analyses" / "surface.py"
    source = surface.read_text()
    n = source.count("\n")
    surface.write_text(source + "\n\ndef draw_it():\n    import matplotlib.pyplot as plt\n"
                                "    from ..present.figures import entropy_by_layer\n"
                                "    from ..lab import claims\n    return plt, entropy_by_layer, claims\n")
    (copy / "stray").mkdir()
    (copy / "stray" / "loose.py").write_text("x = 1\n")
    extract = copy / "engine" / "extract.py"
    extract.write_text(extract.read_text() + "\nfrom bertlook_utils.analyses import syntax\n")
    found = violations(copy)
    assert f"analyses.surface:{n + 4}: imports matplotlib, a drawing library, in analyses" in found
    assert f"analyses.surface:{n + 5}: imports present.figures (present) from below, in analyses" in found
    assert f"analyses.surface:{n + 6}: imports lab.claims (lab) from below, in analyses" in found
    assert any(line.startswith("engine.extract:") and "imports analyses.syntax (analyses)" in line for line in found)
    assert "stray.loose: in no layer's folder (core, data, engine, analyses, present, lab)" in found
    assert len(found) == 5


# -- the two written records of the floor plan -----------------------------------------------------------------
def first_line(path: Path) -> str:
    """The first sentence of a module's docstring, on one line."""
    paragraph = " ".join((ast.get_docstring(ast.parse(path.read_text())) or "").split("\n\n")[0].split())
    return re.split(r"(?<=[^l.][.!?])\s+(?=[A-Z`])", paragraph)[0]


def architecture() -> str:
    """The README's architecture table, rendered from the folders and the modules' docstrings."""
    rows = ["| layer | module | what it is |", "|---|---|---|"]
    for layer in [*LAYERS, ENTRY]:
        folder = PACKAGE_DIR / layer if layer != ENTRY else PACKAGE_DIR
        paths = sorted(folder.rglob("*.py") if layer != ENTRY else folder.glob("*.py"))
        for path in paths:
            if path.name == "__init__.py" and path.parent in (PACKAGE_DIR, PACKAGE_DIR / layer):
                continue
            name = module_name(path).removeprefix(f"{PACKAGE_DIR.name}.")
            rows.append(f"| {layer} | `{name}` | {first_line(path)} |")
    return "\n".join(rows)


def test_the_package_docstring_names_every_layer_in_order():
    said = re.findall(r"^- `(\w+)(?:\.py)?`: (.*)$", bertlook_utils.__doc__, re.MULTILINE)
    assert [name for name, _ in said] == [*LAYERS, "cli"]
    for layer, text in said[:-1]:
        assert first_line(PACKAGE_DIR / layer / "__init__.py").rstrip(".") == f"{layer}: {text}"


MARKERS = ("<!-- architecture: generated by `python tests/test_layers.py` -->", "<!-- end of architecture -->")


def readme_with_architecture(text: str) -> str:
    """The README's text with the architecture table between its markers rendered anew."""
    start, end = MARKERS
    assert start in text and end in text, "the README lost its architecture markers"
    return text[:text.index(start) + len(start)] + f"\n{architecture()}\n" + text[text.index(end):]


def test_the_readme_architecture_section_is_the_folders():
    """The README's table is exactly what the folders and docstrings say (`python tests/test_layers.py`
    rewrites it)."""
    text = README.read_text()
    assert readme_with_architecture(text) == text


def test_the_readme_diagram_stacks_the_layers_in_order():
    section = README.read_text().split("## Architecture", 1)[1].split(MARKERS[0], 1)[0]
    assert re.findall(r"^ (\w+)/ ", section, re.MULTILINE) == list(reversed(LAYERS))  # top of the page = top layer


def test_every_module_has_a_docstring_for_the_map():
    missing = [str(p.relative_to(PACKAGE_DIR)) for p in PACKAGE_DIR.rglob("*.py") if not first_line(p)]
    assert missing == []


if __name__ == "__main__":
    README.write_text(readme_with_architecture(README.read_text()))

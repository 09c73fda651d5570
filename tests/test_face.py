"""The package's face: every name a learner already has keeps working after the move into layer folders.

The committed notebooks, the student copies already handed out, the talk and the README import modules by
their short names (`from bertlook_utils import surface`, `from bertlook_utils.corpora import make_segments`);
each such import is run here, and so is every module name of the flat package that was handed out before.
"""
from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import bertlook_utils

ROOT = Path(__file__).resolve().parents[1]
HANDED_OUT = ["notebooks/*.ipynb", "notebooks/student/*.ipynb", "slides/*.ipynb"]
FLAT_MODULES = (  # the package's modules before its folders were its layers
    "assets attribution cache claims classroom cli clustering compare conventions coref corefdata corpora disabling "
    "exercises extract figures finetune gradients identifiability importance intervals intervene models norms "
    "packaged paper parsecheck parses patternlearn patternnet patterns probes relations report surface syntax talk "
    "tasks threads tokentypes trees views viz widgets wordlevel").split()


def code_blocks() -> list[tuple[str, str]]:
    """(where, code) of every code cell of the handed-out notebooks and every python block of the READMEs."""
    found = []
    for pattern in HANDED_OUT:
        for path in sorted(ROOT.glob(pattern)):
            for i, cell in enumerate(json.loads(path.read_text())["cells"]):
                if cell["cell_type"] == "code":
                    code = "".join(cell["source"])
                    found.append((f"{path.relative_to(ROOT)} [{i}]",
                                  "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!")))))
    for path in [ROOT / "README.md", *sorted(ROOT.glob("*/README.md"))]:
        for j, block in enumerate(re.findall(r"```python\n(.*?)```", path.read_text(), re.DOTALL)):
            found.append((f"{path.relative_to(ROOT)} block {j}", block))
    return found


def package_imports() -> list[tuple[str, str, tuple[str, ...]]]:
    """(where, module, names) of every import of the package in the handed-out code."""
    found = []
    for where, code in code_blocks():
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue  # an exercise stub left for the learner; its imports are in other cells too
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bertlook_utils"):
                found.append((where, node.module, tuple(alias.name for alias in node.names)))
            elif isinstance(node, ast.Import):
                found += [(where, alias.name, ()) for alias in node.names if alias.name.startswith("bertlook_utils")]
    return found


def test_the_handed_out_code_imports_the_package_often():
    found = package_imports()
    assert len(found) > 60
    assert {module for _, module, _ in found} > {"bertlook_utils", "bertlook_utils.corpora", "bertlook_utils.tasks"}


@pytest.mark.parametrize("module, names", sorted({(m, n) for _, m, n in package_imports()}))
def test_every_import_in_the_handed_out_code_works(module, names):
    imported = importlib.import_module(module)
    for name in names:
        assert getattr(imported, name) is not None, f"from {module} import {name}"


@pytest.mark.parametrize("name", FLAT_MODULES)
def test_every_flat_module_name_is_the_module_in_its_layer(name):
    via_face = getattr(bertlook_utils, name)
    via_import = importlib.import_module(f"bertlook_utils.{name}")
    assert via_face is via_import
    assert via_face.__name__.count(".") >= (1 if name == "cli" else 2)  # it lives in a layer's folder
    assert via_face.__spec__.name == via_face.__name__  # the module itself, not a copy under the old name


def test_an_unknown_name_is_refused():
    with pytest.raises(AttributeError, match="has no attribute 'nowhere'"):
        bertlook_utils.nowhere  # noqa: B018
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("bertlook_utils.nowhere")


@pytest.mark.slow
def test_a_module_runs_under_its_old_name():
    """`python -m bertlook_utils.report` (the README's command) runs the report module in its layer."""
    run = subprocess.run([sys.executable, "-m", "bertlook_utils.report", "--help"], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert "--model" in run.stdout

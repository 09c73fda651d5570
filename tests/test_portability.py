"""tools.portability: a setting's environment, the checkout copy it runs on (no cache), and the report of a real
nbval run in which one checked output differs and one cell fails."""
from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from tools import portability


def test_a_setting_names_the_kernels_and_threads_and_imports_the_copy(tmp_path):
    setting = portability.Setting("avx2", 8, alone=True)
    env = setting.env(tmp_path)
    assert (env["ATEN_CPU_CAPABILITY"], env["OMP_NUM_THREADS"], env["MKL_NUM_THREADS"]) == ("avx2", "8", "8")
    assert env["PYTHONPATH"] == str(tmp_path) and env["BERTLOOK_DEVICE"] == "cpu"
    assert str(setting) == "avx2, 8 threads, each alone"
    assert str(portability.Setting("default", 1, alone=False)) == "default, 1 thread, in order"


def test_the_copy_holds_the_tracked_files_and_no_cache(tmp_path):
    copy = portability.checkout_copy(tmp_path)
    assert (copy / "bertlook_utils" / "__init__.py").is_file()
    assert (copy / "tests" / "nbval_sanitize.cfg").is_file() and (copy / "conftest.py").is_file()
    assert len(list((copy / "notebooks").glob("[0-9][0-9]_*.ipynb"))) >= 13
    assert not (copy / "data" / "cache").exists() and not (copy / ".venv").exists()


@pytest.mark.slow
def test_the_report_lists_a_differing_output_and_a_failing_cell(tmp_path):
    def cell(source, output, checked=True):
        code = nbformat.v4.new_code_cell(source, execution_count=1,
                                         outputs=[nbformat.v4.new_output("stream", text=output)])
        code.metadata.tags = ["nbval-check-output"] if checked else []
        return code

    notebook = nbformat.v4.new_notebook(cells=[
        cell("print('same')", "same\n"),
        cell("print(0.125 * 5)", "0.62\n"),  # committed at another precision: differs
        cell("print(1 / 0)", ""),  # fails
        cell("print('moves')", "anything\n", checked=False),  # not checked: never differs
    ])
    notebook.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "n.ipynb"
    nbformat.write(notebook, path)
    junit = tmp_path / "junit.xml"
    subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", f"--junitxml={junit}", "-p",
                    "no:randomly", "-p", "no:cacheprovider", "-q", str(path)], cwd=tmp_path, capture_output=True)
    found = portability.failures(junit)
    assert [(notebook, differs) for notebook, _, _, differs in found] == [("n", True), ("n", False)]
    _, cell_name, excerpt, _ = found[0]
    assert "Cell 1" in cell_name
    assert excerpt.splitlines() == ["this run:  0.625", "committed: 0.62"]
    assert "ZeroDivisionError" in found[1][2]

    outcome = portability.Outcome(portability.Setting("avx2", 2, False), {"n": 3.0},
                                  [found[0][:3]], [found[1][:3]], "AVX2")
    report = portability.report([outcome], [path])
    assert "| avx2, 2 threads, in order | AVX2 | 1 | 1 | 1 | 0.1 |" in report
    assert "n, Cell 1 differs" in report and "committed: 0.62" in report and "ZeroDivisionError" in report

"""conftest.py's nbval hooks: a progress bar is left out of the comparison on both sides, and nothing else is."""
from __future__ import annotations

import os
import subprocess
import sys

import importlib.util

import nbformat
import pytest

from tools.browser import ROOT

spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")  # tests/ has a conftest too
root_conftest = importlib.util.module_from_spec(spec)
spec.loader.exec_module(root_conftest)
is_progress = root_conftest.is_progress

BAR = "fine-tuning on topic:  40%|####      | 29/72 [00:12<00:18,  2.35step/s, loss=1.234]"


def widget(text: str) -> dict:
    return {"output_type": "display_data", "data": {"text/plain": text,
                                                    "application/vnd.jupyter.widget-view+json": {"model_id": "x"}}}


def test_a_progress_bar_is_told_from_a_result():
    assert is_progress(widget(BAR))
    assert is_progress(widget("pruning heads:   0%|          | 0/? [00:00<?, ?input/s]"))
    assert is_progress({"output_type": "stream", "name": "stderr", "text": f"{BAR}\r{BAR}\n"})
    assert not is_progress(widget("HBox(children=(Dropdown(options=('a', 'b')),))"))  # an explorer
    assert not is_progress({"output_type": "stream", "name": "stdout", "text": BAR})  # printed: a result
    assert not is_progress({"output_type": "stream", "name": "stderr", "text": f"{BAR}\nUserWarning: x\n"})
    assert not is_progress({"output_type": "execute_result", "data": {"text/plain": "0.62"}})


@pytest.mark.slow
def test_nbval_passes_a_cold_cell_with_a_bar_and_fails_a_changed_number(tmp_path):
    def checked(source, text):
        cell = nbformat.v4.new_code_cell(source, execution_count=1,
                                         outputs=[nbformat.v4.new_output("stream", text=text)])
        cell.metadata.tags = ["nbval-check-output"]
        return cell

    bar = "from tqdm.auto import tqdm\nfor _ in tqdm(range(3), desc='work'): pass\n"
    notebook = nbformat.v4.new_notebook(cells=[checked(bar + "print('done')", "done\n"),  # committed warm: no bar
                                               checked(bar + "print(0.625)", "0.62\n")])
    notebook.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, tmp_path / "n.ipynb")
    (tmp_path / "root_conftest.py").write_text((ROOT / "conftest.py").read_text())  # the hooks, as a plugin
    run = subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", "-p", "root_conftest", "-p", "no:randomly",
                          "-p", "no:cacheprovider", "-q", "n.ipynb"], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert "1 failed, 1 passed" in run.stdout, run.stdout[-2000:]
    assert "Cell 1" in run.stdout and "0.625" in run.stdout


def test_notebooks_run_longest_first_and_keep_their_cells_in_order():
    from types import SimpleNamespace

    def cell(notebook, index):
        return SimpleNamespace(output_timeout=5, parent=SimpleNamespace(path=ROOT / notebook), index=index)

    other = SimpleNamespace(name="a unit test")
    items = [cell("notebooks/00_tour.ipynb", 0), cell("notebooks/00_tour.ipynb", 1), other,
             cell("slides/bertlook_talk.ipynb", 0), cell("notebooks/10_beyond_attention.ipynb", 0),
             cell("notebooks/10_beyond_attention.ipynb", 1)]
    ordered = root_conftest.longest_first(items)
    assert ordered[0] is other
    assert [(item.parent.path.stem, item.index) for item in ordered[1:]] == [
        ("10_beyond_attention", 0), ("10_beyond_attention", 1), ("00_tour", 0), ("00_tour", 1),
        ("bertlook_talk", 0)]

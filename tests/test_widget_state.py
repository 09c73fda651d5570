"""tools.widget_state: a re-executed notebook keeps no widget state of an earlier run."""
from __future__ import annotations

import nbformat

from tools import widget_state


def test_the_saved_state_goes_and_the_rest_stays(tmp_path):
    path = tmp_path / "nb.ipynb"
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    notebook.metadata.update(widgets={"application/vnd.jupyter.widget-state+json": {"state": {"a": {}}}},
                             rise={"scroll": True})
    nbformat.write(notebook, path)
    assert widget_state.clear(path)
    cleared = nbformat.read(path, as_version=4)
    assert "widgets" not in cleared.metadata and cleared.metadata.rise == {"scroll": True}
    assert cleared.cells[0].source == "x = 1"
    before = path.read_text()
    assert not widget_state.clear(path) and path.read_text() == before

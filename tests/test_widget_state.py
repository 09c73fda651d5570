"""tools.widget_state: a re-executed notebook keeps no widget state of an earlier run; a page without a kernel
shows the explorers as snapshots."""
from __future__ import annotations

import json

import ipywidgets
import nbformat

from bertlook_utils import widgets
from builders import PAIR_TOKENS, make_encoded, prev_map, stack_heads, uniform_map
from tools import widget_state

EXAMPLE = make_encoded(PAIR_TOKENS, stack_heads([[prev_map(len(PAIR_TOKENS)), uniform_map(len(PAIR_TOKENS))]]))


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


def saved_state(*shown) -> dict:
    """The saved state of the widgets `shown`, as nbclient stores it in a notebook: {model_id: model}."""
    from ipywidgets.embed import dependency_state

    return json.loads(json.dumps(dependency_state(list(shown), drop_defaults=False)))


def test_a_snapshot_disables_the_explorers_controls_and_shows_the_note(tmp_path):
    head = widgets.head_explorer([EXAMPLE], encoder=object())
    gallery = widgets.gallery_explorer([("vertical", EXAMPLE, 1, 1, "a"), ("diagonal", EXAMPLE, 1, 2, "b")])
    other = ipywidgets.IntSlider()  # not an explorer's: a progress bar, say
    notebook = nbformat.v4.new_notebook()
    notebook.metadata.widgets = {widget_state.STATE: {"state": saved_state(head.widget, gallery.widget, other),
                                                      "version_major": 2, "version_minor": 0}}
    path = tmp_path / "nb.ipynb"
    nbformat.write(notebook, path)
    assert widget_state.snapshot_file(path)
    models = nbformat.read(path, as_version=4).metadata.widgets[widget_state.STATE]["state"]

    def state(widget):
        return models[widget.model_id]["state"]

    def display(widget):
        return models[state(widget)["layout"].removeprefix("IPY_MODEL_")]["state"]["display"]

    controls = [*head.controls.values(), head.own_text.box, *gallery.controls.values()]
    assert all(state(control)["disabled"] is True for control in controls)
    assert state(other)["disabled"] is False
    assert display(head.note) is None and display(gallery.note) is None  # shown
    note, still, live_controls, live_output = gallery.widget.children
    assert display(still) is None and display(live_controls) == "none" and display(live_output) == "none"
    assert display(head.output) is None  # an explorer without a still keeps its drawing
    before = path.read_text()
    assert not widget_state.snapshot_file(path) and path.read_text() == before  # idempotent
    assert widget_state.snapshot(nbformat.v4.new_notebook()) == 0  # no saved state: nothing to do


def test_the_command_line_snapshots_or_clears(tmp_path, capsys):
    path = tmp_path / "nb.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.metadata.widgets = {widget_state.STATE: {"state": saved_state(widgets.grid_explorer([EXAMPLE]).widget)}}
    nbformat.write(notebook, path)
    widget_state.main(["--snapshot", str(path)])
    assert "as snapshots" in capsys.readouterr().out
    widget_state.main([str(path)])
    assert "cleared" in capsys.readouterr().out and "widgets" not in nbformat.read(path, as_version=4).metadata

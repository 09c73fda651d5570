"""The lecture copy (bertlook_utils.lab.lecture): a run of a kit notebook saved from JupyterLab leaves the checkout
as it was, and is what JupyterLab (and the slideshow) open next; an edit is saved to the notebook itself."""
from __future__ import annotations

import asyncio
import copy

import nbformat
import pytest

pytest.importorskip("jupyter_server")

from bertlook_utils.lab.lecture import LectureContentsManager  # noqa: E402

PATH = "notebooks/01_example.ipynb"


def notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A title"),
                nbformat.v4.new_code_cell("print(1 + 1)", metadata={"tags": ["nbval-check-output"]})]
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="2\n")]
    return nb


@pytest.fixture
def kit(tmp_path):
    (tmp_path / "notebooks").mkdir()
    nbformat.write(notebook(), tmp_path / "notebooks" / "01_example.ipynb")
    manager = LectureContentsManager(root_dir=str(tmp_path), kit_root=str(tmp_path))
    return tmp_path, manager


def run(coroutine):
    return asyncio.run(coroutine)


def ran(model: dict, text: str = "2 (a run in class)\n") -> dict:
    """The model as JupyterLab saves it after a run: new outputs and counts, timings gone, a cell collapsed."""
    model = copy.deepcopy(model)
    cell = model["content"]["cells"][1]
    cell["outputs"] = [nbformat.v4.new_output("stream", text=text)]
    cell["execution_count"] = 7
    cell["metadata"]["jupyter"] = {"outputs_hidden": True}
    model["content"]["metadata"]["widgets"] = {"state": "of this run"}
    return model


def test_a_run_goes_to_the_lecture_copy_and_the_notebook_stays_as_committed(kit):
    root, manager = kit
    committed = (root / PATH).read_bytes()
    saved = run(manager.save(ran(run(manager.get(PATH))), PATH))
    assert (root / PATH).read_bytes() == committed
    copy_path = root / "build" / "lecture" / PATH
    assert copy_path.is_file() and saved["path"] == PATH
    reopened = run(manager.get(PATH))
    assert reopened["content"]["cells"][1]["outputs"][0]["text"] == "2 (a run in class)\n"
    assert reopened["last_modified"] == saved["last_modified"]  # JupyterLab sees no change on disk


def test_an_edit_is_saved_to_the_notebook_and_drops_the_copy(kit):
    root, manager = kit
    run(manager.save(ran(run(manager.get(PATH))), PATH))
    edited = ran(run(manager.get(PATH)), "4\n")
    edited["content"]["cells"][1]["source"] = "print(2 + 2)"
    run(manager.save(edited, PATH))
    assert nbformat.read(root / PATH, 4).cells[1].source == "print(2 + 2)"
    assert not (root / "build" / "lecture" / PATH).exists()
    assert run(manager.get(PATH))["content"]["cells"][1]["outputs"][0]["text"] == "4\n"


def test_a_changed_tag_is_an_edit_too(kit):
    root, manager = kit
    model = run(manager.get(PATH))
    model["content"]["cells"][1]["metadata"]["tags"] = []
    run(manager.save(model, PATH))
    assert nbformat.read(root / PATH, 4).cells[1].metadata.tags == []


def test_a_copy_of_an_older_notebook_is_not_opened(kit):
    root, manager = kit
    run(manager.save(ran(run(manager.get(PATH))), PATH))
    changed = notebook()
    changed.cells[0].source = "# A new title (make notebooks, a pull)"
    nbformat.write(changed, root / PATH)
    assert run(manager.get(PATH))["content"]["cells"][0]["source"] == changed.cells[0].source


def test_other_notebooks_save_as_usual(kit):
    root, manager = kit
    nbformat.write(notebook(), root / "notebooks" / "scratch.ipynb")
    (root / "notebooks" / "student").mkdir()
    nbformat.write(notebook(), root / "notebooks" / "student" / "01_example.ipynb")
    for path in ("notebooks/scratch.ipynb", "notebooks/student/01_example.ipynb"):
        run(manager.save(ran(run(manager.get(path))), path))
        assert nbformat.read(root / path, 4).cells[1].execution_count == 7
    assert not (root / "build").exists()


def test_deleting_a_kit_notebook_deletes_the_notebook_not_its_copy(kit):
    root, manager = kit
    run(manager.save(ran(run(manager.get(PATH))), PATH))
    run(manager.delete(PATH))
    assert not (root / PATH).exists() and (root / "build" / "lecture" / PATH).exists()

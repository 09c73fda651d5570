"""The saved widget state of the notebooks: dropped before a run, made an honest snapshot after one.

nbclient writes `metadata.widgets` only when a run creates widgets, so a notebook whose run creates none would
keep the state of an earlier run: the progress bars of a cold run, say, saved in the file with no output to show
them (they made 06 and 09 a third larger). `clear` drops it before `make notebooks` executes them in place again.

A page, deck or book that renders the saved state has no kernel: its controls would look live and do nothing.
`snapshot` rewrites the saved state of every explorer (`bertlook_utils.present.widgets`): its controls disabled,
the parts marked SNAPSHOT_ONLY shown (the note "snapshot — open in Jupyter to explore"), those marked LIVE_ONLY
hidden. A kernel re-creates the explorers live, as they were made.

    python -m tools.widget_state notebooks/*.ipynb slides/*.ipynb              # clear, before a run
    python -m tools.widget_state --snapshot notebooks/*.ipynb slides/*.ipynb   # after it
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat

from bertlook_utils.present.widgets import LIVE_ONLY, SNAPSHOT_ONLY

STATE = "application/vnd.jupyter.widget-state+json"
EXPLORER = "bertlook-explorer"
REFERENCE = "IPY_MODEL_"


def clear(path: Path) -> bool:
    """Remove `metadata.widgets` from the notebook at `path`; True when the file changed."""
    notebook = nbformat.read(path, as_version=4)
    if notebook.metadata.pop("widgets", None) is None:
        return False
    nbformat.write(notebook, path)
    return True


def _descendants(models: dict, model_id: str) -> list[str]:
    """`model_id` and every model under it through `children` (ids, depth first)."""
    children = models.get(model_id, {}).get("state", {}).get("children", [])
    return [model_id] + [d for child in children for d in _descendants(models, child.removeprefix(REFERENCE))]


def snapshot(nb) -> int:
    """Make the saved state of `nb` (a notebook node, changed in place) what a page without a kernel can honestly
    show; returns how many explorers it holds. Idempotent."""
    models = nb.metadata.get("widgets", {}).get(STATE, {}).get("state", {})
    roots = [key for key, model in models.items() if EXPLORER in model.get("state", {}).get("_dom_classes", [])]
    for key in {d for root in roots for d in _descendants(models, root)}:
        state = models[key]["state"]
        if "disabled" in state:
            state["disabled"] = True
        classes = state.get("_dom_classes", [])
        layout = models.get(str(state.get("layout", "")).removeprefix(REFERENCE))
        if layout is not None and (SNAPSHOT_ONLY in classes or LIVE_ONLY in classes):
            layout["state"]["display"] = None if SNAPSHOT_ONLY in classes else "none"
    return len(roots)


def snapshot_file(path: Path) -> bool:
    """`snapshot` the notebook at `path` in place; True when the file changed."""
    notebook = nbformat.read(path, as_version=4)
    before = nbformat.writes(notebook)
    snapshot(notebook)
    if nbformat.writes(notebook) == before:
        return False
    nbformat.write(notebook, path)
    return True


def main(argv: list[str]) -> None:
    if argv[:1] == ["--snapshot"]:
        for path in argv[1:]:
            if snapshot_file(Path(path)):
                print(f"saved the explorers of {path} as snapshots (controls disabled, with a note)")
        return
    for path in argv:
        if clear(Path(path)):
            print(f"cleared the saved widget state of {path}")


if __name__ == "__main__":
    main(sys.argv[1:])

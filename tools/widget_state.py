"""Drop a notebook's saved widget state before `make notebooks` executes it in place again.

nbclient writes `metadata.widgets` only when a run creates widgets, so a notebook whose run creates none would
keep the state of an earlier run: the progress bars of a cold run, say, saved in the file with no output to show
them (they made 06 and 09 a third larger).

    python -m tools.widget_state notebooks/*.ipynb slides/*.ipynb
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat


def clear(path: Path) -> bool:
    """Remove `metadata.widgets` from the notebook at `path`; True when the file changed."""
    notebook = nbformat.read(path, as_version=4)
    if notebook.metadata.pop("widgets", None) is None:
        return False
    nbformat.write(notebook, path)
    return True


def main(paths: list[str]) -> None:
    for path in paths:
        if clear(Path(path)):
            print(f"cleared the saved widget state of {path}")


if __name__ == "__main__":
    main(sys.argv[1:])

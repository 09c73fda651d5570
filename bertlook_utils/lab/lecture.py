"""The lecture copy: running the kit's notebooks in JupyterLab leaves the checkout as it was.

The numbered notebooks and the talk are committed with the outputs `make notebooks` computed. A teacher runs one in
class and presents it; the slideshow (jupyterlab-rise) saves the notebook first and shows what was saved, so the run
would land in the checkout: new widget ids, timings gone, `git status` dirty. With this contents manager
(`make setup` configures JupyterLab with it) a save that changes no cell -- no source, type or metadata, only
outputs, execution counts and view state -- goes to `build/lecture/<the notebook's path>` instead, and JupyterLab
opens that copy for as long as the committed notebook is the one it was made from. Any edit is saved to the
notebook itself, as always, and drops the copy.

    jupyter lab --ServerApp.contents_manager_class=bertlook_utils.lab.lecture.LectureContentsManager
"""
from __future__ import annotations

import hashlib
import re
from contextvars import ContextVar
from pathlib import Path

import nbformat
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from traitlets import Unicode, default

KIT_ROOT = Path(__file__).resolve().parents[2]
LECTURE = Path("build") / "lecture"
KIT_NOTEBOOK = re.compile(r"(notebooks/\d\d_[^/]+|slides/[^/]+)\.ipynb")  # relative to the kit's folder
# What a run or a click changes, not an author: timings, scroll and collapse state, trust.
VIEW_STATE = {"execution", "collapsed", "scrolled", "trusted", "jupyter"}
RUN_STATE = {"widgets", "language_info"}  # notebook metadata a run rewrites
OPEN = "open"
# Where this request's file operations look: OPEN (a current lecture copy, when there is one), the copy a save
# writes, or None (the notebook itself). A context variable: each request is its own task.
_TARGET: ContextVar[str | Path | None] = ContextVar("bertlook_lecture_target", default=None)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def authored(nb) -> list:
    """What an author writes in `nb` (a notebook node or dict): each cell's type, source and metadata without view
    state, and the notebook's metadata without what a run rewrites."""
    cells = [(c["cell_type"], "".join(c["source"]),  # a source is a string, or in a saved file a list of lines
              {k: v for k, v in c.get("metadata", {}).items() if k not in VIEW_STATE}) for c in nb["cells"]]
    return [cells, {k: v for k, v in nb.get("metadata", {}).items() if k not in RUN_STATE}]


class LectureContentsManager(AsyncLargeFileManager):
    """JupyterLab's file manager, but a run of a kit notebook is saved to, and opened from, its lecture copy.
    Only opening and saving look at the copy: renaming or deleting a kit notebook acts on the notebook itself."""

    kit_root = Unicode(help="The kit's folder (the one holding notebooks/ and slides/)").tag(config=True)

    @default("kit_root")
    def _kit_root_default(self) -> str:
        return str(KIT_ROOT)

    def _kit_paths(self, os_path: str) -> tuple[Path, Path] | None:
        """(the committed notebook, its lecture copy) for a kit notebook's path on disk, else None."""
        path, root = Path(os_path).resolve(), Path(self.kit_root).resolve()
        if not path.is_relative_to(root) or not KIT_NOTEBOOK.fullmatch(path.relative_to(root).as_posix()):
            return None
        return path, root / LECTURE / path.relative_to(root)

    def _current_copy(self, os_path: str) -> Path | None:
        """The lecture copy of the notebook at `os_path`, when it was made from the committed file as it is now."""
        paths = self._kit_paths(os_path)
        if paths is None:
            return None
        committed, copy = paths
        base = _base(copy)
        if copy.is_file() and committed.is_file() and base.is_file() and base.read_text().strip() == digest(committed):
            return copy
        return None

    def _get_os_path(self, path):
        os_path = super()._get_os_path(path)
        target = _TARGET.get()
        if target == OPEN:
            copy = self._current_copy(os_path)
            return str(copy) if copy is not None else os_path
        return str(target) if target is not None and self._kit_paths(os_path) else os_path

    async def get(self, path, content=True, type=None, format=None, require_hash=False):
        token = _TARGET.set(OPEN) if _TARGET.get() is None else None  # within a save: the file it wrote
        try:
            return await super().get(path, content=content, type=type, format=format, require_hash=require_hash)
        finally:
            if token is not None:
                _TARGET.reset(token)

    async def save(self, model, path=""):
        paths = self._kit_paths(super()._get_os_path(path.strip("/")))
        if paths is None or model.get("type") != "notebook" or "content" not in model:
            return await super().save(model, path)
        committed, copy = paths
        if not committed.is_file() or authored(model["content"]) != authored(nbformat.read(committed, 4)):
            copy.unlink(missing_ok=True)  # an edit: saved to the notebook itself, and the copy is out of date
            _base(copy).unlink(missing_ok=True)
            return await super().save(model, path)
        copy.parent.mkdir(parents=True, exist_ok=True)
        token = _TARGET.set(copy)
        try:
            saved = await super().save(model, path)
        finally:
            _TARGET.reset(token)
        _base(copy).write_text(digest(committed) + "\n")
        self.log.info("saved the run of %s to its lecture copy %s; the checkout is unchanged", path, copy)
        return saved


def _base(copy: Path) -> Path:
    """The file beside a lecture copy that holds the digest of the committed notebook it was made from."""
    return copy.with_name(copy.name + ".base")

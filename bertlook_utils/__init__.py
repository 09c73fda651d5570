"""BERTLook: recompute what BERT's attention looks at, offline, on a laptop CPU.

The package's folders are its layers, bottom up. A module imports only from its own layer or below, and no
drawing library is imported below `present` (tests/test_layers.py reads both rules from the folders):

- `core`: conventions, encoders, the cache and the package's own source; no data, no analysis
- `data`: the texts and labels the analyses run on: Wikipedia segments, silver parses, coreference, tasks
- `engine`: the one batching path: attention streamed through reducers, block by block, into the cache
- `analyses`: what the papers measured and what came after; they return data and draw nothing
- `present`: the papers' numbers, figures, offline BertViz views, widgets, tables and the report
- `lab`: teaching: prose checked against the numbers, classroom sizes, the talk, the exercises
- `cli.py`: entry points

Every public module is also reachable by its short name, as notebooks and student copies use it:
`from bertlook_utils import surface` is `bertlook_utils.analyses.surface`, and so is
`import bertlook_utils.surface`.
"""
from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.util
import pkgutil
import sys
from pathlib import Path

from .core.models import Encoded, Encoder, load_encoder

__version__ = "0.1.0"
__all__ = ["Encoded", "Encoder", "load_encoder", "__version__"]

LAYERS = ("core", "data", "engine", "analyses", "present", "lab")  # bottom up: the one record of their order
DRAWING_LAYER = "present"  # the lowest layer that may import a drawing library
RENAMED = {"patternlearn": "analyses.patterns.learn", "patternnet": "analyses.patterns.net"}  # short names of old


@functools.cache
def short_names() -> dict[str, str]:
    """Short name -> dotted module, for every module and sub-package directly inside a layer's folder or the
    package (`cli`), and the old names in RENAMED. Read from the folders, importing nothing."""
    here = Path(__file__).parent
    found = {info.name: f"{__name__}.{info.name}" for info in pkgutil.iter_modules([str(here)]) if not info.ispkg}
    for layer in LAYERS:
        for info in pkgutil.iter_modules([str(here / layer)]):
            if info.name in found:
                raise ImportError(f"{info.name} is in two layers: {found[info.name]} and {layer}")
            found[info.name] = f"{__name__}.{layer}.{info.name}"
    return found | {old: f"{__name__}.{new}" for old, new in RENAMED.items()}


def __getattr__(name: str):
    """`bertlook_utils.surface` and `from bertlook_utils import surface`: the module, imported on first use."""
    if name in short_names():
        return importlib.import_module(short_names()[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *short_names()])


class _ShortNameFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`import bertlook_utils.surface`, `from bertlook_utils.corpora import make_segments` and
    `python -m bertlook_utils.report`: the short name is the module in its layer, not a copy of it."""

    def find_spec(self, fullname, path=None, target=None):
        package, _, short = fullname.rpartition(".")
        if package == __name__ and short_names().get(short, fullname) != fullname:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        module = importlib.import_module(short_names()[spec.name.rpartition(".")[2]])
        self.own_spec = module.__spec__  # the import system overwrites it next; exec_module puts it back
        return module

    def exec_module(self, module):
        module.__spec__ = self.own_spec

    def get_code(self, fullname):  # for `python -m bertlook_utils.<short name>`: run the module itself
        real = short_names()[fullname.rpartition(".")[2]]
        return compile(f"import runpy\nrunpy.run_module({real!r}, run_name='__main__', alter_sys=True)",
                       f"<{fullname}>", "exec")


if not any(isinstance(finder, _ShortNameFinder) for finder in sys.meta_path):
    sys.meta_path.append(_ShortNameFinder())

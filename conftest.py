"""Repository-wide pytest hooks for the notebook run (`make nbval`).

- nbval waits a hard-coded 5 s for each of a cell's remaining messages once the cell has run, and stops the
  kernel (failing every later cell) when one is late. On 2 busy cores a long cell's last message can come later
  than that (seen once in a fresh-clone run, after notebook 08's fine-tuning cell), so it gets a minute here.
- Checked cells are compared by their plain text: a result table (`compare.show`) is styled HTML for the reader
  and plain text for nbval, and the HTML (Styler markup, escaping) would only repeat the same numbers.
- A progress bar is no result: a checked cell that computes shows one when its notebook runs from an empty cache
  and none when the cache holds the result (notebook 09 run alone, before notebook 04 filled it), so progress
  bars (tqdm's widget or its text on stderr) are left out of the comparison on both sides.
- Notebooks run longest first, by their cold times in benchmarks/timings.json (the others, such as the talk,
  last, in the order given): with two workers (`make nbval`, pytest-xdist: one notebook per worker at a time,
  `--dist loadfile --no-loadscope-reorder`) a long notebook never starts alone at the end.
"""
import json
import re
import types
from pathlib import Path

NBVAL_OUTPUT_TIMEOUT = 60  # seconds
NOT_COMPARED = ("text/html",)
PROGRESS = re.compile(r"\|\s*[\d.]+[kMG]?/[\d.?]+[kMG]? \[")  # tqdm's "| 12/72 [" (or "| 0/? [")


def is_progress(output) -> bool:
    """True for a tqdm progress bar: its notebook widget, or stderr text made only of bars."""
    data = output.get("data") or {}
    if "application/vnd.jupyter.widget-view+json" in data:
        return bool(PROGRESS.search(data.get("text/plain", "")))
    if output.get("output_type") == "stream" and output.get("name") == "stderr":
        lines = [line for line in re.split(r"[\r\n]", output.get("text", "")) if line.strip()]
        return bool(lines) and all(PROGRESS.search(line) for line in lines)
    return False


def compare_without_progress(item, test, ref, skip_compare=None):
    keep = [output for output in test if not is_progress(output)]
    kept = [output for output in ref if not is_progress(output)]
    return type(item).compare_outputs(item, keep, kept, skip_compare)


TIMINGS = Path(__file__).parent / "benchmarks" / "timings.json"


def longest_first(items):
    """Notebook cells grouped by notebook, the notebooks in decreasing recorded cold time (unrecorded last, in their
    order; without the record, as given); cells keep their order, other tests stay first."""
    record = json.loads(TIMINGS.read_text())["seconds"] if TIMINGS.exists() else {}
    seconds = {stem: -times["first"] for stem, times in record.items()}

    def key(item):
        if not hasattr(item, "output_timeout"):
            return (0, 0.0)
        return (1, seconds.get(Path(str(item.parent.path)).stem, 0.0))

    return sorted(items, key=key)


def pytest_collection_modifyitems(items):
    items[:] = longest_first(items)
    for item in items:
        if hasattr(item, "output_timeout"):  # nbval's notebook cells
            item.output_timeout = NBVAL_OUTPUT_TIMEOUT
            if not set(NOT_COMPARED) <= set(item.parent.skip_compare):
                item.parent.skip_compare = tuple(item.parent.skip_compare) + NOT_COMPARED
            item.compare_outputs = types.MethodType(compare_without_progress, item)

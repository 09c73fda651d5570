"""Repository-wide pytest hooks for the notebook run (`make nbval`).

- nbval waits a hard-coded 5 s for each of a cell's remaining messages once the cell has run, and stops the
  kernel (failing every later cell) when one is late. On 2 busy cores a long cell's last message can come later
  than that (seen once in a fresh-clone run, after notebook 08's fine-tuning cell), so it gets a minute here.
- Checked cells are compared by their plain text: a result table (`compare.show`) is styled HTML for the reader
  and plain text for nbval, and the HTML (Styler markup, escaping) would only repeat the same numbers.
"""

NBVAL_OUTPUT_TIMEOUT = 60  # seconds
NOT_COMPARED = ("text/html",)


def pytest_collection_modifyitems(items):
    for item in items:
        if hasattr(item, "output_timeout"):  # nbval's notebook cells
            item.output_timeout = NBVAL_OUTPUT_TIMEOUT
            if not set(NOT_COMPARED) <= set(item.parent.skip_compare):
                item.parent.skip_compare = tuple(item.parent.skip_compare) + NOT_COMPARED

"""The kit's maintenance tools: they write the notebooks' generated parts, export and check the pages and fill the
cache. Run each from the repository root as a module, e.g. `python -m tools.navigation`; the Makefile's targets
call them. They are not part of the installed package; the tests import them (`from tools import navigation`).

- `make notebooks`: exercise_cells (each notebook's "Implement it yourself" section), navigation (header and
  navigation cells, the contents tables and the syllabus, from notebooks/course.toml), slides (RISE slide
  metadata), widget_state (drops the widget state an earlier run saved), student_copy (notebooks/student/);
- `make run`, `make slides`: export (offline HTML pages and reveal.js decks, checked for network references);
- `make book`: book (the static website); `make prefill`: prefill (the cache, every notebook run once);
- by hand: parsecheck_sample (the hand-checked silver-parse arcs, data/parsecheck/), pattern_sheets (maps to label
  by eye, data/patterns/).
"""

"""The numbers a notebook's prose uses, computed from its results: one module per notebook (`nb02` for notebook
02), one function per prose cell or section, each returning a small frozen record whose fields the cell's
f-string renders. Unit-tested on synthetic results with known answers (tests/test_readings_nbXX.py), so a prose
cell holds only its sentence and placeholders.
"""

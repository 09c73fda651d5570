"""present: the papers' numbers, figures, offline BertViz views, widgets, tables and the report."""

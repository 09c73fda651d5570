"""analyses: what the papers measured and what came after; they return data and draw nothing."""

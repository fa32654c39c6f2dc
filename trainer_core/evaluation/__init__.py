"""Evaluate and predict: a run (or the base) over held-out rows, with loss, perplexity and text scores."""

"""Kinds of model, one folder a kind: ``vision/`` (image-and-text models)."""

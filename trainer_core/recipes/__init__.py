"""Data recipes: a training set made from the user's documents, seed rows or topics by a model
through any OpenAI-compatible endpoint, checked by quality gates, written with its data card."""

"""Reward functions for GRPO runs: a library chosen in the form (``library``), answer extraction
(``answers``), the user's own functions from a Python file behind a server switch (``code_file``),
the request -> TRL ``reward_funcs`` / ``reward_weights`` mapping (``build``) and the pydantic models
the request and progress hold (``schemas``). GRPO is a method on top of a model kind, not a kind."""

"""Reward functions for GRPO runs: a library chosen in the form (``library``), answer extraction
(``answers``), the user's own functions from a Python file behind a server switch (``code_file``),
and the request -> TRL ``reward_funcs`` / ``reward_weights`` mapping (``build``)."""

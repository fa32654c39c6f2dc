"""Function tools: their definitions, prompts with tools, calls parsed from answers, constrained calls."""

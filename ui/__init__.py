"""The page (Gradio Blocks): the Train tab's form, check and monitor, the Runs tab with its export,
evaluate and compare panels, Chat and the Arena; handlers over the same engine as the API."""

"""The built-in recipes users start from, one YAML file each (``recipes.library`` lists and reads them)."""

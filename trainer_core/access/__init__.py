"""Path rules and the checks every Start passes."""

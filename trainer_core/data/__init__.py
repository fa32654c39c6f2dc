"""Reading, detecting, normalising and tokenizing training data."""

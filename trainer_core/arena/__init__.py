"""The blind model arena: two models answer one prompt side by side, their names hidden until the
user votes; votes are kept in the run history and summed into a leaderboard (``leaderboard``)."""

"""The arena's standings from its votes: win rate with a Wilson score interval, and Elo.

- Win rate: wins + ties / 2 over battles, with the 95 % Wilson score interval (Wilson 1927; the
  interval Chatbot Arena's early leaderboards showed for win shares), which stays inside 0..1 and
  is wide for few battles.
- Elo (Elo 1978), as LMSYS's Chatbot Arena first computed it (Zheng et al. 2023,
  https://arxiv.org/abs/2306.05685): every model starts at 1000, votes are replayed in order with
  K = 32 and base 10 / scale 400; a tie and "both bad" score 0.5 for each side.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Optional

from trainer_core.arena.schemas import Leaderboard, Standing

K = 32.0
START = 1000.0
Z95 = 1.959964


def wilson(successes: float, trials: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``successes`` / ``trials`` (ties may make successes fractional);
    (0, 1) for no trials."""
    if trials <= 0:
        return 0.0, 1.0
    p = successes / trials
    centre = p + z * z / (2 * trials)
    spread = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    denominator = 1 + z * z / trials
    return max(0.0, (centre - spread) / denominator), min(1.0, (centre + spread) / denominator)


def leaderboard(
    votes: list[tuple[str, str, str]], labels: dict[str, str], models: Optional[list[str]] = None
) -> Leaderboard:
    """Standings from ``votes`` ((left model, right model, vote) in the order given), for the battles
    between two models of ``models`` (None: every model voted on); ``labels`` names the models."""
    wanted = set(models) if models else None
    kept = [v for v in votes if wanted is None or (v[0] in wanted and v[1] in wanted)]
    elo: dict[str, float] = defaultdict(lambda: START)
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # wins, losses, ties
    for left, right, vote in kept:
        score = {"left": 1.0, "right": 0.0}.get(vote, 0.5)  # left's score
        expected = 1.0 / (1.0 + 10 ** ((elo[right] - elo[left]) / 400.0))
        elo[left], elo[right] = elo[left] + K * (score - expected), elo[right] - K * (score - expected)
        if score == 0.5:
            tally[left][2] += 1
            tally[right][2] += 1
        else:
            winner, loser = (left, right) if score == 1.0 else (right, left)
            tally[winner][0] += 1
            tally[loser][1] += 1
    names = sorted(set(tally) | (wanted or set()))
    standings = []
    for name in names:
        wins, losses, ties = tally[name]
        battles = wins + losses + ties
        low, high = wilson(wins + ties / 2, battles)
        standings.append(
            Standing(
                model=name,
                label=labels.get(name, name),
                battles=battles,
                wins=wins,
                losses=losses,
                ties=ties,
                win_rate=round((wins + ties / 2) / battles, 4) if battles else 0.0,
                ci_low=round(low, 4),
                ci_high=round(high, 4),
                elo=round(elo[name], 1),
            )
        )
    standings.sort(key=lambda s: (-s.elo, -s.battles, s.model))
    return Leaderboard(models=names, battles=len(kept), standings=standings)

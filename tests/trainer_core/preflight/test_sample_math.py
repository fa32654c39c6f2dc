"""``preflight.sample_math``: stratified totals and their 95 % margins, checked against simulated
samples of a known population."""

from __future__ import annotations

import numpy as np

from trainer_core.data.row_sample import choose
from trainer_core.preflight.sample_math import margins, repeats, row_weights, total_margin


def test_weights_and_repeats_add_up_to_the_file() -> None:
    weights = row_weights(rows=110, first=10, total=10_007)
    assert weights[:10].tolist() == [1.0] * 10
    assert abs(weights.sum() - 10_007) < 1e-6
    assert repeats(weights).sum() == 10_007
    assert set(repeats(weights)[10:]) <= {99, 100, 101}


def test_a_census_has_no_margin() -> None:
    values = np.arange(50.0)
    assert total_margin(values, first=10, total=50) == 0.0


def test_the_margin_covers_the_true_total_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(0)
    population = rng.lognormal(5, 0.8, size=20_000)  # token counts: skewed like real rows
    truth, first, drawn = population.sum(), 100, 400
    covered, widths = 0, []
    for seed in range(300):
        picked = choose(len(population), first, drawn, seed)
        values = population[picked]
        estimate = (values * row_weights(len(values), first, len(population))).sum()
        margin = total_margin(values, first, len(population))
        covered += abs(estimate - truth) <= margin
        widths.append(margin / truth)
    assert 0.90 <= covered / 300 <= 0.99
    assert 0.02 < float(np.mean(widths)) < 0.1


def test_margins_of_several_files_add_in_quadrature() -> None:
    one = (np.array([1.0, 5, 2, 8, 3, 9, 4]), 1, 1000)
    alone = total_margin(*one)
    assert alone > 0
    assert abs(margins({"tokens": [one, one]})["tokens"] - alone * np.sqrt(2)) < 1e-6

"""Benchmark scripts run in --quick mode so they cannot rot (figures are reported, not asserted)."""

from bench import charts as chart_bench


def test_chart_bench_quick(capsys):
    report = chart_bench.main(["--quick"])
    assert [r["steps"] for r in report["results"]] == [1_000, 10_000]
    assert all(r["update_ms"] > 0 and r["wire_kb"] > 0 for r in report["results"])
    assert '"bench": "charts"' in capsys.readouterr().out

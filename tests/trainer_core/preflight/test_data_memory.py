"""``preflight.data_memory``: tokens larger than the memory for them are trained from the
memory-mapped token cache and the check says so (with the cache off, how to avoid holding them);
a sampled check measures them on its sample scaled to the file's rows. A small ``data_memory_mb``
stands for a file larger than memory."""

from __future__ import annotations

from pathlib import Path

import datasets

from trainer_core.preflight.data_memory import CODE, data_over_memory, tokenized_bytes
from trainer_core.preflight.sampled import sampled_preflight
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import Settings

MIB = 2**20


def test_tokens_over_the_memory_for_them_train_from_the_cache() -> None:
    encoded = datasets.Dataset.from_dict({"input_ids": [[1] * 100] * 10})
    assert tokenized_bytes(encoded, 1000) == encoded.data.nbytes * 100 and tokenized_bytes(None, 1000) == 0
    small = Settings(data_memory_mb=1, token_cache_mb=64)
    assert data_over_memory(small, MIB) is None
    cached = data_over_memory(small, 3 * MIB)
    assert cached.code == CODE and cached.level == "warning"
    assert cached.message.startswith("trains from the memory-mapped token cache: the tokenized training data "), cached
    assert "(about 3.0 MiB) is more than the 1.0 MiB of memory available for it (data_memory_mb)" in cached.message
    off = data_over_memory(Settings(data_memory_mb=1, token_cache_mb=0), 3 * MIB)
    assert "the token cache is off (token_cache_mb 0), so training would hold it all in memory" in off.message
    assert data_over_memory(Settings(), MIB) is None  # the machine's available memory


def test_a_sampled_check_says_so_from_its_sample(tmp_path: Path, datasets_dir: Path) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        allowed_paths=f"{tmp_path},{datasets_dir}",
        check_sample_mb=0,
        check_sample_rows=100,
        data_memory_mb=1,
        token_cache_mb=64,
    )
    request = TrainingStartRequest(local_datasets=[str(datasets_dir / "alpaca_en_demo.json")])
    report = sampled_preflight(request, settings)
    (issue,) = [issue for issue in report.warnings if issue.code == CODE]  # once: the sample's own was replaced
    assert issue.message.startswith("trains from the memory-mapped token cache"), issue.message

"""The old ``config.json`` names llama.cpp's converter reads, added to a model saved by transformers 5
(``export.converter_config``): from transformers' own configs as the merged model saves them."""

from __future__ import annotations

import json

from trainer_core.export.converter_config import add_converter_keys, legacy_keys


def _saved(config, tmp_path):
    config.save_pretrained(tmp_path)
    return json.loads((tmp_path / "config.json").read_text())


def test_transformers_5_configs_get_the_names_the_converter_reads(tmp_path):
    import transformers as t

    neox = _saved(t.GPTNeoXConfig(hidden_size=64, num_attention_heads=4, rotary_pct=0.25), tmp_path / "neox")
    assert "rotary_pct" not in neox and legacy_keys(neox) == {"rotary_pct": 0.25}
    gpt2 = {"model_type": "gpt2", "n_positions": 512}
    assert legacy_keys(gpt2) == {"n_ctx": 512} and legacy_keys({**gpt2, "n_ctx": 256}) == {}
    falcon = _saved(t.FalconConfig(hidden_size=64, num_attention_heads=4), tmp_path / "falcon")
    assert falcon["num_kv_heads"] == 4 and legacy_keys(falcon) == {"num_kv_heads": 1}  # Falcon-7B's one kv head
    falcon40 = _saved(
        t.FalconConfig(hidden_size=64, num_attention_heads=4, new_decoder_architecture=True, num_kv_heads=2),
        tmp_path / "f40",
    )
    assert legacy_keys(falcon40) == {}
    assert legacy_keys({"model_type": "llama", "rope_parameters": {"rope_theta": 1e4}}) == {}
    assert add_converter_keys(tmp_path / "neox") == {"rotary_pct": 0.25}
    written = json.loads((tmp_path / "neox" / "config.json").read_text())
    assert written["rotary_pct"] == 0.25 and written["rope_parameters"] == neox["rope_parameters"]
    assert add_converter_keys(tmp_path / "neox") == {}  # already there

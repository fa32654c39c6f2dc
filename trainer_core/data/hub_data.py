"""Read one split of a Hugging Face Hub dataset, with the same errors as local files."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import datasets
import datasets.exceptions

from trainer_core.data.errors import DatasetError
from trainer_core.data.files import check_column_types
from trainer_core.data.row_size import check_row_sizes


def read_hub(name: str, subset: Optional[str], split: str, token: Optional[str]) -> datasets.Dataset:
    """One split of a Hugging Face Hub dataset (cached in the usual datasets cache).

    Checks that the Hub answers first (a few seconds) instead of letting ``datasets`` retry for
    ~25 s. Raises DatasetError when the Hub cannot be reached (or ``HF_HUB_OFFLINE`` is set) and no
    cached copy exists, the dataset or split does not exist,
    access is refused, a column mixes value types, a row is over the size limits (``row_size``), or ``name`` is not a Hub id (a local folder is
    never read through here). The token never appears in messages.
    """
    from huggingface_hub import constants

    from trainer_core.hub_ids import hub_id_problem
    from trainer_core.models.hub import hub_reachable

    if hub_id_problem(name) or Path(name).exists():  # datasets would read a local folder of that name
        raise DatasetError(
            f"hf_dataset: '{name[:120]}' is not a Hub dataset id; files on the server go in local_datasets",
            fields=("hf_dataset", "local_datasets"),
        )
    if not constants.HF_HUB_OFFLINE and not hub_reachable():
        raise DatasetError(
            f"dataset {name}: the Hugging Face Hub could not be reached; connect to the internet or use local files"
        )
    try:
        dataset = datasets.load_dataset(name, subset, split=split, token=token)
    except (datasets.exceptions.DatasetNotFoundError, FileNotFoundError) as exc:
        raise DatasetError(
            f"dataset {name} was not found on the Hub (or is private or gated: accept its terms and give an hf_token)",
            fields=("hf_token",),
        ) from exc
    except ConnectionError as exc:
        why = (
            "HF_HUB_OFFLINE is set, so the Hugging Face Hub is not asked,"
            if constants.HF_HUB_OFFLINE
            else "the Hugging Face Hub could not be reached"
        )
        raise DatasetError(
            f"dataset {name}: {why} and no cached copy exists; connect to the internet "
            "(and unset HF_HUB_OFFLINE) or use local files"
        ) from exc
    except ValueError as exc:  # unknown split or subset
        message = str(exc).replace(token, "***") if token else str(exc)
        raise DatasetError(f"dataset {name} (subset {subset!r}, split {split!r}): {message}") from exc
    if len(dataset) == 0:
        raise DatasetError(f"dataset {name}, split {split!r} has no rows: choose another split")
    check_column_types(dataset, name)
    check_row_sizes(dataset, name)
    return dataset

"""What a Hugging Face Hub repo id looks like (``hub_id_problem``), checked without asking the Hub
or importing ``huggingface_hub``: the request's model and dataset ids, the export's push target."""

from __future__ import annotations

import re
from typing import Optional

# A Hub repo id: "name" or "owner/name" of letters, digits, '-', '_', '.' (huggingface_hub's
# validate_repo_id rules, without importing it here). Local folders are never Hub ids.
HUB_ID = re.compile(r"^(?![.-])[\w.-]{1,96}(?<![.-])(/(?![.-])[\w.-]{1,96}(?<![.-]))?$")


# Names ``datasets.load_dataset`` takes for its packaged builders (datasets 5.2): given as a dataset
# name they read files from the working folder, so they are never taken as Hub ids.
PACKAGED_BUILDERS = frozenset(
    {
        "arrow",
        "audiofolder",
        "conll",
        "csv",
        "eval",
        "fasta",
        "fastq",
        "genbank",
        "harbor",
        "hdf5",
        "iceberg",
        "imagefolder",
        "json",
        "lance",
        "meshfolder",
        "mmcif",
        "niftifolder",
        "pandas",
        "parquet",
        "pdb",
        "pdffolder",
        "text",
        "tsfile",
        "videofolder",
        "vortex",
        "webdataset",
        "xml",
        "sql",
        "generator",
        "cache",
        "folder_based_builder",
    }
)


def hub_id_problem(value: str) -> Optional[str]:
    """Why ``value`` is not a Hub repo id ("owner/name"), or None when it is one. The names of
    ``datasets``' packaged builders (``json``, ``csv``, ...) are refused: they read local files."""
    if value.lower() in PACKAGED_BUILDERS:
        return "is the name of a file loader, not a Hub id such as owner/name"
    if HUB_ID.match(value) and ".." not in value and "--" not in value:
        return None
    return "is not a Hub id such as owner/name"

"""The refusals of data recipes: a recipe that cannot be used, a document that cannot be read, a
writer model that cannot be reached. Each names the field (or file) and the fix; codes are data."""

from __future__ import annotations

from trainer_core.refusals import Refusal

NO_TEXT_LAYER = "no_text_layer"  # a PDF whose pages are pictures (a scan without OCR)
UNREADABLE_DOCUMENT = "unreadable_document"  # a broken or mislabelled file
UNSUPPORTED_DOCUMENT = "unsupported_document"  # a suffix no converter takes
EMPTY_DOCUMENT = "empty_document"  # a readable file without text
MODEL_UNREACHABLE = "writer_model_unreachable"  # the endpoint cannot be reached or refuses the key
REMOTE_MODEL = "remote_writer_model"  # a non-loopback endpoint while the server does not allow them


class RecipeError(Refusal):
    """A recipe (or its run) refused; ``fields`` are the recipe keys concerned."""

    code = "recipe_invalid"


class SourceError(RecipeError):
    """A document that gives no text; the message names the file."""

    code = UNREADABLE_DOCUMENT

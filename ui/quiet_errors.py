"""Gradio's own error texts without the values a caller sent.

Gradio explains a malformed event call with the inputs it got: ``Blocks.validate_inputs`` lists
every received value ("didn't receive enough input values ... Received inputs: [...]") and
``Blocks._format_processing_error`` quotes the value a component could not read. Those texts go to
the caller and to the app's log, so a Hugging Face token typed in the form (or any secret) sent
with one input short would be echoed and logged; and a component's pydantic ``data_model`` check
(``Blocks.preprocess_data``) raises a ValidationError whose text quotes the input. ``quiet_errors``
replaces all three, on one ``Blocks`` instance, with texts that say what was wrong (counts, the
component, the value's type, pydantic's field and reason) and never the value. (gradio 6.x;
``gradio/blocks.py``.)
"""

from __future__ import annotations

import json
import logging
import types
from typing import Any

import gradio as gr
from gradio.exceptions import ComponentProcessingError, InvalidPathError
from pydantic import ValidationError

from ui.refused import one_line

log = logging.getLogger("finetune_studio.access")
NOT_UPLOADED = (
    "A file value that was not uploaded through this page was refused (nothing was read): "
    "upload the file with its file box"
)


def _validate_inputs(self: gr.Blocks, block_fn: Any, inputs: list[Any]) -> None:
    """``Blocks.validate_inputs`` without the received values: raises ValueError naming the counts."""
    if len(inputs) < len(block_fn.inputs):
        name = f" ({block_fn.name})" if block_fn.name and block_fn.name != "<lambda>" else ""
        raise ValueError(
            f"An event handler{name} didn't receive enough input values "
            f"(needed: {len(block_fn.inputs)}, got: {len(inputs)}); the values are not shown"
        )


def _processing_error(
    block_fn: Any, index: int, block: Any, value: Any, is_input: bool, original_error: Exception
) -> str:
    """``Blocks._format_processing_error`` naming the component and the value's type, not the value."""
    kind = "input" if is_input else "output"
    name = f' (named "{block_fn.name}")' if block_fn.name and block_fn.name != "<lambda>" else ""
    return (
        f"The {kind} value at position {index} of the event{name} could not be used by its "
        f"{block.get_block_name()} component: a {type(value).__name__} value ({type(original_error).__name__}); "
        "the value is not shown"
    )


def _texts(value: Any, found: set[str]) -> set[str]:
    """Every text of 4 characters or more inside ``value`` (nested lists, tuples and dicts, keys
    included), also as ``repr`` and JSON would quote it (Gradio's messages quote values with
    ``repr``: a value with a quote or a line break reads differently there)."""
    if isinstance(value, str):
        if len(value) >= 4:
            found.update(
                {value, repr(value)[1:-1], json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
            )
    elif isinstance(value, dict):
        for key, item in value.items():
            _texts(key, found)
            _texts(item, found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _texts(item, found)
    return found


def scrub(message: str, inputs: Any) -> str:
    """``message`` with every text of ``inputs`` (4 characters or more, as sent or quoted) replaced
    by ``***``."""
    for text in sorted(_texts(inputs, set()), key=len, reverse=True):
        if len(text) >= 4:
            message = message.replace(text, "***")
    return message


def _quiet_preprocess(original: Any) -> Any:
    """``Blocks.preprocess_data`` whose errors never carry the inputs: pydantic's are re-raised as
    field and reason, a file that was not uploaded (Gradio's ``InvalidPathError``, printed with its
    traceback otherwise) as one ``gr.Error`` and one log line, a component's ``gr.Error`` (such as a Dropdown's "Value: ... is not in the list of choices") and
    any other error with the input texts scrubbed from its message: each a ``gr.Error`` without the
    traceback Gradio would print, and one log line."""

    async def preprocess_data(block_fn: Any, inputs: list[Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return await original(block_fn, inputs, *args, **kwargs)
        except InvalidPathError:  # a raw call naming a server file: one log line, not Gradio's traceback
            log.warning("refused an event's file value that was not uploaded through the page")
            raise gr.Error(NOT_UPLOADED, print_exception=False) from None
        except ComponentProcessingError as exc:  # its text is ours (_processing_error): no value in it
            log.info("refused an event's input: %s", one_line(str(exc)))
            raise gr.Error(str(exc), print_exception=False) from None
        except ValidationError as exc:
            reasons = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'value'}: {error['msg']}"
                for error in exc.errors(include_input=False, include_url=False)
            )
            log.info("refused an event's input of the wrong shape (%s)", one_line(reasons))
            raise gr.Error(
                f"an input of the wrong shape ({reasons}); the value is not shown", print_exception=False
            ) from None
        except gr.Error as exc:  # a component's own refusal: a clear message, one log line, no traceback
            clean = scrub(str(exc.message or exc), inputs)
            log.info("refused an event's input: %s", one_line(clean))
            raise gr.Error(
                clean, duration=exc.duration, visible=exc.visible, title=exc.title, print_exception=False
            ) from None
        except Exception as exc:  # any other input Gradio could not read (a NUL byte, a name too long)
            clean = scrub(str(getattr(exc, "message", None) or exc), inputs)
            log.info("refused an event's input: %s: %s", type(exc).__name__, one_line(clean))
            raise gr.Error(
                f"An input could not be read ({clean}); the value is not shown", print_exception=False
            ) from None

    return preprocess_data


def quiet_errors(blocks: gr.Blocks) -> gr.Blocks:
    """``blocks`` with Gradio's input-echoing error texts replaced (in place; returned for chaining)."""
    blocks.validate_inputs = types.MethodType(_validate_inputs, blocks)
    blocks._format_processing_error = _processing_error
    blocks.preprocess_data = _quiet_preprocess(blocks.preprocess_data)
    return blocks

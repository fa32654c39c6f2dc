"""Gradio's queue protocol spoken by hand, as an attacker (or the page) would: ``POST
/gradio_api/queue/join`` with any data, then read the SSE stream of ``/gradio_api/queue/data``."""

from __future__ import annotations

import json
import secrets
from typing import Any, Optional

import httpx


def file_value(path: str) -> dict[str, Any]:
    """A ``gradio.FileData`` value naming ``path`` (any path: that is the attack)."""
    return {"path": path, "orig_name": path.rsplit("/", 1)[-1], "meta": {"_type": "gradio.FileData"}}


PREVIEW_OUTPUTS = 10  # the dataset preview's outputs: summary, table, placeholder names, group, 6 fields


class RawGradio:
    """Calls events of the app at ``url`` by fn_index, with cookies of ``client`` (a login, say)."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client
        self.config = client.get("/config").json()
        self.dependencies = self.config["dependencies"]

    def fn_index(self, api_name: Optional[str] = None, inputs_like: Optional[str] = None, outputs: int = 0) -> int:
        """The dependency with ``api_name``; or (private events) the first whose inputs start like
        ``inputs_like``'s and that has ``outputs`` outputs."""
        if api_name is not None:
            return next(d["id"] for d in self.dependencies if d.get("api_name") == api_name)
        first_input = self.dependencies[self.fn_index(inputs_like)]["inputs"][0]
        return next(
            d["id"] for d in self.dependencies if d["inputs"][:1] == [first_input] and len(d["outputs"]) == outputs
        )

    def call(self, fn_index: int, data: list[Any], timeout_s: float = 60, pad: bool = False) -> dict[str, Any]:
        """Run one event; returns the ``process_completed`` message ({"success", "output", ...}),
        or the HTTP refusal of the join as {"success": False, "status_code", "output": {"error"}}.
        ``pad``: the inputs ``data`` leaves out at the end are sent as null (``/start``'s page-only
        placeholder state and box; a State's value is the session's, whatever is sent)."""
        if pad:
            wanted = next((len(d["inputs"]) for d in self.dependencies if d["id"] == fn_index), len(data))
            data = [*data, *[None] * (wanted - len(data))]
        session = secrets.token_hex(8)
        joined = self.client.post(
            "/gradio_api/queue/join",
            json={"data": data, "fn_index": fn_index, "session_hash": session, "event_data": None, "trigger_id": None},
        )
        if joined.status_code != 200:
            return {"success": False, "status_code": joined.status_code, "output": {"error": joined.text}}
        with self.client.stream(
            "GET", "/gradio_api/queue/data", params={"session_hash": session}, timeout=timeout_s
        ) as stream:
            for line in stream.iter_lines():
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[5:])
                if message.get("msg") == "process_completed":
                    return message
                if (
                    message.get("msg") == "process_generating"
                    and message.get("success")
                    and message.get("output", {}).get("data")
                ):
                    return {"success": True, "output": message["output"], "generating": True}
        raise AssertionError("the event stream ended without a result")


def error_text(message: dict[str, Any]) -> str:
    """The error a failed event showed (empty when it succeeded)."""
    if message.get("success"):
        return ""
    output = message.get("output") or {}
    return str(output.get("error") or output.get("title") or output)

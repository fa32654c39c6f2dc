"""Event handlers answer with ``gr.update(...)`` (a plain dict), never a new component: a
``gr.Button(...)`` made while an event runs renders itself into whatever page is being built at that
moment (Gradio's ``Context.root_block`` is one per process), such as the next test's app in the same
pytest worker, which then fails to build. Components are made only while laying out the page."""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import pandas as pd
from gradio.blocks import Block
from gradio.context import Context

REPO = Path(__file__).resolve().parents[2]
FACES = ("ui", "api")  # the packages whose code runs as Gradio events
# Layout helpers that make a component without opening a ``with gr.<Block>`` of their own: each is
# called only while a page is built (never from an event), so the component lands where it belongs.
LAYOUT_HELPERS = {
    "ui/form.py": {"make_widget"},  # a form field's widget, under its section's accordion
    "ui/tables.py": {"fit_table"},  # a read-only table, under its tab or panel
    "ui/method_panel.py": {"_library"},  # the reward picker, under the method section
    "ui/task_progress.py": {"wire_cancel_buttons"},  # the panels' one task timer
    "ui/train_tab.py": {"_wire_monitor"},  # the hardware line's timer
}
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _block_names(tree: ast.Module) -> tuple[set[str], dict[str, str]]:
    """(names bound to the gradio package or its components / layouts modules, names bound to a
    ``Block`` class by ``from gradio... import X``) in one module."""
    modules, classes = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name.startswith("gradio")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gradio"):
            classes |= {a.asname or a.name: a.name for a in node.names if _is_block(a.name)}
    return modules, classes


def _is_block(name: str) -> bool:
    found = getattr(gr, name, None)
    return isinstance(found, type) and issubclass(found, Block)


def _made_block(call: ast.Call, modules: set[str], classes: dict[str, str]) -> str | None:
    """``gr.Button`` for a call ``gr.Button(...)`` (or ``Button(...)`` imported from gradio) that
    makes a component or layout block; None for anything else (``gr.update``, ``gr.Info``...)."""
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in modules:
        return f"{func.value.id}.{func.attr}" if _is_block(func.attr) else None
    if isinstance(func, ast.Name) and func.id in classes:
        return func.id
    return None


def _own_nodes(scope: ast.AST):
    """The nodes of ``scope``'s own body, not those of the functions and lambdas defined in it."""
    for child in ast.iter_child_nodes(scope):
        yield child
        if not isinstance(child, SCOPES):
            yield from _own_nodes(child)


def _lays_out(scope: ast.AST, modules: set[str], classes: dict[str, str]) -> bool:
    """Whether ``scope`` opens a block (``with gr.Row():``) in its own body: a page builder."""
    return any(
        isinstance(node, ast.With)
        and any(
            isinstance(i.context_expr, ast.Call) and _made_block(i.context_expr, modules, classes) for i in node.items
        )
        for node in _own_nodes(scope)
    )


def _event_time_blocks(source: str, relative: str) -> list[str]:
    """``file:line gr.X(...) in scope`` for each component that ``source`` (the module at
    ``relative``, e.g. ``ui/form.py``) makes outside a page builder: in a lambda, in a function that
    opens no block, at module level; ``LAYOUT_HELPERS`` excepted."""
    tree = ast.parse(source)
    modules, classes = _block_names(tree)
    found: list[str] = []
    lays_out = functools.cache(lambda scope: _lays_out(scope, modules, classes))  # once per function

    def visit(node: ast.AST, scope: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Call) and (made := _made_block(child, modules, classes)):
                name = getattr(scope, "name", "<lambda>" if isinstance(scope, ast.Lambda) else "<module>")
                layout = isinstance(scope, SCOPES[:2]) and (name in LAYOUT_HELPERS.get(relative, ()) or lays_out(scope))
                if not layout:
                    found.append(f"{relative}:{child.lineno} {made}(...) in {name}")
            visit(child, child if isinstance(child, SCOPES) else scope)

    visit(tree, tree)
    return found


def test_no_handler_makes_a_component():
    """A handler that changes a widget returns ``gr.update(visible=..., ...)``; one listed here
    makes a component at event time (return ``gr.update`` with the same keywords instead; a helper
    called only while building the page goes in ``LAYOUT_HELPERS``)."""
    files = sorted(path for face in FACES for path in (REPO / face).rglob("*.py"))
    assert len(files) > 40
    found = [line for path in files for line in _event_time_blocks(path.read_text("utf-8"), _relative(path))]
    assert found == []


def _relative(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def test_the_scan_finds_a_component_made_at_event_time():
    """The scan tells a handler's ``gr.Button(...)`` from a page builder's."""
    source = (
        "import gradio as gr\nfrom gradio import Row\n\n"
        "def build():\n    with gr.Row():\n        done = gr.Button('Go')\n"
        "    done.click(lambda: gr.Button(interactive=False), None, done)\n\n"
        "def refresh():\n    return Row(visible=True), gr.update(visible=False)\n"
    )
    assert _event_time_blocks(source, "ui/probe.py") == [
        "ui/probe.py:7 gr.Button(...) in <lambda>",
        "ui/probe.py:10 Row(...) in refresh",
    ]
    assert _event_time_blocks(source.replace("def refresh", "def make_widget"), "ui/form.py") == [
        "ui/form.py:7 gr.Button(...) in <lambda>"  # a listed layout helper's component is its page's
    ]


def test_event_time_updates_render_nothing_into_a_page_being_built(monkeypatch):
    """The monitor's, the Runs tab's and the dataset preview's updates, made while another page is
    being built (its current container is Gradio's global ``Context.block``), leave that page
    empty: they are dicts, not components. (A container stands in for a whole ``gr.Blocks``, which
    takes about a second to make.)"""
    from trainer_core.data.placeholders import PlaceholderCount
    from trainer_core.runs.metrics import MetricsHistory
    from trainer_core.status import TrainingProgress, TrainingStatus
    from ui import method_panel, placeholder_panel, preview, run_handlers, task_progress
    from ui import train_handlers as handlers

    history = MetricsHistory()  # a GRPO step with a sample: every monitor view has something to show
    sample = {"prompt": "2+2?", "completion": "4", "rewards": {"numeric_match": 1.0}, "reward": 1.0}
    history.append(
        TrainingProgress(job_id="j", step=1, total_steps=2, loss=0.1, reward=1.0, reward_std=0.0, samples=[sample])
    )
    page = gr.Column(render=False)
    monkeypatch.setattr(Context, "block", page)  # where a component made now is added
    updates = [  # each output that is a component's new properties
        *handlers.render(TrainingStatus(), history.chart_points(), history.latest_train())[5:],
        *handlers.starting(),
        *run_handlers.show_run(SimpleNamespace(), "")[5:],
        *placeholder_panel.updates([PlaceholderCount(name="city", rows=3)])[1:],
        preview.preview_table(pd.DataFrame({"row": [0], "text": ["hi"]})),
        task_progress.cancel_button(SimpleNamespace(current=lambda: None)),
        method_panel.refresh_adapters(None),
    ]
    assert page.children == []
    probe = gr.Button("made at event time")  # what a handler returning a component did
    assert page.children == [probe]
    assert len(updates) == 6 + 2 + 5 + (1 + placeholder_panel.MAX_FIELDS) + 3
    assert all(isinstance(u, dict) and u["__type__"] == "update" for u in updates)
    assert updates[0]["visible"] and updates[1]["visible"] and "2+2?" in updates[2]["value"]  # GRPO's views shown

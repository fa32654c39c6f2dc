"""The app's Gradio queue polls slowly when idle (its default busy-wait cost 9 % of a core)."""

import gradio as gr

from server import QUEUE_IDLE_POLL_S, QUEUE_PROGRESS_POLL_S, quiet_queue


def test_quiet_queue_sets_gradios_poll_intervals():
    with gr.Blocks() as demo:
        gr.Markdown("x")
    queue = demo.queue()._queue
    assert queue.sleep_when_free < QUEUE_IDLE_POLL_S  # the attribute still exists with Gradio's 1 ms default
    assert queue.progress_update_sleep_when_free < QUEUE_PROGRESS_POLL_S
    quiet_queue(demo)
    assert (queue.sleep_when_free, queue.progress_update_sleep_when_free) == (QUEUE_IDLE_POLL_S, QUEUE_PROGRESS_POLL_S)

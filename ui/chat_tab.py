"""The Chat tab: a model picker (base, runs, checkpoints), one chat or base vs tuned side by side,
a system prompt, an image box for vision models, an audio box for audio models and a voice for
text-to-speech models, Stop generation, Clear, a Tools box (``chat_tool_panel``: function definitions,
the model's calls shown as calls, the user's results sent back) and generation settings built from
``GenerationSettings``."""

from __future__ import annotations

from functools import partial

import gradio as gr

from trainer_core.serving.engine import ChatEngine
from trainer_core.serving.schemas import GenerationSettings
from trainer_core.serving.voices import MAX_VOICE_CHARS
from trainer_core.settings import Settings
from ui import (
    chat_audio,
    chat_checks,
    chat_handlers,
    chat_images,
    chat_send,
    chat_speech,
    chat_tool_panel,
    chat_turns,
)
from ui.form import number_widgets

FREE = dict(concurrency_limit=None)  # the engine runs one generation at a time and queues the rest


class ChatTab:
    """The tab's components that other tabs use: the model picker (Runs tab's "Chat with this run");
    ``tools``: the Tools accordion."""

    def __init__(self, engine: ChatEngine, settings: Settings) -> None:
        self.engine = engine
        with gr.Tab("Chat", id="chat") as self.tab:
            with gr.Row():
                self.model = gr.Dropdown(
                    label=chat_checks.MODEL_LABEL,
                    choices=[],
                    scale=4,
                    elem_id="chat-model",
                    allow_custom_value=True,  # a job id from the API; checked by the engine
                    info=(
                        "The base model, a run's final weights, one of its checkpoints (newest first), a merged "
                        "export, or a GGUF export run by llama.cpp (the fast way to chat on a CPU)."
                    ),
                )
                refresh = gr.Button("Refresh", size="sm", scale=1)
                load_btn = gr.Button("Load", size="sm", scale=1, elem_id="chat-load")
            state = gr.Markdown("No model loaded yet: the first message loads the chosen one.", elem_id="chat-state")
            compare = gr.Checkbox(
                label="Base vs tuned side by side",
                value=False,
                elem_id="chat-compare",
                info="The same prompt, settings and seed to the base model (the adapter switched off).",
            )
            system = gr.Textbox(
                label="System prompt", lines=2, placeholder="Empty: the chat template's default, as in training"
            )
            with gr.Row():
                chat = gr.Chatbot(label="Tuned (the chosen model)", height=380, elem_id="chat-tuned")
                base_chat = gr.Chatbot(label="Base model", height=380, visible=False, elem_id="chat-base")
            message = gr.Textbox(label="Message", placeholder="Type and press Enter", elem_id="chat-message")
            image = gr.Image(
                label=chat_images.IMAGE_LABEL,
                type="pil",
                image_mode="RGB",
                sources=["upload", "clipboard"],
                height=160,
                visible=False,  # shown for a vision-language model (chat_images.image_box)
                elem_id="chat-image",
            )
            audio = gr.Audio(
                label=chat_audio.AUDIO_LABEL,
                sources=["microphone", "upload"],
                type="filepath",  # the path checked as every upload's (ui.uploads), then read by chat_audio
                format=None,  # kept as uploaded: Gradio converts nothing (and reads no path itself)
                visible=False,  # shown for an audio-in chat or speech-to-text model (chat_audio.audio_box)
                elem_id="chat-audio",
            )
            voice = gr.Textbox(
                label=chat_speech.VOICE_LABEL,
                value="0",
                max_length=MAX_VOICE_CHARS,
                visible=False,  # shown for a text-to-speech model (chat_speech.boxes)
                elem_id="chat-voice",
                info="The speaker who says the text, as the run's training rows name them: a number (0, 1, ...) or a "
                "name (an Orpheus-style run's speakers).",
            )
            held = gr.State(None)  # the uploaded image's data: URL until it is sent
            images = gr.State([])  # the earlier user turns' images (data: URLs), kept on the server
            held_clip = gr.State(None)  # the recorded or uploaded clip's data: URL until it is sent
            clips = gr.State([])  # the earlier user turns' clips (data: URLs), kept on the server
            self.outcome = gr.State(None)  # what the last send left to do (chat_turns.Outcome)
            self.seen = gr.State(None)  # the newest run at the last listing (chat_handlers.model_listing)
            with gr.Row():
                send_btn = gr.Button("Send", variant="primary", elem_id="chat-send")
                stop_btn = gr.Button("Stop generation", elem_id="chat-stop")
                clear_btn = gr.Button("Clear", elem_id="chat-clear")
            notice = gr.HTML("", elem_id="chat-notice")  # why a message was not sent (it stays in its box)
            self.tools = chat_tool_panel.ToolsPanel()
            with gr.Accordion("Generation settings", open=False):
                widgets = number_widgets(GenerationSettings)
        self._wire(
            engine,
            refresh,
            load_btn,
            state,
            compare,
            system,
            chat,
            base_chat,
            message,
            send_btn,
            stop_btn,
            clear_btn,
            notice,
            list(widgets.values()),
            (image, held, images),
            (audio, held_clip, clips, voice),
            settings,
        )
        page = (state, notice, clear_btn)
        self.tools.wire(
            engine, self.model, compare, system, (chat, base_chat), list(widgets.values()), (images, clips), page
        )

    def _wire(
        self,
        engine: ChatEngine,
        refresh,
        load_btn,
        state,
        compare,
        system,
        chat,
        base_chat,
        message,
        send_btn,
        stop_btn,
        clear_btn,
        notice,
        widgets: list,
        pictures: tuple,
        sounds: tuple,
        settings: Settings,
    ) -> None:
        """Wire the tab's events; ``pictures``: (the box, its held data: URL, the earlier turns' data:
        URLs) of images; ``sounds``: the same of audio clips, and the voice box of speech."""
        (image, held, images), (audio, held_clip, clips, voice) = pictures, sounds
        listing = (partial(chat_handlers.model_listing, engine), [self.model, self.seen], [self.model, self.seen])
        self.tab.select(*listing, api_name=False, **FREE)
        refresh.click(*listing, api_name=False, **FREE)
        load_btn.click(partial(chat_handlers.load_button, engine), self.model, state, api_name="chat_load", **FREE)
        compare.change(lambda on: gr.update(visible=on), compare, base_chat, api_name=False)
        self.model.change(partial(chat_images.image_box, engine), self.model, image, api_name=False, **FREE)
        image.change(chat_images.pending, image, [held, notice], api_name=False, **FREE)
        # no timer over the audio box while it is shown or hidden, nor over the notice while a clip is read
        quiet = dict(api_name=False, show_progress="hidden", **FREE)
        self.model.change(partial(chat_speech.boxes, engine), self.model, [audio, voice], **quiet)
        audio.change(partial(chat_audio.pending, settings), audio, [held_clip, notice], **quiet)
        page = [held, images, held_clip, clips, voice]  # the page's states (chat_checks.STATES), then the voice
        inputs = [self.model, compare, system, message, chat, base_chat, *widgets, *page, *self.tools.inputs()]
        outputs = [message, chat, base_chat, state, notice, images, clips, self.outcome]
        sent = (
            partial(chat_turns.after_send, settings),
            [self.outcome, message, image, audio],
            [image, audio, message, self.outcome],
        )
        # the picture and the clip are taken again as the send's first step: a Send pressed before
        # the upload's own change event has run still carries them
        taken = (partial(_taken, settings), [image, audio], [held, held_clip])
        # a speech model speaks, a speech-to-text one transcribes; others chat; one answer at a time
        # per page, the Message box left alone while it streams (chat_turns)
        talk = chat_turns.PageSend(partial(chat_send.send, engine)).send
        again = dict(trigger_mode="multiple", **FREE)  # a Send during a stream reaches PageSend (refused there)
        for trigger, name in ((send_btn.click, "chat"), (message.submit, False)):
            step = trigger(*taken, api_name=False, **FREE)
            step = step.then(talk, inputs, outputs, api_name=name, **again)
            step.then(*sent, api_name=False, **again)
        stop_btn.click(partial(chat_handlers.stop, engine), None, None, api_name="chat_stop", **FREE)
        cleared = [chat, base_chat, message, notice, images, image, clips, audio]
        clear_btn.click(chat_handlers.clear, None, cleared, api_name=False)


def _taken(settings: Settings, picture: object, clip: object) -> tuple:
    """(the picture's data: URL, the clip's) as a send takes them (``chat_images.taken``,
    ``chat_audio.taken``)."""
    return chat_images.taken(picture), chat_audio.taken(settings, clip)

"""A local base's chats encoded with its own chat template, as `apply_chat_template`
renders them, so a model trains on the turns it will be prompted with: the conversation
rendered and tokenized once, and each assistant turn's tokens found as those its prefixes
render to (special tokens in the text are the tokenizer's)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Messages = Sequence[tuple[str, str]]
# One chat as token ids with, for each, whether the loss sees it.
Chat = Callable[[Messages, str], tuple[list[int], list[bool]]]


def encoder(tokenizer: Any) -> Chat | None:
    """How the base's template encodes a chat; None when its tokenizer has no template."""
    if not tokenizer.chat_template:
        return None

    def render(turns: Messages, prompt: bool = False) -> str:
        if not turns:
            return ""
        chat = [{"role": role, "content": content} for role, content in turns]
        text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=prompt)
        return str(text)

    def ids(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    def encode(messages: Messages, loss_mask: str) -> tuple[list[int], list[bool]]:
        whole = ids(render(messages))
        trained = [loss_mask == "full_sequence"] * len(whole)
        for i, (role, _) in enumerate(messages):
            if role == "assistant":
                begin = shared(ids(render(messages[:i], prompt=True)), whole)
                last = i == len(messages) - 1
                end = len(whole) if last else shared(ids(render(messages[: i + 1])), whole)
                trained[begin:end] = [True] * (end - begin)
        return whole, trained

    return encode


def shared(prefix: list[int], whole: list[int]) -> int:
    """How many leading tokens `prefix` and `whole` share: where a turn's rendering leaves
    the whole conversation's (a template may close a conversation its own way)."""
    pairs = zip(prefix, whole, strict=False)
    return next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(prefix), len(whole)))

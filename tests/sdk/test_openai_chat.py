"""Chat through the gateway with the official ``openai`` package.

Expected values follow the simulator's documented rules
(tests/simulator/src/chat/mod.rs): one word is one token; prompt tokens are
Σ (words + 1) over the messages; cached tokens are the system messages'
tokens; the reply starts ``Simulated reply to:`` and is deterministic for a
given last user message; reasoning models think 8 words first.
"""

from __future__ import annotations

import re

import openai
import pytest
from openai import OpenAI

SYSTEM = "You are a terse and helpful assistant."
USER = "Name three primary colours please"
MESSAGES = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": USER},
]
SYSTEM_TOKENS = len(SYSTEM.split()) + 1
PROMPT_TOKENS = SYSTEM_TOKENS + len(USER.split()) + 1
REASONING = "Let me think about this step by step."
REQUEST_ID_SUFFIX = re.compile(r"\(request id: req_[0-9A-Za-z]+\)$")


def error_object(e: openai.APIStatusError) -> dict:
    """The `error` object of the answer (the SDK unwraps it into `body`)."""
    body = e.body
    assert isinstance(body, dict), f"error body is not a JSON object: {body!r}"
    return body.get("error", body)


@pytest.fixture(scope="module")
def plain(client: OpenAI):
    """The non-streamed answer to MESSAGES, which the streamed tests compare to."""
    return client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)


def test_plain_chat(plain):
    assert plain.model == "gpt-4o-mini"
    assert plain.object == "chat.completion"
    assert len(plain.choices) == 1
    choice = plain.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    content = choice.message.content
    assert content and content.startswith("Simulated reply to:"), content

    usage = plain.usage
    assert usage is not None
    assert usage.prompt_tokens == PROMPT_TOKENS
    assert usage.completion_tokens == len(content.split())
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == SYSTEM_TOKENS
    assert usage.completion_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens == 0


def test_stream_with_include_usage(client: OpenAI, plain):
    chunks = list(
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks, "no chunks"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    assert "stop" in [ch.finish_reason for c in chunks for ch in c.choices]
    assert all(c.model == "gpt-4o-mini" for c in chunks)

    with_usage = [i for i, c in enumerate(chunks) if c.usage is not None]
    assert with_usage == [len(chunks) - 1], f"usage on chunks {with_usage} of {len(chunks)}"
    usage = chunks[-1].usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (
        plain.usage.prompt_tokens,
        plain.usage.completion_tokens,
        plain.usage.total_tokens,
    )
    assert usage.prompt_tokens_details.cached_tokens == SYSTEM_TOKENS


def test_stream_without_include_usage_folds_usage_into_last_chunk(client: OpenAI, plain):
    chunks = list(client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True))
    assert chunks, "no chunks"
    finishing = [i for i, c in enumerate(chunks) if any(ch.finish_reason for ch in c.choices)]
    assert finishing == [len(chunks) - 1], f"finish_reason on chunks {finishing} of {len(chunks)}"
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    assert last.usage is not None, "the finishing chunk carries no usage"
    assert last.usage.total_tokens == plain.usage.total_tokens
    assert last.usage.completion_tokens == plain.usage.completion_tokens
    assert all(c.usage is None for c in chunks[:-1]), "usage before the last chunk"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content


def test_reasoning_model_cut_by_max_tokens(client: OpenAI):
    resp = client.chat.completions.create(
        model="deepseek-reasoner",
        messages=[{"role": "user", "content": "Why is the sky blue?"}],
        max_tokens=8,
    )
    assert resp.model == "deepseek-reasoner"
    choice = resp.choices[0]
    assert choice.finish_reason == "length"
    assert choice.message.content == ""
    extra = choice.message.model_extra or {}
    reasoning = extra.get("reasoning_content", getattr(choice.message, "reasoning_content", None))
    assert reasoning == REASONING
    assert resp.usage.completion_tokens == 8
    assert resp.usage.completion_tokens_details.reasoning_tokens == 8


def test_unknown_model_is_not_found(client: OpenAI):
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(
            model="no-such-model",
            messages=[{"role": "user", "content": "hello"}],
        )
    assert info.value.status_code == 404
    err = error_object(info.value)
    assert err.get("code") == "model_not_found", err
    assert REQUEST_ID_SUFFIX.search(err.get("message", "")), err


def test_bad_key_is_rejected(gateway):
    bad = gateway.client(api_key="sk-not-a-real-key-0000000000000000")
    try:
        with pytest.raises(openai.AuthenticationError) as info:
            bad.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": "hello"}],
            )
    finally:
        bad.close()
    assert info.value.status_code == 401
    err = error_object(info.value)
    assert "Invalid token" in err.get("message", ""), err
    assert REQUEST_ID_SUFFIX.search(err.get("message", "")), err


def test_models_list(client: OpenAI):
    ids = [m.id for m in client.models.list()]
    assert "gpt-4o-mini" in ids
    assert "deepseek-reasoner" in ids


def test_models_retrieve(client: OpenAI):
    m = client.models.retrieve("gpt-4o-mini")
    assert (m.id, m.object) == ("gpt-4o-mini", "model")
    with pytest.raises(openai.NotFoundError) as info:
        client.models.retrieve("no-such-model")
    assert error_object(info.value).get("code") == "model_not_found"

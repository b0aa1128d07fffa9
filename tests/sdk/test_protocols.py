"""Every client protocol through its official SDK, against each of the three
vendor adapters (the simulator speaks all three vendor APIs), with the
account's charge for each call checked against the usage the vendor
reported, at the model's prices in tests/demo/gateway.toml.

- ``openai``: chat, legacy completions, responses (plain, and
  ``responses.stream()`` to its final response);
- ``anthropic``: messages plain and ``messages.stream()``, with a tool call,
  through the root URL;
- ``google-genai``: ``generate_content`` and ``generate_content_stream``
  with ``api_version="v1beta"``, through the root URL;
- a stream the vendor fails after its text: each SDK yields the text, then
  raises its own error with the vendor's message.
"""

from __future__ import annotations

import math
import time
import tomllib

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import errors as gerrors
from google.genai import types as gtypes

from conftest import TEMPLATE

# model -> the vendor its channel speaks (tests/demo/gateway.toml).
MODELS = {
    "gpt-4o-mini": "openai",
    "claude-sonnet-4-5": "anthropic",
    "gemini-2.5-flash": "gemini",
}
QUESTION = "Name three primary colours please"


def _prices() -> dict[str, tuple[int, int, int, int]]:
    """Quota units per 1M tokens: input, output, cache read, cache write."""
    cfg = tomllib.loads(TEMPLATE.read_text())
    per_cny = cfg.get("billing", {}).get("quota_per_cny", 500_000)
    out = {}
    for m in cfg["models"]:
        q = lambda key, default=None: round(float(m.get(key, default)) * per_cny)  # noqa: E731
        inp = q("input_price")
        out[m["name"]] = (
            inp,
            q("output_price"),
            q("cached_input_price", m["input_price"]),
            q("cache_write_price", m["input_price"]),
        )
    return out


PRICES = _prices()


def _canonical(vendor: str, u: dict) -> tuple[int, int, int, int]:
    """The vendor's own usage in canonical terms: (input incl. cache, output, read, write)."""
    if vendor == "openai":
        return (u["prompt_tokens"], u["completion_tokens"],
                (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0), 0)
    if vendor == "anthropic":
        r, w = u.get("cache_read_input_tokens", 0), u.get("cache_creation_input_tokens", 0)
        return (u["input_tokens"] + r + w, u["output_tokens"], r, w)
    return (u["promptTokenCount"], u.get("candidatesTokenCount", 0) + u.get("thoughtsTokenCount", 0),
            u.get("cachedContentTokenCount", 0), 0)


def _cost(model: str, usage: tuple[int, int, int, int]) -> int:
    pi, po, pr, pw = PRICES[model]
    inp, out, read, write = usage
    part = lambda tokens, price: math.ceil(tokens * price / 1_000_000)  # noqa: E731
    return part(inp - read - write, pi) + part(read, pr) + part(write, pw) + part(out, po)


def check_charge(gateway, model: str) -> None:
    """The newest usage row of the account is the last call: its cost must be
    the vendor's reported usage at the model's prices."""
    sim = httpx.get(f"{gateway.sim_url}/_sim/requests", timeout=10).json()
    reported = sim[-1]["usage"]
    assert reported, f"the simulator reported no usage: {sim[-1]}"
    expected = _cost(model, _canonical(MODELS[model], reported))
    row = gateway.last_row()
    assert row["model"] == model, row
    assert row["cost"] == expected, (row, reported)
    assert expected > 0


@pytest.fixture(scope="module")
def anthropic_client(gateway):
    # The SDK's own client class (newer releases are built on httpx2), with
    # proxies from the environment ignored: everything here is loopback.
    c = anthropic.Anthropic(
        base_url=gateway.root_url,
        api_key=gateway.api_key,
        max_retries=0,
        timeout=20.0,
        http_client=anthropic.DefaultHttpxClient(trust_env=False),
    )
    yield c
    c.close()


@pytest.fixture(scope="module")
def genai_client(gateway):
    return genai.Client(
        api_key=gateway.api_key,
        http_options=gtypes.HttpOptions(
            base_url=gateway.root_url, api_version="v1beta", client_args={"trust_env": False}),
    )


@pytest.mark.parametrize("model", MODELS)
def test_openai_chat_plain_and_streamed(client, gateway, model):
    r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": QUESTION}])
    assert r.model == model
    assert r.choices[0].message.content.startswith(f"Simulated reply to: {QUESTION}.")
    assert r.choices[0].finish_reason == "stop"
    check_charge(gateway, model)
    chunks = list(client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": QUESTION}],
        stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == r.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == r.usage.completion_tokens
    check_charge(gateway, model)


@pytest.mark.parametrize("model", MODELS)
def test_openai_legacy_completions(client, gateway, model):
    r = client.completions.create(model=model, prompt=QUESTION, max_tokens=200)
    assert r.object == "text_completion"
    assert r.choices[0].text.startswith(f"Simulated reply to: {QUESTION}.")
    check_charge(gateway, model)
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model=model, prompt=QUESTION, max_tokens=200, stream=True) if c.choices)
    assert streamed == r.choices[0].text
    check_charge(gateway, model)


@pytest.mark.parametrize("model", MODELS)
def test_openai_responses_plain_and_stream(client, gateway, model):
    r = client.responses.create(model=model, input=QUESTION, instructions="Be brief")
    assert r.status == "completed"
    assert r.output_text.startswith(f"Simulated reply to: {QUESTION}.")
    check_charge(gateway, model)
    deltas = []
    with client.responses.stream(model=model, input=QUESTION, instructions="Be brief") as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    assert "".join(deltas) == r.output_text == final.output_text
    assert final.usage.output_tokens == r.usage.output_tokens
    check_charge(gateway, model)


@pytest.mark.parametrize("model", MODELS)
def test_openai_responses_tool_call(client, gateway, model):
    tools = [{"type": "function", "name": "get_weather", "description": "Weather",
              "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}]
    r = client.responses.create(model=model, input="weather in Paris", tools=tools)
    calls = [o for o in r.output if o.type == "function_call"]
    assert [c.name for c in calls] == ["get_weather"]
    assert calls[0].arguments == '{"query":"weather in Paris"}'
    check_charge(gateway, model)


@pytest.mark.parametrize("model", MODELS)
def test_anthropic_messages_with_a_tool_call(anthropic_client, gateway, model):
    tools = [{"name": "get_weather", "description": "Weather",
              "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}}}]
    msg = anthropic_client.messages.create(
        model=model, max_tokens=512, tools=tools,
        messages=[{"role": "user", "content": "weather in Paris"}])
    assert msg.model == model
    assert msg.stop_reason == "tool_use"
    call = next(b for b in msg.content if b.type == "tool_use")
    assert call.name == "get_weather" and call.input == {"query": "weather in Paris"}
    check_charge(gateway, model)
    # The result fed back; the vendor answers it.
    follow = anthropic_client.messages.create(
        model=model, max_tokens=512, tools=tools,
        messages=[{"role": "user", "content": "weather in Paris"},
                  {"role": "assistant", "content": msg.content},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                                "content": "sunny and mild"}]}])
    assert follow.stop_reason == "end_turn"
    assert follow.content[0].text.startswith("Simulated reply to: sunny and mild.")
    check_charge(gateway, model)


@pytest.mark.parametrize("model", MODELS)
def test_anthropic_messages_streamed(anthropic_client, gateway, model):
    with anthropic_client.messages.stream(
        model=model, max_tokens=512, system="Be brief",
        messages=[{"role": "user", "content": QUESTION}],
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text.startswith(f"Simulated reply to: {QUESTION}.")
    assert final.content[0].text == text
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens > 0
    check_charge(gateway, model)


@pytest.mark.parametrize("model", MODELS)
def test_anthropic_streamed_tool_call(anthropic_client, gateway, model):
    tools = [{"name": "get_weather", "input_schema": {"type": "object"}}]
    with anthropic_client.messages.stream(
        model=model, max_tokens=512, tools=tools,
        messages=[{"role": "user", "content": "weather in Paris"}],
    ) as stream:
        final = stream.get_final_message()
    call = next(b for b in final.content if b.type == "tool_use")
    assert call.input == {"query": "weather in Paris"}
    assert final.stop_reason == "tool_use"
    check_charge(gateway, model)


@pytest.mark.parametrize("model", MODELS)
def test_google_genai_generate_and_stream(genai_client, gateway, model):
    r = genai_client.models.generate_content(
        model=model, contents=QUESTION,
        config=gtypes.GenerateContentConfig(system_instruction="Be brief"))
    assert r.text.startswith(f"Simulated reply to: {QUESTION}.")
    assert r.candidates[0].finish_reason == gtypes.FinishReason.STOP
    assert r.usage_metadata.prompt_token_count > 0
    check_charge(gateway, model)
    streamed = "".join(c.text or "" for c in genai_client.models.generate_content_stream(
        model=model, contents=QUESTION,
        config=gtypes.GenerateContentConfig(system_instruction="Be brief")))
    assert streamed == r.text
    check_charge(gateway, model)


@pytest.mark.parametrize("model", MODELS)
def test_google_genai_function_call_and_thinking(genai_client, gateway, model):
    weather = gtypes.FunctionDeclaration(
        name="get_weather", description="Weather",
        parameters_json_schema={"type": "object", "properties": {"query": {"type": "string"}}})
    r = genai_client.models.generate_content(
        model=model, contents="weather in Paris",
        config=gtypes.GenerateContentConfig(
            tools=[gtypes.Tool(function_declarations=[weather])],
            thinking_config=gtypes.ThinkingConfig(include_thoughts=True, thinking_budget=1024)))
    calls = r.function_calls
    assert calls and calls[0].name == "get_weather"
    assert calls[0].args == {"query": "weather in Paris"}
    thoughts = [p.text for p in r.candidates[0].content.parts if p.thought]
    assert thoughts == ["Let me think about this step by step."]
    check_charge(gateway, model)


def test_google_genai_default_api_version_lands_too(gateway):
    # Newer google-genai releases default to `v1` rather than `v1beta`.
    c = genai.Client(
        api_key=gateway.api_key,
        http_options=gtypes.HttpOptions(base_url=gateway.root_url, client_args={"trust_env": False}),
    )
    r = c.models.generate_content(model="gemini-2.5-flash", contents=QUESTION)
    assert r.text.startswith(f"Simulated reply to: {QUESTION}.")
    check_charge(gateway, "gemini-2.5-flash")


def test_google_genai_lists_the_text_models(genai_client):
    names = [m.name for m in genai_client.models.list()]
    for model in MODELS:
        assert f"models/{model}" in names


# What each vendor's stream says when it fails (the simulator's `error_midway`).
VENDOR_FAILURE = {
    "openai": "The server is overloaded",
    "anthropic": "Overloaded",
    "gemini": "The model is overloaded",
}


@pytest.mark.parametrize("model", MODELS)
def test_a_stream_failing_after_its_text_raises_each_sdks_error(
        client, anthropic_client, genai_client, gateway, model):
    prompt = f"{QUESTION} [[sim:error_midway]]"
    reported = f"the upstream reported an error mid-answer: {VENDOR_FAILURE[MODELS[model]]}"
    opening = f"Simulated reply to: {QUESTION}."

    def check(text: list[str], error: Exception) -> None:
        assert "".join(text).startswith(opening)
        assert reported in str(error), error
        row = gateway.last_row()
        assert (row["model"], row["status"], row["error"]) == (model, 502, reported), row
        # Billed for the text that went out, counted by the gateway.
        assert row["counted_by_gateway"] and row["output_tokens"] > 0 and row["cost"] > 0, row

    text: list[str] = []
    with pytest.raises(openai.APIError) as e:
        for c in client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": prompt}], stream=True):
            text.extend(ch.delta.content or "" for ch in c.choices)
    check(text, e.value)

    text = []
    with pytest.raises(anthropic.APIStatusError) as e:
        with anthropic_client.messages.stream(
                model=model, max_tokens=512, messages=[{"role": "user", "content": prompt}],
        ) as stream:
            text.extend(stream.text_stream)
    check(text, e.value)

    text = []
    with pytest.raises(gerrors.ServerError) as e:
        for c in genai_client.models.generate_content_stream(model=model, contents=prompt):
            text.append(c.text or "")
    check(text, e.value)

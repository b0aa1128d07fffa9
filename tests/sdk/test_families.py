"""The endpoint families through the official SDKs, against the demo config:
openai (embeddings in both encodings, images, speech, transcription of a WAV
file made here, moderations), raw HTTP for rerank, and google-genai's
``embed_content``. Each call's charge is checked against the model's meter
or token prices in tests/demo/gateway.toml (1 CNY = 500 000 quota)."""

from __future__ import annotations

import base64
import io
import json
import math
import wave

import httpx
import pytest
from google import genai
from google.genai import types as gtypes
from openai import OpenAI


def last_sim_request(gateway) -> dict:
    return httpx.get(f"{gateway.sim_url}/_sim/requests", timeout=10).json()[-1]


def wav_bytes(seconds: float, rate: int = 16_000) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\0\0" * int(seconds * rate))
    return out.getvalue()


def test_embeddings_float_and_base64_agree_and_are_billed_by_tokens(client: OpenAI, gateway):
    # The SDK asks for base64 by default and decodes it itself.
    default = client.embeddings.create(model="text-embedding-3-small", input="hello big world", dimensions=16)
    floats = client.embeddings.create(
        model="text-embedding-3-small", input=["hello big world"], dimensions=16, encoding_format="float")
    assert len(default.data[0].embedding) == 16
    assert default.data[0].embedding == pytest.approx(floats.data[0].embedding, rel=1e-6)
    assert floats.usage.prompt_tokens == 3
    row = gateway.last_row()
    assert row["model"] == "text-embedding-3-small"
    assert row["cost"] == math.ceil(3 * 70_000 / 1_000_000)


def test_images_come_back_as_real_pngs_and_cost_their_price(client: OpenAI, gateway):
    r = client.images.generate(model="gpt-image-1", prompt="an otter", n=2, size="1024x1024",
                               quality="hd", response_format="b64_json")
    assert len(r.data) == 2
    assert base64.b64decode(r.data[0].b64_json)[:8] == b"\x89PNG\r\n\x1a\n"
    assert gateway.last_row()["cost"] == 2 * 300_000
    u = client.images.generate(model="gpt-image-1", prompt="an otter", response_format="url")
    assert u.data[0].url.endswith(".png")
    png = httpx.get(u.data[0].url, timeout=10).content
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert gateway.last_row()["cost"] == 150_000


@pytest.mark.parametrize("fmt,magic", [("wav", b"RIFF"), ("mp3", None), ("flac", b"fLaC"), ("opus", b"OggS")])
def test_speech_is_audio_of_the_requested_format(client: OpenAI, gateway, fmt, magic):
    text = "Today is a wonderful day"
    audio = client.audio.speech.create(model="tts-1", voice="alloy", input=text, response_format=fmt)
    data = audio.content
    assert len(data) > 100
    if magic:
        assert data[:len(magic)] == magic
    assert gateway.last_row()["cost"] == math.ceil(len(text) * 54_000_000 / 1_000_000)


def test_a_transcription_of_a_wav_file_is_billed_by_its_seconds(client: OpenAI, gateway):
    audio = wav_bytes(3.0)
    t = client.audio.transcriptions.create(model="whisper-1", file=("speech.wav", audio, "audio/wav"))
    assert t.text == "Simulated transcription of 3.0 seconds of audio."
    assert json.loads(last_sim_request(gateway)["body"])["file"]["size"] == len(audio)
    assert gateway.last_row()["cost"] == math.ceil(3_000 * 21_500 / 60_000)
    srt = client.audio.transcriptions.create(model="whisper-1", file=("speech.wav", audio, "audio/wav"),
                                             response_format="srt")
    assert "-->" in srt
    verbose = client.audio.transcriptions.create(model="whisper-1", file=("speech.wav", audio, "audio/wav"),
                                                 response_format="verbose_json")
    assert verbose.duration == pytest.approx(3.0)


def test_moderations_flag_and_are_free(client: OpenAI, gateway):
    r = client.moderations.create(input=["I love you", "violence"])
    assert [x.flagged for x in r.results] == [False, True]
    assert r.results[1].categories.violence is True
    assert gateway.last_row()["cost"] == 0


def test_rerank_over_raw_http(gateway):
    r = httpx.post(
        f"{gateway.base_url}/rerank",
        headers={"Authorization": f"Bearer {gateway.api_key}"},
        json={"model": "rerank-v1", "query": "capital of france", "top_n": 2, "return_documents": True,
              "documents": ["Berlin is in Germany", {"text": "Paris is the capital of France"}, "Bananas"]},
        timeout=20,
    )
    assert r.status_code == 200, r.text
    v = r.json()
    assert [x["index"] for x in v["results"]][0] == 1
    assert v["results"][0]["document"]["text"] == "Paris is the capital of France"
    tokens = v["usage"]["total_tokens"]
    assert gateway.last_row()["cost"] == 7_200 + math.ceil(tokens * 50_000 / 1_000_000)


def test_google_genai_embed_content(gateway):
    c = genai.Client(
        api_key=gateway.api_key,
        http_options=gtypes.HttpOptions(base_url=gateway.root_url, api_version="v1beta",
                                        client_args={"trust_env": False}),
    )
    r = c.models.embed_content(model="gemini-embedding-001", contents=["hello big world", "hi"],
                               config=gtypes.EmbedContentConfig(output_dimensionality=8))
    assert [len(e.values) for e in r.embeddings] == [8, 8]
    # Gemini reports no usage: the adapter counts a token per 4 characters (4 + 1).
    assert gateway.last_row()["cost"] == math.ceil(5 * 540_000 / 1_000_000)

"""The video workflow with the official ``openai`` package: the SDK's own
``videos.create_and_poll`` (which sends multipart/form-data and honours the
``openai-poll-after-ms`` header), then ``download_content``, and the file
checked with ffprobe: a real MP4 lasting the seconds asked for."""

from __future__ import annotations

import json
import shutil
import subprocess

import httpx
import pytest
from openai import OpenAI


def test_create_and_poll_then_download_a_playable_mp4(client: OpenAI, gateway, tmp_path) -> None:
    # Top up so 8 s of video-fast (11.2 CNY) fits beside the 5 CNY trial.
    topup = httpx.post(
        f"{gateway.admin_url}/admin/v1/accounts/{gateway.account_id}/topup",
        headers={"authorization": f"Bearer {gateway.admin_key}"},
        json={"cny": "20"},
        timeout=10,
    )
    assert topup.status_code == 200, topup.text

    video = client.videos.create_and_poll(
        model="video-fast", prompt="a lighthouse at dawn", seconds="8", size="1280x720"
    )
    assert video.status == "completed", video
    assert video.id.startswith("task_")
    extra = video.model_extra or {}
    assert extra["actual_duration"] == 8
    assert extra["billing"]["settled"] == pytest.approx(11.2)
    assert video.expires_at == video.completed_at + 86_400

    content = client.videos.download_content(video.id)
    path = tmp_path / "video.mp4"
    content.write_to_file(path)
    data = path.read_bytes()
    assert data[4:8] == b"ftyp"

    ffprobe = shutil.which("ffprobe")
    if ffprobe is None:
        pytest.skip("ffprobe is not installed; .ci/run installs ffmpeg")
    probe = subprocess.run(
        [ffprobe, "-v", "error", "-show_entries", "format=duration:stream=codec_type", "-of", "json", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    info = json.loads(probe.stdout)
    assert abs(float(info["format"]["duration"]) - 8.0) < 0.1, info
    assert any(s["codec_type"] == "video" for s in info["streams"]), info


def test_validation_errors_reach_the_sdk_as_400(client: OpenAI) -> None:
    import openai

    with pytest.raises(openai.BadRequestError) as e:
        client.videos.create(model="video-fast", prompt="too long", seconds="16")  # type: ignore[arg-type]
    assert "invalid_duration" in str(e.value)

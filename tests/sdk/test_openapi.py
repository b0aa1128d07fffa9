"""The OpenAPI document as a contract.

``GET /v1/openapi.json`` is read without a token and checked against the
OpenAPI 3.1 schema (``openapi-spec-validator``); then schemathesis, a
property-based API tester, generates requests from the document — the
documented examples, the boundary cases of each schema, and random valid and
invalid bodies, parameters and headers — sends them to the real gateway
(in front of the simulator, with a funded token of its own account), and
checks every answer: no 5xx, a documented status, a documented content type,
and a body that matches the documented schema.

The run is bounded and repeatable: a fixed seed, no example database, at
most ``MAX_EXAMPLES`` cases per operation (about two minutes on two cores).
``OPENAPI_MAX_EXAMPLES`` raises the bound for a longer local run.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import httpx
from openapi_spec_validator import validate

from conftest import _admin

MAX_EXAMPLES = int(os.environ.get("OPENAPI_MAX_EXAMPLES", "12"))
SEED = 20261123
CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_schema_conformance",
    ]
)
RUN_TIMEOUT_S = 600


def _document(stack) -> dict:
    with httpx.Client(trust_env=False, timeout=20.0) as http:
        resp = http.get(f"{stack.base_url}/openapi.json")  # no token
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    return resp.json()


def test_the_document_is_valid_openapi_3_1_at_version_1_1_0(gateway):
    doc = _document(gateway)
    assert doc["openapi"] == "3.1.0"
    assert doc["info"]["version"] == "1.1.0"
    validate(doc)  # raises on any violation of the OpenAPI 3.1 schema
    schemes = doc["components"]["securitySchemes"]
    assert schemes["bearer"] == {"type": "http", "scheme": "bearer", "description": schemes["bearer"]["description"]}
    assert schemes["x-api-key"]["in"] == "header" and schemes["x-api-key"]["name"] == "x-api-key"
    assert schemes["x-goog-api-key"]["in"] == "header"


def test_a_property_based_run_finds_no_answer_that_contradicts_the_document(gateway, tmp_path: pathlib.Path):
    env = {**os.environ, "NO_COLOR": "1", "GATEWAY_ADMIN_URL": gateway.admin_url, "GATEWAY_ADMIN_KEY": gateway.admin_key}
    # Its own account: the video submissions it makes count against that
    # account's caps, not the other suites'.
    account = _admin(env, "account", "create", "--name", "openapi-property", "--trial-credit", "100000")
    token = _admin(env, "token", "create", "--account", account["id"], "--name", "openapi-property")
    schemathesis = pathlib.Path(sys.executable).parent / "schemathesis"
    root = gateway.root_url
    cmd = [
        str(schemathesis),
        "--config-file",
        str(pathlib.Path(__file__).with_name("schemathesis.toml")),
        "run",
        f"{root}/v1/openapi.json",
        "--url",
        root,
        "--header",
        f"Authorization: Bearer {token['key']}",
        "--checks",
        CHECKS,
        "--phases",
        "examples,coverage,fuzzing",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        str(SEED),
        "--generation-database",
        "none",
        "--generation-with-security-parameters",
        "false",
        "--workers",
        "1",
        "--request-timeout",
        "30",
        "--suppress-health-check",
        "all",
        "--no-color",
        "--report",
        "junit",
        "--report-dir",
        str(tmp_path),
    ]
    out = subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL, cwd=tmp_path
    )
    report = out.stdout + out.stderr
    log = tmp_path / "schemathesis.txt"
    log.write_text(report)
    assert out.returncode == 0, f"schemathesis found problems (whole report: {log}):\n{report[-30000:]}"
    # It ran the operations (a run that tested nothing passes vacuously).
    assert "passed" in report.lower(), report[-4000:]

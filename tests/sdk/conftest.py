"""The gateway as a user meets it: real processes, driven by the official SDK.

A session-scoped fixture, ``gateway``, starts ``target/release/upstream-sim``
and ``target/release/gateway`` on free loopback ports (each binds port 0 and
the fixture reads the address it got from its ready line, so no port can be
taken in between), with a config derived from ``tests/demo/gateway.toml`` in
a temporary folder (the rate limit raised; the web console on a port-0
listener, mailing to the simulator's SMTP sink), creates an account and a token
through ``gateway admin``, and yields a :class:`Stack`. On teardown both
processes are stopped; if any test failed, the tails of their logs are shown
in the terminal summary.

Run with ``make test-sdk`` (or ``.venv/bin/python -m pytest -q tests/sdk``
after ``make build`` and ``make venv``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import secrets
import subprocess
import tempfile
import time
import tomllib
from typing import Iterator

import httpx
import pytest
from openai import OpenAI

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = ROOT / "target" / "release"
TEMPLATE = ROOT / "tests" / "demo" / "gateway.toml"
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0  # the gateway gives open streams up to 10 s
CLI_TIMEOUT_S = 30.0
LOG_TAIL_LINES = 40

SIM_READY = re.compile(r"upstream-sim listening on (http://\S+)")
GATEWAY_READY = re.compile(r"gateway listening on (http://\S+) \(admin on (http://[^)\s]+)\)")
SMTP_READY = re.compile(r"upstream-sim SMTP sink on 127\.0\.0\.1:(\d+)")
CONSOLE_READY = re.compile(r"web console on (http://\S+)")

# Log tails gathered at teardown, printed by pytest_terminal_summary on failure.
_log_tails: list[tuple[str, str]] = []


@dataclasses.dataclass(frozen=True)
class Stack:
    base_url: str  # http://127.0.0.1:PORT/v1
    api_key: str
    admin_url: str
    admin_key: str
    sim_url: str  # http://127.0.0.1:PORT (no /v1)
    sim_key: str
    account_id: str
    console_url: str  # http://127.0.0.1:PORT, the web console

    @property
    def root_url(self) -> str:
        """The address without `/v1`, which the Anthropic and Google SDKs take."""
        return self.base_url.removesuffix("/v1")

    def client(self, api_key: str | None = None) -> OpenAI:
        """An SDK client for this gateway: no retries (a failure shows at
        once), no proxies from the environment (everything is loopback)."""
        return OpenAI(
            base_url=self.base_url,
            api_key=api_key or self.api_key,
            max_retries=0,
            timeout=20.0,
            http_client=httpx.Client(trust_env=False, timeout=20.0),
        )

    def last_row(self) -> dict:
        """The account's newest usage row: the last call's."""
        rows = httpx.get(
            f"{self.admin_url}/admin/v1/usage",
            params={"account": self.account_id, "limit": 1},
            headers={"Authorization": f"Bearer {self.admin_key}"},
            timeout=10,
        ).json()["data"]
        assert rows, "a usage row for the call"
        return rows[0]


def _check_prerequisites() -> None:
    missing = [str(BIN / b) for b in ("gateway", "upstream-sim") if not (BIN / b).is_file()]
    if not list((ROOT / "build" / "adapters").glob("*.wasm")):
        missing.append(str(ROOT / "build" / "adapters" / "*.wasm"))
    template = tomllib.loads(TEMPLATE.read_text())
    for model in template.get("models", []):
        for policy in model.get("policies", []):
            path = ROOT / "build" / "policies" / f"{policy}.wasm"
            if not path.is_file():
                missing.append(str(path))
    if missing:
        pytest.exit(
            "the SDK suite needs the built gateway; missing: "
            + ", ".join(missing)
            + ". Run `make build` first.",
            returncode=2,
        )


def _toml_str(s: str) -> str:
    # A JSON string is a valid TOML basic string for anything a path holds.
    return json.dumps(s)


def _write_config(tmp: pathlib.Path, sim_url: str, smtp_port: str) -> pathlib.Path:
    """tests/demo/gateway.toml with loopback port-0 listeners, the given
    simulator and SMTP sink, absolute paths into the repo and a rate limit
    no test hits."""
    top = {
        "listen": "127.0.0.1:0",
        "data_dir": str(tmp / "data"),
        "adapters_dir": str(ROOT / "build" / "adapters"),
        "policies_dir": str(ROOT / "build" / "policies"),
    }
    out, section = [], None
    for line in TEMPLATE.read_text().splitlines():
        header = re.match(r"\s*\[\[?\s*([\w.-]+)\s*\]\]?", line)
        if header:
            section = header.group(1)
        key = re.match(r"\s*([\w-]+)\s*=", line)
        if key:
            k = key.group(1)
            if section is None and k in top:
                line = f"{k} = {_toml_str(top[k])}"
            elif section in ("admin", "console") and k == "listen":
                line = 'listen = "127.0.0.1:0"'
            elif section == "console.smtp" and k == "port":
                line = f"port = {int(smtp_port)}"
            elif section == "channels" and k == "base_url":
                # Keep the path (OpenAI and Anthropic channels end in /v1, Gemini's is the root).
                suffix = "/v1" if re.search(r'/v1"\s*(#.*)?$', line) else ""
                line = f"base_url = {_toml_str(sim_url + suffix)}"
            elif section == "limits":
                raise RuntimeError(f"{TEMPLATE} now has a [limits] table; teach conftest.py to merge into it")
        out.append(line)
    text = "\n".join(out) + "\n\n[limits]\nrate_limit_requests = 1000000\n"

    parsed = tomllib.loads(text)  # also proves the result is valid TOML
    problems = [
        what
        for what, ok in [
            ("listen", parsed.get("listen") == "127.0.0.1:0"),
            ("[admin] listen", parsed.get("admin", {}).get("listen") == "127.0.0.1:0"),
            ("[console] listen", parsed.get("console", {}).get("listen") == "127.0.0.1:0"),
            ("[console.smtp] port", parsed.get("console", {}).get("smtp", {}).get("port") == int(smtp_port)),
            ("data_dir", parsed.get("data_dir") == top["data_dir"]),
            ("channels", bool(parsed.get("channels"))),
            ("[[channels]] base_url", all(c.get("base_url") in (sim_url, f"{sim_url}/v1") for c in parsed.get("channels", []))),
        ]
        if not ok
    ]
    if problems:
        raise RuntimeError(f"cannot derive the test config from {TEMPLATE}: wrong {', '.join(problems)}")

    path = tmp / "gateway.toml"
    path.write_text(text)
    return path


def _tail(path: pathlib.Path, n: int = LOG_TAIL_LINES) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as e:
        return f"(cannot read {path}: {e})"
    return "\n".join(lines[-n:]) or "(empty)"


def _wait_ready(proc: subprocess.Popen, log: pathlib.Path, pattern: re.Pattern, name: str) -> re.Match:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        m = pattern.search(log.read_text(errors="replace"))
        if m:
            return m
        if proc.poll() is not None:
            raise RuntimeError(f"the {name} exited with status {proc.returncode} while starting; {log}:\n{_tail(log)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the {name} was not ready within {READY_TIMEOUT_S:.0f} s; {log}:\n{_tail(log)}")
        time.sleep(0.05)


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def _admin(env: dict[str, str], *args: str) -> dict:
    out = subprocess.run(
        [str(BIN / "gateway"), "admin", "--json", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )
    if out.returncode != 0:
        raise RuntimeError(f"`gateway admin {' '.join(args)}` failed ({out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)


@pytest.fixture(scope="session")
def gateway(request: pytest.FixtureRequest) -> Iterator[Stack]:
    _check_prerequisites()
    admin_key = "adm-" + secrets.token_hex(20)
    sim_key = "sim-" + secrets.token_hex(20)
    env = {
        **os.environ,
        "NO_COLOR": "1",
        "GATEWAY_ADMIN_KEY": admin_key,
        "SIM_API_KEY": sim_key,
        "UPSTREAM_SIM_API_KEY": sim_key,
    }
    env.pop("GATEWAY_CONFIG", None)

    with tempfile.TemporaryDirectory(prefix="gateway-sdk-") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        sim_log, gw_log = tmp / "simulator.log", tmp / "gateway.log"
        sim = gw = None
        try:
            with sim_log.open("wb") as f:
                sim = subprocess.Popen(
                    [str(BIN / "upstream-sim"), "--listen", "127.0.0.1:0", "--smtp-listen", "127.0.0.1:0"],
                    stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, env=env,
                )
            sim_url = _wait_ready(sim, sim_log, SIM_READY, "simulator").group(1)
            smtp_port = _wait_ready(sim, sim_log, SMTP_READY, "simulator's SMTP sink").group(1)

            config = _write_config(tmp, sim_url, smtp_port)
            with gw_log.open("wb") as f:
                gw = subprocess.Popen(
                    [str(BIN / "gateway"), "serve", "--config", str(config)],
                    stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, env=env,
                )
            ready = _wait_ready(gw, gw_log, GATEWAY_READY, "gateway")
            public_url, admin_url = ready.group(1), ready.group(2)
            console_url = _wait_ready(gw, gw_log, CONSOLE_READY, "web console").group(1)

            admin_env = {**env, "GATEWAY_ADMIN_URL": admin_url}
            account = _admin(admin_env, "account", "create", "--name", "sdk-tests", "--trial-credit", "1000")
            token = _admin(admin_env, "token", "create", "--account", account["id"], "--name", "sdk-tests")

            yield Stack(
                base_url=f"{public_url}/v1",
                api_key=token["key"],
                admin_url=admin_url,
                admin_key=admin_key,
                sim_url=sim_url,
                sim_key=sim_key,
                account_id=account["id"],
                console_url=console_url,
            )
        except RuntimeError as e:
            pytest.fail(str(e), pytrace=False)
        finally:
            _stop(gw)
            _stop(sim)
            if request.session.testsfailed:
                _log_tails[:] = [("gateway", _tail(gw_log)), ("simulator", _tail(sim_log))]


@pytest.fixture(scope="session")
def client(gateway: Stack) -> Iterator[OpenAI]:
    c = gateway.client()
    yield c
    c.close()


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001
    for name, tail in _log_tails:
        terminalreporter.write_sep("-", f"{name} log (last {LOG_TAIL_LINES} lines)")
        terminalreporter.write_line(tail)

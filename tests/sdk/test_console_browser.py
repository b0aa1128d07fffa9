"""The web console in a real browser (issue 14 item 2): headless Chromium,
driven through Selenium and Debian's chromedriver, signs up, opens the link
the simulator's SMTP sink received, logs in, creates a token, makes a chat
call with that token through the openai SDK, and finds the call on the
usage page (a row and a bar of the chart). On the way it takes screenshots
of the main pages, the operator's too.

Screenshots go to ``build/screenshots/console`` (not tracked), or to the
folder in ``CONSOLE_SCREENSHOTS``: ``make console-screenshots`` sets it to
``docs/console``, the pictures the README shows, so a test run never changes
tracked files.

Needs ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them); the
test fails, saying so, when they are missing.
"""

from __future__ import annotations

import os
import pathlib
import re
import secrets
import shutil
import time
from typing import Iterator

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.wait import WebDriverWait

from conftest import ROOT, Stack

SHOTS = pathlib.Path(os.environ.get("CONSOLE_SCREENSHOTS") or ROOT / "build" / "screenshots" / "console")
PASSWORD = "a long browser password"
WAIT_S = 10.0


def _find(name: str, *candidates: str) -> str:
    for c in candidates:
        path = shutil.which(c)
        if path:
            return path
    pytest.fail(
        f"the browser test needs {name} (Debian: apt-get install chromium chromium-driver; .ci/run installs it)",
        pytrace=False,
    )


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    opts = Options()
    opts.binary_location = _find("chromium", "chromium", "chromium-browser")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", "--no-first-run", "--disable-extensions"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=_find("chromedriver", "chromedriver")), options=opts)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def _shot(driver: WebDriver, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    # The whole page, not just the window: as tall as its content.
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, max(700, min(int(height) + 20, 2400)))
    assert driver.save_screenshot(str(SHOTS / f"{name}.png")), name
    driver.set_window_size(1280, 900)


def _submit(driver: WebDriver, form_css: str, fields: dict[str, str]) -> None:
    form = driver.find_element(By.CSS_SELECTOR, form_css)
    for name, value in fields.items():
        box = form.find_element(By.NAME, name)
        box.clear()
        box.send_keys(value)
    _click_and_wait(driver, form.find_element(By.CSS_SELECTOR, "button[type=submit]"))


def _click_and_wait(driver: WebDriver, button) -> None:
    """Clicks a form's button and waits until the next page replaced this one.

    The old page is marked with a script variable, and the wait is over when
    the current document lacks the mark and has loaded. Holding an element of
    the old page and waiting for it to go stale does not work everywhere: some
    chromedriver versions answer a lookup of a node from a replaced document
    with an "unknown error" rather than a stale-element error. While the
    browser is between documents a script may fail too; the wait retries then.
    """
    driver.execute_script("window.__gatewayOldPage = true")
    button.click()
    WebDriverWait(driver, WAIT_S, ignored_exceptions=(WebDriverException,)).until(
        lambda d: d.execute_script("return !window.__gatewayOldPage && document.readyState === 'complete'")
    )


def _heading(driver: WebDriver) -> str:
    return driver.find_element(By.TAG_NAME, "h1").text


def _wait_for(what: str, check, timeout: float = WAIT_S):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}", pytrace=False)
        time.sleep(0.1)


def _mailed_link(stack: Stack, email: str) -> str:
    def find() -> str | None:
        mail = httpx.get(f"{stack.sim_url}/_sim/mail", timeout=5.0, trust_env=False).json()
        for m in reversed(mail):
            if email in m["to"]:
                found = re.search(r"http://\S+/verify\?token=[0-9a-f]+", m["body"])
                return found.group(0) if found else None
        return None

    return _wait_for(f"the e-mail to {email}", find)


def test_sign_up_link_login_token_call_and_usage_in_chromium(gateway: Stack, browser: WebDriver) -> None:
    d = browser
    email = f"browser-{secrets.token_hex(4)}@example.com"

    # Sign up: the account is not usable before the e-mailed link is opened.
    d.get(f"{gateway.console_url}/signup")
    _shot(d, "signup")
    _submit(d, "form[action='/signup']", {"email": email, "password": PASSWORD})
    assert _heading(d) == "Check your e-mail", d.page_source
    d.get(f"{gateway.console_url}/login")
    _submit(d, "form[action='/login']", {"email": email, "password": PASSWORD})
    assert _heading(d) == "Login failed", d.page_source

    link = _mailed_link(gateway, email)
    assert link.startswith(gateway.console_url), link
    d.get(link)
    assert _heading(d) == "Account activated", d.page_source

    # Log in: the session cookie is HttpOnly (invisible to scripts) and kept.
    d.get(f"{gateway.console_url}/login")
    _shot(d, "login")
    _submit(d, "form[action='/login']", {"email": email, "password": PASSWORD})
    assert _heading(d) == "Account", d.page_source
    cookie = d.get_cookie("gw_session")
    assert cookie and cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["secure"], cookie
    assert "gw_session" not in d.execute_script("return document.cookie")
    assert "5.000000 CNY" in d.find_element(By.ID, "trial").text

    # A token limited to one model, with a quota cap.
    d.get(f"{gateway.console_url}/tokens")
    form = d.find_element(By.ID, "new-token")
    form.find_element(By.NAME, "name").send_keys("browser")
    form.find_element(By.CSS_SELECTOR, "input[name=models][value='gpt-4o-mini']").click()
    form.find_element(By.NAME, "quota_cny").send_keys("2")
    _shot(d, "tokens-form")
    _click_and_wait(d, form.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    assert _heading(d) == "Token created", d.page_source
    key = d.find_element(By.ID, "new-key").text.strip()
    assert key.startswith("sk-"), key
    _shot(d, "token-created")

    # The key, through the official SDK.
    client = gateway.client(api_key=key)
    try:
        resp = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Hello from the browser test"}]
        )
    finally:
        client.close()
    assert resp.choices[0].message.content
    assert resp.usage and resp.usage.total_tokens > 0

    # The listing never shows the key again.
    d.get(f"{gateway.console_url}/tokens")
    assert key not in d.page_source
    assert "browser" in d.find_element(By.ID, "tokens").text
    _shot(d, "tokens")

    # The call on the usage page: its row, and a bar of the chart.
    d.get(f"{gateway.console_url}/usage")
    rows = d.find_elements(By.CSS_SELECTOR, "#usage-rows tbody tr")
    assert len(rows) == 1, d.page_source
    cells = rows[0].text
    assert "gpt-4o-mini" in cells and "browser" in cells, cells
    assert str(resp.usage.prompt_tokens) in cells and str(resp.usage.completion_tokens) in cells, cells
    bars = d.find_elements(By.CSS_SELECTOR, "svg rect.bar[data-calls='1']")
    assert len(bars) == 1, d.page_source
    _shot(d, "usage")
    d.get(f"{gateway.console_url}/account")
    _shot(d, "account")

    # Log out, then the operator's pages with the admin key.
    _click_and_wait(d, d.find_element(By.CSS_SELECTOR, "form[action='/logout'] button"))
    assert _heading(d) == "Log in"
    assert d.get_cookie("gw_session") is None
    d.get(f"{gateway.console_url}/operator/login")
    _submit(d, "form[action='/operator/login']", {"key": gateway.admin_key})
    assert _heading(d) == "Accounts", d.page_source
    assert email in d.find_element(By.ID, "accounts").text
    _shot(d, "operator-accounts")
    d.get(f"{gateway.console_url}/operator/channels")
    assert "simulator" in d.find_element(By.ID, "channels").text
    _shot(d, "operator-channels")
    d.get(f"{gateway.console_url}/operator/plugins")
    assert "openai" in d.find_element(By.ID, "plugins").text
    _shot(d, "operator-plugins")

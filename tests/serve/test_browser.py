"""The page in a real browser: headless Chromium from Debian's `chromium` package, driven by
Selenium through Debian's `chromium-driver` (browser builds cannot be downloaded here).

In CI (`CI` set) a browser that cannot start fails the run; elsewhere these tests skip and say
why. Screenshots are kept as test artifacts in $KB_TEST_ARTIFACTS (default: test-artifacts/).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serve.conftest import DATA, HOSTILE_ID, HOSTILE_SCRIPT, ROOT, LiveServer

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
LOG = DATA / "logs" / "multi_three_errors_worker.log"
DESKTOP = (1280, 900)
PHONE = (390, 844)  # a common phone's CSS pixels


def artifacts() -> Path:
    folder = Path(os.environ.get("KB_TEST_ARTIFACTS") or ROOT / "test-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the browser test must run in CI: {reason} (see .ci/run)")
    pytest.skip(f"headless Chromium unavailable: {reason}")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    for program in (CHROMIUM, CHROMEDRIVER):
        if not shutil.which(program):
            unavailable(f"{program} is not installed (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={DESKTOP[0]},{DESKTOP[1]}",
    ):
        options.add_argument(argument)
    try:
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    except Exception as exc:  # the driver's message says what is missing
        unavailable(str(exc).splitlines()[0])
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def full_page_screenshot(driver: Any, name: str, width: int) -> Path:
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, min(int(height), 6000))
    path = artifacts() / name
    driver.save_screenshot(str(path))
    return path


def paste_and_submit(driver: Any, server: LiveServer, text: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(server.url + "/")
    box = driver.find_element(By.ID, "log")
    # All at once, as a paste arrives (typing 7 KB key by key takes 20 s), then a keystroke.
    driver.execute_script("arguments[0].value = arguments[1];", box, text)
    box.send_keys("\n")
    driver.find_element(By.CSS_SELECTOR, "form.paste button[type=submit]").click()
    WebDriverWait(driver, 30).until(
        expected_conditions.presence_of_element_located((By.ID, "summary"))
    )


def test_a_pasted_log_shows_the_records_solutions(browser: Any, server: LiveServer) -> None:
    from selenium.webdriver.common.by import By

    expected = httpx.post(server.url + "/api/match", json={"log": LOG.read_text()}).json()
    assert expected["matches"], "the example log has known errors"
    browser.set_window_size(*DESKTOP)
    paste_and_submit(browser, server, LOG.read_text())

    shown = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "ol.solutions li")]
    for match in expected["matches"]:
        for solution in match["record"]["solutions"]:
            assert " ".join(solution.split()) in shown
    articles = browser.find_elements(By.CSS_SELECTOR, "article.error")
    assert len(articles) == len(expected["matches"])
    # kb.js ran under the Content-Security-Policy: it shows the copy buttons it wires up.
    copy = browser.find_element(By.CSS_SELECTOR, "article.error button.copy")
    assert copy.is_displayed()
    label = copy.text
    copy.click()
    from selenium.webdriver.support.ui import WebDriverWait

    # The clipboard answers through a promise: the label changes when it settles.
    WebDriverWait(browser, 10).until(lambda _driver: copy.text != label)
    assert copy.text in ("Copied", "Copy failed: open the markdown below")
    assert full_page_screenshot(browser, "serve-match-desktop.png", DESKTOP[0]).stat().st_size


def test_the_results_fit_a_phone_screen(browser: Any, server: LiveServer) -> None:
    browser.set_window_size(*PHONE)
    paste_and_submit(browser, server, LOG.read_text())
    overflow = browser.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0, f"the page scrolls sideways by {overflow}px on a phone"
    assert full_page_screenshot(browser, "serve-match-phone.png", PHONE[0]).stat().st_size


def test_a_script_in_a_records_documentation_is_shown_as_text(
    browser: Any, server: LiveServer
) -> None:
    from selenium.webdriver.common.by import By

    browser.set_window_size(*DESKTOP)
    browser.get(f"{server.url}/records/{HOSTILE_ID}")
    meaning = browser.find_element(By.CSS_SELECTOR, "section.part p").text
    assert HOSTILE_SCRIPT in meaning
    assert browser.execute_script("return window.kbPwned === undefined")
    scripts = browser.execute_script(
        "return Array.from(document.scripts).map(s => s.getAttribute('src'))"
    )
    assert scripts == ["/static/kb.js"]
    assert browser.find_elements(By.TAG_NAME, "img") == []
    full_page_screenshot(browser, "serve-hostile-record.png", DESKTOP[0])

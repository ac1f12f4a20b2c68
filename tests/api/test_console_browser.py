"""The memory console at /console, driven in a real headless Chromium (Selenium).

Walks what a person does: paste the key and pick team/agent/user; search L1, open a record, see its
exact content with whitespace made visible, delete that id at that version (and the 409 path when it
changed meanwhile); browse L0 by session and delete a message; edit an L2 file with expected_version
(and its 409); read the persona; read the audit trail; clear a memory after typing its memory_id and
delete a user's memory after retyping the user id; see the messages a record was drawn from; read
formation's status and "Form now" (against a stack with formation on and the scripted model, and
refused plainly where formation is off). Each step saves a screenshot under
tests/artifacts/console/. Every page is also checked for: the key only in sessionStorage (never in a
cookie or the URL), no resource from another host, no Content-Security-Policy violation.

Needs /usr/bin/chromium and /usr/bin/chromedriver (Debian: apt-get install chromium chromium-driver);
skipped without them."""

from __future__ import annotations

import re
import shutil
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from helpers import ADMIN_KEY, Api, checked_stack, make_scope, ok

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "tests" / "artifacts" / "console"
STATIC = ROOT / "layers" / "core" / "python" / "memory_hub" / "edge" / "static" / "console"


def _find(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


CHROMIUM = _find("chromium", "chromium-browser", "/usr/bin/chromium")
CHROMEDRIVER = _find("chromedriver", "/usr/bin/chromedriver")

try:
    import selenium  # noqa: F401

    HAVE_SELENIUM = True
except ImportError:  # pragma: no cover - depends on the environment
    HAVE_SELENIUM = False

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not HAVE_SELENIUM, reason="selenium is not installed"),
    pytest.mark.skipif(
        CHROMIUM is None or CHROMEDRIVER is None,
        reason="no Chromium/chromedriver (apt-get install chromium chromium-driver)",
    ),
]

WAIT = 20


# ---------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def driver():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="console-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--window-size=1280,1000",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    browser.set_page_load_timeout(60)
    SHOTS.mkdir(parents=True, exist_ok=True)
    yield browser
    browser.quit()
    shutil.rmtree(profile, ignore_errors=True)


class Console:
    """The console page in the browser, with what the tests need to drive and check it."""

    def __init__(self, driver, stack, scope, name: str, base_url: str | None = None) -> None:
        self.driver, self.scope, self.name = driver, scope, name
        base_url = base_url or stack.api_url
        self.url = base_url.rstrip("/") + "/console"
        origin = urlsplit(base_url)
        self.origin = f"{origin.scheme}://{origin.netloc}"
        self.shots: list[Path] = []
        self.urls_seen: list[str] = []

    # -- driving
    def wait(self, condition, timeout: float = WAIT, message: str = ""):
        """Poll ``condition`` (a list re-rendered meanwhile only makes it try again)."""
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, timeout, ignored_exceptions=(StaleElementReferenceException,)).until(
            lambda _d: condition(), message
        )

    def by_id(self, element_id: str):
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.ID, element_id)

    def css(self, selector: str, root=None):
        from selenium.webdriver.common.by import By

        return (root or self.driver).find_elements(By.CSS_SELECTOR, selector)

    def type(self, element_id: str, text: str) -> None:
        field = self.by_id(element_id)
        field.clear()
        if text:
            field.send_keys(text)

    def click(self, element_id: str) -> None:
        self.by_id(element_id).click()
        self.note_url()

    def status(self) -> str:
        return self.by_id("status").text

    def wait_status(self, pattern: str, kind: str | None = None, timeout: float = WAIT) -> str:
        regex = re.compile(pattern)

        def seen():
            box = self.by_id("status")
            classes = box.get_attribute("class") or ""
            return bool(regex.search(box.text)) and (kind is None or kind in classes.split())

        from selenium.common.exceptions import TimeoutException

        try:
            self.wait(seen, timeout)
        except TimeoutException:
            raise AssertionError(f"status never matched {pattern!r} (last: {self.status()!r})") from None
        return self.status()

    def note_url(self) -> None:
        self.urls_seen.append(self.driver.current_url)

    def shot(self, step: str) -> Path:
        path = SHOTS / f"{self.name}-{len(self.shots) + 1:02d}-{step}.png"
        self.driver.save_screenshot(str(path))
        assert path.stat().st_size > 1000
        self.shots.append(path)
        return path

    def tab(self, name: str) -> None:
        self.click(f"tab-{name}")
        self.wait(lambda: self.by_id(f"panel-{name}").is_displayed())

    def text(self, element_id: str) -> str:
        """An element's exact text (WebDriver's .text trims and folds whitespace)."""
        return self.driver.execute_script("return document.getElementById(arguments[0]).textContent", element_id)

    # -- the walk's first step
    def open(self, key: str = ADMIN_KEY) -> None:
        self.driver.get(self.url)
        self.wait(lambda: self.driver.execute_script("return document.readyState") == "complete")
        self.wait(
            lambda: self.driver.execute_script("return typeof window.memoryConsole") == "object",
            message="app.js did not load",
        )
        self.driver.execute_script("sessionStorage.clear()")
        self.note_url()
        self.type("key", key)
        self.type("service", "default")
        self.type("team", self.scope.team_id)
        self.type("agent", self.scope.agent_id)
        self.type("user", self.scope.user_id)
        self.click("setup-apply")
        self.wait_status(r"^Ready: ", "ok")
        assert self.by_id("memory-id").text == self.scope.memory_id
        assert self.by_id("key").get_attribute("value") == "", "the key stays only in session storage"

    def counts(self) -> dict[str, str]:
        return {layer: self.by_id(f"count-{layer}").text for layer in ("l0", "l1", "l2", "l3")}

    def rows(self, table_id: str) -> list[str]:
        """The ids (or event ids, or paths) of a table's rows, read in one go."""
        return self.driver.execute_script(
            "return Array.from(document.querySelectorAll('#' + arguments[0] + ' tbody tr'))"
            ".map(r => r.dataset.id || r.dataset.event || r.dataset.path || '')",
            table_id,
        )

    def row_texts(self, table_id: str) -> list[str]:
        return self.driver.execute_script(
            "return Array.from(document.querySelectorAll('#' + arguments[0] + ' tbody tr')).map(r => r.textContent)",
            table_id,
        )

    def press_in_row(self, table_id: str, item_id: str, selector: str) -> None:
        def pressed() -> bool:
            found = self.css(f'#{table_id} tbody tr[data-id="{item_id}"] {selector}')
            if not found:
                return False
            found[0].click()
            return True

        self.wait(pressed, message=f"{item_id} not in {table_id}")
        self.note_url()

    def open_row(self, table_id: str, item_id: str) -> None:
        self.press_in_row(table_id, item_id, "button.open-record")
        self.wait(lambda: self.by_id("record-dialog").get_attribute("open") is not None)

    def field(self, name: str, fields: str = "record-fields") -> str:
        return self.css(f'#{fields} dd[data-field="{name}"]')[0].text

    # -- the checks every page must pass
    def assert_clean(self) -> None:
        driver = self.driver
        self.note_url()
        stored = driver.execute_script("return sessionStorage.getItem('memoryHub.console.key')")
        assert stored == ADMIN_KEY, "the key is kept in the tab's session storage"
        assert ADMIN_KEY not in driver.execute_script("return document.cookie")
        assert driver.get_cookies() == [] or all(ADMIN_KEY not in c.get("value", "") for c in driver.get_cookies())
        assert ADMIN_KEY not in driver.execute_script("return JSON.stringify(Object.assign({}, localStorage))")
        for url in [*self.urls_seen, driver.current_url]:
            assert ADMIN_KEY not in url and "mhk_" not in url, url
        resources = driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
            ".concat(performance.getEntriesByType('navigation').map(e => e.name))"
        )
        assert resources, "the page loaded nothing?"
        foreign = [name for name in resources if not name.startswith(self.origin + "/")]
        assert not foreign, f"resources from another host: {foreign}"
        for name in resources:
            assert ADMIN_KEY not in name
        violations = driver.execute_script("return window.memoryConsole.violations")
        assert violations == [], f"CSP violations: {violations}"
        logged = [
            entry
            for entry in driver.get_log("browser")
            if "Content Security Policy" in entry.get("message", "") or "Refused to" in entry.get("message", "")
        ]
        assert not logged, f"CSP violations in the browser log: {logged}"


@pytest.fixture
def console(driver, stack, scope, request):
    page = Console(driver, stack, scope, request.node.name.removeprefix("test_")[:40])
    driver.get_log("browser")  # drop what earlier tests left in the log
    failed_before = request.session.testsfailed
    yield page
    if request.session.testsfailed > failed_before:  # the call failed: keep what the page showed
        page.shot("failed")


# ---------------------------------------------------------------------------------------- helpers


def add_record(api, scope, content: str, **fields) -> dict:
    return ok(api.post("/v3/atomic/add", scope.body(content=content, **fields)))


def l1_total(api, scope) -> int:
    return ok(api.post("/v3/atomic/query", scope.body(limit=100)))["total"]


def l1_ids(api, scope) -> set[str]:
    return {item["id"] for item in ok(api.post("/v3/atomic/query", scope.body(limit=100)))["items"]}


def audit_events(api, scope, **fields) -> list[dict]:
    return ok(api.post("/v3/audit/query", {"memory_id": scope.memory_id, "limit": 100, **fields}))["events"]


# ---------------------------------------------------------------------------------------- tests


MODULES = sorted(path.name for path in STATIC.glob("*.js"))
SERVED = ["rules.js"]  # rendered by the API from the field rules, not a file


def test_the_page_is_static_same_origin_and_relative(api):
    """The console's own files: no inline script/style/handlers, only relative same-origin URLs; one
    entry module, the others imported by relative paths and served as JavaScript."""
    html = (STATIC / "index.html").read_text(encoding="utf-8")
    assert re.findall(r"<script[^>]*>", html) == ['<script type="module" src="console/app.js">']
    assert "<style" not in html and " style=" not in html
    assert not re.search(r"\son[a-z]+\s*=", html), "no event-handler attributes"
    for url in re.findall(r'(?:src|href)="([^"]*)"', html):
        assert not url.startswith(("/", "http:", "https:", "//")), url
    assert "app.js" in MODULES and "api.js" in MODULES and len(MODULES) > 5
    for name in MODULES:
        script = (STATIC / name).read_text(encoding="utf-8")
        assert "http://" not in script and "https://" not in script, name
        assert not re.search(r"""["'`]/v3/""", script), f"{name}: API URLs are relative to the page"
        assert "innerHTML" not in script and "localStorage" not in script and "document.cookie" not in script
        for target in re.findall(r"""^import .*?["']([^"']+)["'];$""", script, re.MULTILINE):
            assert target.startswith("./") and target[2:] in [*MODULES, *SERVED], (name, target)
        if name != "api.js":
            assert "fetch(" not in script, f"{name}: only api.js talks HTTP to the API"
    for path, kind in (
        ("/console", "text/html"),
        ("/console/app.css", "text/css"),
        *((f"/console/{name}", "text/javascript") for name in [*MODULES, *SERVED]),
    ):
        answer = api.raw("GET", path, None)
        assert answer.status == 200 and answer.headers["Content-Type"].startswith(kind), (path, answer.status)
        assert "script-src 'self'" in answer.headers["Content-Security-Policy"]


def _errors_logged(driver) -> list[dict]:
    return [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]


def test_every_module_loads_and_every_tab_renders(console, driver):
    """A fresh page: every module of static/console (and the rules the API renders) is fetched and
    runs without a JavaScript error, and every tab shows its panel."""
    driver.get(console.url)
    driver.execute_script("sessionStorage.clear()")
    driver.get(console.url)  # again, with no key or scope kept: a first visit
    console.wait(
        lambda: driver.execute_script("return typeof window.memoryConsole") == "object",
        message="the entry module did not run: a module failed to load",
    )
    console.wait_status(r"^Paste an API key and set team, agent and user to start\.", "info")
    fetched = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    for name in [*MODULES, *SERVED]:
        assert console.url + "/" + name in fetched, f"{name} was not loaded (an orphan, or not imported)"
    assert _errors_logged(driver) == []
    for tab in ("l0", "l1", "l2", "l3", "search", "formation", "audit", "admin"):
        console.tab(tab)
        panel = console.by_id(f"panel-{tab}")
        assert panel.is_displayed() and panel.find_element("css selector", "h2").text, tab
    console.shot("every-tab-rendered")
    assert _errors_logged(driver) == []


def test_a_module_that_fails_to_load_is_caught(console, driver):
    """The check above is live: with one tab's module blocked, the entry module never runs."""
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/console/tab-l2.js"]})
    try:
        driver.get(console.url)
        console.wait(lambda: driver.execute_script("return document.readyState") == "complete")
        assert driver.execute_script("return typeof window.memoryConsole") == "undefined"
        assert console.status() == "", "no module of the console ran"
    finally:
        driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
        driver.execute_cdp_cmd("Network.disable", {})


def test_the_consoles_field_rules_are_the_apis(console, driver, scope):
    """What the console shows and spells (hints, the memory id) comes from the domain's field rules."""
    from memory_hub.domain import fields, rules
    from memory_hub.domain.scope import Scope

    console.open()
    shown = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "import(new URL('console/rules.js', document.baseURI).href)"
        ".then((m) => done(m.default), (e) => done(String(e)));"
    )
    by_field = shown["fields"]
    assert by_field["user_id"]["maxLength"] == by_field["session_id"]["maxLength"] == rules.MAX_ID_CHARS
    assert by_field["summary"]["maxLength"] == fields.SUMMARY_CHARS
    assert by_field["text"]["maxLength"] == fields.TEXT_CHARS
    assert by_field["type"]["pattern"] == fields.TYPE_PATTERN
    assert by_field["team_id"]["pattern"] == by_field["agent_id"]["pattern"] == fields.TEAM_PATTERN
    assert by_field["path"]["maxBytes"] == rules.MAX_PATH_BYTES
    assert shown["memory_id"] == Scope("{team_id}", "{agent_id}", "").memory_id
    # The hints beside the controls say those numbers; the memory id shown is the API's spelling.
    hints = {
        control: console.text(f"{control}-rule")
        for control in ("user", "l0-session", "l1-type", "l2-path", "l2-content", "l2-file-summary", "team")
    }
    assert f"{rules.MAX_ID_CHARS:,} characters" in hints["user"] and hints["user"] == hints["l0-session"]
    assert f"{fields.SUMMARY_CHARS:,} characters" in hints["l2-file-summary"]
    assert f"{fields.TEXT_CHARS:,} characters" in hints["l2-content"]
    assert f"{rules.MAX_PATH_BYTES:,} UTF-8 bytes" in hints["l2-path"]
    assert fields.TYPE_PATTERN in hints["l1-type"] and fields.TEAM_PATTERN in hints["team"]
    assert "user-rule" in console.by_id("user").get_attribute("aria-describedby")
    assert console.by_id("memory-id").text == Scope(scope.team_id, scope.agent_id, scope.user_id).memory_id
    console.assert_clean()


def test_a_late_count_answer_never_overwrites_a_newer_one(console, driver, api, scope):
    """The page applies the tab's stored scope as it loads; a person who applies another scope at
    once sees that one's counts, however late the first scope's answers come back."""
    add_record(api, scope, "a record of the first user")
    console.open()
    # An earlier apply (the page's own, of the tab's stored scope) can say "Ready" while this one's
    # counts are still on their way: wait for the counts themselves
    console.wait(lambda: console.counts()["l1"] == "1", message=f"counts: {console.counts()}")
    other = make_scope()
    # From now on, answers about the first user reach the page 2 s late.
    driver.execute_script(
        "const real = window.fetch, user = arguments[0];"
        "window.fetch = async (url, init) => {"
        "  const answer = await real(url, init);"
        "  if (init && typeof init.body === 'string' && init.body.includes(user))"
        "    await new Promise((done) => setTimeout(done, 2000));"
        "  return answer;"
        "};",
        scope.user_id,
    )
    console.click("counts-refresh")  # the first user's counts, answered late
    for field, value in (("team", other.team_id), ("agent", other.agent_id), ("user", other.user_id)):
        console.type(field, value)
    console.click("setup-apply")
    console.wait_status(r"^Ready: ", "ok")
    zeros = {"l0": "0", "l1": "0", "l2": "0", "l3": "0"}
    assert console.counts() == zeros
    time.sleep(3)  # the late answers have come back meanwhile
    assert console.counts() == zeros


def test_a_refresh_while_the_scope_is_applied_does_not_stop_the_set_up(console, driver, api, scope):
    """A newer refresh of the counts takes over the display; the set-up that started the older one
    still finishes (the formation setting, the current tab, the Ready line)."""
    add_record(api, scope, "a record to count")
    console.open()
    driver.execute_script(  # every count answer now reaches the page 1 s late
        "const real = window.fetch;"
        "window.fetch = async (url, init) => {"
        "  const answer = await real(url, init);"
        "  if (String(url).includes('/count')) await new Promise((done) => setTimeout(done, 1000));"
        "  return answer;"
        "};"
    )
    console.click("setup-apply")
    console.click("counts-refresh")  # while the set-up waits for its counts
    console.wait_status(r"^Ready: ", "ok")
    console.wait(lambda: console.counts() == {"l0": "0", "l1": "1", "l2": "0", "l3": "0"})


def test_an_older_set_up_never_says_ready_for_a_newer_one(console, driver, api, scope):
    """Another scope applied while the page's first set-up is on its way: the Ready line is the
    newer set-up's, said once its counts are shown — never the older one's, naming the newer scope
    before its counts came."""
    add_record(api, scope, "a record of the first user")
    console.open()
    console.wait(lambda: console.counts()["l1"] == "1", message=f"counts: {console.counts()}")
    other = make_scope()
    driver.execute_script(  # the first user's answers 2 s late; the other's counts 5 s (the rest at once)
        "const real = window.fetch, first = arguments[0], other = arguments[1];"
        "window.fetch = async (url, init) => {"
        "  const answer = await real(url, init);"
        "  const body = init && typeof init.body === 'string' ? init.body : '';"
        "  const ms = body.includes(first) ? 2000 : body.includes(other) && String(url).includes('/count') ? 5000 : 0;"
        "  if (ms) await new Promise((done) => setTimeout(done, ms));"
        "  return answer;"
        "};",
        scope.user_id,
        other.user_id,
    )
    console.click("setup-apply")  # the first user's set-up, its counts on their way for 2 s
    for field, value in (("team", other.team_id), ("agent", other.agent_id), ("user", other.user_id)):
        console.type(field, value)
    console.click("setup-apply")
    console.wait_status(r"^Ready: ", "ok", timeout=30)
    assert other.user_id in console.status()
    assert console.counts() == {"l0": "0", "l1": "0", "l2": "0", "l3": "0"}


def test_key_and_scope_are_set_and_kept_only_in_session_storage(console, driver, api, scope):
    add_record(api, scope, "a first record")
    console.open()
    console.shot("key-and-scope-set")
    assert console.counts() == {"l0": "0", "l1": "1", "l2": "0", "l3": "0"}
    assert "A key is set" in console.by_id("key-state").text
    # Known memories of the team can be listed and picked (fills team and agent).
    from selenium.webdriver.support.ui import Select

    console.type("agent", "")
    console.click("memory-list")
    console.wait_status(r"^1 memories listed for team ")
    Select(console.by_id("memory-pick")).select_by_value(scope.memory_id)
    assert console.by_id("agent").get_attribute("value") == scope.agent_id
    assert console.by_id("memory-id").text == scope.memory_id
    # Every form control has a <label>; buttons are buttons with a name; status is a live region.
    unlabelled = driver.execute_script(
        "return Array.from(document.querySelectorAll('input, select, textarea'))"
        ".filter(c => c.labels.length === 0).map(c => c.id)"
    )
    assert unlabelled == []
    nameless = driver.execute_script(
        "return Array.from(document.querySelectorAll('button'))"
        ".filter(b => !(b.getAttribute('aria-label') || b.textContent.trim())).map(b => b.id)"
    )
    assert nameless == []
    assert console.by_id("status").get_attribute("aria-live") == "polite"
    assert console.by_id("record-status").get_attribute("aria-live") == "polite"
    # A reload keeps the scope and the key (same tab), and reads without asking again.
    driver.refresh()
    console.wait_status(r"^Ready: ", "ok")
    assert console.by_id("team").get_attribute("value") == scope.team_id
    console.assert_clean()
    # A wrong key shows the API's error (code + message) to the person.
    console.type("key", "mhk_000000000000_not-a-real-key-000000000000000000")
    console.click("setup-apply")
    status = console.wait_status(r"^Error 401: authorization: invalid key", "error")
    assert "req-" in status
    console.shot("wrong-key-401")
    # Forgetting the key removes it from the tab.
    console.click("forget-key")
    assert driver.execute_script("return sessionStorage.getItem('memoryHub.console.key')") is None
    assert driver.execute_script("return document.cookie") == ""


def test_search_open_exact_content_and_delete_that_version(console, driver, api, scope):
    tricky = "  needle\tbetween tabs\n  two  spaces inside \n"
    target = add_record(api, scope, tricky, type="fact", tags=["alpha", "beta"])
    other = add_record(api, scope, "another needle without whitespace tricks")
    add_record(api, scope, "nothing to find here")
    console.open()
    console.tab("search")
    console.type("search-query", "needle")
    console.click("search-go")
    console.wait_status(r"^2 results")
    console.shot("l1-search-results")

    console.open_row("search-table", target["id"])
    # The dialog focuses its first field: the exact content.
    assert driver.switch_to.active_element.get_attribute("id") == "record-visible"
    visible = console.text("record-visible")
    assert visible == "␣␣needle→between tabs↵\n␣␣two␣␣spaces inside␣↵\n", repr(visible)
    assert console.text("record-json") == '"  needle\\tbetween tabs\\n  two  spaces inside \\n"'
    assert console.field("version") == "1" and console.field("type") == "fact"
    assert console.field("tags") == "alpha, beta"
    console.shot("record-exact-content")

    # Escape closes the dialog; opening again works.
    from selenium.webdriver.common.keys import Keys

    driver.switch_to.active_element.send_keys(Keys.ESCAPE)
    console.wait(lambda: console.by_id("record-dialog").get_attribute("open") is None)
    console.open_row("search-table", target["id"])

    before = l1_total(api, scope)
    console.click("record-delete")
    assert "at version 1" in console.by_id("record-confirm-text").text
    console.shot("delete-confirm")
    console.click("record-confirm-go")
    console.wait_status(rf"^Deleted L1 record {target['id']} \(version 1\)", "ok")
    console.wait(lambda: target["id"] not in console.rows("search-table"))
    assert other["id"] in console.rows("search-table")
    console.shot("deleted")

    assert l1_total(api, scope) == before - 1
    assert target["id"] not in l1_ids(api, scope) and other["id"] in l1_ids(api, scope)
    deletes = [e for e in audit_events(api, scope, action="delete") if e["target"] == target["id"]]
    assert deletes and deletes[0]["layer"] == "L1", audit_events(api, scope)

    # The console's audit tab shows the delete event too.
    console.tab("audit")
    console.wait(lambda: any(target["id"] in text for text in console.row_texts("audit-table")))
    console.shot("audit-shows-delete")
    console.assert_clean()


def test_stale_version_delete_is_409_then_asks_again(console, api, scope):
    record = add_record(api, scope, "the plan is to meet on Monday", tags=["plan"])
    console.open()
    console.tab("l1")
    console.open_row("l1-table", record["id"])
    assert console.field("version") == "1"
    console.shot("opened-at-version-1")

    # Someone changes it meanwhile.
    updated = ok(api.post("/v3/atomic/update", scope.body(id=record["id"], content="the plan moved to Tuesday ")))
    assert updated["version"] == "v2"

    console.click("record-delete")
    console.click("record-confirm-go")
    console.wait_status(r"^Error 409: .*now at version 2", "error")
    conflict = console.by_id("record-conflict")
    assert conflict.is_displayed()
    assert "you saw version 1" in conflict.text and "now at version 2" in conflict.text
    assert console.field("version") == "2"
    assert console.text("record-visible") == "the plan moved to Tuesday␣"
    assert "at version 2" in console.by_id("record-confirm-text").text
    # The modal dialog says it too (the page behind it is inert) and focuses the confirmation.
    assert console.text("record-status").startswith("Error 409: ")
    assert console.driver.switch_to.active_element.get_attribute("id") == "record-confirm-go"
    assert record["id"] in l1_ids(api, scope), "a 409 deletes nothing"
    console.shot("conflict-shows-version-2")

    console.click("record-confirm-go")
    console.wait_status(rf"^Deleted L1 record {record['id']} \(version 2\)", "ok")
    console.wait(lambda: record["id"] not in console.rows("l1-table"))
    console.shot("deleted-at-version-2")
    assert l1_total(api, scope) == 0
    assert console.counts()["l1"] == "0"
    console.assert_clean()


def test_l0_by_session_paged_and_delete_a_message(console, api, scope):
    first = ok(
        api.post(
            "/v3/conversation/add",
            scope.body(
                session_id="morning",
                messages=[
                    {"role": "user", "content": f"morning message {n}", "timestamp": f"2026-01-01T08:00:0{n}Z"}
                    for n in range(3)
                ],
            ),
        )
    )["accepted_ids"]
    evening = ok(
        api.post(
            "/v3/conversation/add",
            scope.body(
                session_id="evening",
                messages=[{"role": "assistant", "content": "evening\treply ", "timestamp": "2026-01-01T20:00:00Z"}],
            ),
        )
    )["accepted_ids"]
    console.open()
    console.click("l0-show")
    console.wait_status(r"^Showing 4 of 4 messages \(all sessions\)")
    assert console.rows("l0-table") == [evening[0], first[2], first[1], first[0]], "newest first"
    console.shot("l0-all-sessions")

    # Clicking a message's session filters by it.
    console.press_in_row("l0-table", first[1], "button.session-filter")
    console.wait_status(r"^Showing 3 of 3 messages \(session morning\)")
    assert console.rows("l0-table") == [first[2], first[1], first[0]]
    assert console.by_id("l0-session").get_attribute("value") == "morning"
    assert "of 3 (session morning)" in console.by_id("l0-summary").text
    console.shot("l0-session-filter")

    console.click("l0-all")
    console.wait_status(r"^Showing 4 of 4 messages \(all sessions\)")

    console.open_row("l0-table", evening[0])
    assert console.text("record-visible") == "evening→reply␣"
    console.click("record-delete")
    console.click("record-confirm-go")
    console.wait_status(rf"^Deleted L0 message {evening[0]}", "ok")
    console.wait(lambda: evening[0] not in console.rows("l0-table"))
    console.shot("l0-message-deleted")
    assert ok(api.post("/v3/conversation/count", scope.body()))["total"] == 3
    console.assert_clean()


def test_l0_pages(console, api, scope):
    ok(
        api.post(
            "/v3/conversation/add",
            scope.body(session_id="s", messages=[{"role": "user", "content": f"m{n}"} for n in range(12)]),
        )
    )
    console.open()
    assert len(console.rows("l0-table")) == 12
    select = console.by_id("l0-limit")
    from selenium.webdriver.support.ui import Select

    Select(select).select_by_visible_text("10")
    console.click("l0-show")
    console.wait_status(r"^Showing 10 of 12 messages")
    assert len(console.rows("l0-table")) == 10
    assert console.by_id("l0-prev").is_enabled() is False and console.by_id("l0-next").is_enabled()
    console.click("l0-next")
    console.wait_status(r"^Showing 2 of 12 messages")
    assert len(console.rows("l0-table")) == 2
    assert "Messages 11–12 of 12" in console.by_id("l0-summary").text
    assert not console.by_id("l0-next").is_enabled()
    console.shot("l0-page-2")
    console.assert_clean()


def test_scenario_edit_with_expected_version_and_409(console, api, scope):
    ok(api.post("/v3/scenario/write", scope.body(path="notes/plan.md", content="first draft", summary="plans")))
    console.open()
    console.tab("l2")
    console.wait_status(r"^Listed 1 of 1 files")
    console.css('#l2-table tbody tr[data-path="notes/plan.md"] button.open-file')[0].click()
    console.wait(lambda: console.by_id("l2-editor").is_displayed())
    assert "expected version 1" in console.by_id("l2-save").text
    content = console.by_id("l2-content").get_attribute("value")
    assert content.startswith("-----META-START-----\nversion: 1\n") and content.endswith("first draft")
    console.shot("file-open-v1")

    console.type("l2-content", "second draft from the console")
    console.click("l2-save")
    console.wait_status(r"^Saved notes/plan\.md as version 2", "ok")
    assert "expected version 2" in console.by_id("l2-save").text
    read = ok(api.post("/v3/scenario/read", scope.body(path="notes/plan.md")))
    assert read["version"] == 2 and read["content"].endswith("second draft from the console")
    assert read["summary"] == "plans"
    console.shot("file-saved-v2")

    # Someone else writes version 3; the console's save (expected 2) is refused and asks again.
    ok(api.post("/v3/scenario/write", scope.body(path="notes/plan.md", content="someone else's draft")))
    console.type("l2-content", "third draft from the console")
    console.click("l2-save")
    console.wait_status(r"^Error 409: .*now at version 3", "error")
    assert "now at version 3" in console.by_id("l2-conflict").text
    assert "expected version 3" in console.by_id("l2-save").text
    assert console.by_id("l2-content").get_attribute("value") == "third draft from the console"
    read = ok(api.post("/v3/scenario/read", scope.body(path="notes/plan.md")))
    assert read["version"] == 3 and read["content"].endswith("someone else's draft")
    console.shot("file-conflict-409")

    console.click("l2-save")
    console.wait_status(r"^Saved notes/plan\.md as version 4", "ok")
    read = ok(api.post("/v3/scenario/read", scope.body(path="notes/plan.md")))
    assert read["version"] == 4 and read["content"].endswith("third draft from the console")
    console.shot("file-saved-v4")

    # A new file is created with expected_version 0.
    console.type("l2-path", "new/idea.md")
    console.click("l2-open")
    console.wait_status(r"does not exist yet")
    console.type("l2-content", "a new idea")
    console.click("l2-save")
    console.wait_status(r"^Saved new/idea\.md as version 1", "ok")
    assert ok(api.post("/v3/scenario/read", scope.body(path="new/idea.md")))["content"].endswith("a new idea")
    console.wait(lambda: console.counts()["l2"] == "2")
    console.assert_clean()


def test_persona_is_shown_exactly(console, api, scope):
    ok(api.post("/v3/core/write", scope.body(content="# Persona\n\tlikes tea \n")))
    console.open()
    console.tab("l3")
    console.wait(lambda: "Version 1" in console.by_id("l3-meta").text)
    assert console.text("l3-visible") == "# Persona↵\n→likes tea␣↵\n"
    console.shot("persona")
    console.assert_clean()


def test_clear_a_memory_after_typing_its_memory_id(console, api, scope):
    ok(api.post("/v3/conversation/add", scope.body(session_id="s", messages=[{"role": "user", "content": "hi"}])))
    add_record(api, scope, "a fact to clear")
    ok(api.post("/v3/scenario/write", scope.body(path="a.md", content="file")))
    ok(api.post("/v3/core/write", scope.body(content="persona")))
    console.open()
    assert console.counts() == {"l0": "1", "l1": "1", "l2": "1", "l3": "1"}
    console.tab("admin")
    assert console.by_id("clear-target").text == scope.memory_id
    assert not console.by_id("clear-go").is_enabled()
    console.type("clear-confirm", scope.memory_id[:-1])
    assert not console.by_id("clear-go").is_enabled(), "a wrong memory id keeps the button off"
    console.type("clear-confirm", scope.memory_id)
    assert console.by_id("clear-go").is_enabled()
    console.shot("clear-typed")
    console.click("clear-go")
    console.wait_status(rf"^Cleared {re.escape(scope.memory_id)}: 1 L0 messages, 1 L1 records, 1 L2 files", "ok")
    console.wait(lambda: console.counts() == {"l0": "0", "l1": "0", "l2": "0", "l3": "0"})
    console.shot("cleared-counts-zero")
    counts = ok(api.post("/v3/memory/get", {"memory_id": scope.memory_id}))["counts"]
    assert counts == {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
    assert any(e["action"] == "clear" for e in audit_events(api, scope))
    console.assert_clean()


def test_export_a_users_part_and_download_it(console, api, scope):
    """The console builds a person's export and offers the download: their L0/L1 only."""
    import io
    import tarfile

    import requests
    from selenium.webdriver.support.ui import Select

    ok(api.post("/v3/conversation/add", scope.body(session_id="s", messages=[{"role": "user", "content": "mine"}])))
    other = scope.body(
        user_id=scope.user_id + "-other", session_id="s", messages=[{"role": "user", "content": "someone else's"}]
    )
    ok(api.post("/v3/conversation/add", other))
    ok(api.post("/v3/scenario/write", scope.body(path="shared.md", content="about everyone")))
    console.open()
    console.tab("admin")
    assert console.by_id("export-target").text == scope.memory_id
    Select(console.by_id("export-who")).select_by_value("user")
    console.click("export")
    console.wait_status(rf"^Exported {re.escape(scope.memory_id)}: 1 L0 messages, 0 L1 records, 0 L2 files", "ok")
    link = console.by_id("export-link")
    assert link.is_displayed()
    console.shot("export-ready")
    archive = requests.get(link.get_attribute("href"), timeout=30)
    assert archive.status_code == 200
    with tarfile.open(fileobj=io.BytesIO(archive.content)) as tree:
        files = {m.name: tree.extractfile(m).read().decode() for m in tree if m.isfile()}
    assert not any(name.startswith("scene_blocks/") for name in files)  # shared L2 only on request
    conversations = "".join(v for k, v in files.items() if k.startswith("conversations/"))
    assert "mine" in conversations and "someone else" not in conversations
    assert any(e["action"] == "export" for e in audit_events(api, scope))
    console.assert_clean()


def test_delete_a_users_memory_after_retyping_the_user_id(console, api, scope):
    ok(api.post("/v3/conversation/add", scope.body(session_id="s", messages=[{"role": "user", "content": "hi"}])))
    add_record(api, scope, "about this user")
    ok(api.post("/v3/scenario/write", scope.body(path="shared.md", content="agent's file")))
    console.open()
    console.tab("admin")
    assert console.by_id("userdel-user").text == scope.user_id
    console.type("userdel-confirm", scope.user_id.upper())
    assert not console.by_id("userdel-go").is_enabled()
    console.type("userdel-confirm", scope.user_id)
    assert console.by_id("userdel-go").is_enabled()
    console.click("userdel-go")
    console.wait_status(r"^Deleted user .*: 1 L0 messages and 1 L1 records", "ok")
    console.wait(lambda: console.counts() == {"l0": "0", "l1": "0", "l2": "1", "l3": "0"})
    console.shot("user-memory-deleted")
    assert ok(api.post("/v3/atomic/count", scope.body()))["total"] == 0
    assert any(e["action"] == "user_memory_delete" for e in audit_events(api, scope))
    console.assert_clean()


def test_keyboard_tabs_and_audit_paging(console, driver, api, scope):
    ids = [add_record(api, scope, f"record number {n}")["id"] for n in range(12)]
    for record_id in ids:
        ok(api.post("/v3/atomic/delete", scope.body(ids=[record_id])))
    events = len(audit_events(api, scope))
    assert events >= 12
    console.open()
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    console.by_id("tab-l0").send_keys(Keys.ARROW_RIGHT)
    assert driver.switch_to.active_element.get_attribute("id") == "tab-l1"
    assert console.by_id("panel-l1").is_displayed() and not console.by_id("panel-l0").is_displayed()
    driver.switch_to.active_element.send_keys(Keys.END)
    assert driver.switch_to.active_element.get_attribute("id") == "tab-admin"
    driver.switch_to.active_element.send_keys(Keys.ARROW_LEFT)
    assert driver.switch_to.active_element.get_attribute("id") == "tab-audit"
    assert console.by_id("audit-memory").get_attribute("value") == scope.memory_id
    Select(console.by_id("audit-limit")).select_by_visible_text("10")
    console.click("audit-go")
    console.wait_status(r"^Showing 10 audit events")
    assert console.by_id("audit-more").is_displayed()
    console.shot("audit-page-1")
    console.click("audit-more")
    console.wait_status(rf"^Showing {min(events, 20)} audit events")
    shown = set(console.rows("audit-table"))
    assert len(shown) == min(events, 20), "pages do not overlap"
    console.shot("audit-page-2")
    console.assert_clean()


def test_a_csp_violation_would_be_caught(console, driver):
    """The CSP watch is live: an inline style the page tries to set is refused and counted."""
    console.open()
    assert driver.execute_script("return window.memoryConsole.cspViolations") == 0
    driver.execute_script("document.body.setAttribute('style', 'color: red')")
    console.wait(lambda: driver.execute_script("return window.memoryConsole.cspViolations") >= 1)
    violations = driver.execute_script("return window.memoryConsole.violations")
    assert violations[0]["directive"].startswith("style-src"), violations
    logged = [e["message"] for e in driver.get_log("browser") if "Content Security Policy" in e["message"]]
    assert logged, "the browser log reports CSP violations too"


@pytest.fixture
def staged(stack):
    """The stack behind a stage prefix, as API Gateway serves it on AWS: …/v1/<route>."""
    import requests

    target = stack.api_url.rstrip("/")
    session = requests.Session()

    class Forward(BaseHTTPRequestHandler):
        def _forward(self):
            if not self.path.startswith("/v1/"):
                self.send_error(404)
                return
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
            answer = session.request(self.command, target + self.path[3:], data=body, headers=headers, timeout=60)
            self.send_response(answer.status_code)
            for name, value in answer.headers.items():
                if name.lower() not in ("content-length", "content-encoding", "transfer-encoding", "connection"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        do_GET = do_POST = _forward  # noqa: N815

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_works_behind_a_stage_prefix(driver, stack, api, scope, staged):
    """At https://…/v1/console the assets and the API calls resolve under /v1/, never at the root."""
    add_record(api, scope, "staged record")
    page = Console(driver, stack, scope, "stage_prefix", base_url=staged)
    driver.get_log("browser")
    page.open()
    assert page.counts()["l1"] == "1"
    page.tab("l1")
    page.wait(lambda: len(page.rows("l1-table")) == 1)
    page.shot("l1-behind-v1")
    names = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert names and all(name.startswith(staged + "/") for name in names), names
    assert any(name == staged + "/console/app.js" for name in names)
    assert any(name.startswith(staged + "/v3/atomic/query") for name in names)
    page.assert_clean()


# ---------------------------------------------------------------------------------------- provenance, formation


def test_a_records_sources_show_on_a_click_and_formation_off_is_said_plainly(console, api, scope):
    """The session's stack forms nothing (no model): its records are clients', citing messages."""
    said = ok(
        api.post(
            "/v3/conversation/add",
            scope.body(
                session_id="trip",
                messages=[
                    {"role": "user", "content": "  I sit by the window\t"},
                    {"role": "assistant", "content": "noted"},
                ],
            ),
        )
    )["accepted_ids"]
    record = add_record(api, scope, "prefers window seats", session_id="trip", source_message_ids=said)
    console.open()
    assert console.by_id("memory-formation").text == "records (not forming)"
    console.tab("l1")
    console.wait(lambda: console.rows("l1-table") == [record["id"]])
    (row,) = console.row_texts("l1-table")
    assert "2 messages" in row and "formed" not in row
    console.open_row("l1-table", record["id"])
    assert console.field("formed") == "no"
    sources = console.css("#record-fields dd[data-field='sources'] button.source-message")
    assert [b.get_attribute("data-id") for b in sources] == said
    assert not console.by_id("record-source").is_displayed()
    sources[0].click()
    console.wait_status(rf"^Showing message {said[0]}, which record {record['id']} was drawn from", "ok")
    assert console.by_id("record-source").is_displayed()
    assert console.text("record-source-visible") == "␣␣I sit by the window→"
    assert console.field("role", "record-source-fields") == "user"
    assert console.field("session", "record-source-fields") == "trip"
    console.shot("record-source-message")
    console.click("record-close")

    console.tab("formation")
    console.wait_status(r"^Formation idle: 0 messages pending, 0 records formed", "ok")
    assert console.field("formation", "formation-fields").startswith("off: this deployment forms nothing")
    console.click("formation-run")
    console.wait_status(r"^Formation is off for this memory or this deployment: nothing was run\.$", "error")
    assert "Error 409: formation: off" in console.by_id("formation-result").text
    assert console.by_id("formation-run").is_enabled()
    console.shot("formation-off")
    console.assert_clean()


@pytest.fixture(scope="module")
def formation_stack():
    """A stack of this module's own with formation on, against the scripted model; its idle delay is
    long, so only "Form now" starts a run."""
    from memory_hub_local import scripted_llm

    server, url = scripted_llm.serve()
    try:
        with checked_stack(
            "Disabled", llm_url=url, llm_model="scripted", formation_batch=5, formation_idle_s=600
        ) as running:
            yield running
    finally:
        scripted_llm.stop(server)


def test_form_now_forms_records_that_show_their_sources(driver, formation_stack):
    api = Api(formation_stack.api_url)
    scope = make_scope()
    said = ok(
        api.post(
            "/v3/conversation/add",
            scope.body(
                session_id="s", messages=[{"role": "user", "content": f"I like tea number {n}"} for n in range(3)]
            ),
        )
    )["accepted_ids"]
    page = Console(driver, formation_stack, scope, "form_now")
    driver.get_log("browser")
    page.open()
    assert page.by_id("memory-formation").text == "records"
    page.tab("formation")
    page.wait_status(r"^Formation idle: 3 messages pending, 0 records formed\.", "ok")
    assert page.field("formation", "formation-fields") == "on: records"
    assert page.field("model", "formation-fields") != "—" and page.field("last run", "formation-fields") == "never"
    page.shot("formation-status")

    page.click("formation-run")
    page.wait(
        lambda: re.match(r"Formation (queued|running): 3 messages to form\.", page.by_id("formation-result").text)
    )
    page.wait_status(r"^Formation done: 3 records formed, 0 messages pending\.", "ok", timeout=90)
    assert page.field("records formed", "formation-fields") == "3"
    assert page.field("last formed", "formation-fields") == max(said)
    page.shot("formation-done")

    page.tab("l1")
    page.wait(lambda: len(page.rows("l1-table")) == 3)
    assert all("formed" in text and "1 message" in text for text in page.row_texts("l1-table"))
    first = page.rows("l1-table")[0]
    page.open_row("l1-table", first)
    assert page.field("formed") == "yes: formation wrote it"
    (source,) = page.css("#record-fields button.source-message")
    cited = source.get_attribute("data-id")
    assert cited in said
    source.click()
    page.wait_status(rf"^Showing message {cited}", "ok")
    number = said.index(cited)
    assert page.text("record-source-visible") == f"I like tea number {number}"
    assert page.text("record-visible") == f"The user said: I like tea number {number}"
    page.shot("formed-record-source")
    page.click("record-close")
    page.assert_clean()

"""The dev UI and the inbox page in a real headless Chromium, offline.

A requester asks in ADK's dev UI (whose answer box cannot approve), an
approver decides on /inbox in another tab, and the requester's chat shows the
outcome after a reload. The inbox pages through its lists and delivers a stuck
decision, all under its Content-Security-Policy: every inbox test ends by
checking that the page reported no violation of it. A Gemini that refuses the key
says so in the chat, with what to check. Uses Debian's
/usr/bin/chromium through Playwright (no `playwright install`); every request
that is not to 127.0.0.1 is blocked.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from playwright.async_api import BrowserContext, Page, Route, async_playwright, expect
from support.fake_gemini import BAD_KEY, FakeGemini
from support.http import request_over_run
from support.project import expenses, fresh_project, plain_adk
from support.servers import TOKENS, WebServer, web_server
from support.tickets import decide_and_mark_delivered, decided_not_delivered, open_ticket_for, open_tickets

from long_running_agent.ledger.audit.evidence import digest as ticket_digest
from long_running_agent.ledger.policy import file
from long_running_agent.refusals.model import ModelUnavailable
from long_running_agent.settings import parse_approvers

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
]
# The agent's answer naming the ticket: alone, or after why it needs two approvers, when the requester's
# other requests today (of earlier tests, on the shared server) add up past DUAL_APPROVAL_ABOVE.
TICKET = re.compile(r"[Tt]icket (T-[0-9a-f]+)(?: is waiting for an approver| for [^;]*; it is waiting for)")
ICON_FONT = Path("/usr/share/fonts/woff/material-design-icons-iconfont/MaterialIcons-Regular.woff2")
ICON_FONT_URLS = ("https://fonts.gstatic.com/s/materialicons/", "https://fonts.gstatic.com/s/materialsymbolsoutlined/")
# The pictures the docs show, taken by these tests on every run so they show the pages as they are.
DOCS = Path(__file__).resolve().parent.parent / "docs"


def picture(name: str, tmp_path: Path) -> Path:
    """Where a screenshot the docs show goes: docs/ with UPDATE_DOCS=1, else the test's own folder."""
    return (DOCS if os.environ.get("UPDATE_DOCS") == "1" else tmp_path) / name


pytestmark = [
    pytest.mark.browser,
    pytest.mark.subprocess,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium; install it "
                       "with: apt-get install -y --no-install-recommends chromium"),
]


@asynccontextmanager
async def browser_on(base_url: str) -> AsyncIterator[BrowserContext]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = await browser.new_context(base_url=base_url, viewport={"width": 1280, "height": 800})
        context.set_default_timeout(15_000)

        async def loopback_only(route: Route) -> None:
            # The dev UI asks fonts.gstatic.com for its icon fonts; offline means
            # offline, so they come from Debian's copy when it is installed
            # (fonts-material-design-icons-iconfont), else icons show their names.
            url = route.request.url
            if url.startswith(("http://127.0.0.1:", "data:", "blob:")):
                await route.continue_()
            elif ICON_FONT.is_file() and url.startswith(ICON_FONT_URLS):
                await route.fulfill(path=str(ICON_FONT), content_type="font/woff2")
            else:
                await route.abort()

        await context.route("**/*", loopback_only)
        yield context
        await browser.close()


@pytest.fixture
async def context(server) -> AsyncIterator[BrowserContext]:
    async with browser_on(server.base_url) as context:
        yield context


async def ask_in_dev_ui(context: BrowserContext, text: str, user: str = "alice") -> tuple[Page, str]:
    """Open a new chat as `user`, send `text`, and return the page and the ticket id it shows."""
    chat = await context.new_page()
    await chat.goto(f"/dev-ui/?app=long_running_agent&userId={user}")
    box = chat.locator("textarea.chat-input-box")
    await box.fill(text)
    async with chat.expect_response(lambda r: r.url.endswith("/run_sse")) as streamed:
        await box.press("Enter")
    pending = chat.get_by_text(TICKET)
    await expect(pending).to_be_visible()
    # The run has ended: a late event would redraw the pending call and empty an answer typed meanwhile.
    await (await streamed.value).finished()
    match = TICKET.search(await pending.inner_text())
    assert match, await pending.inner_text()
    return chat, match.group(1)


# Runs before the page's own script: every refusal under the page's CSP is kept
# (Chromium also logs each on the console as "Refused to ...").
RECORD_CSP_VIOLATIONS = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.cspViolations.push(`${e.effectiveDirective} refused ${e.blockedURI || "inline"}`), true);
"""


async def open_inbox(context: BrowserContext, approver: str, path: str = "/inbox") -> Page:
    inbox = await context.new_page()
    await inbox.add_init_script(RECORD_CSP_VIOLATIONS)
    await inbox.goto(path)
    await inbox.locator("#token").fill(TOKENS[approver])
    await inbox.locator("#sign-in").click()
    await expect(inbox.locator("#approver-name")).to_have_text(approver)
    return inbox


async def assert_no_csp_violations(page: Page) -> None:
    response = await page.request.get("/inbox")
    assert "default-src 'none'" in response.headers["content-security-policy"]  # the policy is on
    assert await page.evaluate("window.cspViolations") == []


async def assert_tables_fit_their_cards(page: Page) -> None:
    """Every table shown lies inside its card, which has nothing to scroll sideways."""
    tables = await page.locator("section table:visible").all()
    assert tables
    for table in tables:
        card = table.locator("xpath=ancestor::section[1]")
        inner, outer = await table.bounding_box(), await card.bounding_box()
        assert inner and outer
        name = await table.get_attribute("id")
        inside = outer["x"] <= inner["x"] and inner["x"] + inner["width"] <= outer["x"] + outer["width"]
        assert inside, (name, inner, outer)
        assert await card.evaluate("card => card.scrollWidth <= card.clientWidth"), name


async def ledger_view(server: WebServer, ticket_id: str) -> dict:
    async with httpx.AsyncClient(base_url=server.base_url) as client:
        response = await client.get(f"/api/approvals/{ticket_id}",
                                    headers={"Authorization": f"Bearer {TOKENS['carol']}"})
    assert response.status_code == 200, response.text
    return response.json()


async def test_request_in_dev_ui_approved_in_inbox_shows_payout_in_chat(context, server, tmp_path):
    chat, ticket_id = await ask_in_dev_ui(context, "Please reimburse $250 for the team lunch")
    # The dev UI offers the requester an answer box for the pending call; the guard refuses it.
    await chat.locator("app-long-running-response input.response-input").fill("approved")
    async with chat.expect_response(lambda r: r.url.endswith("/run_sse")):
        await chat.locator("app-long-running-response button.send-button").click()
    await expect(chat.get_by_text(re.compile(rf"Approval response not accepted: ticket {ticket_id} is still pending"))
                 .first).to_be_visible()
    await chat.screenshot(path=tmp_path / "1-chat-pending.png")

    inbox = await open_inbox(context, "bob")
    row = inbox.locator(f'#pending tr[data-ticket="{ticket_id}"]')
    await expect(row).to_contain_text("alice")
    await expect(row).to_contain_text("team lunch")
    await expect(row).to_contain_text("$250.00")
    await assert_tables_fit_their_cards(inbox)
    await inbox.screenshot(path=picture("inbox.png", tmp_path))
    await row.locator("button.approve").click()

    await expect(inbox.locator("#notice")).to_contain_text(f"Approved {ticket_id}")
    await expect(inbox.locator("#notice")).to_contain_text("was paid")
    await expect(inbox.locator(f'#decided tr[data-ticket="{ticket_id}"]')).to_contain_text("approved")
    await expect(inbox.locator(f'#pending tr[data-ticket="{ticket_id}"]')).to_have_count(0)
    await inbox.screenshot(path=tmp_path / "3-inbox-approved.png")
    await assert_no_csp_violations(inbox)

    # An open chat does not hear about another client's resume; a reload does.
    await chat.reload()
    await expect(chat.get_by_text(re.compile(r"\$250\.00 for team lunch was paid"))).to_be_visible()
    await chat.screenshot(path=tmp_path / "4-chat-paid.png")
    view = await ledger_view(server, ticket_id)
    assert (view["ticket"]["status"], view["ticket"]["decided_by"]) == ("approved", "bob")
    assert len(view["payouts"]) == 1


async def test_request_in_dev_ui_rejected_in_inbox_pays_nothing_and_a_question_gets_the_news(context, server, tmp_path):
    chat, ticket_id = await ask_in_dev_ui(context, "Please reimburse $480 for a conference ticket")

    inbox = await open_inbox(context, "carol")
    row = inbox.locator(f'#pending tr[data-ticket="{ticket_id}"]')
    await row.locator("button.reject").click()
    await expect(inbox.locator("#notice")).to_contain_text("Give a reason")  # refused in the page, nothing sent
    await row.locator("input.reason").fill("conference was not approved in advance")
    await row.locator("button.reject").click()

    await expect(inbox.locator("#notice")).to_contain_text(f"Rejected {ticket_id}")
    decided = inbox.locator(f'#decided tr[data-ticket="{ticket_id}"]')
    await expect(decided).to_contain_text("rejected")
    await expect(decided).to_contain_text("conference was not approved in advance")
    await assert_tables_fit_their_cards(inbox)
    await inbox.screenshot(path=tmp_path / "1-inbox-rejected.png")
    await assert_no_csp_violations(inbox)

    # The open chat still offers its answer box; a question typed there gets the news, not a refusal.
    await chat.locator("app-long-running-response input.response-input").fill("any news?")
    async with chat.expect_response(lambda r: r.url.endswith("/run_sse")):
        await chat.locator("app-long-running-response button.send-button").click()
    news = chat.get_by_text(re.compile(rf"Ticket {ticket_id} \(\$480\.00 for conference ticket\) was rejected by "
                                       "carol"))
    await expect(news.first).to_be_visible()
    await expect(chat.get_by_text("Approval response not accepted")).to_have_count(0)

    await chat.reload()
    await expect(chat.get_by_text(re.compile(rf"Ticket {ticket_id} for \$480\.00 \(conference ticket\) was rejected "
                                             "by carol"))).to_be_visible()
    await expect(chat.get_by_text(re.compile("Nothing was paid"))).to_be_visible()
    await chat.screenshot(path=tmp_path / "2-chat-rejected.png")
    view = await ledger_view(server, ticket_id)
    assert view["ticket"]["status"] == "rejected" and view["payouts"] == []



async def test_an_approver_approves_less_than_asked_with_a_reason_in_the_inbox(context, server):
    chat, ticket_id = await ask_in_dev_ui(context, "Please reimburse $250 for the team lunch")

    inbox = await open_inbox(context, "bob")
    row = inbox.locator(f'#pending tr[data-ticket="{ticket_id}"]')
    await row.locator("input.amount-input").fill("200")
    await row.locator("button.approve").click()
    await expect(inbox.locator("#notice")).to_contain_text("Give a reason to approve less than $250.00")
    await row.locator("input.amount-input").fill("300")
    await row.locator("input.reason").fill("over the per diem")
    await row.locator("button.approve").click()
    await expect(inbox.locator("#notice")).to_contain_text("$300.00 is more than the $250.00 asked")
    await expect(row).to_be_visible()  # refused by the server: still pending
    # After a refusal the page reloads its lists, keeping what was typed: a click while the row is being
    # replaced may land on the old one, so the next step waits for the new row's buttons.
    await expect(row.locator("button.approve")).to_be_enabled()
    await row.locator("input.amount-input").fill("-$-5")  # sent as typed; the server's amount rule answers
    await row.locator("button.approve").click()
    await expect(inbox.locator("#notice")).to_contain_text("'-$-5' is not a number of dollars and cents")
    await expect(row).to_be_visible()
    await expect(row.locator("button.approve")).to_be_enabled()

    await row.locator("input.amount-input").fill("200")
    await row.locator("button.approve").click()
    await expect(inbox.locator("#notice")).to_contain_text(f"Approved {ticket_id} for $200.00 of $250.00")
    await expect(inbox.locator("#notice")).to_contain_text("of the $250.00 you asked: over the per diem")
    await expect(inbox.locator(f'#decided tr[data-ticket="{ticket_id}"]')).to_contain_text("$200.00 of $250.00")
    await assert_no_csp_violations(inbox)

    await chat.reload()
    await expect(chat.get_by_text(re.compile(r"\$200\.00 for team lunch was paid"))).to_be_visible()
    view = await ledger_view(server, ticket_id)
    assert [p["amount"] for p in view["payouts"]] == [200.0]


async def test_two_approvers_in_the_inbox_above_the_two_person_threshold(context, server):
    chat, ticket_id = await ask_in_dev_ui(context, "Please reimburse $6,000 for the conference sponsorship")

    bob = await open_inbox(context, "bob")
    row = bob.locator(f'#pending tr[data-ticket="{ticket_id}"]')
    await expect(row).to_contain_text("needs 2 approvers")
    await row.locator("button.approve").click()
    await expect(bob.locator("#notice")).to_contain_text(f"Approved {ticket_id}. 1 of 2: needs 1 more approver; "
                                                         "approved by bob.")
    # Still pending, and bob cannot approve again.
    await expect(row).to_contain_text("1 of 2: needs 1 more approver; approved by bob")
    await expect(row).to_contain_text("You approved it; 1 of 2: needs 1 more approver.")
    await expect(row.locator("button.approve")).to_have_count(0)
    await assert_no_csp_violations(bob)

    # The requester sees the progress after a reload; nothing is paid yet.
    await chat.reload()
    await expect(chat.get_by_text(f"bob approved ticket {ticket_id} (1 of 2: needs 1 more approver).")).to_be_visible()
    assert (await ledger_view(server, ticket_id))["payouts"] == []

    carol = await open_inbox(context, "carol")
    other = carol.locator(f'#pending tr[data-ticket="{ticket_id}"]')
    await expect(other).to_contain_text("1 of 2: needs 1 more approver; approved by bob")
    await other.locator("button.approve").click()
    await expect(carol.locator("#notice")).to_contain_text("was paid")
    await expect(carol.locator(f'#decided tr[data-ticket="{ticket_id}"]')).to_contain_text("approved")

    await chat.reload()
    await expect(chat.get_by_text(re.compile(r"\$6,000\.00 for conference sponsorship was paid"))).to_be_visible()
    view = await ledger_view(server, ticket_id)
    assert view["ticket"]["approved_by"] == ["bob", "carol"] and len(view["payouts"]) == 1


async def test_under_a_policy_of_groups_the_inbox_says_what_is_missing_by_group(desk, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text("[[tier]]\nabove = 100\nneed = { finance = 1, cfo = 1 }\n")
    groups = f"bob:{TOKENS['bob']}:finance,carol:{TOKENS['carol']}:cfo,alice:{TOKENS['alice']}"
    with web_server(tmp_path, APPROVAL_POLICY=str(policy), APPROVERS=groups, APPROVAL_THRESHOLD="") as server:
        ledger = desk.ledger_at(server.database_url)
        rules = file.load(policy, {a.name: a.groups for a in parse_approvers(groups).values()})
        ticket = await ledger.tickets.open(  # its own requester: nobody else's requests add to its day
            app_name="long_running_agent", user_id="gina", session_id="s-gina", call_id="adk-gina",
            call_name="ask_for_approval", purpose="a server", amount_cents=90_000, ttl=timedelta(days=3),
            rules=rules)
        async with browser_on(server.base_url) as context:
            bob = await open_inbox(context, "bob")
            row = bob.locator(f'#pending tr[data-ticket="{ticket.id}"]')
            await expect(row.locator(".approvals")).to_have_text("needs 1 from finance and 1 from cfo")
            await row.locator("button.approve").click()
            await expect(bob.locator("#notice")).to_contain_text(
                f"Approved {ticket.id}. 1 of 2: needs 1 more from cfo; approved by bob for finance.")
            await expect(row).to_contain_text("You approved it; 1 of 2: needs 1 more from cfo.")

            carol = await open_inbox(context, "carol")
            other = carol.locator(f'#pending tr[data-ticket="{ticket.id}"]')
            await expect(other.locator(".approvals")).to_have_text(
                "1 of 2: needs 1 more from cfo; approved by bob for finance")
            await assert_no_csp_violations(carol)
        # The page said where each decision came from, and what it showed.
        [decision] = (await ledger.evidence(ticket.id))["decisions"]
        assert (decision["channel"], decision["shown_sha256"]) == ("inbox", ticket_digest(ticket))


async def test_an_approver_sees_no_decision_buttons_on_their_own_request(context):
    _chat, ticket_id = await ask_in_dev_ui(context, "Please reimburse $300 for a keyboard", user="alice")

    inbox = await open_inbox(context, "alice")  # alice is an approver too
    row = inbox.locator(f'#pending tr[data-ticket="{ticket_id}"]')
    await expect(row).to_contain_text("Your own request")
    await expect(row.locator("button.approve")).to_have_count(0)
    await expect(row.locator("button.reject")).to_have_count(0)

    other = await open_inbox(context, "carol")
    await expect(other.locator(f'#pending tr[data-ticket="{ticket_id}"] button.approve')).to_have_count(1)


async def test_the_inbox_shows_beside_a_ticket_the_requesters_other_requests_today(desk, context, server):
    ledger = desk.ledger_at(server.database_url)
    first = await open_ticket_for(ledger, 450_000, user="frank", purpose="team dinner", session="s-frank-1")
    second = await open_ticket_for(ledger, 450_000, user="frank", purpose="dinner for the team", session="s-frank-2")

    inbox = await open_inbox(context, "bob")
    await expect(inbox.locator(f'#pending tr[data-ticket="{second.id}"] .today')).to_have_text(
        f"frank today: $9,000.00 in all: {first.id} ($4,500.00, pending) for team dinner")
    await expect(inbox.locator(f'#pending tr[data-ticket="{second.id}"]')).to_contain_text("needs 2 approvers")


async def test_the_inbox_link_of_a_slack_message_shows_its_ticket(desk, context, server):
    ticket_id = (await open_tickets(desk.ledger_at(server.database_url), 30, "linked from Slack"))[-1].id

    inbox = await open_inbox(context, "carol", f"/inbox?limit=200#{ticket_id}")

    row = inbox.locator(f'#pending tr[data-ticket="{ticket_id}"]')
    await expect(row).to_have_class("linked")
    await expect(row).to_be_in_viewport()
    assert await inbox.locator("tr.linked").count() == 1
    await assert_no_csp_violations(inbox)


async def api_page(server: WebServer, **query: int) -> dict:
    async with httpx.AsyncClient(base_url=server.base_url) as client:
        response = await client.get("/api/approvals", params=query,
                                    headers={"Authorization": f"Bearer {TOKENS['carol']}"})
    assert response.status_code == 200, response.text
    return response.json()


async def rows(page: Page, table: str) -> list[str]:
    return await page.locator(f"#{table} tbody tr[data-ticket]").evaluate_all(
        "(rows) => rows.map((row) => row.dataset.ticket)")


async def test_an_approver_pages_through_pending_tickets_with_the_total(desk, context, server, tmp_path):
    await open_tickets(desk.ledger_at(server.database_url), 5, "browsed")
    first, second = await api_page(server, limit=2), await api_page(server, limit=2, offset=2)
    total = first["total_pending"]
    assert total >= 5

    inbox = await open_inbox(context, "bob", "/inbox?limit=2")

    await expect(inbox.locator("#pending-count")).to_have_text(f"{total:,}")
    await expect(inbox.locator("#pending-range")).to_have_text(f"Showing 1–2 of {total:,}")
    await expect(inbox.locator("#pending-previous")).to_be_disabled()
    assert await rows(inbox, "pending") == [t["id"] for t in first["pending"]]
    await inbox.locator("#pending-next").click()
    await expect(inbox.locator("#pending-range")).to_have_text(f"Showing 3–4 of {total:,}")
    assert await rows(inbox, "pending") == [t["id"] for t in second["pending"]]
    await inbox.screenshot(path=tmp_path / "1-inbox-page-2.png")
    await inbox.locator("#pending-previous").click()
    await expect(inbox.locator("#pending-range")).to_have_text(f"Showing 1–2 of {total:,}")
    assert await rows(inbox, "pending") == [t["id"] for t in first["pending"]]

    # On page 2, every ticket from the third on is decided elsewhere: the page
    # is past the end now, and the inbox steps back to the last page there is.
    await inbox.locator("#pending-next").click()
    await expect(inbox.locator("#pending-range")).to_have_text(f"Showing 3–4 of {total:,}")
    ledger = desk.ledger_at(server.database_url)
    for ticket in (await ledger.tickets.with_status(limit=200))[2:]:
        await ledger.tickets.decide(ticket.id, approver="carol", approve=False, reason="withdrawn")
        await ledger.deliveries.mark_delivered(ticket.id, actor="carol")
    await inbox.locator("#refresh").click()
    await expect(inbox.locator("#pending-range")).to_have_text("Showing 1–2 of 2")
    assert await rows(inbox, "pending") == [t["id"] for t in first["pending"]]
    await expect(inbox.locator("#pending-next")).to_be_disabled()
    await assert_no_csp_violations(inbox)


async def test_an_old_undelivered_decision_is_delivered_from_its_own_section(desk, context, server, tmp_path):
    async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:
        # A requester of its own: alice's requests of other tests add up toward the two-person rule.
        _session_id, _call, ticket_id = await request_over_run(client, "olive")
    ledger = desk.ledger_at(server.database_url)
    # Approved by a process that stopped before delivering; then eleven newer
    # decisions push it out of "Recent decisions".
    await decided_not_delivered(ledger, ticket_id, "the server stopped while delivering it")
    await decide_and_mark_delivered(ledger, 11)

    inbox = await open_inbox(context, "carol")
    stuck = inbox.locator(f'#undelivered tr[data-ticket="{ticket_id}"]')
    await expect(stuck).to_contain_text("approved by bob")
    await expect(stuck).to_contain_text("the server stopped while delivering it")
    await expect(stuck.locator(".failed-at")).to_contain_text("Failed ")  # when the attempt failed
    await expect(inbox.locator(f'#decided tr[data-ticket="{ticket_id}"]')).to_have_count(0)
    await assert_tables_fit_their_cards(inbox)
    await inbox.screenshot(path=tmp_path / "1-inbox-undelivered.png")
    await stuck.locator("button.deliver").click()

    await expect(inbox.locator("#notice")).to_contain_text(f"Delivered {ticket_id}")
    await expect(inbox.locator("#notice")).to_contain_text("was paid")
    await expect(stuck).to_have_count(0)
    await inbox.screenshot(path=tmp_path / "2-inbox-delivered.png")
    view = await ledger_view(server, ticket_id)
    assert view["ticket"]["delivered_at"] and len(view["payouts"]) == 1
    await assert_no_csp_violations(inbox)

async def test_plain_adk_web_request_approved_with_the_expenses_cli_shows_payout_after_reload(tmp_path):
    """`adk web` exactly as ADK users start it: no flags (a port only), no .env."""
    project, home = fresh_project(tmp_path), tmp_path / "home"
    with plain_adk("web", project, home) as server:
        async with browser_on(server.base_url) as context:
            chat, ticket_id = await ask_in_dev_ui(context, "Please reimburse $250 for the team lunch")
            # The requester answers the pending call themselves: the agent refuses, in its own voice.
            await chat.locator("app-long-running-response input.response-input").fill("approved")
            async with chat.expect_response(lambda r: r.url.endswith("/run_sse")):
                await chat.locator("app-long-running-response button.send-button").click()
            note = chat.get_by_text(re.compile(rf"Approval response not accepted: ticket {ticket_id} is still"))
            await expect(note.first).to_be_visible()
            await chat.screenshot(path=tmp_path / "1-plain-adk-web-pending.png")

            approved = expenses(project, home, "approve", ticket_id, "--approver", "bob")
            assert approved.returncode == 0, approved.stderr

            await chat.reload()
            await expect(chat.get_by_text(re.compile(r"\$250\.00 for team lunch was paid"))).to_be_visible()
            await chat.screenshot(path=picture("dev-ui.png", tmp_path))
            # The note is in the agent's row, not in the requester's message.
            note_row = chat.locator("app-event-row", has_text="Approval response not accepted").first
            assert "THOUGHT" not in (await note_row.inner_text()).upper()


async def test_a_gemini_that_refuses_the_key_says_what_to_check_in_the_chat(tmp_path):
    gemini = {"AGENT_MODEL": "gemini-3.5-flash", "GOOGLE_API_KEY": "test-key-not-a-real-one", "GEMINI_API_KEY": ""}
    with FakeGemini([BAD_KEY]) as fake, \
            web_server(tmp_path, **gemini, GOOGLE_GEMINI_BASE_URL=fake.base_url) as server:
        async with browser_on(server.base_url) as context:
            chat = await context.new_page()
            await chat.goto("/dev-ui/?app=long_running_agent&userId=alice")
            box = chat.locator("textarea.chat-input-box")
            await box.fill("Please reimburse $250 for the team lunch")
            async with chat.expect_response(lambda r: r.url.endswith("/run_sse")):
                await box.press("Enter")
            # The run's error event, in the chat: the model, its address, and what to check.
            failed = chat.locator("app-event-row", has_text="model_unavailable").first
            await expect(failed).to_be_visible()
            shown = " ".join((await failed.inner_text()).split())
            assert fake.base_url in shown and ModelUnavailable.NEXT["key"] in shown, shown
            await chat.screenshot(path=tmp_path / "model-unavailable.png")

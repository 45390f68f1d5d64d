// The approver inbox's script, served at /inbox/inbox.js for /inbox (see inbox.html).
// Data is rendered with textContent only: purposes are typed by requesters.
"use strict";
const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("approverToken") || "";
let me = "";  // the signed-in approver, as the server names them
// Where each list is paged to. /inbox?limit=N sets the page size (the API checks it).
const pageSize = new URLSearchParams(location.search).get("limit");
const offsets = {pending: 0, undelivered: 0};

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props);
  for (const child of children) node.append(child ?? "");
  return node;
}

function age(seconds) {
  if (seconds < 60) return "just now";
  const m = Math.floor(seconds / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  return h < 48 ? `${h} h` : `${Math.floor(h / 24)} days`;
}

function money(amount) {
  return "$" + amount.toLocaleString("en-US", {minimumFractionDigits: 2, maximumFractionDigits: 2});
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString([], {month: "short", day: "numeric", hour: "2-digit", minute: "2-digit"}) : "";
}

function notify(text, kind) {
  const box = $("notice");
  box.className = `notice ${kind}`;
  box.textContent = text;
}

async function api(path, options = {}) {
  const response = await fetch(path, {
    ...options,
    // X-Approval-Channel: the inbox's decisions are told apart from other API clients' (/metrics, their evidence).
    headers: {"Authorization": `Bearer ${token}`, "Content-Type": "application/json", "X-Approval-Channel": "inbox"},
  });
  const body = await response.json().catch(() => ({}));
  if (response.status === 401 || (response.status === 403 && body.error === "unknown_token")) {
    signOut(`${body.message || "Not signed in."} ${body.fix || ""}`);
    throw new Error("signed out");
  }
  if (!response.ok) throw Object.assign(new Error(body.message || response.statusText), {body});
  return body;
}

// What a pending ticket still needs, worded as the CLI words it: "needs 2 approvers" before any approval, then
// "1 of 2: needs 1 more from cfo; approved by bob for finance"; "" when one approval from anyone decides it.
function progress(t) {
  const need = Object.entries(t.need);
  const anyone = need.length === 1 && need[0][0] === "approvers";
  if (t.status !== "pending" || (anyone && need[0][1] === 1)) return "";
  if (!t.counted_for.length && !t.no_longer_counting.length) {
    return "needs " + (anyone ? `${need[0][1]} approvers` : need.map(([group, n]) => `${n} from ${group}`).join(" and "));
  }
  const by = t.counted_for.map((c) => c.group === "approvers" ? c.approver : `${c.approver} for ${c.group}`);
  return t.missing + (by.length ? `; approved by ${by.join(" and ")}` : "");
}

function ticketButton(ticket, columns) {
  return el("button", {className: "ticket", type: "button", textContent: ticket.id,
                       title: "Show history", onclick: (e) => toggleDetails(e.target.closest("tr"), ticket, columns)});
}

async function toggleDetails(row, ticket, columns) {
  const next = row.nextElementSibling;
  if (next && next.classList.contains("details")) { next.remove(); return; }
  const data = await api(`/api/approvals/${encodeURIComponent(ticket.id)}`);
  const history = el("ol", {}, ...data.audit.map((a) =>
    el("li", {}, `${when(a.at)} · ${a.action} by ${a.actor}${a.detail ? ": " + a.detail : ""}`)));
  const paid = data.payouts.length
    ? data.payouts.map((p) => `Paid ${p.payout_id}: $${p.amount.toFixed(2)} at ${when(p.paid_at)}`).join("; ")
    : "Nothing paid.";
  const cell = el("td", {colSpan: columns}, el("strong", {}, "History"), history, el("div", {className: "muted"}, paid));
  row.after(el("tr", {className: "details"}, cell));
}

function pendingRow(t) {
  const reason = el("input", {className: "reason", placeholder: "Reason (required to reject)", maxLength: 500,
                                ariaLabel: `Reason for ${t.id}`});
  // Approve less than was asked: the amount to pay, with a reason. Sent as written; the server checks it.
  const amount = el("input", {className: "amount-input", placeholder: "Pay less?", inputMode: "decimal",
                              maxLength: 20, title: `Approve less than ${t.amount_text}: the amount to pay`,
                              ariaLabel: `Amount to approve for ${t.id}`});
  const approve = el("button", {className: "btn approve", type: "button", textContent: "Approve"});
  const reject = el("button", {className: "btn reject", type: "button", textContent: "Reject"});
  approve.onclick = () => decide(t, "approve", reason, amount, [approve, reject]);
  reject.onclick = () => decide(t, "reject", reason, amount, [approve, reject]);
  // Nobody decides their own expense, nor counts twice toward one; the server refuses it too.
  const decision = t.requester === me
    ? el("div", {className: "muted own", textContent: "Your own request: another approver decides it."})
    : t.approved_by.includes(me)
      ? el("div", {className: "muted own", textContent: `You approved it; ${t.missing}.`})
      : el("div", {className: "decide"}, amount, reason, approve, reject);
  const approvals = progress(t) ? el("div", {className: "approvals", textContent: progress(t)}) : "";
  // The requester's other requests today, so that nobody approves half of a split unknowingly.
  const day = t.requester_today;
  const others = day ? day.others.map((o) => `${o.id} (${money(o.amount)}, ${o.status}) for ${o.purpose}`) : [];
  if (day && others.length < day.others_count) others.push(`${day.others_count - others.length} more`);
  if (day && day.paid_without_approval) others.push(`${money(day.paid_without_approval)} paid without approval`);
  const today = others.length
    ? el("div", {className: "muted today", textContent: `${t.requester} today: ${money(day.total)} in all: `
                                                        + others.join("; ")})
    : "";
  const row = el("tr", {},
    el("td", {}, ticketButton(t, 6)),
    el("td", {textContent: t.requester}),
    el("td", {className: "amount"}, t.amount_text, approvals),
    el("td", {}, t.purpose, today),
    el("td", {className: "muted nowrap", textContent: age(t.age_seconds), title: t.created_at}),
    el("td", {}, decision));
  row.dataset.ticket = t.id;
  return row;
}

function decidedRow(t) {
  const status = el("td", {}, el("span", {className: `badge ${t.status}`, textContent: t.status}));
  if (!t.delivered_at) {
    // Listed, with its Deliver button, under "Decided, not delivered".
    status.append(" ", el("span", {className: "not-delivered", textContent: "not delivered"}));
  }
  const row = el("tr", {},
    el("td", {}, ticketButton(t, 8)),
    status,
    el("td", {className: "amount", textContent: paidOf(t)}),
    el("td", {textContent: t.purpose}),
    el("td", {textContent: t.requester}),
    el("td", {textContent: t.decided_by || ""}),
    el("td", {className: "muted", textContent: t.reason || ""}),
    el("td", {className: "muted nowrap", textContent: when(t.decided_at)}));
  row.dataset.ticket = t.id;
  return row;
}

function undeliveredRow(t) {
  // Recorded in the ledger, but the conversation has not had it yet (a failed
  // delivery, a process that stopped half-way, or an expiry nobody delivered).
  const deliver = el("button", {className: "btn deliver", type: "button", textContent: "Deliver",
                                title: "Send this decision to the requester's conversation"});
  deliver.onclick = () => redeliver(t, deliver);
  const actions = el("div", {className: "decide"}, deliver);
  if (t.delivery_error) {
    // A delivery failed: if the conversation is gone for good, settle the ticket without it.
    const settle = el("button", {className: "btn settle", type: "button",
                                 textContent: t.status === "approved" ? "Pay without chat" : "Close",
                                 title: "Its conversation cannot be reached: pay an approved ticket, close any other"});
    settle.onclick = () => settleTicket(t, settle);
    actions.append(settle);
  }
  const row = el("tr", {},
    el("td", {}, ticketButton(t, 8)),
    el("td", {className: "nowrap"}, el("span", {className: `badge ${t.status}`, textContent: t.status}),
       t.decided_by ? ` by ${t.decided_by}` : ""),
    el("td", {className: "amount", textContent: t.amount_text}),
    el("td", {textContent: t.purpose}),
    el("td", {textContent: t.requester}),
    el("td", {className: "muted nowrap", textContent: when(t.decided_at)}),
    // The latest failed attempt, when and why: each one is in the ticket's history too.
    el("td", {className: t.delivery_error ? "why" : "muted"},
       t.delivery_failed_at ? el("span", {className: "failed-at", textContent: `Failed ${when(t.delivery_failed_at)}: `}) : "",
       t.delivery_error || "No attempt finished yet."),
    el("td", {}, actions));
  row.dataset.ticket = t.id;
  return row;
}

// One list's page, its total and its Previous/Next buttons; false instead if the
// page ran past the end (tickets were decided meanwhile) and moved back to the last.
function showPage(name, items, total, page, rowOf, mayMove) {
  if (mayMove && !items.length && total > 0 && page.offset > 0) {
    offsets[name] = Math.floor((total - 1) / page.limit) * page.limit;
    return false;
  }
  $(`${name}-count`).textContent = total.toLocaleString();
  const body = $(name).querySelector("tbody");
  // What an approver typed survives a reload (after a refusal, or a refresh): nothing is lost.
  const typed = new Map([...body.querySelectorAll("input")].filter((i) => i.value)
    .map((i) => [`${i.closest("tr").dataset.ticket} ${i.className}`, i.value]));
  body.replaceChildren(...items.map(rowOf));
  for (const input of body.querySelectorAll("input")) {
    input.value = typed.get(`${input.closest("tr").dataset.ticket} ${input.className}`) ?? "";
  }
  $(name).hidden = items.length === 0;
  $(`${name}-pager`).hidden = total <= page.limit && page.offset === 0;
  $(`${name}-range`).textContent = items.length
    ? `Showing ${(page.offset + 1).toLocaleString()}–${(page.offset + items.length).toLocaleString()} ` +
      `of ${total.toLocaleString()}`
    : "";
  $(`${name}-previous`).disabled = page.previous_offset === null;
  $(`${name}-next`).disabled = page.next_offset === null;
  $(`${name}-previous`).onclick = () => turn(name, page.previous_offset);
  $(`${name}-next`).onclick = () => turn(name, page.next_offset);
  return true;
}

function turn(name, offset) {
  if (offset === null) return;
  offsets[name] = offset;
  load().catch(failed);
}

function failed(error) {
  // A bad ?limit= in the page's address, for one: the API says what is wrong and the fix.
  if (error.message !== "signed out") notify(`${error.message} ${error.body?.fix || ""}`, "error");
}

async function load(again = true) {
  const query = new URLSearchParams({offset: offsets.pending, undelivered_offset: offsets.undelivered});
  if (pageSize) {
    query.set("limit", pageSize);
    query.set("undelivered_limit", pageSize);
  }
  const data = await api(`/api/approvals?${query}`);
  me = data.approver;
  $("approver-name").textContent = data.approver;
  $("signin").hidden = true;
  $("who").hidden = false;
  $("inbox").hidden = false;
  const shown = [
    showPage("pending", data.pending, data.total_pending, data.pending_page, pendingRow, again),
    showPage("undelivered", data.undelivered, data.total_undelivered, data.undelivered_page, undeliveredRow, again),
  ];
  if (shown.includes(false)) return load(false);
  $("pending-empty").hidden = data.total_pending > 0;
  $("undelivered-section").hidden = data.total_undelivered === 0;
  $("decided").querySelector("tbody").replaceChildren(...data.recent_decisions.map(decidedRow));
  $("decided-empty").hidden = data.recent_decisions.length > 0;
  $("decided").hidden = data.recent_decisions.length === 0;
  showLinked();
}

// /inbox#T-…, the link of Slack's Reject and Approve less (docs/slack.md): the ticket's row,
// marked and scrolled to, once, where it is on the page shown.
let linked = decodeURIComponent(location.hash.slice(1));
function showLinked() {
  const row = linked && document.querySelector(`tr[data-ticket="${CSS.escape(linked)}"]`);
  if (!row) return;
  linked = "";
  row.classList.add("linked");
  row.scrollIntoView({block: "center"});
}

// "$200.00 of $250.00" when an approver approved less than was asked.
function paidOf(t) {
  return t.approved_amount == null ? t.amount_text : `$${t.approved_amount.toFixed(2)} of ${t.amount_text}`;
}

async function decide(ticket, action, reasonInput, amountInput, buttons) {
  const reason = reasonInput.value.trim();
  const amount = amountInput.value.trim();
  if (action === "reject" && !reason) {
    notify(`Give a reason to reject ${ticket.id}; the requester is told it.`, "error");
    reasonInput.focus();
    return;
  }
  if (action === "reject" && amount) {
    notify(`An amount goes with Approve; a rejection pays nothing. Clear it to reject ${ticket.id}.`, "error");
    amountInput.focus();
    return;
  }
  if (amount && !reason) {
    notify(`Give a reason to approve less than ${ticket.amount_text}; the requester is told it.`, "error");
    reasonInput.focus();
    return;
  }
  // What this page showed, hashed: a decision on a ticket that no longer matches it is refused (409 not_as_shown).
  const body = {shown: ticket.shown_sha256};
  if (reason) body.reason = reason;
  if (amount) body.amount = amount;
  buttons.forEach((b) => b.disabled = true);
  try {
    const result = await api(`/api/approvals/${encodeURIComponent(ticket.id)}/${action}`, {
      method: "POST", body: JSON.stringify(body),
    });
    const lower = result.ticket.approved_amount == null ? "" : ` for ${paidOf(result.ticket)}`;
    const verb = action === "approve" ? "Approved" : "Rejected";
    const waits = result.delivery === "waiting_for_second_approval" ? ` ${progress(result.ticket)}.` : "";
    notify(`${verb} ${ticket.id}${lower}.${waits} ${result.agent_reply ? "Agent: " + result.agent_reply : ""}`, "ok");
  } catch (error) {
    failed(error);
  }
  await load().catch(() => {});
}

async function redeliver(ticket, button) {
  button.disabled = true;
  try {
    const result = await api(`/api/approvals/${encodeURIComponent(ticket.id)}/deliver`, {method: "POST"});
    notify(`Delivered ${ticket.id}. ${result.agent_reply ? "Agent: " + result.agent_reply : ""}`, "ok");
  } catch (error) {
    failed(error);
  }
  await load().catch(() => {});
}

async function settleTicket(ticket, button) {
  button.disabled = true;
  try {
    const result = await api(`/api/approvals/${encodeURIComponent(ticket.id)}/settle`, {method: "POST"});
    const paid = result.payouts.length ? ` Paid ${result.payouts[0].payout_id}.` : " Closed.";
    notify(`Settled ${ticket.id} without its conversation.${paid}`, "ok");
  } catch (error) {
    failed(error);
  }
  await load().catch(() => {});
}

function signOut(message) {
  token = "";
  sessionStorage.removeItem("approverToken");
  $("signin").hidden = false;
  $("who").hidden = true;
  $("inbox").hidden = true;
  notify(message || "", message ? "error" : "");
}

$("signin-form").onsubmit = async (event) => {
  event.preventDefault();
  token = $("token").value.trim();
  try {
    await load();
    sessionStorage.setItem("approverToken", token);
    $("token").value = "";
    notify("", "");
  } catch (error) {
    failed(error);
  }
};
$("sign-out").onclick = () => signOut();
$("refresh").onclick = () => load().catch(failed);

// Refresh now and then, but never under an approver's fingers.
setInterval(() => {
  const typing = [...document.querySelectorAll("input.reason, input.amount-input")]
    .some((i) => i.value || i === document.activeElement);
  if (token && !typing && !$("inbox").hidden) load().catch(() => {});
}, 15000);

if (token) load().catch(() => {});

// memory-ext inspector: one page over the REST API of `memext serve` (same origin, no framework, nothing remote).
//
// Views (deep links: everything is in the query string):
//   /                                    users and agents with counts
//   /?user_id=maya[&agent_id=a]          Maya's memories, newest first (filters: metadata, session_id, since, until),
//                                        with a link to each of her agents
//   /?user_id=maya&view=search&q=...     a search as the model sees it (matches, weak matches, explain, context)
//   /?user_id=maya&view=history&id=...   a memory: its versions and operations; edit, forget
//   /?user_id=maya&view=files            the prompt index, memory files, importance, compaction
//   /?user_id=maya&view=data             export and import
//   /?user_id=maya&view=forget           forget a session (picked from a list) or the user
//
// Stored memories are attacker-controlled text: every value reaches the page as a text node (textContent), never
// as HTML. The bearer token, when the server needs one, lives in this tab's sessionStorage only.
"use strict";

const TOKEN_KEY = "memext-token";
const PAGE_SIZE = 50;
const RELEVANT = 0.5;  // the documented line between a match and a weak one (README: score_threshold 0.5)
const BUSY_AFTER_MS = 300;  // a request that takes longer than this shows the busy state
const VIEWS = [
  ["memories", "Memories"], ["search", "Search"], ["files", "Memory files"], ["data", "Export & import"],
  ["forget", "Forget"],
];

// -- DOM helpers: text only -------------------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key in el && typeof value !== "string") el[key] = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

let nextId = 0;
function field(label, control, hint, size) {
  const id = control.id || `f${++nextId}`;
  control.id = id;
  return h("div", { class: size ? `field ${size}` : "field" }, h("label", { for: id }, label), control,
           hint ? h("small", { class: "hint" }, hint) : null);
}

const $ = (id) => document.getElementById(id);
const json = (value) => JSON.stringify(value, null, 2);

function fmtTime(value) {
  if (!value) return "—";
  const text = /[zZ]|[+-]\d\d:?\d\d$/.test(value) ? value : `${value}Z`;
  const date = new Date(text);
  return Number.isNaN(date.getTime()) ? String(value) : `${date.toISOString().slice(0, 16).replace("T", " ")} UTC`;
}

function fmtDay(value) {
  return value ? fmtTime(value).slice(0, 10) : "—";
}

// "3 memories", "1 memory"
function plural(n, one, many) {
  return `${n} ${n === 1 ? one : many || `${one}s`}`;
}

// A number as a person reads it: two decimals at most, no trailing zeros.
function num(value) {
  if (typeof value !== "number" || !Number.isFinite(value)) return String(value);
  return String(Math.round(value * 100) / 100);
}

// The first words of a memory, for a title: "Lena moved to Coimbra with…"
function firstWords(text, words) {
  const clean = String(text || "").replace(/\s+/g, " ").trim();
  if (!clean) return "";
  const parts = clean.split(" ");
  const n = words || 8;
  const head = parts.slice(0, n).join(" ");
  return parts.length > n || head.length > 80 ? `${head.slice(0, 80).replace(/[\s,.;:]+$/, "")}…`
    : head.replace(/[\s,.;:!?]+$/, "");
}

// -- the busy state: any request slower than a moment ------------------------------------------------------------

const busy = { count: 0, timer: null, labels: [] };

function busyStart(label) {
  busy.count += 1;
  busy.labels.push(label);
  if (busy.timer === null) {
    busy.timer = setTimeout(() => {
      busy.timer = null;
      if (busy.count > 0) {
        $("busy-text").textContent = `${busy.labels[busy.labels.length - 1]}…`;
        $("busy").hidden = false;
        $("main").setAttribute("aria-busy", "true");
      }
    }, BUSY_AFTER_MS);
  }
}

function busyEnd(label) {
  busy.count = Math.max(0, busy.count - 1);
  const at = busy.labels.lastIndexOf(label);
  if (at >= 0) busy.labels.splice(at, 1);
  if (busy.count === 0) {
    if (busy.timer !== null) clearTimeout(busy.timer);
    busy.timer = null;
    $("busy").hidden = true;
    $("main").removeAttribute("aria-busy");
  } else {
    $("busy-text").textContent = `${busy.labels[busy.labels.length - 1]}…`;
  }
}

// -- the API ----------------------------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, error) {
    super(error.message || `HTTP ${status}`);
    this.status = status;
    this.error = error;
  }
}

class TokenNeeded extends Error {}

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

async function api(method, path, options) {
  const label = (options && options.busy) || "Loading";
  busyStart(label);
  try {
    return await request(method, path, options || {});
  } finally {
    busyEnd(label);
  }
}

async function request(method, path, { params, body, raw, contentType }) {
  const url = new URL(path, location.origin);
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== null && value !== undefined && value !== "") url.searchParams.set(key, String(value));
  }
  const headers = { Accept: "application/json" };
  const secret = token();
  if (secret) headers.Authorization = `Bearer ${secret}`;
  let payload;
  if (body instanceof Blob || typeof body === "string") {
    payload = body;
    headers["Content-Type"] = contentType || "application/octet-stream";
  } else if (body !== undefined) {
    payload = JSON.stringify(body);
    headers["Content-Type"] = "application/json";
  }
  let response;
  try {
    response = await fetch(url, { method, headers, body: payload, cache: "no-store", credentials: "omit" });
  } catch (exc) {
    throw new ApiError(0, { type: "ServerUnavailableError", message: `the server did not answer (${exc.message})`,
                            fix: "is memext serve still running?" });
  }
  if (response.status === 401) {
    const hadToken = Boolean(secret);
    sessionStorage.removeItem(TOKEN_KEY);
    showTokenForm(hadToken ? "The server refused this token. Enter a valid one." : null);
    throw new TokenNeeded();
  }
  if (!response.ok) {
    let error = { type: `HTTP ${response.status}`, message: response.statusText };
    try {
      error = (await response.json()).error || error;
    } catch (_) { /* not JSON: keep the status line */ }
    throw new ApiError(response.status, error);
  }
  return raw ? response : response.json();
}

// The store's namespaces (users and agents), read once per rendering and shared by the views that need them.
let overviewCache = null;
function overview() {
  if (!overviewCache) {
    overviewCache = api("GET", "/v1/overview").catch((exc) => { overviewCache = null; throw exc; });
  }
  return overviewCache;
}

// -- state: the query string ------------------------------------------------------------------------------------

function route() {
  const params = new URLSearchParams(location.search);
  const get = (name) => params.get(name) || "";
  return {
    user_id: get("user_id"), agent_id: get("agent_id"), view: get("view") || "memories",
    q: get("q"), k: get("k"), explain: get("explain") === "1", id: get("id"),
    session_id: get("session_id"), metadata: get("metadata"), since: get("since"), until: get("until"),
  };
}

function href(params) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "" && value !== false) query.set(key, String(value));
  }
  const text = query.toString();
  return text ? `/?${text}` : "/";
}

function nsParams(state) {
  return { user_id: state.user_id, agent_id: state.agent_id || null };
}

function link(params, text, attrs) {
  return h("a", { href: href(params), "data-nav": "", ...(attrs || {}) }, text);
}

function navigate(url) {
  history.pushState(null, "", url);
  clearReceipt();
  render();
}

document.addEventListener("click", (event) => {
  const anchor = event.target.closest && event.target.closest("a[data-nav]");
  if (!anchor || event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) {
    return;
  }
  event.preventDefault();
  navigate(anchor.getAttribute("href"));
});
window.addEventListener("popstate", () => { clearReceipt(); render(); });

// -- shared pieces: errors, receipts, confirmation ----------------------------------------------------------------

// "InvalidQueryError" → "Invalid query"
function errorName(type) {
  const words = String(type || "Error").replace(/Error$/, "").replace(/([a-z])([A-Z])/g, "$1 $2").trim();
  return words ? words.charAt(0) + words.slice(1).toLowerCase() : "Error";
}

function showError(exc) {
  const box = $("error");
  if (exc instanceof TokenNeeded) return;
  const error = exc instanceof ApiError ? exc.error : { type: exc.name || "Error", message: String(exc.message) };
  const fix = error.fix ? String(error.fix) : "";
  let message = String(error.message || "");
  if (fix && message.includes(fix)) {  // the engine's message ends with its fix: say it once
    message = message.replace(fix, "").replace(/[\s;:,.—-]+$/, "");
  }
  box.replaceChildren(...[h("strong", {}, `${errorName(error.type)}: `), message,
                          fix ? h("p", { class: "fix" }, `Fix: ${fix}`) : null].filter(Boolean));
  box.hidden = false;
}

function clearError() {
  $("error").hidden = true;
  $("error").replaceChildren();
}

// A receipt: a title, short sentences (text and links), and the server's answer behind a disclosure.
function showReceipt(title, sentences, value) {
  const box = $("receipt");
  box.replaceChildren(h("h2", {}, title),
                      ...sentences.map((sentence) => h("p", { class: "sentence" }, sentence)),
                      h("details", { class: "raw" }, h("summary", {}, "Raw receipt (JSON)"),
                        h("pre", { class: "json" }, json(value))),
                      h("button", { type: "button", class: "secondary", onclick: clearReceipt }, "Dismiss"));
  box.hidden = false;
  box.scrollIntoView({ block: "nearest" });
}

function clearReceipt() {
  $("receipt").hidden = true;
  $("receipt").replaceChildren();
}

function confirmAction(title, text, okLabel, destructive) {
  const dialog = $("confirm");
  $("confirm-title").textContent = title;
  $("confirm-text").textContent = text;
  const ok = $("confirm-ok");
  ok.textContent = okLabel || "Confirm";
  ok.className = destructive ? "danger" : "primary";
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
    (destructive ? $("confirm-cancel") : ok).focus();
  });
}

// Run an action that changes the store: confirm, call (busy), render the view again, show the receipt.
// `receipt(result)` returns [title, sentences]; `button` is disabled while the call runs.
async function act({ title, text, ok, destructive, call, receipt, button }) {
  clearReceipt();  // before the dialog opens: the receipt shown next is this action's
  if (!(await confirmAction(title, text, ok, destructive))) return;
  clearError();
  if (button) button.disabled = true;
  try {
    const result = await call();
    overviewCache = null;  // counts changed
    const [heading, sentences] = receipt(result);
    await render({ keepReceipt: true });
    showReceipt(heading, sentences, result);
  } catch (exc) {
    showError(exc);
  } finally {
    if (button) button.disabled = false;
  }
}

// "nothing left on disk", or what still holds bytes until the purge completes
function purgeText(receipt) {
  if (receipt.purge_complete !== false) return "nothing left on disk";
  const files = (receipt.pending_purge || []).length;
  return `gone for every reader; ${plural(files, "file")} still hold${files === 1 ? "s" : ""} bytes until the ` +
         "purge completes (memext forget --purge)";
}

function storesText(receipt) {
  const stores = receipt.stores || [];
  return stores.length ? ` from ${stores.length === 1 ? "its store" : `all ${stores.length} stores`}` : "";
}

// -- the token form ---------------------------------------------------------------------------------------------

function showTokenForm(message) {
  $("tabs").hidden = true;
  $("picker").hidden = true;
  const input = h("input", { type: "password", name: "token", autocomplete: "off", required: true,
                             spellcheck: "false" });
  const form = h("form", { class: "card token", "aria-labelledby": "token-title" },
    h("h1", { id: "token-title" }, "This server needs a token"),
    message ? h("p", { class: "error", role: "alert" }, message) : null,
    h("p", {}, "It is kept for this tab only (sessionStorage) and sent as an Authorization: Bearer header."),
    field("Bearer token", input),
    h("button", { type: "submit", class: "primary" }, "Use this token"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    info = null;  // another token may be pinned to another user
    overviewCache = null;
    render();
  });
  $("view").replaceChildren(form);
  input.focus();
}

// -- chrome: who, the user and agent pickers, the tabs -------------------------------------------------------------

function agentName(agentId) {
  return agentId ? `agent ${agentId}` : "no agent";
}

function renderPicker(state, rows) {
  const picker = $("picker");
  const users = [...new Set(rows.map((row) => row.user_id))].sort();
  if (state.user_id && !users.includes(state.user_id)) users.unshift(state.user_id);
  const agents = rows.filter((row) => row.user_id === state.user_id).map((row) => row.agent_id || "");
  if (!agents.includes(state.agent_id)) agents.push(state.agent_id);
  const userSelect = h("select", { id: "pick-user", name: "user_id" },
    h("option", { value: "" }, "All users (overview)"),
    users.map((user) => h("option", { value: user, selected: user === state.user_id }, user)));
  const agentSelect = h("select", { id: "pick-agent", name: "agent_id", disabled: !state.user_id },
    [...new Set(agents)].sort().map((agent) => h("option", { value: agent, selected: agent === state.agent_id },
                                                 agent ? agent : "no agent")));
  const keepView = (view) => (view === "history" ? null : view === "memories" ? null : view);
  userSelect.addEventListener("change", () => navigate(href({ user_id: userSelect.value,
                                                              view: userSelect.value ? keepView(state.view) : null })));
  agentSelect.addEventListener("change", () => navigate(href({ user_id: state.user_id, agent_id: agentSelect.value,
                                                               view: keepView(state.view) })));
  picker.replaceChildren(...[field("User", userSelect, null, "pick"),
                             state.user_id ? field("Agent", agentSelect, null, "pick") : null].filter(Boolean));
  picker.hidden = false;
}

function renderChrome(state, info, rows) {
  const who = $("who");
  const tabs = $("tabs");
  const pin = info && info.user_id ? `token pinned to ${info.user_id}` : "";
  who.textContent = [info ? `memory-ext ${info.version}` : "", pin].filter(Boolean).join(" · ");
  renderPicker(state, rows);
  if (!state.user_id) {
    tabs.hidden = true;
    return;
  }
  const active = state.view === "history" ? "memories" : state.view;
  tabs.replaceChildren(...VIEWS.map(([view, label]) =>
    link({ ...nsParams(state), view: view === "memories" ? null : view }, label,
         view === active ? { "aria-current": "page" } : {})));
  tabs.hidden = false;
}

// -- views ------------------------------------------------------------------------------------------------------

async function viewOverview() {
  const rows = await overview();
  if (rows.length === 0) {
    return [h("h1", {}, "Users and agents"),
            h("div", { class: "empty", id: "empty" },
              h("p", {}, h("strong", {}, "The store holds no memories yet.")),
              h("p", {}, "Memories appear here once an agent saves them: the MCP tool save_memory, POST /v1/turns, ",
                "or a framework adapter (LangChain, LlamaIndex). To restore an export, open a user below and use ",
                "Export & import."),
              userJump())];
  }
  const users = new Set(rows.map((row) => row.user_id));
  return [h("h1", {}, "Users and agents"),
          h("p", { class: "status" }, `${plural(users.size, "user")}, ${plural(rows.length, "namespace")}. ` +
            "Pick a user to read, search, edit or forget their memories."),
          h("div", { class: "scroll" }, h("table", { id: "overview" },
            h("caption", {}, "Each row is a namespace: a user, or a user with one agent"),
            h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "User"), h("th", { scope: "col" }, "Agent"),
                             h("th", { scope: "col", class: "num" }, "Memories"),
                             h("th", { scope: "col", class: "num" }, "Turns"))),
            h("tbody", {}, rows.map((row) => h("tr", {},
              h("th", { scope: "row" }, link({ user_id: row.user_id }, row.user_id)),
              h("td", {}, row.agent_id ? link({ user_id: row.user_id, agent_id: row.agent_id }, row.agent_id) : "—"),
              h("td", { class: "num" }, String(row.memories)), h("td", { class: "num" }, String(row.turns))))))),
          userJump()];
}

// Open a user the overview does not list yet (an empty store, a user to import into).
function userJump() {
  const input = h("input", { type: "text", name: "user_id", required: true, spellcheck: "false",
                             autocomplete: "off" });
  const form = h("form", { class: "row jump", "aria-label": "Open a user" }, field("Open a user by id", input, null,
                                                                                    "medium"),
                 h("button", { type: "submit", class: "secondary" }, "Open"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (input.value.trim()) navigate(href({ user_id: input.value.trim() }));
  });
  return form;
}

function metaText(metadata) {
  return metadata && Object.keys(metadata).length ? JSON.stringify(metadata) : null;
}

// A tool call as a person reads it: "book_table(place: Tasca, time: 20:00)"
function toolCallText(call) {
  const fn = call.function || call;
  const name = fn.name || call.name || "a tool";
  let args = fn.arguments !== undefined ? fn.arguments : call.args !== undefined ? call.args : call.input;
  if (typeof args === "string") {
    try {
      args = JSON.parse(args);
    } catch (_) { /* keep the text */ }
  }
  let shown = "";
  if (args && typeof args === "object" && !Array.isArray(args)) {
    shown = Object.entries(args).map(([key, value]) =>
      `${key}: ${typeof value === "string" ? value : JSON.stringify(value)}`).join(", ");
  } else if (args !== undefined && args !== null && args !== "") {
    shown = typeof args === "string" ? args : JSON.stringify(args);
  }
  return `${name}(${shown})`;
}

function isToolError(memory) {
  const meta = memory.metadata || {};
  return memory.role === "tool" && (meta.status === "error" || meta.is_error === true ||
                                    /^\s*(error|exception|traceback)\b/i.test(memory.content || ""));
}

// What a turn says: its text, its tool calls ("Called …"), a tool's result or error.
function turnBody(memory, toolCalls) {
  const parts = [];
  if (memory.role === "tool") {
    const failed = isToolError(memory);
    parts.push(h("p", { class: failed ? "tool tool-error" : "tool" },
      h("span", { class: "tool-label" }, failed ? "Tool error" : "Tool result"),
      memory.metadata && memory.metadata.tool_call_id ? ` (call ${memory.metadata.tool_call_id})` : "", ": "));
    parts.push(h("p", { class: "content" }, memory.content));
    return parts;
  }
  if (memory.content) parts.push(h("p", { class: "content" }, memory.content));
  const calls = toolCalls || [];
  if (calls.length) {
    parts.push(h("ul", { class: "calls", "aria-label": "Tool calls" },
      calls.map((call) => h("li", {}, h("span", { class: "tool-label" }, "Called "),
                                h("code", {}, toolCallText(call))))));
  } else if (!memory.content) {
    parts.push(h("p", { class: "content muted" }, "(no text)"));
  }
  return parts;
}

// The tool calls of the turns in `memories` with no text (a tool-call turn): read from GET /v1/turns of their
// sessions, the one route that returns a turn's tool_calls. Keyed by turn id.
async function toolCallsOf(state, memories) {
  const sessions = [...new Set(memories.filter((m) => !m.content && m.role === "assistant")
                                        .map((m) => m.session_id || ""))].slice(0, 10);
  const calls = {};
  for (const session of sessions) {
    const turns = await api("GET", "/v1/turns", { params: { ...nsParams(state), session_id: session || null } });
    for (const turn of turns) {
      if (turn.tool_calls && turn.tool_calls.length) calls[turn.id] = turn.tool_calls;
    }
  }
  return calls;
}

function memoryCard(state, memory, toolCalls) {
  const versions = plural(memory.version_count, "version");
  const meta = metaText(memory.metadata);
  const title = firstWords(memory.content) || (toolCalls && toolCalls.length ? toolCallText(toolCalls[0]) : "")
                || memory.id;
  return h("li", { class: "card memory", "data-id": memory.id },
    h("p", { class: "line" },
      h("time", { datetime: memory.timestamp || "" }, fmtTime(memory.timestamp)),
      h("span", { class: "speaker" }, memory.speaker || memory.role, memory.speaker ? ` (${memory.role})` : ""),
      memory.session_id ? h("span", { class: "session" }, `session ${memory.session_id}`) : null,
      h("span", { class: "versions" }, versions)),
    turnBody(memory, toolCalls),
    meta ? h("p", { class: "meta" }, h("span", { class: "label" }, "metadata "), h("code", {}, meta)) : null,
    h("p", { class: "actions" },
      link({ ...nsParams(state), view: "history", id: memory.id }, "Open",
           { "aria-label": `Open memory ${title}` }),
      h("small", { class: "id" }, `id ${memory.id}`)));
}

function memoryFilters(state) {
  const filters = {};
  if (state.metadata) {
    try {
      filters.metadata = JSON.parse(state.metadata);
    } catch (exc) {
      throw new ApiError(400, { type: "InvalidQueryError", message: `metadata filter: not JSON (${exc.message})`,
                                fix: 'write a JSON object, e.g. {"topic": "travel"}' });
    }
  }
  if (state.since) filters.since = state.since;
  if (state.until) filters.until = state.until;
  return Object.keys(filters).length ? JSON.stringify(filters) : null;
}

async function viewMemories(state) {
  const inputs = {
    metadata: h("input", { type: "text", name: "metadata", value: state.metadata, placeholder: '{"topic": "travel"}',
                           spellcheck: "false" }),
    session_id: h("input", { type: "text", name: "session_id", value: state.session_id }),
    since: h("input", { type: "datetime-local", name: "since", value: state.since }),
    until: h("input", { type: "datetime-local", name: "until", value: state.until }),
  };
  const active = Boolean(state.metadata || state.session_id || state.since || state.until);
  const form = h("form", { class: "filters", "aria-label": "Filter memories" },
    h("details", { open: active }, h("summary", {}, active ? "Filters (active)" : "Filters"),
      h("div", { class: "row" },
        field("Metadata (JSON)", inputs.metadata), field("Session", inputs.session_id),
        field("Since (UTC)", inputs.since), field("Until (UTC)", inputs.until)),
      h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Apply filters"),
        link(nsParams(state), "Clear filters"))));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const values = Object.fromEntries(Object.entries(inputs).map(([key, input]) => [key, input.value.trim()]));
    navigate(href({ ...nsParams(state), ...values }));
  });
  const search = searchForm(state);
  const list = h("ol", { id: "memories", class: "cards", "aria-label": `Memories of ${state.user_id}` });
  const more = h("button", { type: "button", id: "more", class: "secondary", hidden: true }, "More memories");
  const status = h("div", { class: "status" });
  const filters = memoryFilters(state);
  let cursor = null;
  let shown = 0;
  async function load() {
    more.disabled = true;
    const page = await api("GET", "/v1/memories", { params: { ...nsParams(state), session_id: state.session_id,
                                                              limit: PAGE_SIZE, cursor, filters } });
    const calls = await toolCallsOf(state, page.items);
    list.append(...page.items.map((memory) => memoryCard(state, memory, calls[memory.turn_id])));
    shown += page.items.length;
    cursor = page.next_cursor;
    more.hidden = !cursor;
    more.disabled = false;
    if (shown > 0) {
      status.replaceChildren(h("p", {}, `${plural(shown, "memory", "memories")} shown, newest first${
        cursor ? "" : " (all of them)"}.`));
    } else {
      status.replaceChildren(...emptyStatus(state, others, active));
    }
  }
  more.addEventListener("click", () => load().catch(showError));
  // every namespace of the user: memories stored under an agent are not in the user's own namespace, and a page
  // that only said "No memories match" would read as "this user has no memories"
  const namespaces = (await overview()).filter((row) => row.user_id === state.user_id);
  const others = namespaces.filter((row) => (row.agent_id || "") !== state.agent_id && row.memories > 0);
  await load();
  return [h("h1", {}, `Memories of ${state.user_id}`), agentsNav(state, namespaces), search, form, status, list,
          more];
}

// Links to each namespace of the user (its own, and one per agent) with their counts; none when there is one.
function agentsNav(state, namespaces) {
  const current = namespaces.some((row) => (row.agent_id || "") === state.agent_id);
  if (namespaces.length === 0 || (namespaces.length === 1 && current)) return null;
  return h("nav", { id: "agents", class: "agents", "aria-label": `Agents of ${state.user_id}` },
    h("span", { class: "label" }, "Agents: "),
    namespaces.map((row) => {
      const here = (row.agent_id || "") === state.agent_id;
      return link({ user_id: state.user_id, agent_id: row.agent_id || null },
                  `${agentName(row.agent_id)} (${row.memories})`, here ? { "aria-current": "page" } : {});
    }));
}

// What an empty list says: which other agents of the user hold memories (with a link to each), or how memories
// get here when the user has none at all.
function emptyStatus(state, others, filtered) {
  const here = state.agent_id ? `under agent ${state.agent_id}` : "without an agent";
  if (others.length === 0) {
    if (filtered) return [h("p", { id: "empty" }, "No memories match these filters. ", link(nsParams(state),
                                                                                            "Clear filters"), ".")];
    return [h("div", { class: "empty", id: "empty" },
      h("p", {}, h("strong", {}, `${state.user_id} has no memories ${state.agent_id ? here : "yet"}.`)),
      h("p", {}, "They appear here once an agent saves them for this user (the MCP tool save_memory, ",
        "POST /v1/turns, a LangChain or LlamaIndex adapter), or after you ",
        link({ ...nsParams(state), view: "data" }, "import an export or a mem0 file"), "."))];
  }
  const total = others.reduce((sum, row) => sum + row.memories, 0);
  const links = others.flatMap((row, i) => [
    i ? ", " : "",
    link({ user_id: state.user_id, agent_id: row.agent_id || null },
         `show ${agentName(row.agent_id)} (${row.memories})`)]);
  return [h("p", { id: "empty" }, `No memories ${filtered ? "match " : ""}${here}; ${state.user_id} has ${
    plural(total, "memory", "memories")} under ${others.map((row) => agentName(row.agent_id)).join(", ")}: `,
            ...links, ".")];
}

function searchForm(state) {
  const query = h("input", { type: "search", name: "q", value: state.q, required: true,
                             placeholder: "what does the agent remember about…" });
  const k = h("input", { type: "number", name: "k", min: "1", max: "200", value: state.k || "10" });
  const explain = h("input", { type: "checkbox", name: "explain", checked: state.explain });
  const form = h("form", { class: "search", role: "search", "aria-label": "Search memories" },
    h("div", { class: "row" }, field("Search query", query), field("Results (k)", k, null, "small"),
      h("div", { class: "field check" }, h("label", {}, explain, " Explain scores")),
      h("button", { type: "submit", class: "primary" }, "Search")));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    navigate(href({ ...nsParams(state), view: "search", q: query.value, k: k.value === "10" ? "" : k.value,
                    explain: explain.checked ? "1" : "" }));
  });
  return form;
}

// "keyword #1", "vector #3", "keyword #2 (second hop)"
function channelChips(channels) {
  const entries = Object.entries(channels || {}).sort((a, b) => a[1] - b[1]);
  if (!entries.length) return [h("span", {}, "—")];
  return entries.map(([name, rank]) => {
    const [channel, route] = name.split("@");
    const where = route ? ` (${route === "feedback" ? "second hop" : `${route} route`})` : "";
    return h("span", { class: "chip" }, `${channel} #${rank}${where}`);
  });
}

const PARTS = [["window", "window (the turns around it)"], ["time_boost", "time boost"],
               ["speaker_boost", "speaker named"], ["session_prior", "session prior"],
               ["answer", "answer link (a reply to a question)"], ["kind_bonus", "kind bonus"],
               ["derived", "derived records"]];

// One route of an explanation: what each channel and each boost added to the route's score, as bars.
function routeTable(name, route, weight) {
  const rows = [];
  for (const [channel, parts] of Object.entries(route.channels || {})) {
    const value = (parts.z || 0) * (parts.weight === undefined ? 1 : parts.weight);
    rows.push([`${channel} channel`, value, `score ${num(parts.score)}, z ${num(parts.z)} × weight ${num(parts.weight)}`]);
  }
  for (const [key, label] of PARTS) {  // the window, the time boost and the answer link always; the rest when set
    const always = key === "window" || key === "time_boost" || key === "answer";
    if (typeof route[key] === "number" && (always || route[key] !== 0)) rows.push([label, route[key], ""]);
  }
  const known = new Set(["channels", "fused", "route_score", ...PARTS.map(([key]) => key)]);
  for (const [key, value] of Object.entries(route)) {
    if (!known.has(key) && typeof value === "number" && value !== 0) rows.push([key.replace(/_/g, " "), value, ""]);
  }
  const widest = Math.max(1e-9, ...rows.map((row) => Math.abs(row[1])));
  const label = name === "query" ? "the question" : name === "feedback" ? "the second hop" : `route ${name}`;
  return h("table", { class: "explain-table" },
    h("caption", {}, `${label[0].toUpperCase()}${label.slice(1)}: route score ${num(route.route_score)}` +
                     (weight !== undefined ? `, weight ${num(weight)}` : "")),
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Part"), h("th", { scope: "col", class: "num" }, "Adds"),
                     h("th", { scope: "col" }, h("span", { class: "visually-hidden" }, "Bar")))),
    h("tbody", {}, rows.map(([part, value, note]) => {
      const bar = h("span", { class: value < 0 ? "bar negative" : "bar" });
      bar.style.width = `${Math.round((Math.abs(value) / widest) * 100)}%`;  // CSSOM: allowed by the CSP
      return h("tr", {}, h("th", { scope: "row" }, part, note ? h("small", { class: "note" }, ` ${note}`) : null),
               h("td", { class: "num" }, num(value)), h("td", { class: "bar-cell" }, bar));
    })));
}

function explanationView(explanation) {
  const score = explanation.score || {};
  const routes = explanation.routes || {};
  const weights = explanation.route_weights || {};
  const facts = [
    ["relevance (the score)", num(score.relevance)], ["fused raw score", num(score.raw)],
    score.cosine !== undefined ? ["cosine with the question", num(score.cosine)] : null,
    explanation.fusion ? ["fusion", explanation.fusion] : null,
    explanation.mmr ? ["diversity (MMR)", `picked ${explanation.mmr.selected_at ?? "—"} of the pool (pool rank ${
      explanation.mmr.pool_rank ?? "—"})`] : null,
    explanation.cold_penalty ? ["cold tier penalty", num(explanation.cold_penalty)] : null,
  ].filter(Boolean);
  return h("div", { class: "explanation" },
    h("dl", { class: "facts" }, facts.flatMap(([term, value]) => [h("dt", {}, term), h("dd", {}, value)])),
    Object.entries(routes).map(([name, route]) => h("div", { class: "scroll" }, routeTable(name, route, weights[name]))),
    h("details", { class: "raw" }, h("summary", {}, "Raw explanation (JSON)"), h("pre", { class: "json" },
                                                                                json(explanation))));
}

// A search item as the turn it is (its text, or the tool calls of a turn without text; a tool's result).
function itemBody(item, calls) {
  const turn = { content: item.text, role: item.role, metadata: item.metadata || {} };
  return item.kind === "turn" ? turnBody(turn, calls) : [h("p", { class: "content" }, item.text)];
}

function resultCard(state, item, calls) {
  const meta = metaText(item.metadata);
  const memoryId = item.kind === "turn" ? (item.external_ids[0] || item.turn_ids[0] || item.id) : null;
  const weak = item.score < RELEVANT;
  return h("li", { class: weak ? "card item weak" : "card item", "data-id": item.id },
    h("p", { class: "line" },
      h("span", { class: "score", title: weak ? "below the 0.5 line: a weak match" : "a match" },
        `score ${item.score.toFixed(2)}`),
      h("time", { datetime: item.timestamp || "" }, fmtTime(item.timestamp)),
      h("span", { class: "speaker" }, item.speaker || item.role || ""),
      item.kind !== "turn" ? h("span", { class: "kind" }, item.kind) : null),
    itemBody(item, calls),
    h("p", { class: "channels" }, h("span", { class: "label" }, "found by "), channelChips(item.channels)),
    meta ? h("p", { class: "meta" }, h("span", { class: "label" }, "metadata "), h("code", {}, meta)) : null,
    item.explanation ? h("details", { class: "explain" }, h("summary", {}, "Why this score"),
                         explanationView(item.explanation)) : null,
    memoryId ? h("p", { class: "actions" }, link({ ...nsParams(state), view: "history", id: memoryId }, "Open",
                                                 { "aria-label": `Open memory ${firstWords(item.text) ||
                                                   (calls && calls.length ? toolCallText(calls[0]) : memoryId)}` }),
                 h("small", { class: "id" }, `id ${memoryId}`)) : null);
}

async function viewSearch(state) {
  const form = searchForm(state);
  const parts = [h("h1", {}, `Search ${state.user_id}'s memory`), form];
  if (!state.q) return parts;
  const result = await api("POST", "/v1/search", { busy: "Searching",
                                                   body: { ...nsParams(state), query: state.q,
                                                           k: Number(state.k || 10), explain: state.explain } });
  const found = await toolCallsOf(state, result.items.filter((item) => item.kind === "turn").map((item) => ({
    content: item.text, role: item.role, session_id: item.session_id })));
  const callsOf = (item) => found[item.turn_ids[0]];
  const strong = result.items.filter((item) => item.score >= RELEVANT);
  const weak = result.items.filter((item) => item.score < RELEVANT);
  const notes = [...(result.warnings || []),
                 ...(result.channel_errors || []).map((e) => `the ${e.channel} channel failed (${e.error_type}${
                   e.message ? `: ${e.message}` : ""}); the results come from the others`)];
  parts.push(notes.length ? h("ul", { class: "warnings", "aria-label": "Warnings" },
                              notes.map((note) => h("li", {}, note))) : null);
  if (strong.length) {
    parts.push(h("h2", {}, `${plural(strong.length, "match", "matches")}`),
               h("ol", { id: "results", class: "cards", "aria-label": "Matches" },
                 strong.map((item) => resultCard(state, item, callsOf(item)))));
  } else {
    parts.push(h("div", { class: "empty", id: "empty" },
      h("p", {}, h("strong", {}, `Nothing relevant found for “${state.q}”.`)),
      h("p", {}, result.items.length
        ? `No memory scores 0.5 or more (the line between a match and a weak one); the nearest ${
          plural(weak.length, "turn")} ${weak.length === 1 ? "is" : "are"} listed below as weak matches.`
        : `${state.user_id}${state.agent_id ? ` (agent ${state.agent_id})` : ""} has no memories to search.`)));
  }
  if (weak.length) {
    parts.push(h("details", { id: "weak", class: "weak-group", open: false },
      h("summary", {}, `${plural(weak.length, "weak match", "weak matches")} (score below 0.5)`),
      h("ol", { id: "weak-results", class: "cards", "aria-label": "Weak matches" },
        weak.map((item) => resultCard(state, item, callsOf(item))))));
  }
  parts.push(h("h2", { id: "context-title" }, "Context the model gets"),
             h("p", { class: "hint" }, "What search returns as context by default (weak matches included; an agent ",
               "that passes min_score 0.5 gets only the matches' windows)."),
             h("pre", { id: "context", class: "context", "aria-labelledby": "context-title" },
               result.context || "(empty)"));
  return parts;
}

function versionItem(version, n) {
  const meta = metaText(version.metadata);
  const label = { add: "added", update: "updated", supersede: "superseded", delete: "forgotten" }[version.operation]
                || version.operation;
  return h("li", { class: `card version op-${version.operation}` },
    h("p", { class: "line" },
      h("span", { class: "op" }, version.operation === "delete" ? label : `version ${n} · ${label}`),
      h("time", { datetime: version.timestamp }, fmtTime(version.timestamp)),
      version.valid_to ? h("span", {}, `valid until ${fmtTime(version.valid_to)}`) : null,
      version.current ? h("span", { class: "current" }, "current") : null),
    h("p", { class: "content" }, version.content === null ? "(no text: forgotten)" : version.content),
    meta ? h("p", { class: "meta" }, h("span", { class: "label" }, "metadata "), h("code", {}, meta)) : null);
}

function deleteSentences(state, title, receipt) {
  const versions = receipt.turns;
  return [[`Forgot “${title}”: ${plural(versions, "version")} (${plural(receipt.records, "record")})${
    storesText(receipt)} — ${purgeText(receipt)}.`],
          [link({ ...nsParams(state) }, `Back to ${state.user_id}'s memories`)]];
}

async function viewHistory(state) {
  // the history first: it answers for a forgotten memory too (its operations, without text)
  const versions = await api("POST", "/v1/memories/history", { body: { ...nsParams(state), id: state.id } });
  const deleted = versions.length > 0 && versions[versions.length - 1].operation === "delete";
  const memory = deleted ? null
    : await api("GET", `/v1/memories/${encodeURIComponent(state.id)}`, { params: nsParams(state) });
  let adds = 0;
  const history = h("ol", { id: "history", class: "cards", "aria-label": "Versions and operations, oldest first" },
                    versions.map((version) => versionItem(version, version.operation === "add" ||
                                                          version.operation === "update" ? ++adds : adds)));
  const known = versions.map((v) => v.content).filter(Boolean);
  const calls = memory && !memory.content ? (await toolCallsOf(state, [memory]))[memory.turn_id] : null;
  const title = firstWords(memory ? memory.content : known[known.length - 1])
                || (calls && calls.length ? toolCallText(calls[0]) : "") || (deleted ? "A forgotten memory"
                                                                                      : `Memory ${state.id}`);
  const parts = [h("h1", {}, title), h("p", { class: "id" }, `memory id ${state.id}`)];
  if (memory) {
    const content = h("textarea", { name: "content", rows: "4", value: memory.content });
    content.value = memory.content;
    const save = h("button", { type: "submit", class: "primary" }, "Save as a new version");
    const forget = h("button", { type: "button", class: "danger", id: "forget-memory" }, "Forget this memory");
    forget.addEventListener("click", () => act({
      title: "Forget this memory?", destructive: true, button: forget,
      text: `Every version of “${title}” is removed from every store; the history keeps only that it was forgotten.`,
      ok: "Forget", call: () => api("POST", "/v1/memories/delete", { busy: "Forgetting",
                                                                     body: { ...nsParams(state), ids: [state.id] } }),
      receipt: (receipt) => ["Forgotten", deleteSentences(state, title, receipt)] }));
    const edit = h("form", { class: "card edit", "aria-label": "Edit this memory" },
      h("p", { class: "line" }, h("time", {}, fmtTime(memory.timestamp)), h("span", {}, memory.speaker || memory.role),
        memory.session_id ? h("span", {}, `session ${memory.session_id}`) : null,
        h("span", {}, plural(memory.version_count, "version"))),
      calls ? turnBody(memory, calls) : null,
      field("Content of the new version", content),
      h("div", { class: "row" }, save, forget));
    edit.addEventListener("submit", (event) => {
      event.preventDefault();
      const next = memory.version_count + 1;
      act({ title: "Save a new version?", text: "The current version is kept in the history.", ok: "Save",
            button: save,
            call: () => api("POST", "/v1/memories/update", { busy: "Saving",
                                                             body: { ...nsParams(state), id: state.id,
                                                                     content: content.value } }),
            receipt: () => ["Saved", [[`Saved version ${next} of “${firstWords(content.value)}”.`],
                                      [`The previous version stays in the history below.`]]] });
    });
    parts.push(h("h2", {}, "Current version"), edit);
  } else {
    parts.push(h("p", { class: "status" }, "This memory was forgotten; its history keeps the operations."));
  }
  parts.push(h("h2", {}, "History"), history);
  return parts;
}

// A title or an abstract without its case, spacing and closing punctuation (to show an abstract only when it says
// more than the title).
function bare(text) {
  return String(text || "").toLowerCase().replace(/\s+/g, " ").replace(/[\s.…!?;:,]+$/, "").trim();
}

async function viewFiles(state) {
  const [prompt, hooks] = await Promise.all([
    api("POST", "/v1/prompt", { body: nsParams(state) }),
    api("GET", "/v1/hooks", { params: { ...nsParams(state), include_merged: "true" } }),
  ]);
  const viewer = h("section", { id: "file", "aria-label": "Open memory file", hidden: true });
  async function open(hook, name) {
    const file = await api("GET", `/v1/files/${encodeURIComponent(hook.id)}`, { params: nsParams(state),
                                                                               busy: "Opening the file" });
    viewer.replaceChildren(h("h2", {}, name), h("p", { class: "id" }, `file id ${hook.id}`),
                           h("pre", { class: "context" }, file.text || file.raw || "(empty)"));
    viewer.hidden = false;
    viewer.scrollIntoView();
  }
  const list = h("ol", { id: "hooks", class: "cards", "aria-label": "Memory files" }, hooks.map((hook, n) => {
    const name = hook.title || `${hook.period} file ${hook.period_key}`;
    const titleId = `hook-title-${n}`;
    const importance = h("input", { type: "number", min: "0", max: "100", value: String(hook.importance),
                                    "aria-label": `Importance of ${name} (0-100)` });
    const setButton = h("button", { type: "submit", class: "secondary" }, "Set importance");
    const setForm = h("form", { class: "row" }, field("Importance (0-100)", importance, null, "small"), setButton);
    setForm.addEventListener("submit", (event) => {
      event.preventDefault();
      act({ title: "Set the importance?", text: `${name}: ${hook.importance} → ${importance.value}`, ok: "Set",
            button: setButton,
            call: () => api("PUT", `/v1/files/${encodeURIComponent(hook.id)}/importance`,
                            { body: { ...nsParams(state), importance: Number(importance.value) } }),
            receipt: (set) => ["Importance set", [[`“${name}” now has importance ${set.importance} (was ${
              hook.importance}): the prompt index orders files by it.`]]] });
    });
    return h("li", { class: "card hook", "data-id": hook.id, "aria-labelledby": titleId },
      h("h3", { class: "hook-title", id: titleId }, name),
      h("p", { class: "line" }, h("span", {}, `${hook.period} ${hook.period_key}`), h("span", {}, hook.status),
        h("span", {}, `${hook.token_count} tokens`), h("small", { class: "id" }, `id ${hook.id}`)),
      hook.abstract && bare(hook.abstract) !== bare(hook.title) ? h("p", { class: "content" }, hook.abstract) : null,
      h("div", { class: "row" },
        h("button", { type: "button", class: "secondary", "aria-label": `Open file ${name}`,
                      onclick: () => open(hook, name).catch(showError) }, "Open file"),
        setForm));
  }));
  const compact = h("button", { type: "button", id: "compact", class: "secondary" }, "Run due compaction");
  compact.addEventListener("click", () => act({
    title: "Run the compaction that is due?", text: "Weekly merge and monthly eviction of the periods that are due.",
    ok: "Run compaction", button: compact,
    call: () => api("POST", "/v1/maybe_compact", { body: nsParams(state), busy: "Compacting" }),
    receipt: (report) => {
      const steps = report.steps || [];
      const changed = steps.filter((step) => step.changed);
      return ["Compaction done", [[steps.length
        ? `Examined ${plural(steps.length, "period")}; ${changed.length ? `changed ${changed.map((s) => s.period)
          .join(", ")}` : "none needed a change"}.`
        : "Nothing was due: no week or month is ready to merge or evict."]]];
    } }));
  return [h("h1", {}, `Memory files of ${state.user_id}`),
          h("h2", { id: "prompt-title" }, "Prompt index (what the system prompt shows)"),
          h("pre", { id: "prompt", class: "context", "aria-labelledby": "prompt-title" }, prompt.prompt || "(empty)"),
          h("h2", {}, plural(hooks.length, "file")), list, viewer, h("h2", {}, "Compaction"), compact];
}

// What an import file holds, read in the page before it is sent: its format and whose memory it is.
function previewImport(text, name) {
  const trimmed = text.trim();
  let doc = null;
  if (trimmed.startsWith("[") || (trimmed.startsWith("{") && !trimmed.includes("\n{"))) {
    try {
      doc = JSON.parse(trimmed);
    } catch (_) { doc = null; }
  }
  if (doc !== null && (Array.isArray(doc) || Array.isArray(doc.results))) {
    const entries = (Array.isArray(doc) ? doc : doc.results).filter((e) => e && typeof e === "object");
    const owners = {};
    let unnamed = 0;
    for (const entry of entries) {
      if (entry.user_id) owners[entry.user_id] = (owners[entry.user_id] || 0) + 1;
      else unnamed += 1;
    }
    return { format: "mem0", name, entries: entries.length, owners, unnamed };
  }
  const owners = {};
  let current = null;
  let lines = 0;
  for (const line of trimmed.split("\n")) {
    if (!line.trim()) continue;
    lines += 1;
    let record;
    try {
      record = JSON.parse(line);
    } catch (_) {
      return { format: "memory-ext", name, error: `line ${lines} is not JSON`, owners, unnamed: 0 };
    }
    if (record.type === "namespace") {
      current = `${record.user_id}${record.agent_id ? ` (agent ${record.agent_id})` : ""}`;
      owners[current] = owners[current] || 0;
    } else if (record.type === "turn" && current !== null) {
      owners[current] += 1;
    }
  }
  return { format: "memory-ext", name, entries: lines, owners, unnamed: 0 };
}

async function viewData(state) {
  const exportButton = h("button", { type: "button", id: "export", class: "primary" },
                         `Export ${state.user_id}'s memory`);
  exportButton.addEventListener("click", async () => {
    clearError();
    exportButton.disabled = true;
    try {
      const response = await api("GET", "/v1/export", { params: nsParams(state), raw: true, busy: "Exporting" });
      const blob = await response.blob();
      const named = /filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "");
      const url = URL.createObjectURL(blob);
      const a = h("a", { href: url, download: named ? named[1] : `memory-ext-${state.user_id}.jsonl`, hidden: true });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    } catch (exc) {
      showError(exc);
    } finally {
      exportButton.disabled = false;
    }
  });
  const rows = await overview();
  const users = [...new Set([state.user_id, ...rows.map((row) => row.user_id)])].sort();
  const file = h("input", { type: "file", name: "file", accept: ".jsonl,.ndjson,.json,application/json",
                            required: true });
  const format = h("select", { name: "format" }, h("option", { value: "memory-ext" }, "memory-ext (memext export)"),
                   h("option", { value: "mem0" }, "mem0 (get_all JSON)"));
  const target = h("input", { type: "text", name: "user_id", value: state.user_id, list: "known-users",
                              required: true, spellcheck: "false", autocomplete: "off" });
  const targetField = field("Import entries without a user into", target,
                            "A mem0 entry's own user_id wins; this user gets the entries that name none.");
  targetField.hidden = true;
  const preview = h("div", { id: "import-preview", class: "preview", "aria-live": "polite" },
                    h("p", { class: "hint" }, "Choose a file: the page shows whose memories it holds before anything "
                                              + "is imported."));
  const submit = h("button", { type: "submit", class: "primary", disabled: true }, "Import");
  let seen = null;
  function describe() {
    if (!seen) return;
    const isMem0 = format.value === "mem0";
    targetField.hidden = !isMem0;
    const who = Object.entries(seen.owners).map(([user, n]) => `${user} (${plural(n, isMem0 ? "entry" : "turn",
                                                                                 isMem0 ? "entries" : "turns")})`);
    const sentences = [];
    if (seen.error) sentences.push(`This file cannot be imported: ${seen.error}.`);
    if (isMem0) {
      if (who.length) sentences.push(`Entries that name their user go to them: ${who.join(", ")}.`);
      if (seen.unnamed) sentences.push(`${seen.unnamed === 1 ? "1 entry names no user: it goes" : `${seen.unnamed} ` +
        "entries name no user: they go"} to ${target.value.trim() || "(choose a user)"}.`);
      if (!seen.entries) sentences.push("The file holds no mem0 entry.");
    } else {
      sentences.push(who.length ? `This export restores the memories of ${who.join(", ")} (the users it was ` +
                                  "exported from)." : "This file names no user: is it a memext export?");
    }
    preview.replaceChildren(h("p", {}, h("strong", {}, `${seen.name}: `), `${seen.format === "mem0" ? "a mem0 file"
      : "a memory-ext export"}.`), ...sentences.map((s) => h("p", { class: "target" }, s)));
    submit.disabled = Boolean(seen.error) || (isMem0 && seen.unnamed > 0 && !target.value.trim());
  }
  file.addEventListener("change", async () => {
    const chosen = file.files[0];
    seen = null;
    submit.disabled = true;
    if (!chosen) return;
    seen = previewImport(await chosen.text(), chosen.name);
    format.value = seen.format;
    describe();
  });
  format.addEventListener("change", async () => {
    if (file.files[0]) seen = { ...previewImport(await file.files[0].text(), file.files[0].name), format: format.value };
    describe();
  });
  target.addEventListener("input", describe);
  const form = h("form", { class: "card", "aria-label": "Import memories" },
    h("div", { class: "row" }, field("Export file", file), field("Format", format, null, "medium")),
    h("datalist", { id: "known-users" }, users.map((user) => h("option", { value: user }))),
    preview, h("div", { class: "row" }, targetField), h("div", { class: "row" }, submit));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = file.files[0];
    if (!chosen || !seen) return;
    const isMem0 = format.value === "mem0";
    const fallback = target.value.trim() || state.user_id;
    const owners = Object.keys(seen.owners);
    const into = isMem0 ? [...owners, ...(seen.unnamed ? [fallback] : [])] : owners;
    const names = [...new Set(into)];
    act({ title: "Import this file?", text: `${chosen.name} (${chosen.size} bytes) into ${names.join(", ") || "—"}: ` +
                                            "what the store does not hold yet is added; the rest is skipped.",
          ok: "Import", button: submit,
          call: () => api("POST", "/v1/import", { busy: "Importing", params: { format: format.value,
                                                                                user_id: isMem0 ? fallback : null,
                                                                                wait: "true" },
                                                  body: chosen,
                                                  contentType: isMem0 ? "application/json"
                                                                      : "application/x-ndjson" }),
          receipt: (report) => {
            const added = [plural(report.turns, "turn")];
            if (report.files) added.push(plural(report.files, "memory file"));
            if (report.history) added.push(plural(report.history, "recorded operation"));
            if (report.items) added.push(plural(report.items, "store item"));
            const links = [...new Set(names.map((name) => name.replace(/ \(agent .*\)$/, "")))]
              .flatMap((user, i) => [i ? ", " : "", link({ user_id: user }, user)]);
            const nothing = !report.turns && !report.files && !report.history && !report.items;
            return ["Imported", [
              nothing ? ["Nothing new to import into ", ...links, "."]
                : [`Imported ${added.join(", ")} into `, ...links, "."],
              [report.skipped_turns ? `${plural(report.skipped_turns, "turn")} the store already held ${
                report.skipped_turns === 1 ? "was" : "were"} skipped.` : "Nothing in the file was already stored."]]];
          } });
  });
  return [h("h1", {}, "Export and import"),
          h("p", {}, "The same JSON-lines format as memext export / memext import."),
          h("h2", {}, "Export"), exportButton, h("h2", {}, "Import"), form];
}

async function viewForget(state) {
  const [rows, sessions] = await Promise.all([
    overview(), api("GET", "/v1/sessions", { params: nsParams(state) })]);
  const namespaces = rows.filter((row) => row.user_id === state.user_id);
  const here = state.agent_id ? ` (agent ${state.agent_id})` : "";
  const table = sessions.length === 0
    ? h("p", { class: "empty", id: "no-sessions" }, `${state.user_id}${here} has no sessions to forget.`)
    : h("div", { class: "scroll" }, h("table", { id: "sessions" },
      h("caption", {}, `Sessions of ${state.user_id}${here}, the most recent first`),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Session"), h("th", { scope: "col" }, "Dates"),
                       h("th", { scope: "col" }, "Size"),
                       h("th", { scope: "col" }, h("span", { class: "visually-hidden" }, "Action")))),
      h("tbody", {}, sessions.map((session) => {
        const name = session.session_id === null ? "(no session)" : session.session_id;
        const days = fmtDay(session.first) === fmtDay(session.last) ? [h("span", { class: "nowrap" },
                                                                          fmtDay(session.first))]
          : [h("span", { class: "nowrap" }, fmtDay(session.first)), " – ",
             h("span", { class: "nowrap" }, fmtDay(session.last))];
        const button = h("button", { type: "button", class: "danger small",
                                     "aria-label": `Forget session ${name}` }, "Forget");
        button.disabled = session.session_id === null;  // forget takes a session id; these go with the user
        button.addEventListener("click", () => act({
          title: `Forget session ${name}?`, destructive: true, button,
          text: `Its ${plural(session.memories, "memory", "memories")} (${plural(session.turns, "turn")}) of ${
            state.user_id} are removed from every store. This cannot be undone.`,
          ok: "Forget the session",
          call: () => api("POST", "/v1/forget", { busy: "Forgetting",
                                                  body: { ...nsParams(state), session_id: session.session_id } }),
          receipt: (receipt) => ["Forgotten", [[`Forgot ${plural(session.memories, "memory", "memories")} of session ${
            name} (${plural(receipt.turns, "turn")}, ${plural(receipt.records, "record")})${storesText(receipt)} — ${
            purgeText(receipt)}.`], [link(nsParams(state), `See what ${state.user_id} still has`)]]] }));
        return h("tr", { "data-session": name }, h("th", { scope: "row" }, name), h("td", { class: "dates" }, days),
                 h("td", { class: "size" }, `${plural(session.memories, "memory", "memories")}, ${
                   plural(session.turns, "turn")}`),
                 h("td", {}, button));
      }))));
  const userButton = h("button", { type: "button", class: "danger", id: "forget-user" },
                       `Forget everything of ${state.user_id}`);
  const agents = namespaces.length ? namespaces.map((row) => row.agent_id) : [state.agent_id || null];
  userButton.addEventListener("click", () => act({
    title: `Forget ${state.user_id}?`, destructive: true, button: userButton,
    text: `All of ${state.user_id}'s memory (${plural(agents.length, "namespace")}: ${agents.map(agentName)
      .join(", ")}) is removed from every store. This cannot be undone.`,
    ok: `Forget ${state.user_id}`,
    call: async () => {
      const receipts = [];
      for (const agent of agents) {
        receipts.push(await api("POST", "/v1/forget", { busy: "Forgetting",
                                                        body: { user_id: state.user_id, agent_id: agent } }));
      }
      return receipts;
    },
    receipt: (receipts) => {
      const turns = receipts.reduce((sum, r) => sum + r.turns, 0);
      const left = receipts.filter((r) => r.purge_complete === false);
      return ["Forgotten", [[`Forgot everything of ${state.user_id}: ${plural(turns, "turn")} in ${
        plural(receipts.length, "namespace")} (${agents.map(agentName).join(", ")}) — ${
        left.length ? purgeText(left[0]) : "nothing left on disk"}.`], [link({}, "Back to the overview")]]];
    } }));
  return [h("h1", {}, "Forget"),
          h("h2", {}, "A session"), table,
          h("p", { class: "hint" }, "To forget one memory, open it from ", link(nsParams(state), "Memories"),
            " and use Forget this memory."),
          h("h2", {}, "The user"), userButton];
}

const RENDERERS = { memories: viewMemories, search: viewSearch, history: viewHistory, files: viewFiles,
                    data: viewData, forget: viewForget };

let info = null;
let generation = 0;

async function render(options) {
  const mine = ++generation;
  const state = route();
  const view = $("view");
  if (!(options && options.keepReceipt)) clearReceipt();
  clearError();
  overviewCache = null;
  view.setAttribute("aria-busy", "true");
  try {
    if (!info) info = await api("GET", "/v1/info");
    const rows = await overview();
    if (mine !== generation) return;
    renderChrome(state, info, rows);
    const renderer = !state.user_id ? viewOverview : RENDERERS[state.view] || viewMemories;
    const parts = await renderer(state);
    if (mine === generation) view.replaceChildren(...parts.filter(Boolean));
  } catch (exc) {
    if (mine !== generation) return;
    if (!(exc instanceof TokenNeeded)) {
      view.replaceChildren();
      showError(exc);
    }
  } finally {
    if (mine === generation) view.removeAttribute("aria-busy");
  }
}

document.addEventListener("DOMContentLoaded", () => render());

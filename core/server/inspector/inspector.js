// memory-ext inspector: one page over the REST API of `memext serve` (same origin, no framework, nothing remote).
//
// Views (deep links: everything is in the query string):
//   /                                    users and agents with counts
//   /?user_id=maya[&agent_id=a]          Maya's memories, newest first (filters: metadata, session_id, since, until),
//                                        with a link to each of her agents
//   /?user_id=maya&view=search&q=...     a search as the model sees it (items, channels, explain, context)
//   /?user_id=maya&view=history&id=...   a memory's versions and operations; edit and delete
//   /?user_id=maya&view=files            the prompt index, memory files, importance, compaction
//   /?user_id=maya&view=data             export and import
//   /?user_id=maya&view=forget           forget a session or the user
//
// Stored memories are attacker-controlled text: every value reaches the page as a text node (textContent), never
// as HTML. The bearer token, when the server needs one, lives in this tab's sessionStorage only.
"use strict";

const TOKEN_KEY = "memext-token";
const PAGE_SIZE = 50;
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

async function api(method, path, { params, body, raw, contentType } = {}) {
  const url = new URL(path, location.origin);
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== null && value !== undefined && value !== "") url.searchParams.set(key, String(value));
  }
  const headers = { Accept: "application/json" };
  const secret = token();
  if (secret) headers.Authorization = `Bearer ${secret}`;
  let payload;
  if (body instanceof Blob) {
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

function showError(exc) {
  const box = $("error");
  if (exc instanceof TokenNeeded) return;
  const error = exc instanceof ApiError ? exc.error : { type: exc.name || "Error", message: String(exc.message) };
  box.replaceChildren(h("strong", {}, `${error.type}: `), error.message || "",
                      error.fix ? h("p", { class: "fix" }, `Fix: ${error.fix}`) : null);
  box.hidden = false;
}

function clearError() {
  $("error").hidden = true;
  $("error").replaceChildren();
}

function showReceipt(title, value) {
  const box = $("receipt");
  box.replaceChildren(h("h2", {}, title), h("pre", { class: "json" }, json(value)),
                      h("button", { type: "button", onclick: clearReceipt }, "Dismiss receipt"));
  box.hidden = false;
}

function clearReceipt() {
  $("receipt").hidden = true;
  $("receipt").replaceChildren();
}

function confirmAction(title, text, okLabel) {
  const dialog = $("confirm");
  $("confirm-title").textContent = title;
  $("confirm-text").textContent = text;
  $("confirm-ok").textContent = okLabel || "Confirm";
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
    $("confirm-cancel").focus();
  });
}

// Run an action that changes the store: confirm, call, show the receipt, render the view again.
async function act({ title, text, ok, call, receipt }) {
  clearReceipt();  // before the dialog opens: the receipt shown next is this action's
  if (!(await confirmAction(title, text, ok))) return;
  clearError();
  try {
    const result = await call();
    await render({ keepReceipt: true });
    showReceipt(receipt, result);
  } catch (exc) {
    showError(exc);
  }
}

// -- the token form ---------------------------------------------------------------------------------------------

function showTokenForm(message) {
  $("tabs").hidden = true;
  const input = h("input", { type: "password", name: "token", autocomplete: "off", required: true,
                             spellcheck: "false" });
  const form = h("form", { class: "card token", "aria-labelledby": "token-title" },
    h("h1", { id: "token-title" }, "This server needs a token"),
    message ? h("p", { class: "error", role: "alert" }, message) : null,
    h("p", {}, "It is kept for this tab only (sessionStorage) and sent as an Authorization: Bearer header."),
    field("Bearer token", input),
    h("button", { type: "submit" }, "Use this token"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    info = null;  // another token may be pinned to another user
    render();
  });
  $("view").replaceChildren(form);
  input.focus();
}

// -- views ------------------------------------------------------------------------------------------------------

function renderChrome(state, info) {
  const who = $("who");
  const tabs = $("tabs");
  const pin = info && info.user_id ? ` · token pinned to ${info.user_id}` : "";
  if (!state.user_id) {
    who.textContent = info ? `memory-ext ${info.version}${pin}` : "";
    tabs.hidden = true;
    return;
  }
  who.textContent = `user ${state.user_id}${state.agent_id ? ` · agent ${state.agent_id}` : ""}${pin}`;
  const active = state.view === "history" ? "memories" : state.view;
  tabs.replaceChildren(...VIEWS.map(([view, label]) =>
    link({ ...nsParams(state), view: view === "memories" ? null : view }, label,
         view === active ? { "aria-current": "page" } : {})));
  tabs.hidden = false;
}

async function viewOverview() {
  const rows = await api("GET", "/v1/overview");
  const body = rows.length === 0
    ? [h("p", {}, "The store holds no memories yet.")]
    : [h("div", { class: "scroll" }, h("table", { id: "overview" },
        h("caption", {}, "Each row is a namespace: a user, or a user with one agent"),
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "User"), h("th", { scope: "col" }, "Agent"),
                         h("th", { scope: "col", class: "num" }, "Memories"),
                         h("th", { scope: "col", class: "num" }, "Turns"))),
        h("tbody", {}, rows.map((row) => h("tr", {},
          h("th", { scope: "row" }, link({ user_id: row.user_id }, row.user_id)),
          h("td", {}, row.agent_id ? link({ user_id: row.user_id, agent_id: row.agent_id }, row.agent_id) : "—"),
          h("td", { class: "num" }, String(row.memories)), h("td", { class: "num" }, String(row.turns))))))),
      ];
  return [h("h1", {}, "Users and agents"), ...body];
}

function metaText(metadata) {
  return metadata && Object.keys(metadata).length ? JSON.stringify(metadata) : null;
}

function memoryCard(state, memory) {
  const versions = memory.version_count === 1 ? "1 version" : `${memory.version_count} versions`;
  const meta = metaText(memory.metadata);
  return h("li", { class: "card memory", "data-id": memory.id },
    h("p", { class: "line" },
      h("time", { datetime: memory.timestamp || "" }, fmtTime(memory.timestamp)),
      h("span", { class: "speaker" }, memory.speaker || memory.role, memory.speaker ? ` (${memory.role})` : ""),
      memory.session_id ? h("span", { class: "session" }, `session ${memory.session_id}`) : null,
      h("span", { class: "versions" }, versions)),
    h("p", { class: "content" }, memory.content),
    meta ? h("p", { class: "meta" }, h("span", { class: "label" }, "metadata "), h("code", {}, meta)) : null,
    h("p", { class: "actions" },
      link({ ...nsParams(state), view: "history", id: memory.id }, "History and edit",
           { "aria-label": `History and edit of memory ${memory.id}` })));
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
      h("div", { class: "row" }, h("button", { type: "submit" }, "Apply filters"),
        link(nsParams(state), "Clear filters"))));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const values = Object.fromEntries(Object.entries(inputs).map(([key, input]) => [key, input.value.trim()]));
    navigate(href({ ...nsParams(state), ...values }));
  });
  const search = searchForm(state);
  const list = h("ol", { id: "memories", class: "cards", "aria-label": `Memories of ${state.user_id}` });
  const more = h("button", { type: "button", id: "more", hidden: true }, "More memories");
  const status = h("p", { class: "status" });
  const filters = memoryFilters(state);
  let cursor = null;
  let shown = 0;
  async function load() {
    more.disabled = true;
    const page = await api("GET", "/v1/memories", { params: { ...nsParams(state), session_id: state.session_id,
                                                              limit: PAGE_SIZE, cursor, filters } });
    list.append(...page.items.map((memory) => memoryCard(state, memory)));
    shown += page.items.length;
    cursor = page.next_cursor;
    more.hidden = !cursor;
    more.disabled = false;
    if (shown > 0) {
      status.textContent = `${shown} memories shown, newest first${cursor ? "" : " (all of them)"}.`;
    } else {
      status.replaceChildren(...emptyStatus(state, others, active));
    }
  }
  more.addEventListener("click", () => load().catch(showError));
  // every namespace of the user: memories stored under an agent are not in the user's own namespace, and a page
  // that only said "No memories match" would read as "this user has no memories"
  const namespaces = (await api("GET", "/v1/overview")).filter((row) => row.user_id === state.user_id);
  const others = namespaces.filter((row) => (row.agent_id || "") !== state.agent_id && row.memories > 0);
  await load();
  return [h("h1", {}, `Memories of ${state.user_id}`), agentsNav(state, namespaces), search, form, status, list,
          more];
}

function agentName(agentId) {
  return agentId ? `agent ${agentId}` : "no agent";
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

// What an empty list says: which other agents of the user hold memories, with a link to each.
function emptyStatus(state, others, filtered) {
  const here = state.agent_id ? `under agent ${state.agent_id}` : "without an agent";
  if (others.length === 0) return [filtered ? "No memories match." : `No memories ${here}.`];
  const total = others.reduce((sum, row) => sum + row.memories, 0);
  const links = others.flatMap((row, i) => [
    i ? ", " : "",
    link({ user_id: state.user_id, agent_id: row.agent_id || null },
         `show ${agentName(row.agent_id)} (${row.memories})`)]);
  return [`No memories ${filtered ? "match " : ""}${here}; ${state.user_id} has ${total} ${
    total === 1 ? "memory" : "memories"} under ${others.map((row) => agentName(row.agent_id)).join(", ")}: `,
          ...links, "."];
}

function searchForm(state) {
  const query = h("input", { type: "search", name: "q", value: state.q, required: true,
                             placeholder: "what does the agent remember about…" });
  const k = h("input", { type: "number", name: "k", min: "1", max: "200", value: state.k || "10" });
  const explain = h("input", { type: "checkbox", name: "explain", checked: state.explain });
  const form = h("form", { class: "search", role: "search", "aria-label": "Search memories" },
    h("div", { class: "row" }, field("Search query", query), field("Results (k)", k, null, "small"),
      h("div", { class: "field check" }, h("label", {}, explain, " Explain scores")),
      h("button", { type: "submit" }, "Search")));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    navigate(href({ ...nsParams(state), view: "search", q: query.value, k: k.value === "10" ? "" : k.value,
                    explain: explain.checked ? "1" : "" }));
  });
  return form;
}

function channelsText(channels) {
  const names = Object.entries(channels || {}).sort((a, b) => a[1] - b[1]);
  return names.length ? names.map(([name, rank]) => `${name} #${rank}`).join(" · ") : "—";
}

async function viewSearch(state) {
  const form = searchForm(state);
  const parts = [h("h1", {}, `Search ${state.user_id}'s memory`), form];
  if (!state.q) return parts;
  const result = await api("POST", "/v1/search", { body: { ...nsParams(state), query: state.q,
                                                           k: Number(state.k || 10), explain: state.explain } });
  const items = h("ol", { id: "results", class: "cards", "aria-label": "Search results" },
    result.items.map((item) => {
      const meta = metaText(item.metadata);
      const memoryId = item.kind === "turn" ? (item.external_ids[0] || item.turn_ids[0] || item.id) : null;
      return h("li", { class: "card item", "data-id": item.id },
        h("p", { class: "line" },
          h("span", { class: "score" }, `score ${item.score.toFixed(3)}`),
          h("span", { class: "channels" }, `found by ${channelsText(item.channels)}`),
          h("time", { datetime: item.timestamp || "" }, fmtTime(item.timestamp)),
          h("span", { class: "speaker" }, item.speaker || item.role || ""),
          h("span", { class: "kind" }, item.kind)),
        h("p", { class: "content" }, item.text),
        meta ? h("p", { class: "meta" }, h("span", { class: "label" }, "metadata "), h("code", {}, meta)) : null,
        item.explanation ? h("details", { class: "explain" }, h("summary", {}, "Explanation"),
                             h("pre", { class: "json" }, json(item.explanation))) : null,
        memoryId ? h("p", { class: "actions" }, link({ ...nsParams(state), view: "history", id: memoryId },
                                                     "History and edit")) : null);
    }));
  const notes = [...(result.warnings || []), ...(result.channel_errors || []).map((e) => `channel error: ${json(e)}`)];
  parts.push(h("h2", {}, `${result.items.length} items`),
             notes.length ? h("ul", { class: "warnings" }, notes.map((note) => h("li", {}, note))) : null,
             items,
             h("h2", { id: "context-title" }, "Context the model gets"),
             h("pre", { id: "context", class: "context", "aria-labelledby": "context-title" },
               result.context || "(empty)"));
  return parts;
}

function versionItem(version) {
  const meta = metaText(version.metadata);
  return h("li", { class: `card version op-${version.operation}` },
    h("p", { class: "line" },
      h("span", { class: "op" }, version.operation),
      h("time", { datetime: version.timestamp }, fmtTime(version.timestamp)),
      version.valid_to ? h("span", {}, `valid until ${fmtTime(version.valid_to)}`) : null,
      version.current ? h("span", { class: "current" }, "current") : null),
    h("p", { class: "content" }, version.content === null ? "(no text: deleted)" : version.content),
    meta ? h("p", { class: "meta" }, h("span", { class: "label" }, "metadata "), h("code", {}, meta)) : null);
}

async function viewHistory(state) {
  const title = h("h1", {}, `Memory ${state.id}`);
  // the history first: it answers for a deleted memory too (its operations, without text)
  const versions = await api("POST", "/v1/memories/history", { body: { ...nsParams(state), id: state.id } });
  const deleted = versions.length > 0 && versions[versions.length - 1].operation === "delete";
  const memory = deleted ? null
    : await api("GET", `/v1/memories/${encodeURIComponent(state.id)}`, { params: nsParams(state) });
  const history = h("ol", { id: "history", class: "cards", "aria-label": "Versions and operations, oldest first" },
                    versions.map(versionItem));
  const parts = [title];
  if (memory) {
    const content = h("textarea", { name: "content", rows: "4", value: memory.content });
    content.value = memory.content;
    const edit = h("form", { class: "card edit", "aria-label": "Edit this memory" },
      h("p", { class: "line" }, h("time", {}, fmtTime(memory.timestamp)), h("span", {}, memory.speaker || memory.role),
        memory.session_id ? h("span", {}, `session ${memory.session_id}`) : null,
        h("span", {}, `${memory.version_count} version(s)`)),
      field("Content of the new version", content),
      h("div", { class: "row" }, h("button", { type: "submit" }, "Save as a new version"),
        h("button", { type: "button", class: "danger", id: "delete",
                      onclick: () => act({ title: "Delete this memory?",
                                           text: `Every version of memory ${state.id} is removed from every store; ` +
                                                 "the history keeps only the operations.",
                                           ok: "Delete", receipt: "Deleted: receipt",
                                           call: () => api("POST", "/v1/memories/delete",
                                                           { body: { ...nsParams(state), ids: [state.id] } }) }) },
          "Delete this memory")));
    edit.addEventListener("submit", (event) => {
      event.preventDefault();
      act({ title: "Save a new version?", text: "The current version is kept in the history.", ok: "Save",
            receipt: "Updated: receipt",
            call: () => api("POST", "/v1/memories/update",
                            { body: { ...nsParams(state), id: state.id, content: content.value } }) });
    });
    parts.push(h("h2", {}, "Current version"), edit);
  } else {
    parts.push(h("p", { class: "status" }, "This memory was deleted; its history keeps the operations."));
  }
  parts.push(h("h2", {}, "History"), history);
  return parts;
}

async function viewFiles(state) {
  const [prompt, hooks] = await Promise.all([
    api("POST", "/v1/prompt", { body: nsParams(state) }),
    api("GET", "/v1/hooks", { params: { ...nsParams(state), include_merged: "true" } }),
  ]);
  const viewer = h("section", { id: "file", "aria-label": "Open memory file", hidden: true });
  async function open(hook) {
    const file = await api("GET", `/v1/files/${encodeURIComponent(hook.id)}`, { params: nsParams(state) });
    viewer.replaceChildren(h("h2", {}, `File ${file.hook.title || file.hook.id}`),
                           h("pre", { class: "context" }, file.text || file.raw || "(empty)"));
    viewer.hidden = false;
    viewer.scrollIntoView();
  }
  const list = h("ol", { id: "hooks", class: "cards", "aria-label": "Memory files" }, hooks.map((hook) => {
    const importance = h("input", { type: "number", min: "0", max: "100", value: String(hook.importance) });
    const setForm = h("form", { class: "row" },
      field(`Importance of ${hook.title || hook.id} (0-100)`, importance, null, "medium"),
      h("button", { type: "submit" }, "Set importance"));
    setForm.addEventListener("submit", (event) => {
      event.preventDefault();
      act({ title: "Set the importance?", text: `${hook.title || hook.id}: ${hook.importance} → ${importance.value}`,
            ok: "Set", receipt: "Importance set: the file's hook",
            call: () => api("PUT", `/v1/files/${encodeURIComponent(hook.id)}/importance`,
                            { body: { ...nsParams(state), importance: Number(importance.value) } }) });
    });
    return h("li", { class: "card hook", "data-id": hook.id },
      h("p", { class: "line" }, h("strong", {}, hook.title || hook.id),
        h("span", {}, `${hook.period} ${hook.period_key}`), h("span", {}, hook.status),
        h("span", {}, `${hook.token_count} tokens`)),
      hook.abstract ? h("p", { class: "content" }, hook.abstract) : null,
      h("div", { class: "row" }, h("button", { type: "button", onclick: () => open(hook).catch(showError) },
                                   `Open file ${hook.title || hook.id}`)),
      setForm);
  }));
  const compact = h("button", { type: "button", id: "compact", onclick: () => act({
    title: "Run the compaction that is due?", text: "Weekly merge and monthly eviction of the periods that are due.",
    ok: "Run compaction", receipt: "Compaction report",
    call: () => api("POST", "/v1/maybe_compact", { body: nsParams(state) }) }) }, "Run due compaction");
  return [h("h1", {}, `Memory files of ${state.user_id}`),
          h("h2", { id: "prompt-title" }, "Prompt index (what the system prompt shows)"),
          h("pre", { id: "prompt", class: "context", "aria-labelledby": "prompt-title" }, prompt.prompt || "(empty)"),
          h("h2", {}, `${hooks.length} files`), list, viewer, h("h2", {}, "Compaction"), compact];
}

async function viewData(state) {
  const exportButton = h("button", { type: "button", id: "export" }, `Export ${state.user_id}'s memory`);
  exportButton.addEventListener("click", async () => {
    clearError();
    try {
      const response = await api("GET", "/v1/export", { params: nsParams(state), raw: true });
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
    }
  });
  const file = h("input", { type: "file", name: "file", accept: ".jsonl,.ndjson,.json,application/json",
                            required: true });
  const format = h("select", { name: "format" }, h("option", { value: "memory-ext" }, "memory-ext (memext export)"),
                   h("option", { value: "mem0" }, "mem0 (get_all JSON)"));
  const form = h("form", { class: "card", "aria-label": "Import memories" },
    h("div", { class: "row" }, field("Export file", file), field("Format", format)),
    h("button", { type: "submit" }, "Import"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = file.files[0];
    if (!chosen) return;
    act({ title: "Import this file?", text: `${chosen.name} (${chosen.size} bytes): what the store does not hold yet ` +
                                            "is added; the rest is skipped.",
          ok: "Import", receipt: "Import report",
          call: () => api("POST", "/v1/import", { params: { format: format.value, user_id: state.user_id,
                                                            wait: "true" },
                                                  body: chosen,
                                                  contentType: format.value === "mem0" ? "application/json"
                                                                                       : "application/x-ndjson" }) });
  });
  return [h("h1", {}, `Export and import`),
          h("p", {}, "The same JSON-lines format as memext export / memext import."),
          h("h2", {}, "Export"), exportButton, h("h2", {}, "Import"), form];
}

async function viewForget(state) {
  const rows = await api("GET", "/v1/overview");
  const namespaces = rows.filter((row) => row.user_id === state.user_id);
  const session = h("input", { type: "text", name: "session_id", required: true });
  const sessionForm = h("form", { class: "card", "aria-label": "Forget a session" },
    field("Session to forget", session), h("button", { type: "submit", class: "danger" }, "Forget this session"));
  sessionForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const sessionId = session.value.trim();
    act({ title: `Forget session ${sessionId}?`, text: `Every turn of session ${sessionId} of ${state.user_id} ` +
                                                      "is removed from every store.",
          ok: "Forget the session", receipt: "Forgotten: receipt",
          call: () => api("POST", "/v1/forget", { body: { ...nsParams(state), session_id: sessionId } }) });
  });
  const userButton = h("button", { type: "button", class: "danger", id: "forget-user" },
                       `Forget everything of ${state.user_id}`);
  userButton.addEventListener("click", () => act({
    title: `Forget ${state.user_id}?`,
    text: `All of ${state.user_id}'s memory (${namespaces.length || 1} namespace(s): every agent) is removed ` +
          "from every store. This cannot be undone.",
    ok: `Forget ${state.user_id}`, receipt: "Forgotten: receipts",
    call: async () => {
      const agents = namespaces.length ? namespaces.map((row) => row.agent_id) : [state.agent_id || null];
      const receipts = [];
      for (const agent of agents) {
        receipts.push(await api("POST", "/v1/forget", { body: { user_id: state.user_id, agent_id: agent } }));
      }
      return receipts;
    } }));
  return [h("h1", {}, `Forget`), h("h2", {}, "A session"), sessionForm, h("h2", {}, "The user"), userButton];
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
  view.setAttribute("aria-busy", "true");
  try {
    if (!info) info = await api("GET", "/v1/info");
    renderChrome(state, info);
    const render = !state.user_id ? viewOverview : RENDERERS[state.view] || viewMemories;
    const parts = await render(state);
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

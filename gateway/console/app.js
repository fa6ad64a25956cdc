// Trainyard's console: the org's jobs, a job training live, the wallet and the org's
// limits, its keys, its audit trail and its webhooks. Every call goes
// through the REST API with the key pasted at sign-in, kept in this tab's sessionStorage
// only. Nothing the API answers is inserted as HTML: elements are built and their text set.
"use strict";

const KEY = "trainyard.key";
const TERMINAL = new Set(["succeeded", "rejected", "failed", "cancelled", "stopped"]);
const RETRYABLE = new Set(["failed", "cancelled"]);
const STATUSES = ["queued", "preparing", "running", "evaluating", "finalizing", "cancelling",
  "succeeded", "rejected", "failed", "cancelled", "stopped"];
const PAGE = 20;
const FIXTURES = { "fixture-tiny-llm": "fixture:synthetic-tiny-v1", "fixture-tiny-decider": "fixture:decisions-tiny-v1" };
const CHART_POINTS = 2000;
const WAIT_SECONDS = 20;
const WEBHOOK_EVENTS = ["job.succeeded", "job.failed", "job.cancelled", "job.stopped", "job.rejected",
  "job.stalled", "budget.threshold", "spend_cap.threshold", "artifact.expiring"];

// ---- building the page -------------------------------------------------------------------

// An element: `props` sets properties (text, className, onclick, …), `attrs` attributes
// and `style` style properties (through the CSSOM: the page's policy allows no inline
// style attribute); children are elements or strings, which become text.
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  const { attrs, style, ...rest } = props;
  Object.assign(node, rest);
  Object.assign(node.style, style || {});
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const main = () => document.getElementById("main");

// Replaces a node's children, skipping the empty ones as el() does.
function fill(node, ...children) {
  node.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

function show(...nodes) {
  fill(main(), ...nodes);
}

function badge(status) {
  return el("span", { className: `badge ${status}`, textContent: status || "—", attrs: { "data-status": status || "" } });
}

function facts(pairs) {
  return el("dl", { className: "facts" },
    pairs.filter(([, value]) => value !== undefined && value !== null && value !== "")
      .map(([term, value]) => [el("dt", { textContent: term }), el("dd", {}, value)]));
}

function card(title, ...body) {
  return el("section", { className: "card" }, title ? el("h2", { textContent: title }) : null, ...body);
}

// ---- formatting ----------------------------------------------------------------------------

// Amounts travel in micro-cents; a fraction of a cent keeps its digits rather than reading $0.00.
function dollars(microCents) {
  const value = Number(microCents || 0) / 1e8;
  const digits = value !== 0 && Math.abs(value) < 0.01 ? 6 : 4;
  return value.toLocaleString(undefined, { style: "currency", currency: "USD", minimumFractionDigits: 2, maximumFractionDigits: digits });
}

function when(timestamp) {
  return timestamp ? new Date(timestamp).toLocaleString() : "";
}

function seconds(value) {
  if (value === undefined || value === null) return "";
  const s = Math.round(Number(value));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

function number(value, digits = 4) {
  return value === undefined || value === null ? "" : Number(value).toFixed(digits);
}

// TFLOP/s in the unit that reads best: a tiny model on a CPU does megaflops.
function flops(tflops) {
  if (!tflops) return "";
  const units = [["TFLOP/s", 1], ["GFLOP/s", 1e3], ["MFLOP/s", 1e6]];
  const [unit, scale] = units.find(([, k]) => Number(tflops) * k >= 1) || units[units.length - 1];
  return `${(Number(tflops) * scale).toFixed(2)} ${unit}`;
}

// A storage cost in US cents a month: a small object's is a tiny fraction of a cent.
function perMonth(cents) {
  const value = Number(cents || 0);
  if (!value) return "0¢/month";
  return `${value >= 0.01 ? value.toFixed(2) : value.toPrecision(3)}¢/month`;
}

// Where a waiting job stands, as the CLI says it.
function queueLine(queue) {
  if (!queue) return "";
  const line = `position ${queue.position} of ${queue.total}`;
  if (queue.eta_seconds === null || queue.eta_seconds === undefined) return `${line}, no connected executor can take it yet`;
  return `${line}, starts in about ${seconds(Math.max(1, queue.eta_seconds))}`;
}

function bytes(value) {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let v = Number(value || 0), i = 0;
  while (v >= 1000 && i < units.length - 1) { v /= 1000; i += 1; }
  return `${v.toFixed(i ? 1 : 0)} ${units[i]}`;
}

// ---- the API -------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, detail) {
    super(detail);
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
}

async function api(method, path, { body, headers = {}, signal } = {}) {
  const key = sessionStorage.getItem(KEY);
  const init = { method, signal, headers: { Authorization: `Bearer ${key}`, ...headers } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  let answer;
  try {
    answer = await fetch(path, init);
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, "unavailable", "The gateway cannot be reached; is the stack up?");
  }
  if (answer.status === 204) return null;
  const text = await answer.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!answer.ok) {
    // A problem document ({code, detail}) or the money wire's {error: {code, message}}.
    const code = data?.code || data?.error?.code || `http_${answer.status}`;
    const detail = data?.detail || data?.error?.message || answer.statusText;
    if (answer.status === 401) sessionStorage.removeItem(KEY);
    throw new ApiError(answer.status, code, detail);
  }
  return data;
}

function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    for (const one of [].concat(value)) if (one !== undefined && one !== null && one !== "") search.append(name, one);
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

function errorBox(err) {
  return el("div", { className: "error", attrs: { role: "alert", "data-code": err.code || "" } },
    el("span", { className: "code", textContent: err.code || "error" }),
    el("span", { className: "detail", textContent: err.detail || err.message || "" }));
}

// The place an error of one part of a page shows, replacing the last one.
function errorSlot() {
  const slot = el("div");
  slot.report = (err) => slot.replaceChildren(...(err ? [errorBox(err)] : []));
  return slot;
}

// ---- routing -------------------------------------------------------------------------------

let leaving = new AbortController(); // aborted when the page changes: stops its live reads

function route() {
  leaving.abort();
  leaving = new AbortController();
  const signal = leaving.signal;
  const hash = location.hash.replace(/^#/, "") || "/jobs";
  const [path, search = ""] = hash.split("?");
  const params = new URLSearchParams(search);
  const signedIn = Boolean(sessionStorage.getItem(KEY));
  document.getElementById("nav").hidden = !signedIn;
  if (!signedIn) return signIn(path === "/signin" ? "/jobs" : hash);
  const parts = path.split("/").filter(Boolean);
  for (const link of document.querySelectorAll("[data-nav]")) {
    link.classList.toggle("on", link.dataset.nav === (parts[1] === "new" ? "new" : parts[0]));
  }
  if (parts[0] === "jobs" && parts[1] === "new") return newJob(signal);
  if (parts[0] === "jobs" && parts[1]) return jobPage(decodeURIComponent(parts[1]), signal);
  if (parts[0] === "wallet") return walletPage(params, signal);
  if (parts[0] === "compare") return comparePage(params, signal);
  if (parts[0] === "webhooks" && parts[1]) return webhookPage(decodeURIComponent(parts[1]), params, signal);
  if (parts[0] === "webhooks") return webhooksPage(signal);
  if (parts[0] === "keys") return keysPage(params, signal);
  if (parts[0] === "audit") return auditPage(params, signal);
  return jobsPage(params, signal);
}

function signIn(next, err) {
  const input = el("input", { type: "password", id: "api-key", autocomplete: "off", placeholder: "ty_…", required: true });
  const form = el("form", { className: "card signin form" },
    el("h1", { textContent: "Sign in" }),
    el("p", { className: "note", textContent: "Paste an API key. It is kept for this tab only and sent with every call." }),
    el("p", { className: "note", id: "key-source" }, "No key yet? The deployment's operator makes one for your org with ",
      el("code", { textContent: "trainyard admin create-key --org <org> --role member" }), "."),
    err ? errorBox(err) : null,
    el("label", {}, el("span", { textContent: "API key" }), input),
    el("button", { className: "primary", type: "submit", textContent: "Sign in" }));
  form.onsubmit = async (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY, input.value.trim());
    try {
      await api("GET", `/v1/train/jobs${query({ page_size: 1 })}`);
    } catch (failure) {
      sessionStorage.removeItem(KEY);
      return signIn(next, failure);
    }
    if (location.hash === `#${next}`) route(); else location.hash = next;
  };
  show(form);
  input.focus();
}

// ---- jobs ----------------------------------------------------------------------------------

async function jobsPage(params, signal) {
  const status = params.get("status") || "";
  const token = params.get("page") || "";
  const back = params.getAll("back");
  const filter = el("select", { id: "status-filter", onchange: () => {
    location.hash = `/jobs${query({ status: filter.value })}`;
  } }, el("option", { value: "", textContent: "All statuses" }),
  STATUSES.map((s) => el("option", { value: s, textContent: s, selected: s === status })));
  const errors = errorSlot();
  const body = el("tbody");
  const pager = el("div", { className: "pager" });
  const picked = comparePicker();
  show(
    el("h1", {}, "Jobs", el("span", { className: "actions" }, picked.button,
      el("a", { className: "button", href: "#/jobs/new", textContent: "New job" }))),
    el("div", { className: "toolbar" }, filter, el("span", { className: "note", id: "total" })),
    errors,
    el("section", { className: "card" }, el("table", { id: "jobs" },
      el("thead", {}, el("tr", {}, el("th", { className: "pick", title: `Pick ${COMPARE_MIN} to ${COMPARE_MAX} jobs to compare` }),
        ["Job", "Base model", "Status", "Step", "Loss", "Cost", "Created"].map(
          (name, i) => el("th", { className: i >= 3 && i <= 5 ? "num" : "", textContent: name })))),
      body), pager));

  // Refreshed while the page is shown, so statuses and losses move on their own.
  while (!signal.aborted) {
    try {
      const page = await api("GET", `/v1/train/jobs${query({ status, page_size: PAGE, page_token: token })}`, { signal });
      errors.report(null);
      const total = page.total_size ?? page.jobs.length;
      document.getElementById("total").textContent = `${total} ${total === 1 ? "job" : "jobs"}`;
      body.replaceChildren(...page.jobs.map((job) => jobRow(job, picked)));
      if (!page.jobs.length) body.append(el("tr", {}, el("td", { colSpan: 8, className: "note", textContent: "No jobs yet." })));
      fill(pager,
        back.length ? el("a", { className: "button", textContent: "Newer",
          href: `#/jobs${query({ status, page: back.at(-1), back: back.slice(0, -1) })}` }) : null,
        page.next_page_token ? el("a", { className: "button", textContent: "Older",
          href: `#/jobs${query({ status, page: page.next_page_token, back: [...back, token] })}` }) : null);
    } catch (err) {
      if (signal.aborted) return;
      errors.report(err);
    }
    await pause(3000, signal);
  }
}

function jobRow(job, picked) {
  const progress = job.progress || {};
  const row = el("tr", { className: "row", attrs: { "data-job": job.id } },
    el("td", { className: "pick" }, picked.box(job.id)),
    el("td", {}, el("a", { href: `#/jobs/${encodeURIComponent(job.id)}`, textContent: `#${job.number}` }),
      " ", el("span", { className: "mono note", textContent: job.id })),
    el("td", { textContent: job.base_model }),
    el("td", {}, badge(job.status)),
    el("td", { className: "num", textContent: `${progress.step || 0} / ${job.planned_steps || progress.planned_steps || "?"}` }),
    el("td", { className: "num", textContent: number(progress.loss) }),
    el("td", { className: "num", textContent: dollars(job.cost_micro_cents) }),
    el("td", { textContent: when(job.create_time) }));
  row.onclick = (event) => {
    if (!["A", "INPUT"].includes(event.target.tagName) && !event.target.closest("td.pick")) location.hash = `/jobs/${encodeURIComponent(job.id)}`;
  };
  return row;
}

function pause(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
  });
}

// ---- a new job -------------------------------------------------------------------------------

async function newJob(signal) {
  const errors = errorSlot();
  const field = (label, input) => el("label", {}, el("span", { textContent: label }), input);
  const base = el("select", { id: "base-model" });
  const dataset = el("input", { id: "dataset", value: "fixture:synthetic-tiny-v1" });
  const steps = el("input", { id: "max-steps", type: "number", min: 1, value: 20 });
  const rate = el("input", { id: "learning-rate", type: "number", step: "any", placeholder: "the base's default" });
  const budget = el("input", { id: "budget", type: "number", min: 1, value: 100 });
  const estimate = el("div", { id: "estimate" });
  const create = el("button", { className: "primary", type: "button", textContent: "Create job", disabled: true });
  // Enabled once the catalog has filled the base's choices.
  const check = el("button", { type: "submit", textContent: "Estimate", disabled: true });
  // One key per form: a double click or a retried request makes one job.
  const idempotencyKey = crypto.randomUUID();
  const form = el("form", { className: "form" },
    field("Base model", base), field("Dataset URI", dataset), field("Max steps", steps),
    field("Learning rate", rate), field("Budget (US cents, for jobs the platform runs)", budget),
    el("div", { className: "toolbar" }, check, create));
  show(el("h1", { textContent: "New job" }), errors, el("div", { className: "grid" }, card("", form), card("Estimate", estimate)));

  const body = () => {
    const hyperparameters = { max_steps: Number(steps.value) };
    if (rate.value) hyperparameters.learning_rate = Number(rate.value);
    return { base_model: base.value, dataset: { uri: dataset.value.trim() }, hyperparameters,
      resources: { budget: Number(budget.value) } };
  };
  // A built-in dataset follows the base: each built-in base reads its own.
  base.onchange = () => {
    if (dataset.value.startsWith("fixture:")) dataset.value = FIXTURES[base.value] || FIXTURES["fixture-tiny-llm"];
  };
  for (const input of [base, dataset, steps, rate, budget]) {
    input.oninput = () => { create.disabled = true; estimate.replaceChildren(el("p", { className: "note", textContent: "Estimate again to create." })); };
  }
  form.onsubmit = async (event) => {
    event.preventDefault();
    errors.report(null);
    try {
      const answer = await api("POST", "/v1/train/estimate", { body: body(), signal });
      estimate.replaceChildren(estimateFacts(answer));
      create.disabled = !answer.admitted || !(answer.dataset || {}).is_trainable;
    } catch (err) {
      errors.report(err);
    }
  };
  create.onclick = async () => {
    errors.report(null);
    create.disabled = true;
    try {
      const job = await api("POST", "/v1/train/jobs", { body: body(), headers: { "Idempotency-Key": idempotencyKey }, signal });
      location.hash = `/jobs/${encodeURIComponent(job.id)}`;
    } catch (err) {
      errors.report(err);
      create.disabled = false;
    }
  };
  try {
    const catalog = await api("GET", "/v1/train/models", { signal });
    base.replaceChildren(...catalog.models.map((m) => el("option", { value: m.name, textContent: `${m.name} — ${m.description}`,
      selected: m.name === "fixture-tiny-llm" })));
    check.disabled = false;
  } catch (err) {
    errors.report(err);
  }
}

function estimateFacts(answer) {
  const job = answer.job || {};
  const duration = answer.duration_components || {};
  return el("div", {},
    facts([
      ["Admitted", answer.admitted ? "yes" : "no"],
      ["Trainable", (answer.dataset || {}).is_trainable ? "yes" : `no (${((answer.dataset || {}).reasons || []).join(", ")})`],
      ["Planned steps", job.planned_steps],
      ["Training examples", job.train_examples],
      ["Evaluation examples", job.eval_examples],
      ["Expected run time", answer.expected ? seconds(answer.expected.device_seconds) : ""],
      ["Device class", answer.device_class || ""],
      ["Projected for admission", seconds(duration.projected_active_seconds)],
      ["Execution limit", seconds(duration.execution_limit_seconds)],
      ["Expected price", answer.expected ? dollars(answer.expected.micro_cents) : ""],
      ["Held at most", answer.authorization_ceiling ? dollars(answer.authorization_ceiling.micro_cents) : ""],
    ]));
}

// ---- one job ----------------------------------------------------------------------------------

async function jobPage(id, signal) {
  const path = `/v1/train/jobs/${encodeURIComponent(id)}`;
  const errors = errorSlot();
  const head = el("div", { id: "job-head" });
  const chart = new LossChart();
  const cards = el("div", { className: "grid", id: "job-cards" });
  const attempts = el("div", { id: "attempts" });
  const artifacts = el("div", { id: "artifacts" });
  const dataset = el("div", { id: "dataset-preview" });
  const log = new LogPanel(path, signal);
  show(errors, head,
    card("", el("div", { className: "chart-head" }, el("h2", { textContent: "Loss" }),
      el("span", { className: "sub", id: "chart-points" })), chart.node, chart.legend),
    cards,
    card("Attempts", attempts), log.node, card("Artifacts", artifacts), card("Dataset", dataset));

  let job;
  const refresh = async () => {
    job = await api("GET", path, { signal });
    head.replaceChildren(jobHead(job, path, errors, refresh));
    cards.replaceChildren(timelineCard(job), throughputCard(job), evaluationCard(job), outcomeCard(job));
    chart.mark(job.evaluation);
    const [tries, objects] = await Promise.all([
      api("GET", `${path}/attempts`, { signal }),
      api("GET", `${path}/artifacts`, { signal }),
    ]);
    attempts.replaceChildren(attemptsTable(tries.attempts || []));
    log.attempts(tries.attempts || []);
    artifacts.replaceChildren(artifactsTable(objects.artifacts || [], errors, refresh));
  };
  try {
    await refresh();
    datasetPreview(dataset, path, signal);
    const read = await api("GET", `${path}/metrics${query({ names: ["loss", "eval_loss"], max_points: CHART_POINTS })}`, { signal });
    chart.load(read.series || []);
    await follow(path, read.next_after || 0, chart, refresh, errors, signal);
  } catch (err) {
    if (!signal.aborted) errors.report(err);
  }
}

// Long-polls the job's events: metric points grow the chart, anything else reads the job
// again. Ends when the job has ended and said everything.
async function follow(path, after, chart, refresh, errors, signal) {
  while (!signal.aborted) {
    let page;
    try {
      page = await api("GET", `${path}/events${query({ after, wait: WAIT_SECONDS, page_size: 500 })}`, { signal });
      errors.report(null);
    } catch (err) {
      if (signal.aborted) return;
      errors.report(err);
      await pause(2000, signal);
      continue;
    }
    let changed = false;
    for (const event of page.events) {
      if (event.type === "metric") chart.add(event.name, event.step, event.value);
      else changed = true;
    }
    after = page.next_after;
    chart.draw();
    if (changed) await refresh().catch((err) => signal.aborted || errors.report(err));
    if (!page.events.length && TERMINAL.has(page.status)) return;
  }
}

function jobHead(job, path, errors, refresh) {
  const progress = job.progress || {};
  const planned = job.planned_steps || progress.planned_steps || 0;
  const buttons = [];
  if (!TERMINAL.has(job.status) && job.status !== "cancelling") {
    buttons.push(el("button", { className: "danger", id: "cancel", textContent: "Cancel", onclick: async () => {
      if (!confirm(`Cancel job #${job.number}? Its progress so far is kept.`)) return;
      try { await api("POST", `${path}/cancel`, { body: {} }); await refresh(); } catch (err) { errors.report(err); }
    } }));
  }
  if (RETRYABLE.has(job.status)) {
    buttons.push(el("button", { id: "retry", textContent: "Retry", onclick: async () => {
      const resume = confirm(`Retry job #${job.number}?\n\nOK resumes from its last checkpoint; Cancel asks to start over.`)
        || (confirm("Start over from step 0 instead?") ? false : null);
      if (resume === null) return;
      try {
        await api("POST", `${path}/retry`, { body: { resume_from_checkpoint: resume }, headers: { "Idempotency-Key": crypto.randomUUID() } });
        await refresh();
      } catch (err) { errors.report(err); }
    } }));
  }
  const publishing = el("div", { id: "publishing" });
  if (["succeeded", "rejected"].includes(job.status) && job.result?.sha256) {
    buttons.push(el("button", { id: "publish", textContent: "Publish", onclick: () => publishForm(publishing, job, path) }));
  }
  const percent = planned ? Math.min(100, (100 * (progress.step || 0)) / planned) : 0;
  return el("div", { className: "card" },
    el("h1", {}, `Job #${job.number}`, badge(job.status), el("span", { className: "sub mono", textContent: job.id }),
      el("span", { className: "actions" }, buttons)),
    publishing,
    el("div", { className: "progress" }, el("div", { style: { width: `${percent.toFixed(1)}%` } })),
    job.failure_code ? errorBox({ code: job.failure_code, detail: `${job.failure_category}: ${job.failure_message}` }) : null,
    facts([
      ["Base model", job.base_model],
      ["Queue", queueLine(job.queue)],
      ["Step", `${progress.step || 0} / ${planned || "?"}`],
      ["Loss", number(progress.loss)],
      ["ETA", TERMINAL.has(job.status) ? "" : seconds(progress.eta_seconds)],
      ["Tokens/s", progress.tokens_per_second ? Math.round(progress.tokens_per_second) : ""],
      ["Cost so far", dollars(job.cost_micro_cents)],
      ["Held now", job.holding && Number(job.holding.micro_cents) ? dollars(job.holding.micro_cents) : ""],
      ["Dataset", job.dataset?.uri],
      ["Created", when(job.create_time)],
    ]));
}

// Publishes the job's output under a name; a capability names the question keys it answers,
// and a rejected job's output needs the force the record will keep.
function publishForm(node, job, path) {
  const errors = errorSlot();
  const name = el("input", { id: "publish-name", value: job.output?.name || job.result?.name || "" });
  const capability = job.result?.kind === "capability";
  const keys = el("input", { id: "publish-keys", placeholder: "queue, topic" });
  const force = el("input", { type: "checkbox", id: "publish-force" });
  const done = el("div");
  const form = el("form", { className: "form" }, errors,
    el("label", {}, el("span", { textContent: "Name" }), name),
    capability ? el("label", {}, el("span", { textContent: "Question keys it answers (comma-separated)" }), keys) : null,
    job.status === "rejected" ? el("label", {}, force, " Publish although its verdict is rejected (recorded)") : null,
    el("button", { className: "primary", type: "submit", textContent: "Publish" }), done);
  form.onsubmit = async (event) => {
    event.preventDefault();
    errors.report(null);
    const body = { name: name.value.trim(), force: force.checked };
    if (capability) body.route = { keys: keys.value.split(",").map((k) => k.trim()).filter(Boolean) };
    try {
      const published = await api("POST", `${path}/publish`, { body });
      done.replaceChildren(facts([["Published as", published.name], ["Form", published.form], ["sha256", published.sha256],
        ["Forced", published.forced ? "yes" : ""]]));
    } catch (err) { errors.report(err); }
  };
  node.replaceChildren(form);
}

function timelineCard(job) {
  const timing = job.timing || {};
  const phases = [["queued", timing.queued_seconds], ["preparing", timing.preparing_seconds],
    ["training", timing.training_seconds], ["finalizing", timing.finalizing_seconds]]
    .filter(([, s]) => s !== undefined && s !== null);
  const total = phases.reduce((sum, [, s]) => sum + Number(s), 0);
  return card("Timeline",
    total > 0 ? el("div", { className: "timeline", id: "timeline" }, phases.map(([name, s]) =>
      el("div", { className: `phase-${name}`, title: `${name} ${seconds(s)}`, textContent: Number(s) / total > 0.12 ? name : "",
        style: { flex: String(Math.max(Number(s), total / 200)) } }))) : el("p", { className: "note", textContent: "Not started yet." }),
    el("div", { className: "legend" }, phases.map(([name, s]) => el("span", {}, el("i", { className: `phase-${name}` }), `${name} ${seconds(s)}`))),
    facts([
      ["Total", seconds(timing.total_seconds)],
      ["Attempts", timing.attempt_count],
      ["Device-seconds metered", timing.metered_device_seconds],
      ["Device-seconds charged", timing.charged_device_seconds],
    ]));
}

// The latest step's pace as its trainer measured it (executor/trainers/throughput.py): MFU
// needs the device's dense peak, which the table has none of for a CPU (`mfu` is null).
function throughputCard(job) {
  const p = job.progress || {};
  const known = p.mfu !== undefined && p.mfu !== null;
  const node = card("Throughput", p.tokens_per_second ? facts([
    ["Tokens/s", Math.round(p.tokens_per_second).toLocaleString()],
    ["Samples/s", number(p.samples_per_second, 2)],
    ["Model FLOP/s", flops(p.model_tflops)],
    ["MFU", el("span", { id: "mfu", textContent: known ? `${(100 * p.mfu).toFixed(1)}%` : "n/a: no known peak for this device" })],
    ["Dense peak", p.peak_tflops ? `${p.peak_tflops} TFLOP/s` : ""],
    ["FLOPs/token", p.flops_per_token ? Number(p.flops_per_token).toExponential(3) : ""],
  ]) : el("p", { className: "note", textContent: "Measured from the first step." }));
  node.id = "throughput";
  return node;
}

// 002: no evaluation chart under 160 selected examples, because none were set aside.
function evaluationCard(job) {
  const evaluation = job.evaluation || {};
  if (!job.eval_examples) {
    const selected = job.preparation?.selected_examples;
    return card("Evaluation", el("p", { className: "note", id: "no-evaluation",
      textContent: `No evaluation: ${selected ? `${selected} examples were selected; ` : ""}evaluation starts at 160, so none were set aside and the job reports no evaluation loss.` }));
  }
  if (!evaluation.evaluations) {
    const latest = job.progress?.eval_loss;
    return card("Evaluation", el("p", { className: "note", textContent: `${job.eval_examples} examples are set aside for evaluation; `
      + (latest !== undefined && latest !== null ? `the latest evaluation loss is ${number(latest)}. ` : "")
      + (TERMINAL.has(job.status) ? "The run reported no evaluation." : "The summary comes when the run ends.") }));
  }
  const node = card("Evaluation", facts([
    ["Best loss", `${number(evaluation.best_loss)} at step ${evaluation.best_step}`],
    ["Last loss", `${number(evaluation.last_loss)} at step ${evaluation.last_step}`],
    ["Evaluations", evaluation.evaluations],
    ["Served checkpoint", evaluation.served_step !== undefined ? `step ${evaluation.served_step}` : ""],
    ["Verdict", evaluation.verdict],
  ]), evaluation.promoted_before_last_eval
    ? el("p", { className: "note", textContent: "The served checkpoint is not the last evaluated one: a better one came earlier." }) : null,
  gradesTable(evaluation.grades || [], job.protect?.budget));
  node.id = "evaluation";
  return node;
}

// Each graded suite, base → trained; a protected suite outside the budget is marked.
function gradesTable(grades, budget) {
  if (!grades.length) return null;
  const pair = (g, metric) => `${number(g.base?.[metric], 3)} → ${number(g.trained?.[metric], 3)}`;
  return el("div", {},
    budget ? el("p", { className: "note", textContent: `Budget: accuracy down at most ${budget.accuracy ?? "—"}, ECE up at most ${budget.ece ?? "—"}.` }) : null,
    el("table", { id: "grades" }, el("thead", {}, el("tr", {}, ["Suite", "Role", "Accuracy", "Log loss", "ECE", "Within"].map((t) => el("th", { textContent: t })))),
      el("tbody", {}, grades.map((g) => el("tr", { attrs: { "data-suite": g.suite } },
        el("td", { textContent: g.suite }), el("td", { textContent: g.role }),
        el("td", { className: "num", textContent: pair(g, "accuracy") }),
        el("td", { className: "num", textContent: pair(g, "log_loss") }),
        el("td", { className: "num", textContent: pair(g, "ece") }),
        el("td", { textContent: g.role === "protected" ? (g.within_budget ? "yes" : "no") : "" }))))));
}

// 002: the outcome card is an exception surface. It shows early stopping, a cancel and the
// adjustments the run made; a routine completion is not repeated as news.
const STOPS = {
  early_stopping: "Stopped early: the evaluation loss stopped improving.",
  cancelled: "Cancelled before its planned steps.",
  completed: "Completed: it ran its planned steps.",
  max_steps: "Completed: it reached max_steps.",
};

function outcomeCard(job) {
  const outcome = job.outcome;
  if (!outcome) {
    return card("Outcome", el("p", { className: "note", textContent: TERMINAL.has(job.status)
      ? "The run reported no outcome: it never reached the training loop." : "Reported when the run ends." }));
  }
  const routine = ["completed", "max_steps"].includes(outcome.stop_reason) && !(outcome.downgrades || []).length;
  const node = card("Outcome",
    el("p", { className: routine ? "note" : "", textContent: routine ? "Nothing to flag: the run completed as planned." : (STOPS[outcome.stop_reason] || `Stopped: ${outcome.stop_reason}`) }),
    (outcome.downgrades || []).length ? el("table", {}, el("thead", {}, el("tr", {}, ["Setting", "Action", "Cause"].map((t) => el("th", { textContent: t })))),
      el("tbody", {}, outcome.downgrades.map((token) => {
        const [setting, action, cause] = token.split(":");
        return el("tr", {}, el("td", { className: "mono", textContent: setting }), el("td", { textContent: action || "" }), el("td", { textContent: cause || "" }));
      }))) : null);
  node.id = "outcome";
  return node;
}

// An attempt's log (its trainer's standard output and error), read from the start and
// followed by long polls until the attempt ends. The latest attempt is shown, and a newer
// one (a retry) replaces it, unless another was picked.
class LogPanel {
  constructor(path, signal) {
    this.path = path;
    this.signal = signal;
    this.shown = 0;
    this.newest = 0;
    this.reading = null;
    this.pick = el("select", { id: "log-attempt", onchange: () => this.open(Number(this.pick.value)) });
    this.size = el("span", { className: "sub", id: "log-size" });
    this.text = el("pre", { className: "log", id: "attempt-log", textContent: "Nothing written yet." });
    this.node = card("", el("div", { className: "chart-head" }, el("h2", { textContent: "Log" }), this.pick, this.size), this.text);
  }

  attempts(list) {
    const numbers = list.map((a) => a.attempt_number);
    const newest = Math.max(0, ...numbers);
    const follows = this.shown === this.newest;
    this.newest = newest;
    fill(this.pick, numbers.map((n) => el("option", { value: String(n), textContent: `Attempt ${n}` })));
    const chosen = follows ? newest : this.shown;
    this.pick.value = String(chosen);
    if (chosen && chosen !== this.shown) this.open(chosen);
  }

  async open(number) {
    if (this.reading) this.reading.abort();
    const reading = new AbortController();
    this.reading = reading;
    this.signal.addEventListener("abort", () => reading.abort(), { once: true });
    this.shown = number;
    this.text.textContent = "";
    let offset = 0;
    while (!reading.signal.aborted) {
      let part;
      try {
        part = await api("GET", `${this.path}/attempts/${number}/logs${query({ offset, wait: WAIT_SECONDS })}`, { signal: reading.signal });
      } catch (err) {
        if (reading.signal.aborted) return;
        this.size.textContent = `${err.code}: ${err.detail || ""}`;
        await pause(2000, reading.signal);
        continue;
      }
      const atEnd = this.text.scrollTop + this.text.clientHeight >= this.text.scrollHeight - 4;
      if (part.offset > offset) this.text.append(`[the first ${bytes(part.offset)} are no longer kept]\n`);
      this.text.append(part.text);
      if (atEnd) this.text.scrollTop = this.text.scrollHeight;
      offset = part.next_offset;
      this.size.textContent = `${bytes(part.size)}${part.complete ? "" : " · following"}`;
      if (part.complete && offset >= part.size) {
        if (!part.size) this.text.textContent = "Nothing written.";
        return;
      }
    }
  }
}

function attemptsTable(attempts) {
  if (!attempts.length) return el("p", { className: "note", textContent: "None yet." });
  return el("table", {}, el("thead", {}, el("tr", {}, ["#", "Status", "Resumed at", "Failure", "Started", "Ended"].map((t) => el("th", { textContent: t })))),
    el("tbody", {}, attempts.map((a) => el("tr", {},
      el("td", { textContent: a.attempt_number }), el("td", {}, badge(a.status)),
      el("td", { textContent: a.resume_step !== undefined ? `step ${a.resume_step}` : "" }),
      el("td", { textContent: a.failure_code ? `${a.failure_code}: ${a.failure_message}` : "" }),
      el("td", { textContent: when(a.started_time) }), el("td", { textContent: when(a.end_time) })))));
}

// A download is a plain link: its URL works alone for ten minutes. Each object says what
// keeping it costs, when it expires (or what keeps it), and pins or unpins.
function artifactsTable(artifacts, errors, refresh) {
  if (!artifacts.length) return el("p", { className: "note", textContent: "None yet." });
  const detail = el("div");
  const keep = (a) => el("button", { className: "link pin", textContent: a.pinned ? "Unpin" : "Pin",
    attrs: { "data-sha256": a.sha256 }, onclick: async () => {
      try {
        await api("POST", `/v1/train/artifacts/${a.sha256}/${a.pinned ? "unpin" : "pin"}`, { body: {} });
        await refresh();
      } catch (err) { errors.report(err); }
    } });
  const expiry = (a) => a.pinned ? "never (pinned)" : a.expire_time ? when(a.expire_time) : "never";
  return el("div", {}, el("table", { id: "artifacts-table" }, el("thead", {}, el("tr", {}, ["Name", "Kind", "Size", "Cost", "Expires", "Kept by", "sha256", ""].map((t) => el("th", { className: ["Size", "Cost"].includes(t) ? "num" : "", textContent: t })))),
    el("tbody", {}, artifacts.map((a) => el("tr", { attrs: { "data-sha256": a.sha256 } },
      el("td", { textContent: a.name }), el("td", { textContent: a.kind }), el("td", { className: "num", textContent: bytes(a.size) }),
      el("td", { className: "num cost", textContent: perMonth(a.storage_cost_per_month) }),
      el("td", { className: "expires", textContent: expiry(a) }),
      el("td", { className: "mono kept", textContent: a.kept_by || "" }),
      el("td", { className: "mono", textContent: `${a.sha256.slice(0, 12)}…` }),
      el("td", { className: "actions" }, keep(a),
        el("button", { className: "link", textContent: "Download", onclick: () => detail.replaceChildren(download(a)) })))))), detail);
}

function download(artifact) {
  // The URL alone downloads (the gateway serves the bytes under the URL's own token).
  const name = artifact.name || artifact.sha256;
  return el("div", { className: "stack" },
    el("a", { href: artifact.url, download: name, textContent: `Download ${name}` }),
    el("p", { className: "note", textContent: `The link works until ${when(artifact.expires * 1000)}; \`trainyard artifacts get ${artifact.sha256}\` fetches it too.` }));
}

function datasetPreview(node, path, signal) {
  const search = el("input", { type: "search", id: "dataset-search", placeholder: "Search names and messages" });
  const split = el("select", { id: "dataset-split" }, ["all", "train", "eval"].map((s) => el("option", { value: s, textContent: s })));
  const list = el("tbody");
  const more = el("div", { className: "pager" });
  const detail = el("div");
  const errors = errorSlot();
  let offset = 0;
  const load = async () => {
    try {
      const page = await api("GET", `${path}/dataset${query({ offset, limit: 10, search: search.value, split: split.value })}`, { signal });
      errors.report(null);
      list.replaceChildren(...page.items.map((item) => {
        const row = el("tr", { className: "row" }, el("td", { textContent: item.name || item.id }),
          el("td", { className: "num", textContent: item.message_count }), el("td", { textContent: item.split }));
        row.onclick = async () => {
          try {
            const full = await api("GET", `${path}/dataset/${encodeURIComponent(item.id)}`, { signal });
            detail.replaceChildren(el("div", { className: "messages" }, (full.messages || []).map((m) =>
              el("div", { className: "message" }, el("b", { textContent: m.role }), m.content))));
          } catch (err) { errors.report(err); }
        };
        return row;
      }));
      if (!page.items.length) list.append(el("tr", {}, el("td", { colSpan: 3, className: "note", textContent: "No examples match." })));
      more.replaceChildren(el("span", {},
        el("span", { className: "note", textContent: page.total !== undefined && page.total !== null ? `${page.total} examples ` : "" }),
        offset > 0 ? el("button", { textContent: "Previous", onclick: () => { offset = Math.max(0, offset - 10); load(); } }) : null,
        page.has_more ? el("button", { textContent: "Next", onclick: () => { offset = page.next_offset; load(); } }) : null));
    } catch (err) {
      if (!signal.aborted) errors.report(err);
    }
  };
  let typing;
  search.oninput = () => { clearTimeout(typing); typing = setTimeout(() => { offset = 0; load(); }, 250); };
  split.onchange = () => { offset = 0; load(); };
  node.replaceChildren(errors, el("div", { className: "toolbar" }, search, split),
    el("table", {}, el("thead", {}, el("tr", {}, el("th", { textContent: "Example" }), el("th", { className: "num", textContent: "Messages" }), el("th", { textContent: "Split" }))), list),
    more, detail);
  load();
}

// ---- the loss chart ------------------------------------------------------------------------

// Train loss per step as a line, evaluation loss as markers, the best and the served
// checkpoint as vertical lines. Points arrive from the metrics read and then one by one.
class LossChart {
  constructor() {
    this.node = el("div", { id: "chart" });
    this.legend = el("div", { className: "legend" },
      el("span", {}, el("i", { style: { background: "#2f6fed" } }), "train loss"),
      el("span", {}, el("i", { style: { background: "#e07b00" } }), "eval loss"),
      el("span", {}, el("i", { style: { background: "#1f8a4c" } }), "best checkpoint"),
      el("span", {}, el("i", { style: { background: "#7a3fd1" } }), "served checkpoint"));
    this.loss = new Map();
    this.evalLoss = new Map();
    this.marks = {};
    this.plot = null;
    if (!window.uPlot) {
      this.node.append(errorBox({ code: "console_incomplete", detail: "The chart library is not installed here: `npm ci` in the checkout installs it." }));
    }
  }

  load(series) {
    for (const s of series) for (const p of s.points || []) this.add(s.name, p.step, p.value);
    this.draw();
  }

  add(name, step, value) {
    if (step === undefined || value === undefined) return;
    if (name === "loss") this.loss.set(step, value);
    else if (name === "eval_loss") this.evalLoss.set(step, value);
  }

  mark(evaluation) {
    this.marks = { best: evaluation?.best_step, served: evaluation?.served_step };
    this.plot?.redraw(false);
  }

  data() {
    const steps = [...new Set([...this.loss.keys(), ...this.evalLoss.keys()])].sort((a, b) => a - b);
    return [steps, steps.map((s) => this.loss.get(s) ?? null), steps.map((s) => this.evalLoss.get(s) ?? null)];
  }

  draw() {
    if (!window.uPlot) return;
    const data = this.data();
    document.getElementById("chart-points")?.replaceChildren(`${this.loss.size} train points, ${this.evalLoss.size} evaluations`);
    this.node.dataset.points = String(this.loss.size);
    if (!data[0].length) return;
    if (this.plot) return this.plot.setData(data);
    const marks = this;
    this.plot = new uPlot({
      width: Math.max(320, this.node.clientWidth || 800),
      height: 300,
      scales: { x: { time: false } },
      axes: [{ label: "step" }, { label: "loss" }],
      legend: { show: false },
      series: [
        { label: "step" },
        { label: "train loss", stroke: "#2f6fed", width: 1.5, spanGaps: true, points: { show: false } },
        { label: "eval loss", stroke: "#e07b00", width: 0, paths: () => null, points: { show: true, size: 8, fill: "#e07b00" } },
      ],
      hooks: { draw: [(u) => {
        for (const [key, color] of [["best", "#1f8a4c"], ["served", "#7a3fd1"]]) {
          const step = marks.marks[key];
          if (step === undefined || step === null) continue;
          const x = u.valToPos(step, "x", true);
          const ctx = u.ctx;
          ctx.save();
          ctx.strokeStyle = color;
          ctx.setLineDash([6, 4]);
          ctx.lineWidth = 1.5 * devicePixelRatio;
          ctx.beginPath();
          ctx.moveTo(x, u.bbox.top);
          ctx.lineTo(x, u.bbox.top + u.bbox.height);
          ctx.stroke();
          ctx.restore();
        }
      }] },
    }, data, this.node);
  }
}

// ---- comparing jobs ----------------------------------------------------------------------------

// Jobs side by side, as `trainyard jobs compare` and the SDK's `compare_jobs` show them:
// their loss curves overlaid (by step, or by tokens seen so a resumed job lines up),
// their evaluation blocks in columns, and where their frozen configs differ.
const COMPARE_MIN = 2;
const COMPARE_MAX = 6;
const COMPARE_COLORS = ["#2f6fed", "#e07b00", "#1f8a4c", "#c23a3a", "#7a3fd1", "#0f8b8d"];
// A job's frozen config, as trainyard/sdk_compare.py reads it (CONFIG_FIELDS, LABELS):
// its spec expanded and frozen, and the plan derived from it; not its labels (a default
// output name is the job's own), nor what the run reported (of `evaluation`, only the
// suites it asked for).
const CONFIG_FIELDS = ["project", "base_model", "revision", "from", "dataset", "objective", "adaptation",
  "hyperparameters", "protect", "evaluation", "resources", "output", "retention", "planned_steps",
  "steps_per_epoch", "effective_batch_size", "train_examples", "eval_examples"];
// The evaluation block's rows, in the contract's order (job.proto's Evaluation).
const EVALUATION_ROWS = [["best_loss", "Best loss"], ["best_step", "Best step"], ["last_loss", "Last loss"],
  ["last_step", "Last step"], ["evaluations", "Evaluations"], ["served_step", "Served step"],
  ["promoted_before_last_eval", "Promoted before last eval"], ["verdict", "Verdict"]];
const NONE = "—";

function compareHref(ids) {
  return `#/compare?jobs=${ids.map(encodeURIComponent).join(",")}`;
}

// The jobs list's picks: a checkbox a row, kept while the list refreshes, and the button
// that opens the compare page once 2 to 6 are picked.
function comparePicker() {
  const ids = new Set();
  const button = el("a", { className: "button", id: "compare", textContent: "Compare" });
  const update = () => {
    const ok = ids.size >= COMPARE_MIN && ids.size <= COMPARE_MAX;
    button.textContent = ids.size ? `Compare ${ids.size}` : "Compare";
    button.classList.toggle("disabled", !ok);
    button.setAttribute("aria-disabled", String(!ok));
    button.title = ok ? "" : `Pick ${COMPARE_MIN} to ${COMPARE_MAX} jobs`;
    if (ok) button.href = compareHref([...ids]); else button.removeAttribute("href");
  };
  update();
  const box = (id) => el("input", { type: "checkbox", checked: ids.has(id), attrs: { "aria-label": `Compare ${id}` },
    onchange: (event) => { if (event.target.checked) ids.add(id); else ids.delete(id); update(); } });
  return { button, box };
}

function runLabel(job) {
  return [`#${job.number}`, job.project, job.base_model].filter(Boolean).join(" ");
}

function configOf(job) {
  const config = {};
  for (const name of CONFIG_FIELDS) if (job[name] !== undefined && name !== "evaluation") config[name] = job[name];
  config.evaluation = { suites: job.evaluation?.suites || [] };
  if (config.output) config.output = Object.fromEntries(Object.entries(config.output).filter(([k]) => k !== "name"));
  return Object.fromEntries(CONFIG_FIELDS.filter((n) => n in config).map((n) => [n, config[n]]));
}

// Dotted paths to values: a list of plain values is one value, a list of objects is
// numbered (`objective.terms.0.kind`), an empty object adds no path.
function flattenConfig(value, prefix = "", out = {}) {
  for (const [key, v] of Object.entries(value)) {
    const path = `${prefix}${key}`;
    if (v !== null && typeof v === "object" && !Array.isArray(v)) flattenConfig(v, `${path}.`, out);
    else if (Array.isArray(v) && v.some((x) => x !== null && typeof x === "object")) {
      flattenConfig(Object.fromEntries(v.map((x, i) => [String(i), x])), `${path}.`, out);
    } else out[path] = v;
  }
  return out;
}

function cellText(value) {
  if (value === undefined || value === null || value === "") return NONE;
  if (typeof value === "object" || typeof value === "boolean") return JSON.stringify(value);
  return String(value);
}

async function comparePage(params, signal) {
  const ids = [...new Set((params.get("jobs") || "").split(",").map((id) => id.trim()).filter(Boolean))];
  const errors = errorSlot();
  show(el("h1", {}, `Compare ${ids.length} jobs`, el("span", { className: "actions" },
    el("a", { className: "button", href: "#/jobs", textContent: "Jobs" }))), errors);
  if (ids.length < COMPARE_MIN || ids.length > COMPARE_MAX) {
    return errors.report({ code: "invalid_request", detail: `Pick ${COMPARE_MIN} to ${COMPARE_MAX} jobs on the jobs page to compare.` });
  }
  let runs;
  try {
    runs = await Promise.all(ids.map(async (id, i) => {
      const path = `/v1/train/jobs/${encodeURIComponent(id)}`;
      const [job, read] = await Promise.all([api("GET", path, { signal }),
        api("GET", `${path}/metrics${query({ names: ["loss", "eval_loss", "tokens_seen"], max_points: CHART_POINTS })}`, { signal })]);
      const series = Object.fromEntries((read.series || []).map((s) => [s.name, (s.points || []).map((p) => [p.step, p.value])]));
      return { job, label: runLabel(job), color: COMPARE_COLORS[i], loss: series.loss || [],
        evalLoss: series.eval_loss || [], tokens: series.tokens_seen || [] };
    }));
  } catch (err) {
    if (!signal.aborted) errors.report(err);
    return;
  }
  const chart = new CompareChart(runs);
  main().append(
    card("", el("div", { className: "chart-head" }, el("h2", { textContent: "Loss" }), chart.toggle,
      el("span", { className: "sub", textContent: "train loss as lines, evaluation loss as markers" })), chart.node, chart.legend),
    card("Runs", runsTable(runs)),
    configCard(runs));
  chart.draw();
}

// Where a run's step falls on the tokens-seen axis: its point, or between the two around
// it (a cut series keeps different steps of each series); null where no count was kept.
function tokensAt(tokens, step) {
  if (!tokens.length) return null;
  let lo = null, hi = null;
  for (const [s, v] of tokens) {
    if (s === step) return v;
    if (s < step) lo = [s, v];
    else if (hi === null) hi = [s, v];
  }
  if (lo && hi) return lo[1] + ((hi[1] - lo[1]) * (step - lo[0])) / (hi[0] - lo[0]);
  if (hi && hi[0] > 0) return (hi[1] * step) / hi[0];
  return null;
}

class CompareChart {
  constructor(runs) {
    this.runs = runs;
    this.axis = "step";
    this.plot = null;
    this.node = el("div", { id: "compare-chart" });
    this.buttons = ["step", "tokens"].map((axis) => el("button", { type: "button", textContent: axis === "step" ? "step" : "tokens seen",
      attrs: { "data-axis": axis }, onclick: () => { this.axis = axis; this.draw(); } }));
    this.toggle = el("span", { className: "toggle", id: "x-axis" }, this.buttons);
    this.legend = el("div", { className: "legend", id: "compare-legend" }, runs.map((r) =>
      el("span", { attrs: { "data-job": r.job.id } }, el("i", { style: { background: r.color } }), r.label,
        r.tokens.length ? null : el("span", { className: "note", textContent: " (no tokens seen)" }))));
    if (!window.uPlot) {
      this.node.append(errorBox({ code: "console_incomplete", detail: "The chart library is not installed here: `npm ci` in the checkout installs it." }));
    }
  }

  x(run, step) {
    return this.axis === "step" ? step : tokensAt(run.tokens, step);
  }

  // One x array for every curve (uPlot's aligned data), each run's points at their x and
  // gaps elsewhere, which its line spans.
  data() {
    const placed = this.runs.map((run) => ["loss", "evalLoss"].map((kind) => new Map(run[kind]
      .map(([step, value]) => [this.x(run, step), value]).filter(([x]) => x !== null))));
    const xs = [...new Set(placed.flatMap((pair) => pair.flatMap((m) => [...m.keys()])))].sort((a, b) => a - b);
    return { xs, drawn: placed.filter(([loss]) => loss.size).length,
      data: [xs, ...placed.flatMap((pair) => pair.map((m) => xs.map((x) => m.get(x) ?? null)))] };
  }

  draw() {
    for (const b of this.buttons) {
      b.classList.toggle("on", b.dataset.axis === this.axis);
      b.setAttribute("aria-pressed", String(b.dataset.axis === this.axis));
    }
    const { xs, drawn, data } = this.data();
    Object.assign(this.node.dataset, { axis: this.axis, series: String(drawn), xMax: String(xs.length ? xs[xs.length - 1] : 0) });
    if (!window.uPlot) return;
    this.plot?.destroy();
    this.plot = null;
    if (!xs.length) {
      this.node.replaceChildren(el("p", { className: "note", textContent: "No points on this axis yet." }));
      return;
    }
    this.node.replaceChildren();
    this.plot = new uPlot({
      width: Math.max(320, this.node.clientWidth || 800),
      height: 320,
      scales: { x: { time: false } },
      // Steps are whole; tokens read best with their thousands marked.
      axes: [this.axis === "step" ? { label: "step", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000] }
        : { label: "tokens seen", values: (u, ticks) => ticks.map((t) => t.toLocaleString()) }, { label: "loss" }],
      legend: { show: false },
      series: [{ label: this.axis }, ...this.runs.flatMap((run) => [
        { label: `${run.label} train loss`, stroke: run.color, width: 1.5, spanGaps: true, points: { show: false } },
        { label: `${run.label} eval loss`, stroke: run.color, width: 0, paths: () => null, points: { show: true, size: 8, fill: run.color } },
      ])],
    }, data, this.node);
  }
}

// The runs side by side: a column per job, its status, steps, cost and stop reason, then
// the rows of its evaluation block.
function runsTable(runs) {
  const row = (name, cells, key) => el("tr", { attrs: { "data-row": key } }, el("th", { textContent: name }),
    cells.map((cell) => el("td", { className: "num" }, cell)));
  const evaluated = (key) => runs.map((r) => {
    const value = (r.job.evaluation || {})[key];
    if (value === undefined || value === null || value === "") return NONE;
    if (key.endsWith("_loss")) return number(value);
    if (typeof value === "boolean") return value ? "yes" : "no";
    return String(value);
  });
  const tokens = (r) => (r.tokens.length ? Math.round(r.tokens[r.tokens.length - 1][1]).toLocaleString() : NONE);
  return el("table", { id: "compare-runs" },
    el("thead", {}, el("tr", {}, el("th"), runs.map((r) => el("th", { className: "num", attrs: { "data-job": r.job.id } },
      el("i", { className: "swatch", style: { background: r.color } }),
      el("a", { href: `#/jobs/${encodeURIComponent(r.job.id)}`, textContent: r.label }))))),
    el("tbody", {},
      row("Status", runs.map((r) => badge(r.job.status)), "status"),
      row("Steps", runs.map((r) => `${r.job.progress?.step || 0} / ${r.job.planned_steps || "?"}`), "steps"),
      row("Final loss", runs.map((r) => (r.job.progress?.loss !== undefined ? number(r.job.progress.loss) : NONE)), "final_loss"),
      row("Tokens seen", runs.map(tokens), "tokens_seen"),
      row("Cost", runs.map((r) => dollars(r.job.cost_micro_cents)), "cost"),
      row("Stop reason", runs.map((r) => r.job.outcome?.stop_reason || NONE), "stop_reason"),
      el("tr", { className: "group" }, el("th", { colSpan: runs.length + 1, textContent: "Evaluation" })),
      EVALUATION_ROWS.map(([key, name]) => row(name, evaluated(key), `evaluation.${key}`))));
}

// The frozen configs' differences: a row per dotted path whose value is not the same in
// every job, its differing cells marked; "show all" adds the paths they share.
function configCard(runs) {
  const flat = runs.map((r) => flattenConfig(configOf(r.job)));
  const paths = [...new Set(flat.flatMap((f) => Object.keys(f)))];
  const differs = new Set(paths.filter((p) => new Set(flat.map((f) => JSON.stringify(f[p] ?? null))).size > 1));
  const all = el("input", { type: "checkbox", id: "config-all" });
  const body = el("tbody");
  const note = el("p", { className: "note", id: "config-same" });
  const render = () => {
    const shown = paths.filter((p) => all.checked || differs.has(p));
    note.textContent = differs.size ? "" : "The jobs' configs are the same.";
    body.replaceChildren(...shown.map((p) => {
      const first = JSON.stringify(flat[0][p] ?? null);
      return el("tr", { className: differs.has(p) ? "differs" : "", attrs: { "data-path": p } },
        el("th", { className: "mono", textContent: p }),
        flat.map((f) => el("td", { className: `mono${differs.has(p) && JSON.stringify(f[p] ?? null) !== first ? " differs" : ""}`,
          textContent: cellText(f[p]) })));
    }));
  };
  all.onchange = render;
  render();
  const node = card("Config",
    el("div", { className: "toolbar" }, el("span", { className: "note", textContent: `${differs.size} of ${paths.length} settings differ` }),
      el("label", { className: "inline" }, all, " show all")),
    note,
    el("table", { id: "compare-config" }, el("thead", {}, el("tr", {}, el("th", { textContent: "Setting" }),
      runs.map((r) => el("th", {}, el("i", { className: "swatch", style: { background: r.color } }), r.label)))), body));
  node.id = "config";
  return node;
}

// ---- the wallet ----------------------------------------------------------------------------

async function walletPage(params, signal) {
  const token = params.get("page") || "";
  const back = params.getAll("back");
  const errors = errorSlot();
  show(el("h1", { textContent: "Wallet" }), errors);
  try {
    const [wallet, ledger, limits] = await Promise.all([
      api("GET", "/v1/train/wallet", { signal }),
      api("GET", `/v1/train/ledger${query({ page_size: 25, page_token: token })}`, { signal }),
      api("GET", "/v1/train/limits", { signal }),
    ]);
    main().append(
      limitsCard(limits),
      el("div", { className: "grid" },
        card("Balance", el("div", { id: "balance" }, facts([
          ["Balance", dollars(wallet.balance_micro_cents)],
          ["Held for running work", dollars(wallet.held_micro_cents)],
          ["Available", dollars(wallet.available_micro_cents)],
          ["Spent", dollars(wallet.spent_micro_cents)],
          ["Spend cap", Number(wallet.spend_cap_micro_cents) ? dollars(wallet.spend_cap_micro_cents) : "none"],
          ["Storage", `${bytes(wallet.storage_bytes)} kept · ${perMonth(wallet.storage_cost_per_month)}`],
        ]))),
        card("Holds", (wallet.holds || []).length ? el("table", {}, el("thead", {}, el("tr", {}, ["Job", "Held", "Used", "Charged", "Status"].map((t) => el("th", { textContent: t })))),
          el("tbody", {}, wallet.holds.map((h) => el("tr", {},
            el("td", {}, el("a", { href: `#/jobs/${encodeURIComponent(h.job_id)}`, className: "mono", textContent: h.job_id })),
            el("td", { className: "num", textContent: seconds(h.held_seconds) }), el("td", { className: "num", textContent: seconds(h.used_seconds) }),
            el("td", { className: "num", textContent: dollars(h.charged_micro_cents) }), el("td", { textContent: h.status }))))) : el("p", { className: "note", textContent: "Nothing is held." }))),
      card("Ledger", el("table", { id: "ledger" }, el("thead", {}, el("tr", {}, ["When", "Entry", "Kind", "Job", "Amount"].map((t, i) => el("th", { className: i === 4 ? "num" : "", textContent: t })))),
        el("tbody", {}, (ledger.entries || []).map((e) => el("tr", {},
          el("td", { textContent: when(e.create_time) }), el("td", { className: "mono", textContent: e.name }), el("td", { textContent: e.kind }),
          el("td", {}, e.job_id ? el("a", { href: `#/jobs/${encodeURIComponent(e.job_id)}`, className: "mono", textContent: e.job_id }) : ""),
          el("td", { className: "num", textContent: dollars(e.micro_cents) }))))),
      el("div", { className: "pager" },
        back.length ? el("a", { className: "button", textContent: "Newer", href: `#/wallet${query({ page: back.at(-1), back: back.slice(0, -1) })}` }) : null,
        ledger.next_page_token ? el("a", { className: "button", textContent: "Older", href: `#/wallet${query({ page: ledger.next_page_token, back: [...back, token] })}` }) : null)));
  } catch (err) {
    if (!signal.aborted) errors.report(err);
  }
}

// ---- webhooks ------------------------------------------------------------------------------

// The org's endpoints, and a form to register one (its admins'); the signing secret the
// create answers is shown here once.
async function webhooksPage(signal) {
  const errors = errorSlot();
  const field = (label, input) => el("label", {}, el("span", { textContent: label }), input);
  const url = el("input", { id: "webhook-url", type: "url", required: true, placeholder: "https://hooks.example.com/trainyard" });
  const description = el("input", { id: "webhook-description", maxLength: 256 });
  const boxes = WEBHOOK_EVENTS.map((name) => el("input", { type: "checkbox", value: name, defaultChecked: name.startsWith("job.") && name !== "job.stalled" }));
  const events = el("fieldset", { className: "events", id: "webhook-events" }, el("legend", { textContent: "Events" }),
    boxes.map((box) => el("label", { className: "check" }, box, el("span", { className: "mono", textContent: box.value }))));
  const secret = el("div", { id: "webhook-secret" });
  const body = el("tbody");
  const form = el("form", { className: "form" }, field("URL", url), field("Description", description), events,
    el("div", { className: "toolbar" }, el("button", { className: "primary", type: "submit", textContent: "Add endpoint" })));
  show(el("h1", { textContent: "Webhooks" }), errors, secret,
    card("Endpoints", el("table", { id: "webhooks" }, el("thead", {}, el("tr", {}, ["Endpoint", "URL", "Events", "Created"].map((t) => el("th", { textContent: t })))), body)),
    card("Add an endpoint", el("p", { className: "note", textContent: "Deliveries are signed as the Standard Webhooks specification says; verify them with the secret shown once here." }), form));

  const load = async () => {
    const found = [];
    let token = "";
    do {
      const page = await api("GET", `/v1/train/webhooks${query({ page_size: 100, page_token: token })}`, { signal });
      found.push(...page.webhooks);
      token = page.next_page_token;
    } while (token);
    body.replaceChildren(...found.map((hook) => el("tr", { attrs: { "data-webhook": hook.id } },
      el("td", {}, el("a", { href: `#/webhooks/${encodeURIComponent(hook.id)}`, className: "mono", textContent: hook.id }),
        hook.description ? el("div", { className: "note", textContent: hook.description }) : null),
      el("td", { className: "mono", textContent: hook.url }),
      el("td", { className: "mono", textContent: hook.events.join(", ") }),
      el("td", { textContent: when(hook.create_time) }))));
    if (!found.length) body.append(el("tr", {}, el("td", { colSpan: 4, className: "note", textContent: "No endpoints yet." })));
  };
  form.onsubmit = async (event) => {
    event.preventDefault();
    errors.report(null);
    try {
      const made = await api("POST", "/v1/train/webhooks", { signal, body: {
        url: url.value.trim(), description: description.value, events: boxes.filter((b) => b.checked).map((b) => b.value) } });
      fill(secret, card("Signing secret", el("p", { className: "note", textContent: `Keep it now: ${made.id}'s secret is not shown again.` }),
        el("code", { className: "secret", textContent: made.secret })));
      form.reset();
      await load();
    } catch (err) {
      if (!signal.aborted) errors.report(err);
    }
  };
  try {
    await load();
  } catch (err) {
    if (!signal.aborted) errors.report(err);
  }
}

// One endpoint and its delivery log, newest first, each delivery with a Redeliver button.
async function webhookPage(id, params, signal) {
  const token = params.get("page") || "";
  const back = params.getAll("back");
  const errors = errorSlot();
  const path = `/v1/train/webhooks/${encodeURIComponent(id)}`;
  const head = el("div");
  const body = el("tbody");
  const pager = el("div", { className: "pager" });
  show(el("h1", {}, "Webhook ", el("span", { className: "mono", textContent: id }), el("span", { className: "actions" },
    el("button", { className: "danger", type: "button", textContent: "Delete", onclick: async () => {
      if (!confirm("Delete this endpoint and its delivery log?")) return;
      try {
        await api("DELETE", path, { signal });
        location.hash = "/webhooks";
      } catch (err) {
        errors.report(err);
      }
    } }))),
  errors, head,
  card("Deliveries", el("table", { id: "deliveries" }, el("thead", {}, el("tr", {},
    ["Queued", "Event", "Status", "Attempts", "Last answer", "Message", ""].map((t, i) => el("th", { className: i === 3 ? "num" : "", textContent: t })))), body), pager));

  const redeliver = (delivery, button) => async () => {
    button.disabled = true;
    errors.report(null);
    try {
      await api("POST", `${path}/deliveries/${encodeURIComponent(delivery.id)}/redeliver`, { body: {}, signal });
      await load();
    } catch (err) {
      errors.report(err);
      button.disabled = false;
    }
  };
  const row = (delivery) => {
    const button = el("button", { type: "button", textContent: "Redeliver" });
    button.onclick = redeliver(delivery, button);
    const answer = [delivery.last_status_code ? `HTTP ${delivery.last_status_code}` : "", delivery.last_error].filter(Boolean).join(" · ");
    return el("tr", { attrs: { "data-delivery": delivery.id } },
      el("td", { textContent: when(delivery.create_time) }),
      el("td", { className: "mono", textContent: delivery.event_type }),
      el("td", {}, badge(delivery.status), delivery.next_attempt_time && delivery.status === "pending"
        ? el("div", { className: "note", textContent: `next ${when(delivery.next_attempt_time)}` }) : null),
      el("td", { className: "num", textContent: String(delivery.attempts || 0) }),
      el("td", { textContent: answer || "—" }),
      el("td", { className: "mono note", textContent: delivery.message_id }, delivery.redelivery_of ? el("div", { textContent: "redelivery" }) : null),
      el("td", {}, button));
  };
  const load = async () => {
    const page = await api("GET", `${path}/deliveries${query({ page_size: 25, page_token: token })}`, { signal });
    body.replaceChildren(...page.deliveries.map(row));
    if (!page.deliveries.length) body.append(el("tr", {}, el("td", { colSpan: 7, className: "note", textContent: "Nothing delivered yet." })));
    fill(pager,
      back.length ? el("a", { className: "button", textContent: "Newer", href: `#/webhooks/${encodeURIComponent(id)}${query({ page: back.at(-1), back: back.slice(0, -1) })}` }) : null,
      page.next_page_token ? el("a", { className: "button", textContent: "Older", href: `#/webhooks/${encodeURIComponent(id)}${query({ page: page.next_page_token, back: [...back, token] })}` }) : null);
  };
  try {
    const hook = await api("GET", path, { signal });
    fill(head, card("Endpoint", facts([
      ["URL", el("span", { className: "mono", textContent: hook.url })],
      ["Events", el("span", { className: "mono", textContent: hook.events.join(", ") })],
      ["Description", hook.description],
      ["Stalled after", seconds(hook.stalled_after_seconds)],
      ["Expiring within", seconds(hook.expiring_within_seconds)],
      ["Thresholds", (hook.thresholds_percent || []).map((p) => `${p}%`).join(", ")],
      ["Created", when(hook.create_time)],
    ])));
    // Refreshed while shown, so retries and redeliveries move on their own.
    while (!signal.aborted) {
      await load();
      errors.report(null);
      await pause(3000, signal);
    }
  } catch (err) {
    if (!signal.aborted) errors.report(err);
  }
}

// ---- limits, keys and the audit trail ---------------------------------------------------------

// US cents (the unit of limits and keys' spend) as dollars; `none` for a cap that is not set.
function cents(value) {
  return value === undefined || value === null ? "none" : dollars(Number(value) * 1e6);
}

function used(usage, format = (v) => Number(v).toLocaleString()) {
  const limit = usage.limit === null || usage.limit === undefined ? "no limit" : format(usage.limit);
  return `${format(usage.used)} of ${limit}`;
}

function scope(key) {
  return [
    `projects: ${(key.projects || []).join(", ") || "all"}`,
    `bases: ${(key.bases || []).join(", ") || "all"}`,
    `spent ${cents(key.spend_this_month)} of ${cents(key.monthly_spend_cap)} this month`,
  ].join("; ");
}

function limitsCard(limits) {
  const key = limits.key || {};
  return card("Limits", el("div", { id: "limits" }, facts([
    ["Active jobs", used(limits.active_jobs)],
    ["Training clients", used(limits.training_clients)],
    ["Pending uploads", used(limits.pending_uploads, bytes)],
    ["Spent this month", used(limits.spend_this_month, cents)],
    ...(limits.project_spend || []).map((p) => [`Project ${p.project}`, used(p, cents)]),
    ["This key", `${key.id} (${key.role}) — ${scope(key)}${key.expire_time ? `; expires ${when(key.expire_time)}` : ""}`],
  ])));
}

async function keysPage(params, signal) {
  const token = params.get("page") || "";
  const back = params.getAll("back");
  const errors = errorSlot();
  const field = (label, input) => el("label", {}, el("span", { textContent: label }), input);
  const role = el("select", { id: "key-role" }, ["member", "admin", "executor"].map((r) => el("option", { value: r, textContent: r })));
  const label = el("input", { id: "key-label", placeholder: "who holds it (optional)" });
  const projects = el("input", { id: "key-projects", placeholder: "all; or comma-separated" });
  const bases = el("input", { id: "key-bases", placeholder: "all; or comma-separated" });
  const cap = el("input", { id: "key-cap", type: "number", min: 0, placeholder: "none" });
  const ttl = el("input", { id: "key-ttl", type: "number", min: 1, placeholder: "never" });
  const made = el("div", { id: "key-made" });
  const list = (text) => text.split(",").map((s) => s.trim()).filter(Boolean);
  const form = el("form", { className: "form", id: "key-form" },
    field("Role", role), field("Label", label), field("Projects", projects), field("Bases", bases),
    field("Monthly spend cap (US cents)", cap), field("Expires after (seconds)", ttl),
    el("div", { className: "toolbar" }, el("button", { className: "primary", type: "submit", textContent: "Create key" })));
  const body = el("tbody");
  const pager = el("div", { className: "pager" });
  // A secret is shown once, in the answer that made it; the page never keeps it.
  const showSecret = (key, what) => made.replaceChildren(el("div", { className: "secret", attrs: { role: "status" } },
    el("p", { textContent: `${what} ${key.id}. Copy its secret now: it is not shown again.` }),
    el("code", { className: "mono", id: "key-secret", textContent: key.secret })));
  show(el("h1", { textContent: "Keys" }), errors, made,
    el("div", { className: "grid" }, card("New key", form),
      card("", el("p", { className: "note", textContent: "A key acts in this org only, with its role. One limited to projects sees and acts on their jobs only; one limited to bases trains those only; a monthly spend cap bounds what its jobs are charged. Revoking refuses the key's very next call; rotating gives it a new secret and refuses the old one." }))),
    el("section", { className: "card" }, el("table", { id: "keys" },
      el("thead", {}, el("tr", {}, ["Key", "Status", "Role", "Label", "Limits", "Created", "Last used", ""].map((t) => el("th", { textContent: t })))),
      body), pager));

  const load = async () => {
    const page = await api("GET", `/v1/train/keys${query({ page_size: PAGE, page_token: token })}`, { signal });
    body.replaceChildren(...page.keys.map(keyRow));
    if (!page.keys.length) body.append(el("tr", {}, el("td", { colSpan: 8, className: "note", textContent: "No keys." })));
    fill(pager,
      back.length ? el("a", { className: "button", textContent: "Newer", href: `#/keys${query({ page: back.at(-1), back: back.slice(0, -1) })}` }) : null,
      page.next_page_token ? el("a", { className: "button", textContent: "Older", href: `#/keys${query({ page: page.next_page_token, back: [...back, token] })}` }) : null);
  };
  const act = async (key, verb) => {
    const question = verb === "revoke" ? `Revoke ${key.label || key.id}? Its next call is refused.` : `Rotate ${key.label || key.id}? Its current secret stops working now.`;
    if (!confirm(question)) return;
    errors.report(null);
    try {
      const answer = await api("POST", `/v1/train/keys/${encodeURIComponent(key.id)}/${verb}`, { body: {}, signal });
      if (verb === "rotate") showSecret(answer, "Rotated"); else made.replaceChildren();
      await load();
    } catch (err) {
      errors.report(err);
    }
  };
  const keyRow = (key) => el("tr", { attrs: { "data-key": key.id } },
    el("td", { className: "mono", textContent: key.id }), el("td", {}, badge(key.status)),
    el("td", { textContent: key.role }), el("td", { textContent: key.label || "" }),
    el("td", { className: "note", textContent: `${scope(key)}${key.expire_time ? `; expires ${when(key.expire_time)}` : ""}` }),
    el("td", { textContent: when(key.create_time) }), el("td", { textContent: when(key.last_used_time) || "never" }),
    el("td", {}, key.status === "active" ? [
      el("button", { type: "button", className: "revoke", textContent: "Revoke", onclick: () => act(key, "revoke") }), " ",
      el("button", { type: "button", className: "rotate", textContent: "Rotate", onclick: () => act(key, "rotate") })] : ""));
  form.onsubmit = async (event) => {
    event.preventDefault();
    errors.report(null);
    const request = { role: role.value, label: label.value.trim(), projects: list(projects.value), bases: list(bases.value) };
    if (cap.value !== "") request.monthly_spend_cap = Number(cap.value);
    if (ttl.value !== "") request.ttl_seconds = Number(ttl.value);
    try {
      showSecret(await api("POST", "/v1/train/keys", { body: request, signal }), "Made");
      form.reset();
      await load();
    } catch (err) {
      errors.report(err);
    }
  };
  try {
    await load();
  } catch (err) {
    if (!signal.aborted) errors.report(err);
  }
}

// A datetime-local input's value, read as the browser's local time, as RFC 3339.
function rfc3339(local) {
  return local ? new Date(local).toISOString() : "";
}

async function auditPage(params, signal) {
  const filters = { actor: params.get("actor") || "", action: params.get("action") || "",
    start_time: params.get("start_time") || "", end_time: params.get("end_time") || "" };
  const token = params.get("page") || "";
  const back = params.getAll("back");
  const errors = errorSlot();
  const field = (label, input) => el("label", {}, el("span", { textContent: label }), input);
  const actor = el("input", { id: "audit-actor", placeholder: "key_…", value: filters.actor });
  const action = el("input", { id: "audit-action", placeholder: "training.job.* or an exact name", value: filters.action });
  const since = el("input", { id: "audit-since", type: "datetime-local" });
  const until = el("input", { id: "audit-until", type: "datetime-local" });
  const form = el("form", { className: "toolbar filters", id: "audit-filters" },
    field("Key", actor), field("Action", action), field("From", since), field("Before", until),
    el("button", { type: "submit", textContent: "Filter" }));
  form.onsubmit = (event) => {
    event.preventDefault();
    location.hash = `/audit${query({ actor: actor.value.trim(), action: action.value.trim(),
      start_time: rfc3339(since.value) || filters.start_time, end_time: rfc3339(until.value) || filters.end_time })}`;
  };
  const body = el("tbody");
  const pager = el("div", { className: "pager" });
  show(el("h1", { textContent: "Audit trail" }), form, errors,
    el("section", { className: "card" }, el("table", { id: "audit" },
      el("thead", {}, el("tr", {}, ["When", "Action", "Subject", "Code", "Key", "Key's org", "Request"].map((t) => el("th", { textContent: t })))),
      body), pager));
  try {
    const page = await api("GET", `/v1/train/audit${query({ ...filters, page_size: PAGE, page_token: token })}`, { signal });
    body.replaceChildren(...page.entries.map((e) => el("tr", { attrs: { "data-entry": String(e.id) } },
      el("td", { textContent: when(e.create_time) }), el("td", { className: "mono", textContent: e.action }),
      el("td", { className: "mono", textContent: e.subject }), el("td", { textContent: e.code }),
      el("td", {}, e.key_id ? el("a", { className: "mono", href: `#/audit${query({ actor: e.key_id })}`, textContent: e.key_id }) : "—",
        e.key_role ? el("span", { className: "note", textContent: ` ${e.key_role}${e.key_label ? `, ${e.key_label}` : ""}` }) : null),
      el("td", { textContent: e.key_org && e.key_org !== e.org ? e.key_org : "" }),
      el("td", { className: "mono note", textContent: e.request_id }))));
    if (!page.entries.length) body.append(el("tr", {}, el("td", { colSpan: 7, className: "note", textContent: "Nothing on the trail matches." })));
    fill(pager,
      back.length ? el("a", { className: "button", textContent: "Newer", href: `#/audit${query({ ...filters, page: back.at(-1), back: back.slice(0, -1) })}` }) : null,
      page.next_page_token ? el("a", { className: "button", textContent: "Older", href: `#/audit${query({ ...filters, page: page.next_page_token, back: [...back, token] })}` }) : null);
  } catch (err) {
    if (!signal.aborted) errors.report(err);
  }
}

// ---- start -------------------------------------------------------------------------------

document.getElementById("sign-out").onclick = () => {
  sessionStorage.removeItem(KEY);
  location.hash = "/signin";
  route();
};
window.addEventListener("hashchange", route);
route();

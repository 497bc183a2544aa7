"use strict";

/*
 * Sift's live dashboard (served at /ui by service/api/routes/ui.py).
 *
 * It reads the /v1 API as any client does and draws its two charts as SVG itself: no framework,
 * nothing from another origin.
 *
 * Live updates come from polling, not server-sent events: EventSource cannot send an
 * Authorization header (the key would have to travel in the URL, which access logs keep), and
 * a poll is cheap: one page of the selector list (searched, filtered and paged by the server:
 * the page never downloads thousands of descriptions), a few describes for the pending counts, and
 * the top and history of the shown selector only when its version, h or view changed; one page
 * of the stream list, and the shown stream's rankings side by side (``#stream=<name>``); and
 * the sources (``GET /v1/sources``), shown beside the selectors they feed (a source into a
 * stream feeds every selector attached to it), or none when the key may not read them.
 * Failures back off (the interval doubles up to MAX_BACKOFF_MS); a hidden tab does not poll
 * at all.
 *
 * Whatever comes from the server (feature names come from users) reaches the DOM as text nodes
 * and attribute values only, never as markup; the page's Content-Security-Policy forbids inline
 * script besides.
 */
(() => {
  const KEY_STORAGE = "sift.apiKey";
  const POLL_MS = 2000;
  const MAX_BACKOFF_MS = 30000;
  /** Describes per poll for the pending counts (the list does not carry them): round robin. */
  const DESCRIBES_PER_POLL = 6;
  /** Selectors per page of the list (the server pages, searches and filters it). */
  const LIST_PAGE_SIZE = 25;
  /** How long the search waits for more typing before it asks the server. */
  const SEARCH_DELAY_MS = 250;
  const HISTORY_LIMIT = 20;
  /** Alert events shown under the charts, newest first. */
  const EVENTS_SHOWN = 10;
  /** Feature names longer than this are cut in the charts (the tooltip has them whole). */
  const LABEL_CHARS = 24;
  /** A source's last error is cut to this in the lists (the tooltip and the detail have it). */
  const ERROR_CHARS = 60;
  /** A source's states (GET /v1/sources); another value is shown, styled as none of them. */
  const SOURCE_STATES = new Set(["starting", "running", "paused", "retrying", "failed"]);
  /** States whose last error is shown: the source does not read its bus. */
  const TROUBLED = new Set(["retrying", "failed"]);
  const SVG_NS = "http://www.w3.org/2000/svg";
  /** Tableau 10: distinguishable, and readable on light and dark backgrounds. */
  const PALETTE = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
  ];
  /** The API, next to this page: /ui -> /v1/ (and /prefix/ui -> /prefix/v1/ behind a proxy). */
  const API_BASE = new URL("v1/", new URL(".", window.location.href));
  const NUMBER = new Intl.NumberFormat("en");

  const $ = (id) => document.getElementById(id);
  const ui = {
    status: $("status"),
    forgetKey: $("forget-key"),
    problem: $("problem"),
    selectorRows: $("selectors").querySelector("tbody"),
    selectorSourceHead: $("selectors").querySelector("th.sources"),
    noSelectors: $("no-selectors"),
    noMatches: $("no-matches"),
    search: $("selector-search"),
    method: $("selector-method"),
    showTemporary: $("show-temporary"),
    prev: $("selector-prev"),
    next: $("selector-next"),
    pageLabel: $("selector-page"),
    stabilityLegend: $("stability-legend"),
    title: $("detail-title"),
    facts: $("detail-facts"),
    detailSources: $("detail-sources"),
    message: $("detail-message"),
    charts: $("charts"),
    stability: $("stability"),
    driftFacts: $("drift-facts"),
    events: $("alert-events"),
    noEvents: $("no-events"),
    barChart: $("bar-chart"),
    rankChart: $("rank-chart"),
    h: $("h"),
    viewControl: $("view-control"),
    view: $("view"),
    keyDialog: $("key-dialog"),
    keyForm: $("key-form"),
    keyInput: $("key-input"),
    keyReason: $("key-reason"),
    keyCancel: $("key-cancel"),
    streamRows: $("streams").querySelector("tbody"),
    streamSourceHead: $("streams").querySelector("th.sources"),
    noStreams: $("no-streams"),
    streamDetail: $("stream-detail"),
    streamTitle: $("stream-title"),
    streamFacts: $("stream-facts"),
    streamMessage: $("stream-message"),
    sideBySide: $("side-by-side"),
    agreement: $("agreement"),
  };

  const state = {
    /** The selectors of the page shown, as the list answered them, sorted by name. */
    selectors: [],
    /** What the list asks the server for: a part of the name, a method, temporary ones too. */
    filter: { q: "", method: "", temporary: false },
    /** The ``after`` of every page up to the one shown (null: the first), and the next one's. */
    pages: [null],
    nextPage: null,
    /** The chosen selector when it is not on the page shown (its describe answer), or null. */
    outside: null,
    /** Whether the method filter has its options (GET /v1/methods, once). */
    methodsKnown: false,
    /** name -> the last describe answer (pending entries, classes, ...). */
    described: new Map(),
    describeCursor: 0,
    selected: null,
    h: Number(ui.h.value),
    view: null,
    /** What the charts show: [name, created, version, h, view]; redrawn when it changes. */
    shownKey: null,
    /** Feature key -> colour, kept while the feature stays in the top (bars and lines agree). */
    colours: new Map(),
    failures: 0,
    lastSuccess: null,
    timer: null,
    running: false,
    again: false,
    waitingForKey: false,
    /** The streams as the list answered them, and the one shown side by side (or null). */
    streams: [],
    stream: null,
    /** What the side-by-side view shows: [stream, h, every selector's name and version]. */
    streamShownKey: null,
    /** The sources (GET /v1/sources) this key may read; [] when it may read none. */
    sources: [],
  };

  // -- the API ---------------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, problem, path) {
      const said = problem && (problem.detail || problem.title);
      super(said ? `${status}: ${said}` : `${status} from ${path}`);
      this.status = status;
      this.problem = problem || {};
      this.path = path;
    }
  }

  function storedKey() {
    try {
      return window.sessionStorage.getItem(KEY_STORAGE);
    } catch (_) {
      return null; // storage disabled: the page still works without authentication
    }
  }

  function storeKey(key) {
    try {
      if (key === null) window.sessionStorage.removeItem(KEY_STORAGE);
      else window.sessionStorage.setItem(KEY_STORAGE, key);
    } catch (_) {
      /* nothing to keep it in: it is asked for again on the next 401 */
    }
    ui.forgetKey.hidden = !storedKey();
  }

  /** GET a /v1 path; the parsed JSON, or an ApiError carrying the problem details. */
  async function api(path, query = {}) {
    const url = new URL(path, API_BASE);
    for (const [name, value] of Object.entries(query)) {
      if (value !== null && value !== undefined) url.searchParams.set(name, String(value));
    }
    const headers = { Accept: "application/json" };
    const key = storedKey();
    if (key) headers.Authorization = `Bearer ${key}`;
    let response;
    try {
      response = await fetch(url, { headers, cache: "no-store" });
    } catch (error) {
      throw new ApiError(
        0,
        { title: "The service did not answer", detail: String(error.message || error) },
        url.pathname,
      );
    }
    if (response.ok) return response.json();
    let problem;
    try {
      problem = await response.json();
    } catch (_) {
      problem = { title: response.statusText || "Error", status: response.status };
    }
    throw new ApiError(response.status, problem, url.pathname);
  }

  const selectorPath = (name, ...rest) =>
    ["selectors", encodeURIComponent(name), ...rest].join("/");
  const streamPath = (name, ...rest) => ["streams", encodeURIComponent(name), ...rest].join("/");
  /** The hash that shows a stream (a name never holds '='). */
  const STREAM_HASH = "#stream=";

  /** Errors about the whole connection (back off, ask for a key) rather than one answer. */
  function isConnectionError(error) {
    return !(error instanceof ApiError) || error.status === 0 || error.status === 401
      || error.status >= 500;
  }

  /** An answer, or {error} for an error that belongs to this answer alone. */
  function settle(promise) {
    return promise.then(
      (answer) => ({ answer }),
      (error) => {
        if (isConnectionError(error)) throw error;
        return { error };
      },
    );
  }

  // -- DOM helpers -----------------------------------------------------------------------------

  /** An element with attributes and text; text is always a text node, never parsed. */
  function element(tag, attributes = {}, text = null, namespace = null) {
    const node = namespace ? document.createElementNS(namespace, tag) : document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
      if (value !== null && value !== undefined) node.setAttribute(name, String(value));
    }
    if (text !== null) node.textContent = String(text);
    return node;
  }

  const svgElement = (tag, attributes = {}, text = null) => element(tag, attributes, text, SVG_NS);

  function truncate(text, length) {
    const chars = Array.from(text);
    return chars.length <= length ? text : `${chars.slice(0, length - 1).join("")}…`;
  }

  /**
   * Shorten the SVG text ``node`` (in the document, so it can be measured) until it fits
   * ``width`` user units; the whole name stays in the tooltip.
   */
  function fitText(node, width) {
    const chars = Array.from(node.textContent);
    let keep = chars.length;
    while (keep > 1 && node.getComputedTextLength() > width) {
      keep -= 1;
      node.textContent = `${chars.slice(0, keep).join("").replace(/…$/, "")}…`;
    }
  }

  function formatScore(score) {
    if (typeof score !== "number" || !Number.isFinite(score)) return String(score);
    const size = Math.abs(score);
    if (size !== 0 && (size >= 1e5 || size < 1e-3)) return score.toExponential(2);
    return String(Number(score.toPrecision(3)));
  }

  function ago(epochSeconds) {
    if (typeof epochSeconds !== "number") return "–";
    const seconds = Math.max(0, Date.now() / 1000 - epochSeconds);
    if (seconds < 5) return "just now";
    if (seconds < 60) return `${Math.floor(seconds)} s ago`;
    if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
    if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
    return `${Math.floor(seconds / 86400)} d ago`;
  }

  /** Whether a selector's chunks are feature columns (it counts features, and they go to
   * POST .../features): its chunk kind says so (GET /v1/methods lists every method's). */
  function takesColumns(entry) {
    return entry.chunk_kind === "columns";
  }

  /** "1,200 rows" or "35 features": feature streams count features, row streams rows. */
  function seenText(entry) {
    const seen = takesColumns(entry) ? entry.features_seen : entry.rows_seen;
    if (typeof seen !== "number") return "–";
    return `${NUMBER.format(seen)} ${takesColumns(entry) ? "features" : "rows"}`;
  }

  function pendingOf(entry) {
    if (typeof entry.pending_entries === "number") return entry.pending_entries;
    if (entry.state && typeof entry.state.pending_entries === "number") {
      return entry.state.pending_entries;
    }
    const described = state.described.get(entry.name);
    if (described && described.state && typeof described.state.pending_entries === "number") {
      return described.state.pending_entries;
    }
    return null;
  }

  const featureKey = (feature) => `${feature.view ?? ""}\u0000${feature.index}`;

  function assignColours(keys) {
    const next = new Map();
    const used = new Set();
    for (const key of keys) {
      const colour = state.colours.get(key);
      if (colour && !used.has(colour)) {
        next.set(key, colour);
        used.add(colour);
      }
    }
    let cursor = 0;
    for (const key of keys) {
      if (next.has(key)) continue;
      while (cursor < PALETTE.length && used.has(PALETTE[cursor])) cursor += 1;
      const colour = PALETTE[cursor % PALETTE.length];
      cursor += 1;
      next.set(key, colour);
      used.add(colour);
    }
    state.colours = next;
  }

  // -- problems and status ---------------------------------------------------------------------

  /** The lines of problem details (RFC 9457) worth showing: title and status, detail, ids. */
  function problemLines(error) {
    if (!(error instanceof ApiError)) {
      return { title: "The dashboard failed", detail: String(error && error.message), extra: "" };
    }
    const problem = error.problem;
    const status = error.status ? ` (${error.status})` : "";
    const extra = [];
    if (problem.type) extra.push(`type ${problem.type}`);
    for (const field of ["error_id", "request_id"]) {
      if (problem[field]) extra.push(`${field} ${problem[field]}`);
    }
    extra.push(`on ${error.path}`);
    return {
      title: `${problem.title || "Error"}${status}`,
      detail: problem.detail || "",
      extra: extra.join(" · "),
    };
  }

  function showProblem(error) {
    const lines = problemLines(error);
    ui.problem.querySelector(".problem-title").textContent = lines.title;
    ui.problem.querySelector(".problem-detail").textContent = lines.detail;
    ui.problem.querySelector(".problem-extra").textContent = lines.extra;
    ui.problem.hidden = false;
  }

  /** A problem inside one chart (or the detail panel): the same lines, in place. */
  function problemNote(error, what) {
    const lines = problemLines(error);
    const note = element("div", { class: "note problem" });
    note.append(
      element("p", { class: "problem-title" }, `${what}: ${lines.title}`),
      element("p", { class: "problem-detail" }, lines.detail),
      element("p", { class: "problem-extra" }, lines.extra),
    );
    return note;
  }

  function nextDelay() {
    return state.failures === 0 ? POLL_MS : Math.min(MAX_BACKOFF_MS, POLL_MS * 2 ** state.failures);
  }

  function updateStatus() {
    ui.status.classList.toggle("failing", state.failures > 0 || state.waitingForKey);
    if (state.waitingForKey) {
      ui.status.textContent = "Waiting for an API key";
    } else if (state.failures > 0) {
      ui.status.textContent = `Connection problem: retrying in ${nextDelay() / 1000} s`;
    } else {
      const at = new Date(state.lastSuccess).toLocaleTimeString();
      ui.status.textContent = `Live: polling every ${POLL_MS / 1000} s · last update ${at}`;
    }
  }

  // -- authentication --------------------------------------------------------------------------

  function askForKey(error) {
    state.waitingForKey = true;
    const refused = Boolean(storedKey());
    if (refused) storeKey(null);
    const said = error.problem.detail || error.problem.title || "authentication required";
    ui.keyReason.textContent = refused
      ? `The key was refused: ${said}`
      : `This server needs an API key: ${said}`;
    updateStatus();
    if (!ui.keyDialog.open) ui.keyDialog.showModal();
    ui.keyInput.focus();
  }

  ui.keyForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const key = ui.keyInput.value.trim();
    if (!key) return;
    storeKey(key);
    ui.keyInput.value = "";
    ui.keyDialog.close();
    state.waitingForKey = false;
    state.failures = 0;
    state.shownKey = null;
    poll();
  });

  ui.keyCancel.addEventListener("click", () => ui.keyDialog.close());
  // Closed without a key (Cancel, Escape): stay put; the status says what is missing, and a
  // click on it opens the dialog again.
  ui.status.addEventListener("click", () => {
    if (state.waitingForKey && !ui.keyDialog.open) ui.keyDialog.showModal();
  });

  ui.forgetKey.addEventListener("click", () => {
    storeKey(null);
    state.shownKey = null;
    poll();
  });

  // -- polling ---------------------------------------------------------------------------------

  /** One round: list, pending counts, the shown selector. Never two at once. */
  async function poll() {
    if (state.running) {
      state.again = true;
      return;
    }
    clearTimeout(state.timer);
    state.timer = null;
    if (state.waitingForKey) return;
    state.running = true;
    try {
      await refreshList();
      await refreshPending();
      await refreshSources();
      renderSelectors();
      await refreshDetail();
      await refreshStreams();
      renderStreams();
      await refreshStream();
      state.failures = 0;
      state.lastSuccess = Date.now();
      ui.problem.hidden = true;
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) {
        state.running = false;
        askForKey(error);
        return;
      }
      state.failures += 1;
      showProblem(error);
    } finally {
      state.running = false;
    }
    updateStatus();
    if (state.again) {
      state.again = false;
      window.setTimeout(poll, 0);
    } else if (!document.hidden) {
      state.timer = window.setTimeout(poll, nextDelay());
    }
  }

  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) poll();
  });

  /** One page of the list, as the filters ask (the server searches, filters and pages). */
  async function refreshList() {
    if (!state.methodsKnown) await loadMethods();
    const { q, method, temporary } = state.filter;
    const answer = await api("selectors", {
      limit: LIST_PAGE_SIZE,
      after: state.pages[state.pages.length - 1],
      q: q || null,
      method: method || null,
      temporary: temporary ? null : "false",
    });
    const listed = answer.selectors || [];
    state.selectors = listed;
    state.nextPage = answer.next || null;
    const names = new Set(listed.map((entry) => entry.name));
    for (const name of state.described.keys()) {
      if (!names.has(name) && name !== state.selected) state.described.delete(name);
    }
    if (state.selected === null && listed.length > 0) choose(listed[0].name, { replace: true });
    // The chosen selector off this page (searched away, another page, or opened by its URL):
    // its own describe.
    state.outside = null;
    if (state.selected !== null && !names.has(state.selected)) {
      const described = await settle(api(selectorPath(state.selected)));
      state.outside = described.answer || null;
    }
  }

  /** The methods' names for the method filter (GET /v1/methods, once). */
  async function loadMethods() {
    const answer = await settle(api("methods"));
    if (!answer.answer) return;
    const options = (answer.answer.methods || []).map(
      (method) => element("option", { value: method.name }, method.name),
    );
    ui.method.append(...options);
    state.methodsKnown = true;
  }

  /** Back to the first page with other filters, and ask at once. */
  function refilter(change) {
    Object.assign(state.filter, change);
    state.pages = [null];
    poll();
  }

  let searchTimer = null;
  ui.search.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = window.setTimeout(() => refilter({ q: ui.search.value.trim() }), SEARCH_DELAY_MS);
  });
  document.getElementById("selector-filters").addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(searchTimer);
    refilter({ q: ui.search.value.trim() });
  });
  ui.method.addEventListener("change", () => refilter({ method: ui.method.value }));
  ui.showTemporary.addEventListener("change", () => refilter({ temporary: ui.showTemporary.checked }));
  ui.next.addEventListener("click", () => {
    if (!state.nextPage) return;
    state.pages.push(state.nextPage);
    poll();
  });
  ui.prev.addEventListener("click", () => {
    if (state.pages.length < 2) return;
    state.pages.pop();
    poll();
  });

  /** Describe the shown selector and a few others in turn, for the pending counts. */
  async function refreshPending() {
    const lacking = state.selectors.filter(
      (entry) => typeof entry.pending_entries !== "number"
        && !(entry.state && typeof entry.state.pending_entries === "number"),
    );
    const names = [];
    if (lacking.some((entry) => entry.name === state.selected)) names.push(state.selected);
    const others = lacking.filter((entry) => entry.name !== state.selected);
    const turns = Math.min(others.length, DESCRIBES_PER_POLL - names.length);
    for (let i = 0; i < turns; i += 1) {
      names.push(others[(state.describeCursor + i) % others.length].name);
    }
    state.describeCursor = others.length ? (state.describeCursor + turns) % others.length : 0;
    const answers = await Promise.all(names.map((name) => settle(api(selectorPath(name)))));
    names.forEach((name, i) => {
      if (answers[i].answer) state.described.set(name, answers[i].answer);
    });
  }

  // -- sources: the buses that feed selectors -------------------------------------------------

  /** GET /v1/sources: every source this key may read. A key that may not read them (403), or a
   * service without them (404), shows none; the rest of the page does not depend on them. */
  async function refreshSources() {
    const answer = await settle(api("sources"));
    state.sources = answer.answer ? answer.answer.sources || [] : [];
  }

  /** The sources into stream ``stream`` (none for null). */
  function sourcesIntoStream(stream) {
    if (!stream) return [];
    return state.sources.filter((source) => source.into && source.into.stream === stream);
  }

  /** The sources feeding a selector: into it, or into the stream it is attached to. */
  function sourcesFeeding(entry) {
    const direct = state.sources.filter(
      (source) => source.into && source.into.selector === entry.name,
    );
    return [...direct, ...sourcesIntoStream(entry.stream)];
  }

  /** "lag 1,200": entries on the bus after its committed positions ("lag –": it cannot say). */
  function lagText(source) {
    return typeof source.lag === "number" ? `lag ${NUMBER.format(source.lag)}` : "lag –";
  }

  /** "lag by partition 0: 12, 1: 0" for a bus of several partitions (Kafka); null otherwise. */
  function partitionLagText(source) {
    const lags = Object.entries(source.partition_lag || {})
      .sort(([a], [b]) => Number(a) - Number(b) || a.localeCompare(b));
    if (lags.length < 2) return null;
    const shown = lags.map(([p, lag]) => `${p}: ${typeof lag === "number" ? NUMBER.format(lag) : "–"}`);
    return `lag by partition ${shown.join(", ")}`;
  }

  function rateText(source) {
    const rate = typeof source.rows_per_second === "number" ? source.rows_per_second : 0;
    const shown = rate >= 10 || rate === 0 ? NUMBER.format(Math.round(rate)) : rate.toFixed(1);
    return `${shown} rows/s`;
  }

  /** The last error, when the source does not read its bus (retrying, failed). */
  function troubleOf(source) {
    return TROUBLED.has(source.state) && source.last_error ? String(source.last_error) : null;
  }

  /** One source in a line: name · state · lag · rows/s, and its error below it when it has
   * one (cut to ERROR_CHARS unless ``whole``; the tooltip has it whole). Text nodes only. */
  function sourceLine(source, { whole = false } = {}) {
    const known = SOURCE_STATES.has(source.state) ? source.state : "unknown";
    const line = element("div", { class: `source state-${known}`, "data-source": source.name });
    const lag = element(
      "span",
      {
        class: "source-lag",
        title: typeof source.lag === "number"
          ? "Entries on the bus it has not read yet"
          : "The bus cannot say how many entries it has not read yet",
      },
      lagText(source),
    );
    // The figures stay on one line; the lists put them under the name (and hide the dot).
    const figures = element("span", { class: "source-figures" });
    figures.append(
      element("span", { class: "source-state" }, source.state),
      " · ",
      lag,
      " · ",
      element("span", { class: "source-rate" }, rateText(source)),
    );
    line.append(
      element("span", { class: "source-name", title: `Source ${source.name} (${source.kind})` }, source.name),
      element("span", { class: "source-sep" }, " · "),
      figures,
    );
    const trouble = troubleOf(source);
    if (trouble !== null) {
      line.append(element(
        "span",
        { class: "source-error", title: trouble },
        whole ? trouble : truncate(trouble, ERROR_CHARS),
      ));
    }
    return line;
  }

  /** A table cell with the sources feeding a row (empty when none). */
  function sourcesCell(sources) {
    const cell = element("td", { class: "sources" });
    cell.append(...sources.map((source) => sourceLine(source)));
    return cell;
  }

  /** What a source reads: "redis-stream events at redis://host:6379" (its URL as the API
   * shows it, without credentials). */
  function busText(source) {
    const what = {
      nats: [source.stream, source.subject ? `subject ${source.subject}` : null],
      kafka: [source.topic ? `topic ${source.topic}` : null],
    }[source.kind] ?? [source.key];
    return [source.kind, ...what.filter(Boolean), `at ${source.url}`].join(" ");
  }

  /** The shown selector's sources, each with what it read so far (none: hidden). */
  function renderDetailSources(entry) {
    const sources = entry ? sourcesFeeding(entry) : [];
    ui.detailSources.hidden = sources.length === 0;
    const items = sources.map((source) => {
      const item = element("li", { "data-source": source.name });
      const through = source.into && source.into.stream ? ` through stream ${source.into.stream}` : "";
      const facts = [
        `${NUMBER.format(source.rows)} rows appended${through}`,
        `${NUMBER.format(source.rejected)} entries set aside`,
        source.updated_at ? `last batch ${ago(source.updated_at)}` : "no batch yet",
      ];
      const byPartition = partitionLagText(source);
      if (byPartition) facts.push(byPartition);
      item.append(
        sourceLine(source, { whole: true }),
        element("span", { class: "source-facts" }, `${busText(source)} · ${facts.join(" · ")}`),
      );
      return item;
    });
    ui.detailSources.querySelector("ul").replaceChildren(...items);
  }

  // -- the selector list -----------------------------------------------------------------------

  function renderSelectors() {
    const rows = state.selectors.map((entry) => {
      const row = element("tr", { "data-name": entry.name });
      if (entry.name === state.selected) row.classList.add("selected");
      const link = element("a", { href: `#${encodeURIComponent(entry.name)}` }, entry.name);
      const nameCell = element("td", { class: "name" });
      nameCell.append(link);
      if (entry.temporary) {
        nameCell.append(element(
          "span",
          { class: "badge", title: "Made by a job that deletes it when done (a scikit-learn fit)" },
          "temporary",
        ));
      }
      const pending = pendingOf(entry);
      const pendingCell = element(
        "td",
        { class: `num pending${pending ? " pending-some" : ""}` },
        pending === null ? "…" : NUMBER.format(pending),
      );
      const updated = element("td", { class: "updated" }, ago(entry.updated_at));
      updated.title = new Date(entry.updated_at * 1000).toLocaleString();
      row.append(
        nameCell,
        element("td", { class: "method" }, entry.method),
        element("td", { class: "num seen" }, seenText(entry)),
        element("td", { class: "num version" }, NUMBER.format(entry.version)),
        pendingCell,
        updated,
      );
      if (state.sources.length > 0) row.append(sourcesCell(sourcesFeeding(entry)));
      row.addEventListener("click", () => choose(entry.name));
      return row;
    });
    ui.selectorRows.replaceChildren(...rows);
    ui.selectorSourceHead.hidden = state.sources.length === 0;
    const { q, method } = state.filter;
    const filtered = Boolean(q || method) || state.pages.length > 1;
    ui.noSelectors.hidden = state.selectors.length > 0 || filtered;
    ui.noMatches.hidden = state.selectors.length > 0 || !filtered;
    ui.prev.disabled = state.pages.length < 2;
    ui.next.disabled = !state.nextPage;
    ui.pageLabel.textContent = `Page ${state.pages.length}`;
  }

  function choose(name, { replace = false } = {}) {
    if (name === state.selected) return;
    state.selected = name;
    state.shownKey = null;
    state.colours = new Map();
    state.view = null;
    const hash = `#${encodeURIComponent(name)}`;
    if (window.location.hash !== hash) {
      if (replace) window.history.replaceState(null, "", hash);
      else window.location.hash = hash;
    }
    if (!replace) poll();
  }

  window.addEventListener("hashchange", () => {
    const hash = window.location.hash;
    if (hash.startsWith(STREAM_HASH)) {
      chooseStream(decodeURIComponent(hash.slice(STREAM_HASH.length)));
      return;
    }
    const name = decodeURIComponent(hash.slice(1));
    if (name) choose(name);
  });

  ui.h.addEventListener("change", () => {
    state.h = Number(ui.h.value);
    poll();
  });

  ui.view.addEventListener("change", () => {
    state.view = ui.view.value;
    poll();
  });

  // -- the shown selector ----------------------------------------------------------------------

  function showMessage(text) {
    ui.message.textContent = text;
    ui.message.hidden = !text;
  }

  function clearCharts() {
    ui.barChart.replaceChildren();
    ui.rankChart.replaceChildren();
    ui.charts.hidden = true;
  }

  function renderFacts(entry) {
    const parts = [entry.method, seenText(entry)];
    if (typeof entry.n_features === "number") parts.push(`${NUMBER.format(entry.n_features)} features wide`);
    if (typeof entry.n_samples === "number") parts.push(`${NUMBER.format(entry.n_samples)} samples`);
    if (entry.views) {
      const views = Object.entries(entry.views).map(([view, width]) => `${view} (${width})`);
      parts.push(`views ${views.join(", ")}`);
    }
    if (entry.stream) parts.push(`attached to stream ${entry.stream}`);
    parts.push(`version ${NUMBER.format(entry.version)}`);
    const pending = pendingOf(entry);
    if (pending !== null) parts.push(`${NUMBER.format(pending)} pending`);
    parts.push(`updated ${ago(entry.updated_at)}`);
    ui.facts.textContent = parts.join(" · ");
  }

  /** Multi-view selectors rank one view at a time: offer their views. */
  function syncViews(entry) {
    const views = entry.views ? Object.keys(entry.views) : [];
    ui.viewControl.hidden = views.length === 0;
    if (views.length === 0) {
      state.view = null;
      return;
    }
    const offered = Array.from(ui.view.options, (option) => option.value);
    if (offered.join("\u0000") !== views.join("\u0000")) {
      ui.view.replaceChildren(...views.map((view) => element("option", { value: view }, view)));
    }
    if (!views.includes(state.view)) state.view = views[0];
    ui.view.value = state.view;
  }

  async function refreshDetail() {
    const name = state.selected;
    if (name === null) {
      ui.title.textContent = "No selector chosen";
      ui.facts.textContent = "";
      renderDetailSources(null);
      showMessage(state.selectors.length ? "Choose a selector in the list." : "");
      clearCharts();
      return;
    }
    ui.title.textContent = name;
    const entry = state.selectors.find((candidate) => candidate.name === name)
      || (state.outside && state.outside.name === name ? state.outside : null);
    if (!entry) {
      ui.facts.textContent = "";
      renderDetailSources(null);
      showMessage(`There is no selector '${name}' (any more), or this API key may not see it.`);
      clearCharts();
      state.shownKey = null;
      return;
    }
    renderFacts(entry);
    renderDetailSources(entry);
    syncViews(entry);
    if (entry.version === 0) {
      const route = takesColumns(entry) ? "features" : "chunks";
      const pending = pendingOf(entry);
      const waiting = pending ? ` ${pending} pending ${pending === 1 ? "entry is" : "entries are"} being applied.` : "";
      // A selector attached to a stream applies the stream's chunks, and takes none directly.
      const target = entry.stream ? `/v1/streams/${entry.stream}/chunks` : `/v1/selectors/${name}/${route}`;
      showMessage(`No data yet: push to POST ${target} and the charts appear here.${waiting}`);
      clearCharts();
      state.shownKey = null;
      return;
    }
    showMessage("");
    // created_at: a selector deleted and created again under the same name starts over.
    const key = JSON.stringify([name, entry.created_at, entry.version, state.h, state.view]);
    if (key === state.shownKey) return;
    const [top, history, drift, events] = await Promise.all([
      settle(api(selectorPath(name, "top"), { h: state.h, view: state.view })),
      settle(api(selectorPath(name, "history"), { h: state.h, limit: HISTORY_LIMIT })),
      settle(api(selectorPath(name, "drift"), { h: state.h })),
      settle(api(selectorPath(name, "alerts", "events"), { limit: EVENTS_SHOWN })),
    ]);
    if (state.selected !== name) return; // chosen away meanwhile: the next poll draws that one
    ui.charts.hidden = false;
    const current = top.answer ? top.answer.features : [];
    assignColours(current.map(featureKey));
    renderStability(top);
    renderBars(top);
    renderRanks(history, current);
    renderMovement(drift, events);
    state.shownKey = key;
  }

  // -- how settled the top is, how far it moved, what the alerts said -------------------------

  function renderStability(top) {
    const stability = top.answer && top.answer.stability;
    ui.stability.hidden = !stability;
    ui.stabilityLegend.hidden = !stability;
    if (!stability) {
      ui.stability.textContent = "";
      return;
    }
    const [low, high] = stability.interval;
    const each = stability.corrected ? "" : " (the index of one resample's rows)";
    ui.stability.textContent = `Stability of the top ${stability.h}: ${stability.index.toFixed(2)} `
      + `(95% interval ${low.toFixed(2)} to ${high.toFixed(2)}, `
      + `${stability.resamples} resamples${each}) · whiskers: each feature's ranks over them`;
  }

  const names = (features) =>
    features.map((feature) => (feature.view ? `${feature.view}:${feature.name}` : feature.name))
      .join(", ") || "none";

  function movedText(what, moved) {
    const parts = [`${what} (version ${NUMBER.format(moved.version)}): drift ${moved.drift.toFixed(2)}`];
    if (moved.entered.length || moved.left.length) {
      parts.push(`entered ${names(moved.entered)}; left ${names(moved.left)}`);
    }
    return parts.join(" · ");
  }

  // Why there is no baseline yet, at the h the rule judges (it may not be the h shown).
  function baselineWaitText(rule) {
    if (!rule) return "No baseline yet: the first version whose ranking is stable becomes it.";
    const now = rule.stability === null || rule.stability === undefined
      ? "not estimated yet" : rule.stability.toFixed(2);
    return `No baseline yet: a version becomes it when the stability of its top ${rule.h} ` +
      `reaches ${rule.threshold.toFixed(2)} (now ${now}).`;
  }

  function renderMovement(drift, events) {
    if (drift.error) {
      ui.driftFacts.textContent = `No drift: ${problemLines(drift.error).detail}`;
    } else {
      const answer = drift.answer;
      const lines = [];
      if (answer.previous) lines.push(movedText("Since the previous version", answer.previous));
      lines.push(answer.baseline
        ? movedText(`Since the baseline, ${answer.baseline.how}`, answer.baseline)
        : baselineWaitText(answer.baseline_rule));
      ui.driftFacts.textContent = lines.join(" — ");
    }
    const listed = events.answer ? events.answer.events : [];
    ui.events.hidden = listed.length === 0;
    ui.noEvents.hidden = listed.length > 0;
    const rows = listed.map((event) => {
      const delivery = event.delivery ? event.delivery.status : "–";
      const row = element("tr", { "data-event": event.id });
      row.append(
        element("td", { class: "event" }, event.id),
        element("td", { class: "num" }, NUMBER.format(event.version)),
        element("td", { class: "num" }, event.drift.toFixed(2)),
        element("td", { class: `delivery ${delivery}` }, delivery),
        element("td", { class: "features" }, names(event.entered)),
        element("td", { class: "features" }, names(event.left)),
      );
      return row;
    });
    ui.events.querySelector("tbody").replaceChildren(...rows);
  }

  // -- the bar chart: the current top h --------------------------------------------------------

  function renderBars(top) {
    if (top.error) {
      ui.barChart.replaceChildren(problemNote(top.error, "No ranking"));
      return;
    }
    const features = top.answer.features;
    if (features.length === 0) {
      ui.barChart.replaceChildren(element("p", { class: "note" }, "No feature is ranked yet."));
      return;
    }
    const width = 640;
    const labelWidth = 210;
    const valueWidth = 70;
    const rowHeight = 24;
    const barHeight = 16;
    const largest = Math.max(...features.map((feature) => Math.abs(feature.score))) || 1;
    // Rank bands, when the answer has them: a whisker per bar, on a rank axis of its own at
    // the right (1 at the left end, the deepest rank any band reaches at the right).
    const banded = features.some((feature) => Array.isArray(feature.band));
    const height = features.length * rowHeight + 8 + (banded ? 18 : 0);
    const bandWidth = banded ? 110 : 0;
    const deepest = banded ? Math.max(...features.map((feature) => (feature.band ? feature.band[1] : 1)), 2) : 1;
    const bandLeft = width - bandWidth + 10;
    const bandSpan = bandWidth - 20;
    const rankX = (rank) => bandLeft + ((rank - 1) / (deepest - 1)) * bandSpan;
    const span = width - labelWidth - valueWidth - bandWidth;
    const svg = svgElement("svg", {
      viewBox: `0 0 ${width} ${height}`,
      role: "img",
      "aria-label": `Top ${features.length} features by score at version ${top.answer.version}`,
      "data-version": top.answer.version,
    });
    features.forEach((feature, i) => {
      const y = 4 + i * rowHeight;
      const middle = y + barHeight / 2;
      const length = Math.max(1, (Math.abs(feature.score) / largest) * span);
      const group = svgElement("g", { class: "bar", "data-index": feature.index });
      group.append(
        svgElement(
          "title",
          {},
          `${feature.rank}. ${feature.name} (index ${feature.index}): ${formatScore(feature.score)}`,
        ),
        svgElement("text", { class: "axis", x: 4, y: middle, "dominant-baseline": "central" }, feature.rank),
        svgElement(
          "text",
          { class: "label", x: labelWidth - 8, y: middle, "text-anchor": "end", "dominant-baseline": "central" },
          truncate(feature.name, LABEL_CHARS),
        ),
        svgElement("rect", {
          x: labelWidth, y, width: length.toFixed(1), height: barHeight, rx: 2,
          fill: state.colours.get(featureKey(feature)),
        }),
        svgElement(
          "text",
          { class: "value", x: (labelWidth + length + 6).toFixed(1), y: middle, "dominant-baseline": "central" },
          formatScore(feature.score),
        ),
      );
      if (Array.isArray(feature.band)) {
        const [low, high] = feature.band;
        const whisker = svgElement("g", { class: "whisker", "data-band": `${low}-${high}` });
        whisker.append(
          svgElement("title", {}, `${feature.name}: ranks ${low} to ${high} over the resamples`),
          svgElement("line", { x1: rankX(low).toFixed(1), x2: rankX(high).toFixed(1), y1: middle, y2: middle }),
          svgElement("line", { x1: rankX(low).toFixed(1), x2: rankX(low).toFixed(1), y1: middle - 5, y2: middle + 5 }),
          svgElement("line", { x1: rankX(high).toFixed(1), x2: rankX(high).toFixed(1), y1: middle - 5, y2: middle + 5 }),
          svgElement("circle", { cx: rankX(feature.rank).toFixed(1), cy: middle, r: 3 }),
        );
        group.append(whisker);
      }
      svg.append(group);
    });
    if (banded) {
      const axis = svgElement("g", { class: "band-axis" });
      const y = height - 6;
      axis.append(
        svgElement("text", { class: "axis", x: rankX(1), y, "text-anchor": "middle" }, "1"),
        svgElement("text", { class: "axis", x: rankX(deepest), y, "text-anchor": "middle" }, deepest),
        svgElement(
          "text",
          { class: "axis", x: (rankX(1) + rankX(deepest)) / 2, y, "text-anchor": "middle" },
          "rank band",
        ),
      );
      svg.append(axis);
    }
    ui.barChart.replaceChildren(svg);
    for (const label of svg.querySelectorAll("text.label")) fitText(label, labelWidth - 8 - 24);
  }

  // -- the rank chart: how the current top features moved over recent versions -----------------

  function renderRanks(history, current) {
    if (history.error) {
      ui.rankChart.replaceChildren(problemNote(history.error, "No rank history"));
      return;
    }
    // Oldest first, left to right; for a multi-view selector, the shown view's ranks only.
    const versions = [...(history.answer.versions || [])].reverse().map((version) => ({
      version: version.version,
      ranks: new Map(
        (version.top || [])
          .filter((feature) => state.view === null || (feature.view ?? null) === state.view)
          .map((feature) => [featureKey(feature), feature.rank]),
      ),
    }));
    if (versions.length === 0 || current.length === 0) {
      ui.rankChart.replaceChildren(element("p", { class: "note" }, "No versions recorded yet."));
      return;
    }
    let deepest = current.length;
    for (const version of versions) {
      for (const feature of current) {
        const rank = version.ranks.get(featureKey(feature));
        if (rank !== undefined) deepest = Math.max(deepest, rank);
      }
    }
    const width = 640;
    const left = 40;
    const right = 190;
    const top = 10;
    const rowHeight = 22;
    const axisHeight = 26;
    const plotWidth = width - left - right;
    const height = top + deepest * rowHeight + axisHeight;
    const x = (i) => left + (versions.length === 1 ? plotWidth / 2 : (i * plotWidth) / (versions.length - 1));
    const y = (rank) => top + (rank - 0.5) * rowHeight;
    const svg = svgElement("svg", {
      viewBox: `0 0 ${width} ${height}`,
      role: "img",
      "aria-label": `Ranks of the current top ${current.length} over ${versions.length} versions`,
      "data-versions": versions.length,
    });
    const grid = svgElement("g", { class: "grid" });
    for (let rank = 1; rank <= deepest; rank += 1) {
      grid.append(
        svgElement("line", { class: "grid", x1: left, x2: left + plotWidth, y1: y(rank), y2: y(rank) }),
        svgElement("text", { class: "axis", x: 4, y: y(rank), "dominant-baseline": "central" }, `#${rank}`),
      );
    }
    const step = Math.max(1, Math.ceil(versions.length / 8));
    versions.forEach((version, i) => {
      if (i % step === 0 || i === versions.length - 1) {
        grid.append(svgElement(
          "text",
          { class: "axis version-tick", x: x(i), y: height - 8, "text-anchor": "middle", "data-version": version.version },
          `v${version.version}`,
        ));
      }
    });
    svg.append(grid);
    for (const feature of current) {
      const key = featureKey(feature);
      const colour = state.colours.get(key);
      const series = svgElement("g", { class: "series", "data-index": feature.index });
      series.append(svgElement("title", {}, feature.name));
      // A feature out of the top at some version breaks its line there.
      let path = "";
      let previous = false;
      let last = null;
      versions.forEach((version, i) => {
        const rank = version.ranks.get(key);
        if (rank === undefined) {
          previous = false;
          return;
        }
        path += `${previous ? "L" : "M"}${x(i).toFixed(1)} ${y(rank).toFixed(1)} `;
        previous = true;
        last = { i, rank };
        series.append(svgElement("circle", { cx: x(i).toFixed(1), cy: y(rank).toFixed(1), r: 4, fill: colour }));
      });
      if (path) series.prepend(svgElement("path", { d: path.trim(), stroke: colour }));
      const labelRank = last ? last.rank : feature.rank;
      series.append(svgElement(
        "text",
        { class: "label", x: left + plotWidth + 12, y: y(labelRank), "dominant-baseline": "central" },
        truncate(feature.name, LABEL_CHARS),
      ));
      svg.append(series);
    }
    ui.rankChart.replaceChildren(svg);
    for (const label of svg.querySelectorAll("text.label")) fitText(label, right - 16);
  }

  // -- streams: their selectors side by side ---------------------------------------------------

  async function refreshStreams() {
    const answer = await api("streams", { limit: LIST_PAGE_SIZE });
    state.streams = answer.streams || [];
  }

  function renderStreams() {
    const rows = state.streams.map((entry) => {
      const row = element("tr", { "data-name": entry.name });
      if (entry.name === state.stream) row.classList.add("selected");
      const link = element("a", { href: `${STREAM_HASH}${encodeURIComponent(entry.name)}` }, entry.name);
      const nameCell = element("td", { class: "name" });
      nameCell.append(link);
      row.append(
        nameCell,
        element("td", { class: "kind" }, entry.chunk_kind),
        element("td", { class: "num" }, NUMBER.format(entry.entries)),
        element("td", { class: "num" }, NUMBER.format(entry.log_entries)),
      );
      if (state.sources.length > 0) row.append(sourcesCell(sourcesIntoStream(entry.name)));
      row.addEventListener("click", () => chooseStream(entry.name));
      return row;
    });
    ui.streamRows.replaceChildren(...rows);
    ui.streamSourceHead.hidden = state.sources.length === 0;
    ui.noStreams.hidden = state.streams.length > 0;
  }

  function chooseStream(name) {
    if (name === state.stream) return;
    state.stream = name;
    state.streamShownKey = null;
    const hash = `${STREAM_HASH}${encodeURIComponent(name)}`;
    if (window.location.hash !== hash) window.location.hash = hash;
    poll();
  }

  function showStreamMessage(text) {
    ui.streamMessage.textContent = text;
    ui.streamMessage.hidden = !text;
  }

  /** The shown stream's selectors side by side: each one's top h in a column (a feature has
   * one colour in every column), and the agreement of every pair. */
  async function refreshStream() {
    const name = state.stream;
    ui.streamDetail.hidden = name === null;
    if (name === null) return;
    ui.streamTitle.textContent = `Stream ${name}`;
    const entry = state.streams.find((candidate) => candidate.name === name);
    if (!entry) {
      ui.streamFacts.textContent = "";
      showStreamMessage(`There is no stream '${name}' (any more), or this API key may not see it.`);
      ui.sideBySide.replaceChildren();
      ui.agreement.hidden = true;
      state.streamShownKey = null;
      return;
    }
    ui.streamFacts.textContent = [
      entry.chunk_kind,
      `${NUMBER.format(entry.entries)} chunks pushed`,
      `${NUMBER.format(entry.items)} ${entry.chunk_kind === "columns" ? "features" : "rows"}`,
      `methods that may attach: ${entry.methods.join(", ")}`,
    ].join(" · ");
    const rankings = await settle(api(streamPath(name, "rankings"), { h: state.h }));
    if (state.stream !== name) return;
    if (rankings.error) {
      showStreamMessage("");
      ui.sideBySide.replaceChildren(problemNote(rankings.error, "No rankings"));
      ui.agreement.hidden = true;
      state.streamShownKey = null;
      return;
    }
    const answer = rankings.answer;
    const key = JSON.stringify([
      name, entry.created_at, state.h, answer.selectors.map((top) => [top.name, top.version]),
    ]);
    if (key !== state.streamShownKey) {
      if (answer.selectors.length === 0) {
        showStreamMessage(
          `No selector is attached: create one with "stream": "${name}" and its ranking appears here.`,
        );
      } else {
        showStreamMessage("");
      }
      renderSideBySide(answer);
      renderAgreement(answer);
      state.streamShownKey = key;
    }
    renderColumnSources(name);
  }

  /** Under each attached selector's heading, the sources feeding it (the stream's, and its
   * own), refreshed on every poll even when the rankings did not move. */
  function renderColumnSources(stream) {
    for (const column of ui.sideBySide.querySelectorAll(".ranking")) {
      const holder = column.querySelector(".sources");
      if (!holder) continue;
      const sources = sourcesFeeding({ name: column.getAttribute("data-name"), stream });
      holder.hidden = sources.length === 0;
      holder.replaceChildren(...sources.map((source) => sourceLine(source)));
    }
  }

  function renderSideBySide(answer) {
    const keys = [];
    for (const top of answer.selectors) {
      for (const feature of top.features) {
        const key = featureKey(feature);
        if (!keys.includes(key)) keys.push(key);
      }
    }
    const colours = new Map(keys.map((key, i) => [key, PALETTE[i % PALETTE.length]]));
    const columns = answer.selectors.map((top) => {
      const column = element("div", { class: "ranking", "data-name": top.name });
      const seen = seenText({ ...top, chunk_kind: top.features_seen !== undefined ? "columns" : "rows" });
      column.append(
        element("h3", {}, top.name),
        element("p", { class: "facts" }, `${top.method} · version ${NUMBER.format(top.version)} · ${seen}`),
        element("div", { class: "sources", hidden: "" }),
      );
      const list = element("ol", { class: "features" });
      for (const feature of top.features) {
        const item = element("li", { "data-index": feature.index, title: `index ${feature.index}: ${formatScore(feature.score)}` });
        const swatch = element("span", { class: "swatch" });
        swatch.style.background = colours.get(featureKey(feature));
        const label = feature.view ? `${feature.view}/${feature.name}` : feature.name;
        item.append(element("span", { class: "rank" }, feature.rank), swatch,
          element("span", { class: "feature" }, truncate(label, LABEL_CHARS)),
          element("span", { class: "score" }, formatScore(feature.score)));
        list.append(item);
      }
      column.append(list);
      return column;
    });
    for (const unranked of answer.unranked || []) {
      const column = element("div", { class: "ranking", "data-name": unranked.name });
      column.append(
        element("h3", {}, unranked.name),
        element("div", { class: "sources", hidden: "" }),
        element("p", { class: "note" }, unranked.detail),
      );
      columns.push(column);
    }
    ui.sideBySide.replaceChildren(...columns);
  }

  function renderAgreement(answer) {
    const pairs = answer.agreement || [];
    ui.agreement.hidden = pairs.length === 0;
    const rows = pairs.map((pair) => {
      const row = element("tr", { "data-pair": `${pair.a}|${pair.b}` });
      row.append(
        element("td", {}, pair.a),
        element("td", {}, pair.b),
        element("td", {}, pair.view ?? "–"),
        element("td", { class: "num jaccard" }, pair.jaccard.toFixed(2)),
        element("td", { class: "num rbo" }, pair.rbo.toFixed(2)),
        element("td", { class: "num" }, NUMBER.format(pair.shared)),
      );
      return row;
    });
    ui.agreement.querySelector("tbody").replaceChildren(...rows);
  }

  // -- start -----------------------------------------------------------------------------------

  ui.forgetKey.hidden = !storedKey();
  if (window.location.hash.startsWith(STREAM_HASH)) {
    state.stream = decodeURIComponent(window.location.hash.slice(STREAM_HASH.length));
  }
  const fromHash = window.location.hash.startsWith(STREAM_HASH)
    ? ""
    : decodeURIComponent(window.location.hash.slice(1));
  if (fromHash) state.selected = fromHash;
  clearCharts();
  poll();
})();

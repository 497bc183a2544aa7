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
 * script besides. Every name a user gave (selectors, streams, sources, views, features, bus keys)
 * is bidi-isolated wherever it shows: in a <bdi> in the page, a tspan with ``unicode-bidi:
 * plaintext`` in the charts, between FSI and PDI in tooltips; so a right-to-left name, or one
 * holding an override such as U+202E, cannot reorder the text around it.
 *
 * The charts are drawn at the pixel width of their place (and again when it changes), so their
 * text keeps the page's size at any window width.
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
  /** Feature names longer than this are cut in the charts before they are fitted to their
   * width (the tooltip has them whole). */
  const LABEL_CHARS = 40;
  /** The narrowest the charts are drawn, in pixels (a narrower place shows them scaled down). */
  const MIN_CHART_WIDTH = 320;
  /** Unicode's first-strong isolate and pop-directional isolate: a name inside a tooltip. */
  const FSI = "\u2068";
  const PDI = "\u2069";
  /** A source's last error is cut to this in the lists (the tooltip and the detail have it). */
  const ERROR_CHARS = 60;
  /** A source's states (GET /v1/sources); another value is shown, styled as none of them. */
  const SOURCE_STATES = new Set(["starting", "running", "paused", "retrying", "reset", "failed"]);
  /** States whose last error is shown: the source does not read its bus. */
  const TROUBLED = new Set(["retrying", "reset", "failed"]);
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
    /** The answers the charts show ({top, history, current}), drawn again on a resize. */
    drawn: null,
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

  /** A user-given name in the page: isolated, its direction its own (``<bdi>``). */
  const bdi = (name, attributes = {}) => element("bdi", attributes, name);

  /** A user-given name inside a plain string (a tooltip): between FSI and PDI. */
  const isolated = (name) => `${FSI}${name}${PDI}`;

  /** "1 row", "2 rows": a count with its noun. */
  function counted(count, one, many = `${one}s`) {
    return `${NUMBER.format(count)} ${count === 1 ? one : many}`;
  }

  /**
   * A name that stays on one line in a table: cut with an ellipsis by the stylesheet past its
   * column's width, the whole name in its tooltip (and in the DOM, for search and copy).
   */
  function nameCell(name, href = null) {
    const cell = element("td", { class: "name" });
    const holder = href === null
      ? element("span", { class: "name-text", title: name })
      : element("a", { class: "name-text", href, title: name });
    holder.append(bdi(name));
    const line = element("div", { class: "name-line" });
    line.append(holder);
    cell.append(line);
    return cell;
  }

  /**
   * An SVG label for a user-given name: isolated in a tspan (``unicode-bidi: plaintext``), cut
   * at LABEL_CHARS; ``fitLabel`` cuts it further to its width once it is in the document.
   */
  function svgLabel(attributes, name) {
    const label = svgElement("text", attributes);
    const chars = Array.from(String(name));
    label.append(svgElement("tspan", { class: "name" }, chars.slice(0, LABEL_CHARS).join("")));
    if (chars.length > LABEL_CHARS) label.append(svgElement("tspan", { class: "cut" }, "…"));
    label.fullName = String(name);
    return label;
  }

  function truncate(text, length) {
    const chars = Array.from(text);
    return chars.length <= length ? text : `${chars.slice(0, length - 1).join("")}…`;
  }

  /**
   * Shorten the SVG label ``node`` (made by ``svgLabel``, in the document so it can be
   * measured) until it fits ``width`` pixels: the name's tspan loses characters, an ellipsis
   * outside it says so; the whole name stays in the tooltip.
   */
  function fitLabel(node, width) {
    const name = node.querySelector("tspan.name");
    const chars = Array.from(node.fullName ?? name.textContent);
    let keep = Array.from(name.textContent).length;
    while (keep > 1 && node.getComputedTextLength() > width) {
      keep -= 1;
      name.textContent = chars.slice(0, keep).join("");
      if (!node.querySelector("tspan.cut")) node.append(svgElement("tspan", { class: "cut" }, "…"));
    }
  }

  /** The width, in pixels, to draw a chart at: its place's width, at least MIN_CHART_WIDTH. */
  function chartWidth(holder) {
    return Math.max(MIN_CHART_WIDTH, Math.floor(holder.clientWidth));
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
    return counted(seen, takesColumns(entry) ? "feature" : "row");
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
      bdi(source.name, { class: "source-name", title: `Source ${isolated(source.name)} (${source.kind})` }),
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

  /**
   * The row under a list's row that holds the sources feeding it, across every column (so a
   * source's name and figures never widen the table); null when none feed it. ``of`` is the
   * name of the row it belongs to.
   */
  function sourcesRow(of, sources, columns) {
    if (sources.length === 0) return null;
    const row = element("tr", { class: "fed", "data-of": of });
    const cell = element("td", {
      class: "sources",
      colspan: columns,
      title: "The sources feeding it from a bus: state, lag (entries not read yet), rows per second",
    });
    cell.append(...sources.map((source) => sourceLine(source)));
    row.append(cell);
    return row;
  }

  /** What a source reads: "redis-stream events at redis://host:6379" (its URL as the API
   * shows it, without credentials), each user-given part isolated. */
  function busText(source) {
    const what = {
      nats: [source.stream && [bdi(source.stream)], source.subject && ["subject ", bdi(source.subject)]],
      kafka: [source.topic && ["topic ", bdi(source.topic)]],
    }[source.kind] ?? [source.key !== undefined && source.key !== null && [bdi(source.key)]];
    const parts = [[source.kind], ...what.filter(Boolean), ["at ", bdi(source.url)]];
    return parts.flatMap((part, i) => (i === 0 ? part : [" ", ...part]));
  }

  /** The shown selector's sources, each with what it read so far (none: hidden). */
  function renderDetailSources(entry) {
    const sources = entry ? sourcesFeeding(entry) : [];
    ui.detailSources.hidden = sources.length === 0;
    const items = sources.map((source) => {
      const item = element("li", { "data-source": source.name });
      const appended = [`${counted(source.rows, "row")} appended`];
      if (source.into && source.into.stream) appended.push(" through stream ", bdi(source.into.stream));
      const facts = [
        appended,
        [`${counted(source.rejected, "entry", "entries")} set aside`],
        [source.updated_at ? `last batch ${ago(source.updated_at)}` : "no batch yet"],
      ];
      const byPartition = partitionLagText(source);
      if (byPartition) facts.push([byPartition]);
      const text = element("span", { class: "source-facts" });
      text.append(...busText(source), ...facts.flatMap((fact) => [" · ", ...fact]));
      item.append(sourceLine(source, { whole: true }), text);
      return item;
    });
    ui.detailSources.querySelector("ul").replaceChildren(...items);
  }

  // -- the selector list -----------------------------------------------------------------------

  /** The selector list's columns (its rows of sources span them all). */
  const SELECTOR_COLUMNS = 6;

  function renderSelectors() {
    const rows = state.selectors.flatMap((entry) => {
      const row = element("tr", { "data-name": entry.name });
      if (entry.name === state.selected) row.classList.add("selected");
      const named = nameCell(entry.name, `#${encodeURIComponent(entry.name)}`);
      if (entry.temporary) {
        named.querySelector(".name-line").append(element(
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
        named,
        element("td", { class: "method" }, entry.method),
        element("td", { class: "num seen" }, seenText(entry)),
        element("td", { class: "num version" }, NUMBER.format(entry.version)),
        pendingCell,
        updated,
      );
      const fed = sourcesRow(entry.name, sourcesFeeding(entry), SELECTOR_COLUMNS);
      for (const part of [row, fed]) part?.addEventListener("click", () => choose(entry.name));
      if (fed && entry.name === state.selected) fed.classList.add("selected");
      return fed ? [row, fed] : [row];
    });
    ui.selectorRows.replaceChildren(...rows);
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

  /** The detail's message: text and isolated names (``[...]`` of strings and nodes). */
  function showMessage(...parts) {
    ui.message.replaceChildren(...parts);
    ui.message.hidden = parts.length === 0 || (parts.length === 1 && !parts[0]);
  }

  function clearCharts() {
    ui.barChart.replaceChildren();
    ui.rankChart.replaceChildren();
    ui.charts.hidden = true;
    state.drawn = null;
  }

  function renderFacts(entry) {
    const parts = [[entry.method], [seenText(entry)]];
    if (typeof entry.n_features === "number") {
      parts.push([`${counted(entry.n_features, "feature")} wide`]);
    }
    if (typeof entry.n_samples === "number") parts.push([counted(entry.n_samples, "sample")]);
    if (entry.views) {
      const views = Object.entries(entry.views)
        .flatMap(([view, width], i) => [i === 0 ? "views " : ", ", bdi(view), ` (${width})`]);
      parts.push(views);
    }
    if (entry.stream) parts.push(["attached to stream ", bdi(entry.stream)]);
    parts.push([`version ${NUMBER.format(entry.version)}`]);
    const pending = pendingOf(entry);
    if (pending !== null) parts.push([`${NUMBER.format(pending)} pending`]);
    parts.push([`updated ${ago(entry.updated_at)}`]);
    ui.facts.replaceChildren(...parts.flatMap((part, i) => (i === 0 ? part : [" · ", ...part])));
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
      ui.view.replaceChildren(
        ...views.map((view) => element("option", { value: view, dir: "auto" }, view)),
      );
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
    ui.title.replaceChildren(bdi(name));
    const entry = state.selectors.find((candidate) => candidate.name === name)
      || (state.outside && state.outside.name === name ? state.outside : null);
    if (!entry) {
      ui.facts.textContent = "";
      renderDetailSources(null);
      showMessage("There is no selector '", bdi(name), "' (any more), or this API key may not see it.");
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
      const target = entry.stream
        ? ["/v1/streams/", bdi(entry.stream), "/chunks"]
        : ["/v1/selectors/", bdi(name), `/${route}`];
      const path = element("code");
      path.append("POST ", ...target);
      showMessage("No data yet: push to ", path, ` and the charts appear here.${waiting}`);
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
    state.drawn = { top, history, current };
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
    // An index not scaled to every row seen is that of one resample's rows (fewer rows: lower).
    const each = stability.corrected ? "" : "; the index of one resample's rows, not of all of them";
    ui.stability.textContent = `Stability of the top ${stability.h}: ${stability.index.toFixed(2)} `
      + `(95% interval ${low.toFixed(2)} to ${high.toFixed(2)} over `
      + `${counted(stability.resamples, "resample")}${each}) · whiskers: each feature's ranks `
      + "over the resamples";
  }

  /** Features as text: "view:name" (or the name), each isolated, ", " between, or "none". */
  function featureList(features) {
    if (features.length === 0) return ["none"];
    return features.flatMap((feature, i) => {
      const shown = feature.view ? [bdi(feature.view), ":", bdi(feature.name)] : [bdi(feature.name)];
      return i === 0 ? shown : [", ", ...shown];
    });
  }

  /** "Since the baseline (auto, version 3): drift 0.20 · entered a; left b", as nodes; ``how``
   * the baseline's way of being set, or null. */
  function movedText(what, moved, how = null) {
    const which = [how, `version ${NUMBER.format(moved.version)}`].filter(Boolean).join(", ");
    const parts = [`${what} (${which}): drift ${moved.drift.toFixed(2)}`];
    if (moved.entered.length || moved.left.length) {
      parts.push(" · entered ", ...featureList(moved.entered), "; left ", ...featureList(moved.left));
    }
    return parts;
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
        ? movedText("Since the baseline", answer.baseline, answer.baseline.how)
        : [baselineWaitText(answer.baseline_rule)]);
      // One line each: the previous version's, then the baseline's.
      ui.driftFacts.replaceChildren(...lines.map((line) => {
        const holder = element("span", { class: "drift-line" });
        holder.append(...line);
        return holder;
      }));
    }
    const listed = events.answer ? events.answer.events : [];
    ui.events.hidden = listed.length === 0;
    ui.noEvents.hidden = listed.length > 0;
    // Each event in two rows: its figures, then the features that entered and left (as wide
    // as the table, so long names never widen it).
    const rows = listed.flatMap((event) => {
      const delivery = event.delivery ? event.delivery.status : "–";
      const row = element("tr", { "data-event": event.id });
      row.append(
        element("td", { class: "event" }, event.id),
        element("td", { class: "num" }, NUMBER.format(event.version)),
        element("td", { class: "num" }, event.drift.toFixed(2)),
        element("td", { class: `delivery ${delivery}` }, delivery),
      );
      const moved = element("tr", { class: "moved", "data-of": event.id });
      const features = element("td", { class: "features", colspan: 4 });
      const entered = element("span", { class: "entered" });
      entered.append("entered ", ...featureList(event.entered));
      const left = element("span", { class: "left" });
      left.append("left ", ...featureList(event.left));
      features.append(entered, left);
      moved.append(features);
      return [row, moved];
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
    // In pixels: the chart is as wide as its place, its text the page's size.
    const width = chartWidth(ui.barChart);
    // Names get the most room (a name of 24 characters is whole at 1,280 px), the bars the rest.
    const rankWidth = 24;
    const labelWidth = Math.round(Math.min(300, Math.max(130, width * 0.4)));
    const valueWidth = 64;
    const rowHeight = 24;
    const barHeight = 16;
    const largest = Math.max(...features.map((feature) => Math.abs(feature.score))) || 1;
    // Rank bands, when the answer has them: a whisker per bar, on a rank axis of its own at
    // the right (1 at the left end, the deepest rank any band reaches at the right).
    const banded = features.some((feature) => Array.isArray(feature.band));
    const height = features.length * rowHeight + 8 + (banded ? 20 : 0);
    const bandWidth = banded ? Math.round(Math.min(200, Math.max(110, width * 0.2))) : 0;
    const deepest = banded ? Math.max(...features.map((feature) => (feature.band ? feature.band[1] : 1)), 2) : 1;
    const bandLeft = width - bandWidth + 14;
    const bandSpan = bandWidth - 28;
    const rankX = (rank) => bandLeft + ((rank - 1) / (deepest - 1)) * bandSpan;
    const span = width - labelWidth - valueWidth - bandWidth;
    const svg = svgElement("svg", {
      width,
      height,
      viewBox: `0 0 ${width} ${height}`,
      role: "img",
      "aria-label": `Top ${counted(features.length, "feature")} by score at version ${top.answer.version}`,
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
          `${feature.rank}. ${isolated(feature.name)} (index ${feature.index}): ${formatScore(feature.score)}`,
        ),
        svgElement("text", { class: "axis rank", x: 4, y: middle, "dominant-baseline": "central" }, feature.rank),
        svgLabel(
          { class: "label", x: labelWidth - 8, y: middle, "text-anchor": "end", "dominant-baseline": "central" },
          feature.name,
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
          svgElement("title", {}, `${isolated(feature.name)}: ranks ${low} to ${high} over the resamples`),
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
    for (const label of svg.querySelectorAll("text.label")) fitLabel(label, labelWidth - 8 - rankWidth);
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
    // In pixels, as the bar chart.
    const width = chartWidth(ui.rankChart);
    const left = 44;
    const right = Math.round(Math.min(300, Math.max(150, width * 0.36)));
    const top = 10;
    const rowHeight = 22;
    const axisHeight = 26;
    const plotWidth = width - left - right;
    const height = top + deepest * rowHeight + axisHeight;
    const x = (i) => left + (versions.length === 1 ? plotWidth / 2 : (i * plotWidth) / (versions.length - 1));
    const y = (rank) => top + (rank - 0.5) * rowHeight;
    const svg = svgElement("svg", {
      width,
      height,
      viewBox: `0 0 ${width} ${height}`,
      role: "img",
      "aria-label": `Ranks of the current top ${current.length} over ${counted(versions.length, "version")}`,
      "data-versions": versions.length,
    });
    const grid = svgElement("g", { class: "grid" });
    for (let rank = 1; rank <= deepest; rank += 1) {
      grid.append(
        svgElement("line", { class: "grid", x1: left, x2: left + plotWidth, y1: y(rank), y2: y(rank) }),
        svgElement("text", { class: "axis", x: 4, y: y(rank), "dominant-baseline": "central" }, `#${rank}`),
      );
    }
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
      series.append(svgLabel(
        { class: "label", x: left + plotWidth + 12, y: y(labelRank), "dominant-baseline": "central" },
        feature.name,
      ));
      svg.append(series);
    }
    ui.rankChart.replaceChildren(svg);
    for (const label of svg.querySelectorAll("text.label")) fitLabel(label, right - 16);
    versionTicks(grid, versions, x, height - 8, plotWidth);
  }

  /**
   * The version labels under the rank chart (``grid`` in the document, so they can be
   * measured): the newest always, then every ``step``-th back from it, the step as large as
   * the widest label needs so that no two labels touch.
   */
  function versionTicks(grid, versions, x, y, plotWidth) {
    const tick = (version) => svgElement(
      "text",
      { class: "axis version-tick", x: 0, y, "text-anchor": "middle", "data-version": version.version },
      `v${version.version}`,
    );
    const probe = tick(versions.reduce((a, b) => (`${b.version}`.length > `${a.version}`.length ? b : a)));
    grid.append(probe);
    const widest = probe.getComputedTextLength();
    probe.remove();
    const spacing = versions.length > 1 ? plotWidth / (versions.length - 1) : plotWidth;
    const step = Math.max(1, Math.ceil((widest + 12) / spacing));
    const shown = [];
    for (let i = versions.length - 1; i >= 0; i -= step) shown.unshift(i);
    for (const i of shown) {
      const label = tick(versions[i]);
      label.setAttribute("x", x(i).toFixed(1));
      grid.append(label);
    }
  }

  /** Draw the charts again at their new width when the window (or the list beside them)
   * changes it; the answers drawn are kept, nothing is fetched. */
  function redrawOnResize() {
    if (typeof ResizeObserver !== "function") return;
    let drawnAt = null;
    new ResizeObserver(() => {
      const width = ui.barChart.clientWidth;
      if (width === 0 || width === drawnAt || state.drawn === null) return;
      drawnAt = width;
      const { top, history, current } = state.drawn;
      renderBars(top);
      renderRanks(history, current);
    }).observe(ui.charts);
  }

  // -- streams: their selectors side by side ---------------------------------------------------

  async function refreshStreams() {
    const answer = await api("streams", { limit: LIST_PAGE_SIZE });
    state.streams = answer.streams || [];
  }

  /** The stream list's columns (its rows of sources span them all). */
  const STREAM_COLUMNS = 4;

  function renderStreams() {
    const rows = state.streams.flatMap((entry) => {
      const row = element("tr", { "data-name": entry.name });
      if (entry.name === state.stream) row.classList.add("selected");
      row.append(
        nameCell(entry.name, `${STREAM_HASH}${encodeURIComponent(entry.name)}`),
        element("td", { class: "kind" }, entry.chunk_kind),
        element("td", { class: "num" }, NUMBER.format(entry.entries)),
        element("td", { class: "num" }, NUMBER.format(entry.log_entries)),
      );
      const fed = sourcesRow(entry.name, sourcesIntoStream(entry.name), STREAM_COLUMNS);
      for (const part of [row, fed]) part?.addEventListener("click", () => chooseStream(entry.name));
      if (fed && entry.name === state.stream) fed.classList.add("selected");
      return fed ? [row, fed] : [row];
    });
    ui.streamRows.replaceChildren(...rows);
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

  /** The stream view's message: text and isolated names. */
  function showStreamMessage(...parts) {
    ui.streamMessage.replaceChildren(...parts);
    ui.streamMessage.hidden = parts.length === 0 || (parts.length === 1 && !parts[0]);
  }

  /** The shown stream's selectors side by side: each one's top h in a column (a feature has
   * one colour in every column), and the agreement of every pair. */
  async function refreshStream() {
    const name = state.stream;
    ui.streamDetail.hidden = name === null;
    if (name === null) return;
    ui.streamTitle.replaceChildren("Stream ", bdi(name));
    const entry = state.streams.find((candidate) => candidate.name === name);
    if (!entry) {
      ui.streamFacts.textContent = "";
      showStreamMessage("There is no stream '", bdi(name), "' (any more), or this API key may not see it.");
      ui.sideBySide.replaceChildren();
      ui.agreement.hidden = true;
      state.streamShownKey = null;
      return;
    }
    ui.streamFacts.textContent = [
      entry.chunk_kind,
      `${counted(entry.entries, "chunk")} pushed`,
      counted(entry.items, entry.chunk_kind === "columns" ? "feature" : "row"),
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
        const body = element("code");
        body.append('"stream": "', bdi(name), '"');
        showStreamMessage("No selector is attached: create one with ", body, " and its ranking appears here.");
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
        element("h3", {}, null),
        element("p", { class: "facts" }, `${top.method} · version ${NUMBER.format(top.version)} · ${seen}`),
        element("div", { class: "sources", hidden: "" }),
      );
      const list = element("ol", { class: "features" });
      for (const feature of top.features) {
        const item = element("li", { "data-index": feature.index, title: `index ${feature.index}: ${formatScore(feature.score)}` });
        const swatch = element("span", { class: "swatch" });
        swatch.style.background = colours.get(featureKey(feature));
        // One line, cut with an ellipsis by the stylesheet; the whole name in its tooltip.
        const label = element("span", {
          class: "feature",
          title: feature.view ? `${feature.view}/${feature.name}` : feature.name,
        });
        label.append(...(feature.view ? [bdi(feature.view), "/", bdi(feature.name)] : [bdi(feature.name)]));
        item.append(element("span", { class: "rank" }, feature.rank), swatch, label,
          element("span", { class: "score" }, formatScore(feature.score)));
        list.append(item);
      }
      column.querySelector("h3").append(bdi(top.name));
      column.append(list);
      return column;
    });
    for (const unranked of answer.unranked || []) {
      const column = element("div", { class: "ranking", "data-name": unranked.name });
      const heading = element("h3");
      heading.append(bdi(unranked.name));
      column.append(
        heading,
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
      const view = element("td", { class: "view" });
      view.append(pair.view ? bdi(pair.view) : "–");
      row.append(
        nameCell(pair.a),
        nameCell(pair.b),
        view,
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
  redrawOnResize();
  poll();
})();

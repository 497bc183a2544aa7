"""The dashboard tests' page (a browser page that must not reach the network) and the checks
the layout tests make on a page's DOM.

The checks run in the page and return what is wrong, as sentences (empty: nothing):

* ``layout_problems``: the page or a panel scrolls sideways, a table overflows its container,
  a name or a source is cut where it is not cut by design (an ellipsis the stylesheet draws,
  with the whole name in the element's ``title``), a chart is drawn scaled (its text would not
  have the page's size), a chart's text runs out of the chart or two of its texts overlap.
* ``bidi_problems``: a text node holding one of ``marks`` (characters of right-to-left names,
  an override) that is not inside a bidi isolate (``<bdi>`` in the page, ``tspan.name`` in the
  charts), and neighbouring text that is drawn out of its logical order around an isolate.
* ``generated_text``: every string the page shows or offers as a tooltip or label, for the
  checks of wording.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from playwright.sync_api import Page


@dataclass
class OfflinePage:
    """A page that may reach ``origin`` only, and what it tried besides and what failed in it."""

    page: Page
    origin: str
    blocked: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def assert_clean(self) -> None:
        """Nothing was fetched from another origin, and no script error happened."""
        assert self.blocked == [], f"requests to other origins: {self.blocked}"
        assert self.errors == [], f"script errors in the page: {self.errors}"


#: Shared by the checks: what an element is called in a report, whether it shows.
_HELPERS = """
const describe = (el) => {
  const name = el.tagName.toLowerCase();
  if (el.id) return `${name}#${el.id}`;
  const classes = typeof el.className === "string" ? el.className : el.className.baseVal;
  const text = (el.textContent || "").trim().slice(0, 40);
  return `${name}${classes ? "." + classes.split(/\\s+/).join(".") : ""} "${text}"`;
};
const visible = (el) => el.getClientRects().length > 0
  && getComputedStyle(el).visibility !== "hidden";
"""

LAYOUT_CHECK = (
    "() => {"
    + _HELPERS
    + """
  const problems = [];
  const root = document.documentElement;
  if (root.scrollWidth > root.clientWidth) {
    problems.push(`the page scrolls sideways: ${root.scrollWidth} > ${root.clientWidth}`);
  }
  for (const panel of document.querySelectorAll(".panel")) {
    if (visible(panel) && panel.scrollWidth > panel.clientWidth) {
      problems.push(`${describe(panel)} scrolls sideways: `
        + `${panel.scrollWidth} > ${panel.clientWidth}`);
    }
  }
  for (const table of document.querySelectorAll("table")) {
    if (!visible(table)) continue;
    for (const box of new Set([table, table.parentElement, table.closest(".panel")])) {
      if (box && box.scrollWidth > box.clientWidth) {
        problems.push(`${describe(table)} overflows ${describe(box)}: scrollWidth `
          + `${box.scrollWidth} > clientWidth ${box.clientWidth}`);
      }
    }
  }

  // Where the text of ``el`` is cut: el itself (its own overflow), an ancestor, or null.
  const clipOf = (el) => {
    const style = getComputedStyle(el);
    if (style.display !== "inline" && style.overflowX !== "visible"
        && (el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1)) {
      return el;
    }
    const rects = Array.from(el.getClientRects());
    for (let up = el.parentElement; up && up !== document.body; up = up.parentElement) {
      const s = getComputedStyle(up);
      if (s.overflowX === "visible" && s.overflowY === "visible") continue;
      const r = up.getBoundingClientRect();
      if (rects.some((x) => x.left < r.left - 1 || x.right > r.right + 1
          || x.top < r.top - 1 || x.bottom > r.bottom + 1)) return up;
    }
    return null;
  };
  const names = document.querySelectorAll(
    "td.name .name-text, .source-name, .source-figures, td.sources, td.features, "
    + ".ranking h3, .ranking .feature, #detail-title, #stream-title, #detail-sources li"
  );
  let cut = 0;
  for (const el of names) {
    if (!visible(el)) continue;
    const clip = clipOf(el);
    if (clip === null) continue;
    const style = getComputedStyle(el);
    const byDesign = style.textOverflow === "ellipsis" || style.webkitLineClamp === "1";
    if (clip !== el) {
      problems.push(`${describe(el)} is cut by ${describe(clip)}`);
    } else if (!byDesign) {
      problems.push(`${describe(el)} is cut without an ellipsis`);
    } else if (el.title !== el.textContent) {
      problems.push(`${describe(el)} is cut and its title is not the whole name: `
        + `${JSON.stringify(el.title)}`);
    } else {
      cut += 1;
    }
  }

  let charts = 0;
  for (const svg of document.querySelectorAll(".chart svg")) {
    if (!visible(svg)) continue;
    charts += 1;
    const box = svg.getBoundingClientRect();
    // Pixels per user unit: 1 when the chart is drawn at the width it is shown at.
    const scale = box.width / (svg.viewBox.baseVal?.width || box.width);
    if (Math.abs(scale - 1) > 0.02) {
      problems.push(`${describe(svg.parentElement)} is drawn scaled by ${scale.toFixed(2)}`);
    }
    const texts = Array.from(svg.querySelectorAll("text"), (t) => [t, t.getBoundingClientRect()]);
    for (const [text, r] of texts) {
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1
          || r.bottom > box.bottom + 1) {
        problems.push(`${describe(text)} runs out of ${describe(svg.parentElement)}`);
      }
      if (text.querySelector("tspan.cut")) {
        const title = text.closest("g")?.querySelector("title")?.textContent ?? "";
        const shown = text.querySelector("tspan.name").textContent;
        if (!title.includes(shown)) {
          problems.push(`${describe(text)} is cut and no tooltip has its whole name`);
        }
      }
    }
    for (let i = 0; i < texts.length; i += 1) {
      for (let j = i + 1; j < texts.length; j += 1) {
        const [a, ra] = texts[i];
        const [b, rb] = texts[j];
        if (ra.left < rb.right - 0.5 && rb.left < ra.right - 0.5
            && ra.top < rb.bottom - 0.5 && rb.top < ra.bottom - 0.5) {
          problems.push(`${describe(a)} and ${describe(b)} overlap in `
            + `${describe(svg.parentElement)}`);
        }
      }
    }
  }
  return { problems, cut, charts };
}"""
)

BIDI_CHECK = (
    "([marks, control]) => {"
    + _HELPERS
    + """
  const problems = [];
  const holds = (text) => marks.some((mark) => text.includes(mark));
  // The first (or last) drawn character of a text node, as a rectangle; null if none.
  const charRect = (node, last) => {
    const text = node.data;
    let i = last ? text.length - 1 : 0;
    while (i >= 0 && i < text.length && /\\s/.test(text[i])) i += last ? -1 : 1;
    if (i < 0 || i >= text.length) return null;
    const range = document.createRange();
    range.setStart(node, i);
    range.setEnd(node, i + 1);
    const rects = range.getClientRects();
    return rects.length ? rects[0] : null;
  };
  const textSibling = (el, forward) => {
    let node = forward ? el.nextSibling : el.previousSibling;
    while (node && !(node.nodeType === Node.TEXT_NODE && node.data.trim())) {
      if (node.nodeType === Node.ELEMENT_NODE) return null;
      node = forward ? node.nextSibling : node.previousSibling;
    }
    return node;
  };
  // Whether the text around the isolate ``el`` is drawn in its logical (left-to-right) order.
  const inOrder = (el) => {
    const lines = el.getClientRects();
    if (!lines.length) return true;
    const first = lines[0];
    const lastLine = lines[lines.length - 1];
    const before = textSibling(el, false);
    const after = textSibling(el, true);
    const sameLine = (a, b) => Math.abs(a.top - b.top) < 2;
    const b = before && charRect(before, true);
    if (b && sameLine(b, first) && b.right > first.left + 1) return false;
    const a = after && charRect(after, false);
    if (a && sameLine(a, lastLine) && a.left < lastLine.right - 1) return false;
    return true;
  };
  if (control) {
    const sample = document.createElement("p");
    sample.append("before ");
    const name = document.createElement("span");
    name.textContent = control;
    sample.append(name, " after");
    document.body.append(sample);
    const ordered = inOrder(name);
    sample.remove();
    return { controlInOrder: ordered };
  }

  let isolates = 0;
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!holds(node.data)) continue;
    const holder = node.parentElement;
    if (holder.closest("title, option, script, style")) continue;
    const isolate = holder.closest("bdi, tspan.name");
    if (!isolate) {
      problems.push(`${JSON.stringify(node.data)} is not isolated in ${describe(holder)}`);
      continue;
    }
    isolates += 1;
    const bidi = getComputedStyle(isolate).unicodeBidi;
    if (!["isolate", "plaintext", "isolate-override"].includes(bidi)) {
      problems.push(`${describe(isolate)} has unicode-bidi ${bidi}`);
    }
    if (isolate.tagName.toLowerCase() === "bdi") {
      if (visible(isolate) && !inOrder(isolate)) {
        problems.push(`the text around ${describe(isolate)} in ${describe(isolate.parentElement)} `
          + "is reordered");
      }
    } else {
      // A chart label: its ellipsis (when cut) is drawn after every character of the name.
      const text = isolate.closest("text");
      const cut = text.querySelector("tspan.cut");
      if (cut && visible(text)) {
        const count = Array.from(isolate.textContent).length;
        let right = -Infinity;
        for (let i = 0; i < count; i += 1) {
          const extent = text.getExtentOfChar(i);
          right = Math.max(right, extent.x + extent.width);
        }
        const ellipsis = text.getExtentOfChar(count);
        if (ellipsis.x < right - 0.5) {
          problems.push(`the ellipsis of ${describe(text)} is drawn inside its name`);
        }
      }
    }
  }
  return { problems, isolates };
}"""
)

GENERATED_TEXT = """() => {
  const texts = [document.body.innerText];
  for (const el of document.querySelectorAll("[title], [aria-label]")) {
    for (const name of ["title", "aria-label"]) {
      if (el.hasAttribute(name)) texts.push(el.getAttribute(name));
    }
  }
  for (const title of document.querySelectorAll("svg title")) texts.push(title.textContent);
  return texts;
}"""


def layout_problems(page: Page) -> dict[str, Any]:
    """``{"problems": [...], "cut": names cut by design, "charts": charts checked}``."""
    found: dict[str, Any] = page.evaluate(LAYOUT_CHECK)
    return found


def bidi_problems(page: Page, marks: list[str]) -> dict[str, Any]:
    """``{"problems": [...], "isolates": isolated names checked}``."""
    found: dict[str, Any] = page.evaluate(BIDI_CHECK, [marks, None])
    return found


def control_in_order(page: Page, name: str) -> bool:
    """Whether the check finds the text around a *non*-isolated ``name`` in order (a name that
    reorders its neighbours must make it answer False: the check can fail)."""
    found: dict[str, bool] = page.evaluate(BIDI_CHECK, [[], name])
    return found["controlInOrder"]


def generated_text(page: Page) -> list[str]:
    texts: list[str] = page.evaluate(GENERATED_TEXT)
    return texts

// The trace panel (app_ui/trace_panel.py says why it is one component): lays out the payload
// built in Python and reports the user's actions as triggers. Built once per element; each run
// after that only updates what changed: texts, the token strip's HTML, and the live charts
// (chart_core.js, sent in front of this file). Nothing here computes on the trace.
const CHARTS = ["heatmap", "summary", "profile", "view"];
// Colours come from Streamlit's theme variables (light and dark), with the light theme's as fallback.
const CSS = `
.dv-panel { display: flex; flex-direction: column; gap: 0.6rem; font-size: 0.95rem; }
.dv-panel button { font: inherit; padding: 0.25rem 0.8rem; border-radius: 0.5rem; cursor: pointer;
  border: 1px solid var(--st-border-color, rgba(49, 51, 63, 0.2)); background: transparent; color: inherit;
  min-height: 2.3rem; }
.dv-panel button:hover:not(:disabled) { border-color: var(--st-primary-color, #ff4b4b); color: var(--st-primary-color, #ff4b4b); }
.dv-panel button:disabled { opacity: 0.45; cursor: not-allowed; }
.dv-panel button[aria-pressed="true"] { border-color: var(--st-primary-color, #ff4b4b);
  color: var(--st-primary-color, #ff4b4b); }
.dv-controls { display: flex; align-items: center; gap: 0.5rem; }
.dv-controls .dv-scrub { flex: 1; accent-color: var(--st-primary-color, #ff4b4b); }
.dv-stepno { min-width: 7.5rem; text-align: right; opacity: 0.8; font-variant-numeric: tabular-nums; }
.dv-row { display: flex; gap: 1rem; }
.dv-col { flex: 1 1 0; min-width: 0; }
.dv-caption { font-size: 0.85rem; opacity: 0.7; }
.dv-caption:empty, .dv-notices:empty, .dv-cut:empty { display: none; }
.dv-notice { padding: 0.6rem 0.9rem; border-radius: 0.5rem; margin-bottom: 0.4rem; }
.dv-notice.warning, .dv-cut { background: rgba(255, 189, 69, 0.2); padding: 0.6rem 0.9rem; border-radius: 0.5rem; }
.dv-notice.info { background: rgba(28, 131, 225, 0.12); }
.dv-notice.error { background: rgba(255, 43, 43, 0.12); }
.dv-output { white-space: pre-wrap; word-break: break-word; font-family: "Source Code Pro", monospace;
  font-size: 0.85rem; padding: 0.7rem 0.9rem; border-radius: 0.5rem;
  background: var(--st-secondary-background-color, rgba(128, 128, 128, 0.1));
  margin: 0.3rem 0 0.6rem; }
.dv-metrics { display: flex; gap: 0.75rem; }
.dv-metric { flex: 1 1 0; border: 1px solid var(--st-border-color, rgba(49, 51, 63, 0.2)); border-radius: 0.5rem;
  padding: 0.5rem 0.9rem; }
.dv-metric-label { font-size: 0.85rem; opacity: 0.8; }
.dv-metric-value { font-size: 1.7rem; line-height: 1.3; font-variant-numeric: tabular-nums; }
.dv-metric-delta { font-size: 0.8rem; opacity: 0.65; }
.dv-views { display: flex; flex-wrap: wrap; align-items: center; gap: 0.4rem; }
.dv-views-label { margin-right: 0.4rem; font-size: 0.9rem; }
.dv-kalman { display: flex; flex-wrap: wrap; align-items: center; gap: 0.4rem; }
.dv-kalman select { font: inherit; padding: 0.25rem; border-radius: 0.5rem; background: transparent; color: inherit; }
.dv-hidden { display: none !important; }
/* A phone (390 px): the heatmap and the summary one above the other, the numbers wrapped, so no
   chart is squeezed to a third of its width and no number card runs off the screen. */
@media (max-width: 640px) {
  .dv-row { flex-direction: column; }
  .dv-metrics { flex-wrap: wrap; }
  .dv-metric { flex: 1 1 6.5rem; }
}
`;

const SKELETON = `
<div class="dv-notices"></div>
<div class="dv-controls">
  <button class="dv-step" title="one forward pass (→)">Step</button>
  <button class="dv-back" title="previous step (←)">◀</button>
  <input class="dv-scrub" type="range" min="0" max="0" step="1" value="0" aria-label="Step"
         title="scrub through the recorded forward passes">
  <button class="dv-fwd" title="next recorded step">▶</button>
  <span class="dv-stepno"></span>
</div>
<div class="dv-body">
  <div class="dv-row">
    <div class="dv-col"><div class="dv-chart-heatmap"></div><div class="dv-caption dv-heat-hint"></div></div>
    <div class="dv-col"><div class="dv-cut"></div><div class="dv-output-label"></div><pre class="dv-output"></pre>
      <div class="dv-chart-summary"></div></div>
  </div>
  <div class="dv-metrics"></div>
  <div class="dv-caption dv-edits"></div>
  <div class="dv-strip"></div>
  <div class="dv-chart-profile"></div>
  <div class="dv-views"><span class="dv-views-label">More views</span><span class="dv-view-buttons"></span></div>
  <div class="dv-kalman"></div>
  <div class="dv-caption dv-view-note"></div>
  <div class="dv-chart-view"></div>
</div>`;

function injectStyle() {
  if (document.getElementById("dllm-viz-trace-panel-css")) return;
  const style = document.createElement("style");
  style.id = "dllm-viz-trace-panel-css";
  style.textContent = CSS;
  document.head.appendChild(style);
}

function setText(element, text) {
  const value = text === null || text === undefined ? "" : String(text);
  if (element.textContent !== value) element.textContent = value;
}

function setHtml(element, markup) {  // markup built by dllm_viz.figures with every text escaped
  if (element.__shown !== markup) {
    element.innerHTML = markup;
    element.__shown = markup;
  }
}

// The arrow keys, once per page: → steps (or scrubs forward where the panel cannot step), ←
// scrubs back. Space is the Play button's own shortcut (a Streamlit button above the panel).
function listenToKeys() {
  if (window.__dllmVizPanelKeys) return;
  window.__dllmVizPanelKeys = true;
  document.addEventListener("keydown", (event) => {
    const panel = window.__dllmVizPanel;
    if (!panel || !document.body.contains(panel.root)) return;
    if (event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    const target = event.target;
    const tag = target && target.tagName ? target.tagName.toLowerCase() : "";
    if (["input", "textarea", "select"].includes(tag) || (target && target.isContentEditable)) return;
    if (event.key === "ArrowRight") {
      event.preventDefault();
      if (panel.data.stepping) panel.step();
      else panel.scrubBy(1);
    } else if (event.key === "ArrowLeft") {
      event.preventDefault();
      panel.scrubBy(-1);
    }
  });
}

function mountPanel(parent, send) {
  injectStyle();
  const root = document.createElement("div");
  root.className = "dv-panel";
  root.innerHTML = SKELETON;
  parent.appendChild(root);
  const find = (name) => root.querySelector("." + name);
  const panel = { root: root, find: find, data: null, send: send, charts: {} };
  for (const name of CHARTS) panel.charts[name] = mountChart(find("dv-chart-" + name));
  panel.charts.heatmap.report = (value) => panel.send("cell", value);
  panel.step = () => {
    if (panel.data && panel.data.stepping && panel.data.can_step) panel.send("step", true);
  };
  panel.scrubBy = (delta) => {
    const body = panel.data && panel.data.trace;
    if (!body || body.steps <= 1) return;
    const next = Math.min(Math.max(body.step + delta, 0), body.steps - 1);
    if (next !== body.step) panel.send("scrub", next);
  };
  // A mouse click does not focus the panel's buttons: a focused button would take the next Space
  // (Play's shortcut) as a click of its own. Keyboard focus (Tab) is untouched.
  root.addEventListener("mousedown", (event) => {
    if (event.target.closest && event.target.closest("button")) event.preventDefault();
  });
  find("dv-step").addEventListener("click", panel.step);
  find("dv-back").addEventListener("click", () => panel.scrubBy(-1));
  find("dv-fwd").addEventListener("click", () => panel.scrubBy(1));
  const scrub = find("dv-scrub");
  scrub.addEventListener("input", () => setText(find("dv-stepno"), stepLabel(Number(scrub.value), panel.data.trace)));
  scrub.addEventListener("change", () => panel.send("scrub", Number(scrub.value)));
  parent.__dllmVizPanel = panel;
  return panel;
}

function stepLabel(step, body) {
  return body && body.steps ? `step ${step} of ${body.steps - 1}` : "no steps yet";
}

function showNotices(panel, notices) {
  const box = panel.find("dv-notices");
  const key = JSON.stringify(notices);
  if (box.__shown === key) return;
  box.__shown = key;
  box.replaceChildren(...notices.map((notice) => {
    const div = document.createElement("div");
    div.className = "dv-notice " + notice.kind;
    div.textContent = notice.text;
    return div;
  }));
}

function showMetrics(panel, metrics) {
  const box = panel.find("dv-metrics");
  if (box.children.length !== metrics.length) {
    box.replaceChildren(...metrics.map(() => {
      const card = document.createElement("div");
      card.className = "dv-metric";
      card.innerHTML = '<div class="dv-metric-label"></div><div class="dv-metric-value"></div>' +
        '<div class="dv-metric-delta"></div>';
      return card;
    }));
  }
  metrics.forEach((metric, index) => {
    const card = box.children[index];
    card.dataset.label = metric.label;
    card.title = metric.help || "";
    setText(card.querySelector(".dv-metric-label"), metric.label);
    setText(card.querySelector(".dv-metric-value"), metric.value);
    setText(card.querySelector(".dv-metric-delta"), metric.delta || "");
  });
}

function showViews(panel, body) {
  const box = panel.find("dv-view-buttons");
  const key = JSON.stringify([body.views, body.view]);
  if (box.__shown !== key) {
    box.__shown = key;
    box.replaceChildren(...body.views.map((name) => {
      const button = document.createElement("button");
      button.textContent = name;
      button.dataset.view = name;
      button.setAttribute("aria-pressed", String(name === body.view));
      button.addEventListener("click", () => { if (name !== panel.data.trace.view) panel.send("view", name); });
      return button;
    }));
  }
  panel.find("dv-views").classList.toggle("dv-hidden", !body.views.length);
}

// Kalman bands: the positions shown, each removable, and a list to add one (a heatmap column
// click adds one too).
function showKalman(panel, kalman) {
  const box = panel.find("dv-kalman");
  const key = JSON.stringify(kalman);
  if (box.__shown === key) return;
  box.__shown = key;
  box.classList.toggle("dv-hidden", !kalman);
  if (!kalman) return box.replaceChildren();
  const parts = [document.createTextNode("Positions to show:")];
  for (const [position, label] of kalman.picked) {
    const chip = document.createElement("button");
    chip.textContent = label + " ×";
    chip.dataset.position = String(position);
    chip.title = "drop this position";
    chip.addEventListener("click", () => panel.send("unpick", position));
    parts.push(chip);
  }
  if (!kalman.picked.length) {
    const hint = document.createElement("span");
    hint.className = "dv-caption";
    hint.textContent = "none picked: CE's early commits, then spread over the order (click heatmap columns)";
    parts.push(hint);
  }
  const select = document.createElement("select");
  select.setAttribute("aria-label", "add a position");
  select.add(new Option(`add a position (up to ${kalman.limit})`, ""));
  kalman.labels.forEach((label, position) => select.add(new Option(label, String(position))));
  select.addEventListener("change", () => { if (select.value !== "") panel.send("pick", Number(select.value)); });
  parts.push(select);
  box.replaceChildren(...parts);
}

function render(panel, data) {
  panel.data = data;
  showNotices(panel, data.notices);
  const body = data.trace;
  panel.find("dv-step").classList.toggle("dv-hidden", !data.stepping);
  panel.find("dv-step").disabled = !data.can_step;
  panel.find("dv-body").classList.toggle("dv-hidden", !body || !body.steps);
  const scrub = panel.find("dv-scrub");
  for (const name of ["dv-back", "dv-scrub", "dv-fwd", "dv-stepno"]) {
    panel.find(name).classList.toggle("dv-hidden", !body);
  }
  if (!body) return;
  scrub.max = String(Math.max(body.steps - 1, 0));
  scrub.value = String(body.step);
  scrub.disabled = body.steps <= 1;
  panel.root.dataset.step = String(body.step);  // read by the browser tests and the render benchmark
  panel.root.dataset.nfe = String(body.nfe);
  panel.root.dataset.seconds = String(body.seconds);
  setText(panel.find("dv-stepno"), stepLabel(body.step, body));
  setText(panel.find("dv-cut"), body.cut_off || "");
  setText(panel.find("dv-output-label"), "Output · " + body.label);
  setText(panel.find("dv-output"), body.output || " ");
  setText(panel.find("dv-heat-hint"), body.heat_hint);
  showMetrics(panel, body.metrics);
  setText(panel.find("dv-edits"), body.edits || "");
  if (!body.steps) return;
  setHtml(panel.find("dv-strip"), body.strip || "");
  showViews(panel, body);
  showKalman(panel, body.kalman);
  const heatmap = (body.charts || {}).heatmap;
  panel.find("dv-chart-heatmap").classList.toggle("dv-hidden", !heatmap);
  if (heatmap) showChart(panel.charts.heatmap, heatmap);
  const rest = (window.__dllmVizRest || {})[data.key];
  if (rest && rest.run === data.run) panel.rest(rest);  // the second part came first
}

// The second part of a run (trace_panel_rest.js): the other charts, drawn after the browser has
// painted the heatmap (one thread draws every chart; a Step's news is the heatmap's new row).
function drawRest(panel, rest) {
  if (!panel.data || rest.run !== panel.data.run || panel.restDrawn === rest.run) return;
  panel.restDrawn = rest.run;
  const body = panel.data.trace;
  const charts = body && body.steps ? rest.charts : {};
  setText(panel.find("dv-view-note"), rest.view_note || "");
  for (const name of CHARTS.slice(1)) panel.find("dv-chart-" + name).classList.toggle("dv-hidden", !charts[name]);
  afterPaint(() => {
    if (panel.restDrawn !== rest.run) return;  // a newer run came first: it draws them
    for (const name of CHARTS.slice(1)) if (charts[name]) showChart(panel.charts[name], charts[name]);
  });
}

function afterPaint(callback) {
  requestAnimationFrame(() => setTimeout(callback, 0));
}

export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  const panel = parentElement.__dllmVizPanel || mountPanel(parentElement, setTriggerValue);
  panel.send = setTriggerValue;
  panel.rest = (rest) => drawRest(panel, rest);
  window.__dllmVizPanel = panel;
  window.__dllmVizPanels = window.__dllmVizPanels || {};
  window.__dllmVizPanels[data.key] = panel;
  listenToKeys();
  render(panel, data);
}

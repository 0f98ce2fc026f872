// Live Plotly charts, shared by the single-chart component (live_chart.js) and the trace panel
// (trace_panel.js): loaded in front of either (app_ui.static_component.page_script), so one
// plotly.js serves every chart of the page. A chart is drawn into a box that stays mounted:
// a new figure is a diffed Plotly.react, a playhead-only change one Plotly.relayout, and a box
// out of sight keeps only its newest figure until it scrolls into view.
const MISSING = "null";

function loadPlotly(src) {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!window.__dllmVizPlotly) {
    window.__dllmVizPlotly = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = src;
      script.onload = () => warmUp(window.Plotly).then(() => resolve(window.Plotly));
      script.onerror = () => reject(new Error("plotly.js did not load from " + src));
      document.head.appendChild(script);
    });
  }
  return window.__dllmVizPlotly;
}

// plotly.js pays a one-time set-up on its first draw (styles, fonts, trace modules): spend it
// on a hidden chart while the page loads, not on the first real chart after a Run.
function warmUp(Plotly) {
  const box = document.createElement("div");
  box.style.cssText = "position:absolute;left:-10000px;top:0;width:400px;height:300px";
  document.body.appendChild(box);
  const traces = [{ type: "heatmap", z: [[0, 1], [1, 0]] }, { type: "scatter", y: [1, 2] }, { type: "bar", y: [1] }];
  return Plotly.newPlot(box, traces, { height: 300 })
    .catch(() => null)
    .then(() => { Plotly.purge(box); box.remove(); });
}

function shapesWith(state, playhead) {
  return playhead ? state.baseShapes.concat([playhead]) : state.baseShapes;
}

// When the last draw finished (epoch clock) and how long it took: read by the browser tests
// and the render benchmark.
function drawn(state, started) {
  state.box.dataset.drawnAt = String(performance.timeOrigin + performance.now());
  state.box.dataset.drawMs = String(Math.round(performance.now() - started));
}

function draw(Plotly, state, data) {
  const playhead = JSON.stringify(data.playhead === undefined ? null : data.playhead);
  const started = performance.now();
  if (data.digest !== state.digest) {
    const figure = JSON.parse(data.spec);
    const layout = figure.layout || {};
    state.baseShapes = layout.shapes || [];
    layout.shapes = shapesWith(state, data.playhead);
    layout.height = data.height;
    layout.autosize = true;
    state.box.style.height = data.height + "px";
    // Plotly.react diffs against the chart already drawn: one draw, no remount.
    Plotly.react(state.box, figure.data || [], layout, { displaylogo: false, responsive: true })
      .then(() => drawn(state, started));
    state.digest = data.digest;
    state.playhead = playhead;
  } else if (playhead !== state.playhead) {
    Plotly.relayout(state.box, { shapes: shapesWith(state, data.playhead) }).then(() => drawn(state, started));
    state.playhead = playhead;
  }
  state.box.dataset.digest = state.digest;
  state.box.dataset.playhead = data.playhead ? String(data.playhead.x0) : "";
  if (data.clickable && !state.wired) {
    state.wired = true;
    state.box.on("plotly_click", (event) => {
      const point = event && event.points && event.points[0];
      if (point && state.report) state.report({ x: String(point.x), y: point.y === undefined ? null : Number(point.y) });
    });
  }
}

// A chart box inside `parent`, created once and kept on it; `state.report` receives clicks.
function mountChart(parent) {
  let state = parent.__dllmVizChart;
  if (state) return state;
  const box = document.createElement("div");
  box.className = "dllm-live-chart";
  box.style.width = "100%";
  parent.appendChild(box);
  state = { box: box, digest: null, playhead: MISSING, baseShapes: [], wired: false, visible: true,
            pending: null, report: null };
  parent.__dllmVizChart = state;
  // A chart scrolled out of sight keeps only the newest figure and draws it when it comes
  // back into view: a Step pays for the charts the user can see (all draw on one thread).
  new IntersectionObserver((entries) => {
    state.visible = entries[entries.length - 1].isIntersecting;
    if (state.visible && state.pending) {
      const next = state.pending;
      state.pending = null;
      loadPlotly(next.src).then((Plotly) => draw(Plotly, state, next));
    }
    box.dataset.pending = state.pending ? "1" : "";
  }).observe(box);
  // Plotly's own `responsive` follows the window only; a column that narrows (the sidebar
  // opening) must resize the chart too.
  let width = parent.getBoundingClientRect().width;
  new ResizeObserver(() => {
    const now = parent.getBoundingClientRect().width;
    const shown = box.offsetParent !== null;  // plotly cannot resize a chart that is not displayed
    if (shown && Math.abs(now - width) > 1 && window.Plotly && state.digest !== null) window.Plotly.Plots.resize(box);
    width = now;
  }).observe(parent);
  return state;
}

// Show `data` (app_ui.live_chart.chart_data) in the chart `state`: now if in sight, else later.
function showChart(state, data) {
  state.box.style.height = data.height + "px";  // the page keeps its layout while a chart waits
  if (state.digest === null) {  // first call: the observer has not reported yet, so look
    const top = state.box.getBoundingClientRect().top;
    state.visible = top < window.innerHeight;
  }
  if (state.visible) {
    state.pending = null;
    loadPlotly(data.src).then((Plotly) => draw(Plotly, state, data));
  } else {
    state.pending = data;
  }
  state.box.dataset.pending = state.pending ? "1" : "";
}

// The trace panel's second part (app_ui/trace_panel.py, `panel_rest`: the per-step summary, the
// profile and the view chart), sent as its own element after the first part so the browser draws
// the heatmap while the server builds these. It shows nothing itself: it hands its data to the
// panel it names (static/trace_panel.js), now or when that panel renders this run.
export default function (component) {
  const { data, parentElement } = component;
  const host = parentElement.closest ? parentElement.closest("[data-testid='stElementContainer']") : null;
  if (host) host.style.display = "none";  // no empty row, no gap in the page
  window.__dllmVizRest = window.__dllmVizRest || {};
  window.__dllmVizRest[data.panel] = data;
  const panel = (window.__dllmVizPanels || {})[data.panel];
  if (panel) panel.rest(data);
}

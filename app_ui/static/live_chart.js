// One Plotly chart that stays mounted across reruns (app_ui/live_chart.py says why); the
// drawing lives in chart_core.js, sent in front of this file. Streamlit calls this function on
// mount and again whenever the element's data changes.
export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  if (!data.spec) {  // the preload element: fetch plotly.js while the user reads the page
    loadPlotly(data.src);
    return;
  }
  const state = mountChart(parentElement);
  state.report = (value) => setTriggerValue("click", value);
  showChart(state, data);
}

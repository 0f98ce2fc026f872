// A block of generated, escaped HTML that stays mounted across reruns (app_ui/live_html.py).
export default function (component) {
  const { data, parentElement } = component;
  let box = parentElement.__dllmVizHtml;
  if (!box) {
    box = document.createElement("div");
    parentElement.appendChild(box);
    parentElement.__dllmVizHtml = box;
  }
  if (box.__shown !== data.html) {
    box.innerHTML = data.html;  // built by dllm_viz.figures with every text escaped
    box.__shown = data.html;
  }
}

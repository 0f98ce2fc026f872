"""Streamlit pages of dllm-viz; each is thin: read widgets, call dllm_viz, plot."""

"""UI helpers of the Streamlit app (forms, trace views, export, sweeps), outside pages/ so that
Streamlit never lists them as pages. Only the app (app.py, pages/) imports this package."""

"""``judgegraph view``: a local web application over results files — the runs over time, people's labels
(a blind queue), and their agreement (docs/guide/view.md). Built on Starlette and uvicorn; nothing here runs at import."""

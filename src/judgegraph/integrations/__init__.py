"""Bridges to other tools, each importing its tool only when used (``import judgegraph`` never imports MLflow):
:mod:`judgegraph.integrations.mlflow` reads MLflow trace sessions as conversations and writes results back as
assessments (``pip install "judgegraph[mlflow]"``)."""

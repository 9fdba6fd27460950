"""Bridges to other tools. Each submodule imports its tool only when used:
``import judgegraph`` (or this package) never imports MLflow.

* :mod:`judgegraph.integrations.mlflow` - read MLflow trace sessions as
  conversations (:func:`~judgegraph.integrations.mlflow.load_sessions`) and
  write results back as MLflow assessments
  (:func:`~judgegraph.integrations.mlflow.log_assessments`). Needs
  ``pip install "judgegraph[mlflow]"``.
"""

"""Every figure of the five documents as an entry of one registry (issue 14), drawn by ``flb figure NAME``.

* :mod:`benchmark.figures.registry`: :class:`FigureSpec`, :func:`register_figure`, :func:`list_figures`,
  :func:`figure_status` (which figures run under a config, and why the others do not).
* :mod:`benchmark.figures.render`: draw one figure and write its PNG, PDF, data CSV and JSON manifest.
* One catalogue module per document (``legate2023``, ``fedcof``, ``bernier2024``, ``fedbabu``): its figures,
  each citing the caption's line in ``../shared/papers``.
"""

"""The reproducibility report as one static HTML site (issue 14), built from whatever exists under results/.

* :mod:`benchmark.site.inputs` reads the check reports, claims, figure manifests, known findings and the figure
  registry's status into frozen dataclasses (nothing is typed by hand; a missing part is said as such).
* :mod:`benchmark.site.sources` collects the provenance of every source of numbers: the fresh results of this
  checkout (``results/tidy``, figure manifests) and the committed records under ``docs/runs/*/``.
* :mod:`benchmark.site.render` turns them into HTML (escaped, one shared style.css, relative links only).
* :mod:`benchmark.site.build` writes the site atomically: ``flb site --results results --out results/report``.
* :mod:`benchmark.site.browser` loads it in headless Chromium and checks pages, tables, images and links:
  ``flb site-check results/report --screenshot out.png``.
"""

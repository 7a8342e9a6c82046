"""HTML reports of runs: one page per run and an index, the same for the service and for local runs.

The service renders them at ``/report/`` (:mod:`scenariokit_server.reports`); ``scenariokit run --html
DIR`` and ``pytest --scenariokit-html DIR`` write them as files (:mod:`scenariokit.local.html_report`).
Both build the page's values with :mod:`scenariokit.reports.model` from what the services return and
render them with :mod:`scenariokit.reports.render` (Jinja2, every value escaped). The pages need no
build step and load nothing from outside: one stylesheet and one script, shipped in this package.
"""

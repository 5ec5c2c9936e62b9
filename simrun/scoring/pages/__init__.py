"""The pages: one self-contained HTML report per run, and the dashboard of every run.

    report      the report of one run: rates, the gate's verdict, the worst transcripts
    dashboard   every run of one or more stores on one page, like with like
    verdicts    the verdicts the dashboard shows, remembered beside the pages
    own_verdicts each run's own verdict on the dashboard, remembered beside the pages
    charts      inline SVG charts, escaped here
    render      the templates' environment (autoescaped) and writing a page
    templates/  the jinja2 templates; a project's own folder is searched first

Imports: everything else in `scoring`; nothing imports the pages but the command line.
"""

from __future__ import annotations

from simrun.scoring.pages._dashboard import build_dashboard
from simrun.scoring.pages._report import build_report

__all__ = ["build_dashboard", "build_report"]

if __name__ != "simrun.scoring.pages":   # one module name per file (simrun/scoring/__init__.py says why)
    raise ImportError(f"this is simrun.scoring.pages; import it as `simrun.scoring.pages`, not `{__name__}`")

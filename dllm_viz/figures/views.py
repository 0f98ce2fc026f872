"""The table of per-trace views the app offers, each with the trace extras it needs.

A page shows every view whose data a trace holds (`views_for`), so a new rule's figure is one row
here, declared with the extras its module says it needs, and no page knows a policy by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import plotly.graph_objects as go

from dllm_viz.figures.forecast import REQUIRED as KALMAN_NEEDS
from dllm_viz.figures.forecast import kalman_forecast_bands
from dllm_viz.figures.heatmaps import TSPD_GATE_NEEDS, entropy_heatmap, margin_heatmap, tspd_gate_heatmap
from dllm_viz.figures.refinement import refinement_dumbbell
from dllm_viz.figures.runs import PERSISTENCE_NEEDS, persistence_runs_bar
from dllm_viz.figures.tokens import commit_order_heatmap
from dllm_viz.figures.volatility import VOLATILITY_NEEDS, volatility_band_heatmap
from dllm_viz.trace import Trace


@dataclass(frozen=True)
class View:
    """One figure of a single trace.

    Attributes:
        name: the label a page shows.
        build: the builder (its keyword options keep their defaults, which read the trace's pipeline).
        needs: extras the trace must hold for the view to have data.
    """

    name: str
    build: Callable[[Trace], go.Figure]
    needs: tuple[str, ...] = ()

    def fits(self, trace: Trace) -> bool:
        """True when `trace` holds every extra this view needs."""
        return all(name in trace.extras for name in self.needs)


KALMAN_VIEW = "Kalman bands"  # the view whose positions a page lets the user pick

VIEWS: tuple[View, ...] = (
    View("commit order", commit_order_heatmap),
    View("entropy", entropy_heatmap),
    View("margin", margin_heatmap),
    View("refinement", refinement_dumbbell),
    View("volatility bands", volatility_band_heatmap, VOLATILITY_NEEDS),
    View(KALMAN_VIEW, kalman_forecast_bands, KALMAN_NEEDS),
    View("persistence runs", persistence_runs_bar, PERSISTENCE_NEEDS),
    View("TSPD gate", tspd_gate_heatmap, TSPD_GATE_NEEDS),
)


def views_for(trace: Trace) -> tuple[View, ...]:
    """The views whose data `trace` holds, in table order (the generic ones first)."""
    return tuple(view for view in VIEWS if view.fits(trace))

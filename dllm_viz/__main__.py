"""`python -m dllm_viz`: see dllm_viz.cli."""

from __future__ import annotations

import sys

from dllm_viz.cli import main

if __name__ == "__main__":
    sys.exit(main())

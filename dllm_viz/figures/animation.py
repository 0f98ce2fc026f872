"""An animated GIF of a decode's canvas, one frame per (sampled) step, for slides.

Drawn with Pillow straight from the token states (the same colours as the token strip and the
HTML replay), so it needs no browser: a 64-frame GIF of a 128-position decode takes well under
a second. The self-contained HTML player with play / pause / scrub is export.replay_html.
"""

from __future__ import annotations

import io

from PIL import Image, ImageDraw, ImageFont

from dllm_viz.figures.export import frame_steps
from dllm_viz.figures.tokens import STATE_COLORS, text_color, token_states
from dllm_viz.trace import Trace

CELL_W, CELL_H, HEADER_H, PAD = 44, 22, 26, 6
CELL_CHARS = 5


def decode_gif(trace: Trace, *, max_frames: int = 64, tokens_per_row: int = 16, frame_ms: int = 300,
               max_positions: int = 512) -> bytes:
    """The canvas after each sampled step as an animated GIF (loops; the last frame held longer).

    Args:
        trace: the decode to animate.
        max_frames: most frames; steps are sampled evenly, the last always included.
        tokens_per_row: positions per row of the grid.
        frame_ms: time each frame is shown (the last frame shows four times as long).
        max_positions: positions drawn (the first ones; a GIF of 1024 readable cells is too big).

    Raises:
        ValueError: `max_frames` or `tokens_per_row` below 1.
    """
    if tokens_per_row < 1:
        raise ValueError(f"`tokens_per_row` must be >= 1, got {tokens_per_row}")
    shown = min(trace.gen_length, max_positions)
    rows = max(1, -(-shown // tokens_per_row))
    size = (PAD * 2 + tokens_per_row * CELL_W, HEADER_H + PAD + rows * CELL_H + PAD)
    font = ImageFont.load_default()
    frames = []
    steps = frame_steps(trace.num_steps, max_frames)
    tiles: dict[tuple[int, bool, str], Image.Image] = {}
    for step in steps.tolist():
        frames.append(_frame(trace, step, shown, tokens_per_row, size, font, tiles))
    durations = [frame_ms] * (len(frames) - 1) + [frame_ms * 4]
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:], duration=durations, loop=0,
                   optimize=False, disposal=2)
    return out.getvalue()


def _frame(trace: Trace, step: int, shown: int, per_row: int, size: tuple[int, int],
           font: ImageFont.ImageFont | ImageFont.FreeTypeFont,
           tiles: dict[tuple[int, bool, str], Image.Image]) -> Image.Image:
    """One frame: a header line and the grid of cells after `step` (-1 = the empty canvas).

    Each distinct cell (state, draft, text) is drawn once into `tiles`, shared by all frames, and
    pasted: drawing 512 cells' text per frame was ~2/3 of a 64-frame GIF's 3 s.
    """
    states = token_states(trace, None if step < 0 else step)
    image = Image.new("RGB", size, "#FFFFFF")
    draw = ImageDraw.Draw(image)
    label = trace.meta.label or "decode"
    header = f"{label} - after step {step + 1} of {trace.num_steps}" if step >= 0 else f"{label} - empty canvas"
    draw.text((PAD, PAD), header, fill="#111111", font=font)
    for p in range(shown):
        key = (int(states.state[p]), bool(states.is_draft[p]), states.text[p][:CELL_CHARS])
        if (tile := tiles.get(key)) is None:
            tile = tiles[key] = _tile(*key, font)
        image.paste(tile, (PAD + (p % per_row) * CELL_W, HEADER_H + PAD + (p // per_row) * CELL_H))
    return image


def _tile(state: int, draft: bool, text: str, font: ImageFont.ImageFont | ImageFont.FreeTypeFont) -> Image.Image:
    """One cell with its right and bottom gap: the state's colour, its text (clipped to the cell's pitch)."""
    tile = Image.new("RGB", (CELL_W, CELL_H), "#FFFFFF")
    draw = ImageDraw.Draw(tile)
    draw.rectangle((0, 0, CELL_W - 2, CELL_H - 2), fill=STATE_COLORS[state])
    shown = text.encode("latin-1", "replace").decode("latin-1")  # the bitmap font's range
    draw.text((3, 5), shown, fill=text_color(state, draft), font=font)
    return tile

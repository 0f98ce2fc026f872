"""LLaDA's architecture written out from its definition, independently of transformers.

RMSNorm, rotary on the two halves of each head (rotate_half), SwiGLU with SiLU on `ff_proj`,
no causal mask (docs/ALGORITHMS.md §0.3, LLaDA/OLMo LLaDALlamaBlock). Supports a Fast-dLLM dual-cache
partial pass: queries are a window, keys/values outside it come from an earlier full pass.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from safetensors.torch import load_file


class LladaReference:
    """Float64 forward of a LLaDA checkpoint directory."""

    def __init__(self, directory: Path) -> None:
        self.cfg = json.loads((directory / "config.json").read_text())
        raw = load_file(str(directory / "model.safetensors"))
        self.w = {k.removeprefix("model."): v.double() for k, v in raw.items()}
        self.heads = self.cfg["n_heads"]
        self.hd = self.cfg["d_model"] // self.heads

    def _rms(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.cfg["rms_norm_eps"]) * weight

    def _rope(self, t: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:  # t: heads, n, hd
        hd = self.hd
        inv = 1.0 / self.cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
        freqs = torch.outer(positions.double(), inv)
        cos, sin = torch.cat([freqs, freqs], -1).cos(), torch.cat([freqs, freqs], -1).sin()
        half = torch.cat([-t[..., hd // 2 :], t[..., : hd // 2]], -1)
        return t * cos + half * sin

    def forward(self, ids: torch.Tensor, *, window: tuple[int, int] | None = None,
                cached: list[tuple[torch.Tensor, torch.Tensor]] | None = None
                ) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        """Logits and per-layer (keys, values) after rotary.

        With `window` and `cached` (the keys/values of an earlier full pass), only the window's
        positions are queries; their fresh keys/values replace the window's cached slots.
        """
        w, n = self.w, ids.shape[0]
        lo, hi = window or (0, n)
        positions = torch.arange(lo, hi)
        x = w["transformer.wte.weight"][ids[lo:hi]]
        layers = []
        for i in range(self.cfg["n_layers"]):
            p = f"transformer.blocks.{i}."
            h = self._rms(x, w[p + "attn_norm.weight"])
            q, k, v = ((h @ w[p + name + ".weight"].T).view(hi - lo, self.heads, self.hd).transpose(0, 1)
                       for name in ("q_proj", "k_proj", "v_proj"))
            q, k = self._rope(q, positions), self._rope(k, positions)
            if cached is not None:
                keys, values = cached[i][0].clone(), cached[i][1].clone()
                keys[:, lo:hi], values[:, lo:hi] = k, v
            else:
                keys, values = k, v
            layers.append((keys, values))
            att = torch.softmax(q @ keys.transpose(-1, -2) / math.sqrt(self.hd), dim=-1)
            x = x + (att @ values).transpose(0, 1).reshape(hi - lo, -1) @ w[p + "attn_out.weight"].T
            h = self._rms(x, w[p + "ff_norm.weight"])
            gate = torch.nn.functional.silu(h @ w[p + "ff_proj.weight"].T)
            x = x + (gate * (h @ w[p + "up_proj.weight"].T)) @ w[p + "ff_out.weight"].T
        logits = self._rms(x, w["transformer.ln_f.weight"]) @ w["transformer.ff_out.weight"].T
        return logits, layers

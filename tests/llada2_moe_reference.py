"""LLaDA2.x's architecture written out from its definition, independently of transformers.

Per layer: RMSNorm; a fused QKV projection (query heads, then key heads, then value heads);
RMSNorm over each head's dimensions on queries and keys; rotate-half rotary on the first
`partial_rotary_factor` of each head; grouped-query attention under a given additive mask;
output projection. Then RMSNorm and either a SwiGLU MLP (the first `first_k_dense_replace`
layers) or a MoE: sigmoid router scores, experts chosen on bias-corrected scores within the
`topk_group` best of `n_group` groups (a group scores the sum of its two best experts),
weighted by the uncorrected scores normalised to sum one and scaled by
`routed_scaling_factor`, plus the shared experts. Float64 throughout (docs/PARADIGMS.md).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from safetensors.torch import load_file


class Llada2Reference:
    """Float64 forward of a LLaDA2.x checkpoint directory (published parameter names)."""

    def __init__(self, directory: Path) -> None:
        self.cfg = json.loads((directory / "config.json").read_text())
        self.w = {k: v.double() for k, v in load_file(str(directory / "model.safetensors")).items()}
        self.heads, self.kv_heads = self.cfg["num_attention_heads"], self.cfg["num_key_value_heads"]
        self.hd = self.cfg["head_dim"]

    def _rms(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.cfg["rms_norm_eps"]) * weight

    def _rope(self, t: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:  # t: heads, n, hd
        rot = int(self.hd * self.cfg["partial_rotary_factor"])
        inv = 1.0 / self.cfg["rope_theta"] ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot)
        angles = torch.outer(positions.double(), inv)
        cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()
        head, tail = t[..., :rot], t[..., rot:]
        half = torch.cat([-head[..., rot // 2 :], head[..., : rot // 2]], -1)
        return torch.cat([head * cos + half * sin, tail], -1)

    def _swiglu(self, x: torch.Tensor, prefix: str) -> torch.Tensor:
        w = self.w
        gate = torch.nn.functional.silu(x @ w[prefix + "gate_proj.weight"].T)
        return (gate * (x @ w[prefix + "up_proj.weight"].T)) @ w[prefix + "down_proj.weight"].T

    def _moe(self, x: torch.Tensor, prefix: str) -> torch.Tensor:
        cfg, n = self.cfg, x.shape[0]
        scores = torch.sigmoid(x @ self.w[prefix + "gate.weight"].T)
        biased = scores + self.w[prefix + "gate.expert_bias"]
        groups = biased.view(n, cfg["n_group"], -1)
        best_groups = groups.topk(2, dim=-1).values.sum(-1).topk(cfg["topk_group"], dim=-1).indices
        allowed = torch.zeros_like(groups[..., 0], dtype=torch.bool).scatter(1, best_groups, True)
        allowed = allowed[..., None].expand_as(groups).reshape(n, -1)
        chosen = biased.masked_fill(~allowed, -math.inf).topk(cfg["num_experts_per_tok"], dim=-1).indices
        weights = scores.gather(1, chosen)
        weights = weights / (weights.sum(-1, keepdim=True) + 1e-20) * cfg["routed_scaling_factor"]
        out = self._swiglu(x, prefix + "shared_experts.")
        for row in range(n):
            for slot in range(chosen.shape[1]):
                expert = int(chosen[row, slot])
                out[row] += weights[row, slot] * self._swiglu(x[row : row + 1], f"{prefix}experts.{expert}.")[0]
        return out

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Logits (positions x vocab) of a 1-D id row under an additive (positions x positions) mask."""
        w, n, hd = self.w, ids.shape[0], self.hd
        positions = torch.arange(n)
        x = w["model.word_embeddings.weight"][ids]
        for i in range(self.cfg["num_hidden_layers"]):
            p = f"model.layers.{i}."
            h = self._rms(x, w[p + "input_layernorm.weight"])
            qkv = (h @ w[p + "attention.query_key_value.weight"].T).view(n, -1, hd).transpose(0, 1)
            q, k, v = qkv.split([self.heads, self.kv_heads, self.kv_heads], dim=0)
            q = self._rope(self._rms(q, w[p + "attention.query_layernorm.weight"]), positions)
            k = self._rope(self._rms(k, w[p + "attention.key_layernorm.weight"]), positions)
            repeat = self.heads // self.kv_heads
            k, v = k.repeat_interleave(repeat, 0), v.repeat_interleave(repeat, 0)
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd) + mask.double(), dim=-1)
            x = x + (att @ v).transpose(0, 1).reshape(n, -1) @ w[p + "attention.dense.weight"].T
            h = self._rms(x, w[p + "post_attention_layernorm.weight"])
            dense = i < self.cfg["first_k_dense_replace"]
            x = x + (self._swiglu(h, p + "mlp.") if dense else self._moe(h, p + "mlp."))
        return self._rms(x, w["model.norm.weight"]) @ w["lm_head.weight"].T

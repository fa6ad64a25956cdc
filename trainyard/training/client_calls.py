"""What a training client's calls may say, shared by ClientService (which checks a call
before it queues it) and the engine (which runs it): one list, so the two never disagree."""

from __future__ import annotations

KINDS = ("forward_backward", "optim_step", "sample", "save_weights")
LOSS_FNS = ("", "cross_entropy", "importance_sampling", "ppo")
# The losses that read the sampling logprobs and advantages (Tinker's RL losses).
RL_LOSS_FNS = ("importance_sampling", "ppo")
# PPO's bounds on the probability ratio, Tinker's defaults; `loss_fn_config` may set them.
PPO_CLIP = {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}
# The most alternatives a sample's prompt logprobs list at each position.
MAX_TOPK = 20
# `save_weights` kinds: the adapter alone (`lora`, the default) or with Adam's state.
SAVE_KINDS = ("", "lora", "state")
# Where a saved `state` keeps the optimizer's moments, beside the adapter.
OPTIMIZER_FILE = "optimizer.safetensors"

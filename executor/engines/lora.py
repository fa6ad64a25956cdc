"""The engine of a training client: a base with a LoRA adapter held in memory and trained
call by call, Tinker's way (forward_backward accumulates gradients, optim_step applies
them, sample decodes from the current weights, save_weights writes the adapter).

`Engine` is used in-process (benchmarks) or as `python -m executor.engines SPEC.json`, a
subprocess the executor's `ClientRunner` talks to in JSON lines:

- stdout, once loaded: `{"ready": true, "vocab_size": V, "trainable": T}`; or
  `{"failed": "base_not_found" | "engine_failed"}` and exit 1.
- stdin, one line per operation: `{"seq": n, "kind": k, "input": {...}}`.
- stdout, one line per operation, in order: `{"seq", "ok": true, "output": {...},
  "seconds"}` or `{"seq", "ok": false, "code", "field", "message", "seconds"}`.
- EOF on stdin: exit 0, so an engine never outlives its executor.

Operations apply once each: seqs increase, a seq already applied answers its cached
answer again, and one too old to be cached answers `CONFLICT`. One whose `deadline` has
passed answers `DEADLINE_EXCEEDED` without running. A failed answer never
quotes an input value.
"""

from __future__ import annotations

import collections
import logging
import math
import os
import time
from pathlib import Path
from typing import Any

import torch

from executor.engines import datums, inputs, losses, sampling, state
from trainyard.training.catalog import LORA_DEFAULTS, Catalog
from trainyard.training.client_calls import KINDS, MAX_TOPK

log = logging.getLogger(__name__)

CACHED_ANSWERS = 256


def past_deadline(input: Any) -> bool:
    """Whether a call's deadline has passed: `deadline` in its input, seconds since the
    epoch, set by the service from the `deadline_seconds` the call asked for."""
    deadline = input.get("deadline") if isinstance(input, dict) else None
    return isinstance(deadline, int | float) and time.time() > deadline


class LoadFailed(Exception):
    """The engine could not load its base: `base_not_found` or `engine_failed`."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


def adapter_settings(base_model: str, adaptation: dict[str, Any]) -> dict[str, Any]:
    """The adapter's rank, alpha and targets: the given ones, else the base's defaults."""
    base = Catalog.from_env(os.environ).get(base_model)
    defaults: dict[str, Any] = {**LORA_DEFAULTS, **(dict(base.adaptation) if base else {})}
    targets = list(adaptation.get("targets") or (base.default_targets if base else ()))
    return {
        "mode": "lora",
        "rank": int(adaptation.get("rank") or defaults["rank"]),
        "alpha": int(adaptation.get("alpha") or defaults["alpha"]),
        "targets": targets,
    }


class Engine:
    """One training client's model: a base, its LoRA adapter, and an optimizer. With
    `init_dir` (a saved adapter or state, unpacked) the adapter starts from its weights;
    with `with_optimizer` too, the optimizer's state and step are the saved ones, so
    training goes on as if it had never stopped."""

    def __init__(
        self,
        base_model: str,
        adaptation: dict[str, Any],
        seed: int = 0,
        device: str | None = None,
        init_dir: Path | None = None,
        with_optimizer: bool = False,
    ) -> None:
        from peft import LoraConfig, get_peft_model

        from executor.models import bases

        self.base_model = base_model
        self.adaptation = adapter_settings(base_model, inputs.snake(adaptation))
        self.seed = seed
        try:
            loaded = bases.load(base_model)
        except SystemExit as exc:  # bases.load's way of saying the catalog lacks it
            raise LoadFailed(str(exc.code or "base_not_found")) from None
        self.codec, self.decode = loaded.codec, loaded.decode
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        ad = self.adaptation
        torch.manual_seed(seed)  # the same seed, the same adapter init
        self.model = get_peft_model(
            loaded.model,
            LoraConfig(
                r=ad["rank"],
                lora_alpha=ad["alpha"],
                target_modules=ad["targets"],
                lora_dropout=0.0,
                bias="none",
                task_type="CAUSAL_LM",
            ),
        ).to(self.device)
        # No dropout anywhere: the same calls give the same numbers.
        self.model.eval()
        config: Any = loaded.model.config
        self.vocab_size = int(config.vocab_size)
        self.max_positions = int(getattr(config, "max_position_embeddings", 2048) or 2048)
        self.vocab = datums.Vocab(self.codec, self.vocab_size, self.max_positions)
        self.trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.step = 0
        self._optimizer: torch.optim.AdamW | None = None
        self._samples = 0
        self._last_seq = 0
        self._answers: collections.OrderedDict[int, dict[str, Any]] = collections.OrderedDict()
        if init_dir is not None:
            self._start_from(init_dir, with_optimizer)

    def _named_trainable(self) -> list[tuple[str, torch.nn.Parameter]]:
        return [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]

    def _start_from(self, directory: Path, with_optimizer: bool) -> None:
        """Load a saved adapter's weights (and, `with_optimizer`, its optimizer's state):
        every LoRA weight must come from it, or the load fails rather than half-load."""
        try:
            state.load_adapter(self.model, directory)
            if with_optimizer:
                self._optimizer, self.step = state.load_optimizer(
                    self._named_trainable(), directory, self.device
                )
        except state.Unreadable:
            raise LoadFailed("engine_failed") from None

    @property
    def trainable_count(self) -> int:
        return sum(p.numel() for p in self.trainable)

    # -- the protocol --------------------------------------------------------------------

    def apply(
        self, seq: int, kind: str, input: dict[str, Any], out_dir: Path | None = None
    ) -> dict[str, Any]:
        """Apply operation `seq` once: a seq seen before answers as it did the first time."""
        if seq in self._answers:
            return self._answers[seq]
        if seq <= self._last_seq:
            return {
                "seq": seq,
                "ok": False,
                "code": "CONFLICT",
                "field": "seq",
                "message": "the operation was applied before and its answer is no longer held",
                "seconds": 0.0,
            }
        if past_deadline(input):
            # Past its deadline a call fails plainly and never runs.
            self._last_seq = seq
            return self._keep(
                seq,
                {
                    "seq": seq,
                    "ok": False,
                    "code": "DEADLINE_EXCEEDED",
                    "field": "",
                    "message": "the call did not start within its deadline_seconds",
                    "seconds": 0.0,
                },
            )
        started = time.perf_counter()
        try:
            output = self._run(kind, input, out_dir)
            answer: dict[str, Any] = {"seq": seq, "ok": True, "output": output}
        except inputs.Invalid as exc:
            answer = {
                "seq": seq,
                "ok": False,
                "code": "INVALID_REQUEST",
                "field": exc.field,
                "message": exc.message,
            }
        except Exception:
            log.exception("operation %d (%s) failed in the engine", seq, kind)
            answer = {
                "seq": seq,
                "ok": False,
                "code": "ENGINE_FAILED",
                "field": "",
                "message": "the engine failed to apply the operation",
            }
        answer["seconds"] = time.perf_counter() - started
        self._last_seq = seq
        return self._keep(seq, answer)

    def _keep(self, seq: int, answer: dict[str, Any]) -> dict[str, Any]:
        """Hold an answer, so the same seq again answers it."""
        self._answers[seq] = answer
        while len(self._answers) > CACHED_ANSWERS:
            self._answers.popitem(last=False)
        return answer

    def _run(self, kind: str, input: dict[str, Any], out_dir: Path | None) -> dict[str, Any]:
        if kind not in KINDS:
            raise inputs.Invalid(
                "kind", "must be forward_backward, optim_step, sample or save_weights"
            )
        body = inputs.snake(inputs.object_of(input, "input"))
        if kind == "forward_backward":
            return self.forward_backward(body)
        if kind == "optim_step":
            return self.optim_step(body)
        if kind == "sample":
            return self.sample(body)
        if out_dir is None:
            raise inputs.Invalid("name", "the engine has nowhere to write weights")
        return self.save_weights(body, out_dir)

    # -- operations ----------------------------------------------------------------------

    def _logits(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """The logits of right-padded rows, and the mask of their real positions."""
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.codec.pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row)
            mask[i, : len(row)] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        return self.model(input_ids=ids, attention_mask=mask).logits.float(), mask

    def forward_backward(self, body: dict[str, Any]) -> dict[str, Any]:
        """Accumulate the gradient of the loss over `data`: `cross_entropy`, the weighted
        sum of target negative log-probs; `importance_sampling`, the negative sum of
        `exp(logp - sampling logp) * advantage`; `ppo`, the same with the ratio clipped.
        With `forward_only` the same answer, and no gradient kept."""
        # Every datum is checked before any gradient moves.
        batch = datums.batch(body, self.vocab)
        parsed = batch.data
        with torch.set_grad_enabled(not batch.forward_only):
            logits, mask = self._logits([p[0] for p in parsed])
            columns = losses.columns(parsed, logits.shape[1])
            targets, first, second = (x.to(self.device) for x in columns)
            logprobs = losses.target_logprobs(logits, targets)
            real = mask.to(logprobs.dtype)
            elementwise = losses.elementwise(
                batch.loss_fn, logprobs, real, first, second, batch.config
            )
            loss_sum = elementwise.sum()
            if not batch.forward_only:
                loss_sum.backward()
        total = loss_sum.item()
        tokens = float(sum(len(p[0]) for p in parsed))
        if batch.rl:
            loss = total
        else:
            total_weight = first.sum().item()
            loss = total / total_weight if total_weight > 0 else 0.0
        rows = logprobs.detach().cpu().tolist()
        terms = elementwise.detach().cpu().tolist()
        return {
            "loss": loss,
            "loss_fn_outputs": [
                {"logprobs": rows[i][: len(p[0])], "elementwise_loss": terms[i][: len(p[0])]}
                for i, p in enumerate(parsed)
            ],
            "metrics": {"loss:sum": total, "tokens": tokens},
        }

    def optim_step(self, body: dict[str, Any]) -> dict[str, Any]:
        """One AdamW step over the gradients accumulated since the last; then clear them."""
        hp = inputs.adam(body)
        if self._optimizer is None:
            self._optimizer = torch.optim.AdamW(self.trainable, weight_decay=0.0)
        for group in self._optimizer.param_groups:
            group["lr"] = hp["learning_rate"]
            group["betas"] = (hp["beta1"], hp["beta2"])
            group["eps"] = hp["eps"]
        grads = [p.grad.detach().float() for p in self.trainable if p.grad is not None]
        norm = math.sqrt(sum(float((g * g).sum()) for g in grads))
        self._optimizer.step()
        self._optimizer.zero_grad(set_to_none=True)
        self.step += 1
        return {"step": self.step, "metrics": {"grad_norm": norm}}

    def sample(self, body: dict[str, Any]) -> dict[str, Any]:
        """Decode `num_samples` continuations of the prompt from the current weights. The
        draw is seeded (the same seed, weights and prompt decode the same tokens) and never
        touches the gradients being accumulated."""
        prompt, _ = datums.input_ids(body.get("prompt"), "prompt", self.vocab)
        p = inputs.sampling(body)
        want_prompt = body.get("prompt_logprobs") or False
        if not isinstance(want_prompt, bool):
            raise inputs.Invalid("prompt_logprobs", "must be true or false")
        topk = inputs.int_of(body.get("topk_prompt_logprobs") or 0, "topk_prompt_logprobs")
        if not 0 <= topk <= MAX_TOPK:
            raise inputs.Invalid("topk_prompt_logprobs", f"must be 0 to {MAX_TOPK}")
        scored: dict[str, Any] = self._prompt_scores(prompt, want_prompt, topk)
        seed = p["seed"]
        if seed is None:
            # Unseeded draws still repeat from run to run: the client's seed and its count.
            seed = self.seed * 1_000_003 + self._samples
        self._samples += 1
        generator = torch.Generator(device=self.device).manual_seed(seed % 2**63)
        budget = min(p["max_tokens"], self.max_positions - len(prompt))
        rows = [sampling.Row() for _ in range(p["num"])]
        with torch.no_grad():
            ids = torch.tensor([prompt] * p["num"], dtype=torch.long, device=self.device)
            out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1)
            for _ in range(budget):
                logits = out.logits[:, -1, :].float()
                chosen = sampling.choose(logits, p, generator)
                logprobs = torch.log_softmax(logits, dim=-1).gather(-1, chosen.unsqueeze(-1))
                for row, token, lp in zip(
                    rows, chosen.tolist(), logprobs.squeeze(-1).tolist(), strict=True
                ):
                    if row.reason:
                        continue
                    row.tokens.append(token)
                    row.logprobs.append(lp)
                    if token == self.codec.eos:
                        row.reason = "eos"
                    elif token in p["stop_tokens"]:
                        row.reason = "stop"
                        row.text = self.decode(row.tokens)
                    elif p["stop"]:
                        sampling.check_stop(row, p["stop"], self.decode)
                if all(row.reason for row in rows):
                    break
                out = self.model(
                    input_ids=chosen.unsqueeze(-1),
                    cache=out.cache,
                    use_cache=True,
                    logits_to_keep=1,
                )
        sequences = []
        for row in rows:
            text = row.text if row.reason == "stop" else self.decode(row.tokens)
            sequences.append(
                {
                    "tokens": row.tokens,
                    "logprobs": row.logprobs,
                    "text": text,
                    "stop_reason": row.reason or "length",
                }
            )
        return {"sequences": sequences, **scored}

    def _prompt_scores(self, prompt: list[int], logprobs: bool, topk: int) -> dict[str, Any]:
        """Each prompt token's log-probability given the ones before it (the first has
        none: NaN, as proto JSON writes it) and each position's `topk` likeliest tokens."""
        if not logprobs and not topk:
            return {}
        with torch.no_grad():
            ids = torch.tensor([prompt], dtype=torch.long, device=self.device)
            logits = self.model(input_ids=ids).logits.float()[0, :-1]
            table = torch.log_softmax(logits, dim=-1)
        out: dict[str, Any] = {}
        if logprobs:
            after = table.gather(-1, ids[0, 1:].unsqueeze(-1)).squeeze(-1).cpu().tolist()
            out["prompt_logprobs"] = ["NaN", *after]
        if topk:
            values, tokens = torch.topk(table, min(topk, table.shape[-1]), dim=-1)
            out["topk_prompt_logprobs"] = [
                {},
                *(
                    {"token_ids": t, "logprobs": v}
                    for t, v in zip(tokens.cpu().tolist(), values.cpu().tolist(), strict=True)
                ),
            ]
        return out

    def save_weights(self, body: dict[str, Any], out_dir: Path) -> dict[str, Any]:
        """Write the adapter (safetensors and its config) and trainyard.json to `out_dir`,
        and for a `state` the optimizer's step and moments beside them."""
        name, kind = state.save_request(body)
        optimizer = self._optimizer if kind == "state" else None
        meta = {
            "base_model": self.base_model,
            "step": self.step,
            "seed": self.seed,
            "adaptation": self.adaptation,
            "name": name,
        }
        state.save(self.model, out_dir, meta, optimizer, self._named_trainable())
        return {
            "name": name,
            "step": self.step,
            "dir": str(out_dir),
            "kind": kind,
            "optimizer": optimizer is not None,
        }

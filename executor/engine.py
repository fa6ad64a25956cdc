"""The engine of a training client: a base with a LoRA adapter held in memory and trained
call by call, Tinker's way (forward_backward accumulates gradients, optim_step applies
them, sample decodes from the current weights, save_weights writes the adapter).

`Engine` is used in-process (benchmarks) or as `python -m executor.engine SPEC.json`, a
subprocess the executor's `ClientRunner` talks to in JSON lines:

- stdout, once loaded: `{"ready": true, "vocab_size": V, "trainable": T}`; or
  `{"failed": "base_not_found" | "engine_failed"}` and exit 1.
- stdin, one line per operation: `{"seq": n, "kind": k, "input": {...}}`.
- stdout, one line per operation, in order: `{"seq", "ok": true, "output": {...},
  "seconds"}` or `{"seq", "ok": false, "code", "field", "message", "seconds"}`.
- EOF on stdin: exit 0, so an engine never outlives its executor.

Operations apply once each: seqs increase, a seq already applied answers its cached
answer again, and one too old to be cached answers `CONFLICT`. A failed answer never
quotes an input value.
"""

from __future__ import annotations

import collections
import json
import logging
import math
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import torch

from trainyard.training.catalog import LORA_DEFAULTS, Catalog

log = logging.getLogger(__name__)

KINDS = ("forward_backward", "optim_step", "sample", "save_weights")
LOSS_FNS = ("", "cross_entropy")
MAX_DATA = 64
MAX_SAMPLES = 16
MAX_NEW_TOKENS = 1024
DEFAULT_NEW_TOKENS = 16
MAX_TEMPERATURE = 5.0
MAX_STOPS = 4
CACHED_ANSWERS = 256
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
ADAM_DEFAULTS = {"learning_rate": 1e-4, "beta1": 0.9, "beta2": 0.95, "eps": 1e-12}


class Invalid(Exception):
    """An operation's input breaks a bound: the field's path and a fixed phrase."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class LoadFailed(Exception):
    """The engine could not load its base: `base_not_found` or `engine_failed`."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


def _snake(value: Any) -> Any:
    """Proto JSON may name fields in lowerCamelCase; the engine reads snake_case."""
    if isinstance(value, dict):
        return {re.sub(r"(?<!^)([A-Z])", r"_\1", k).lower(): _snake(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_snake(v) for v in value]
    return value


def _object(value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Invalid(field, "must be an object")
    return value


def _int(value: Any, field: str) -> int:
    # Proto JSON writes int64 values as strings.
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,19}", value):
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise Invalid(field, "must be an integer")
    return int(value)


def _float(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        # Proto JSON writes NaN and the infinities as strings: never valid here.
        raise Invalid(field, "must be a finite number")
    if not math.isfinite(value):
        raise Invalid(field, "must be a finite number")
    return float(value)


def _ints(value: Any, field: str) -> list[int]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise Invalid(field, "must be a list of integers")
    return [_int(v, field) for v in value]


def adapter_settings(base_model: str, adaptation: dict[str, Any]) -> dict[str, Any]:
    """The adapter's rank, alpha and targets: the given ones, else the base's defaults."""
    base = Catalog.from_env(os.environ).get(base_model)
    defaults: dict[str, Any] = {**LORA_DEFAULTS, **(dict(base.adaptation) if base else {})}
    targets = list(adaptation.get("targets") or defaults["targets"])
    return {
        "mode": "lora",
        "rank": int(adaptation.get("rank") or defaults["rank"]),
        "alpha": int(adaptation.get("alpha") or defaults["alpha"]),
        "targets": targets,
    }


class Engine:
    """One training client's model: a base, its LoRA adapter, and an optimizer."""

    def __init__(
        self, base_model: str, adaptation: dict[str, Any], seed: int = 0, device: str | None = None
    ) -> None:
        from peft import LoraConfig, get_peft_model

        from executor import bases

        self.base_model = base_model
        self.adaptation = adapter_settings(base_model, _snake(adaptation))
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
                r=ad["rank"], lora_alpha=ad["alpha"], target_modules=ad["targets"],
                lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
            ),
        ).to(self.device)  # fmt: skip
        # No dropout anywhere: the same calls give the same numbers.
        self.model.eval()
        config: Any = loaded.model.config
        self.vocab_size = int(config.vocab_size)
        self.max_positions = int(getattr(config, "max_position_embeddings", 2048) or 2048)
        self.trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.step = 0
        self._optimizer: torch.optim.AdamW | None = None
        self._samples = 0
        self._last_seq = 0
        self._answers: collections.OrderedDict[int, dict[str, Any]] = collections.OrderedDict()

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
                "seq": seq, "ok": False, "code": "CONFLICT", "field": "seq",
                "message": "the operation was applied before and its answer is no longer held",
                "seconds": 0.0,
            }  # fmt: skip
        started = time.perf_counter()
        try:
            output = self._run(kind, input, out_dir)
            answer: dict[str, Any] = {"seq": seq, "ok": True, "output": output}
        except Invalid as exc:
            answer = {
                "seq": seq, "ok": False, "code": "VALIDATION_ERROR", "field": exc.field,
                "message": exc.message,
            }  # fmt: skip
        except Exception:
            log.exception("operation %d (%s) failed in the engine", seq, kind)
            answer = {
                "seq": seq, "ok": False, "code": "ENGINE_FAILED", "field": "",
                "message": "the engine failed to apply the operation",
            }  # fmt: skip
        answer["seconds"] = time.perf_counter() - started
        self._last_seq = seq
        self._answers[seq] = answer
        while len(self._answers) > CACHED_ANSWERS:
            self._answers.popitem(last=False)
        return answer

    def _run(self, kind: str, input: dict[str, Any], out_dir: Path | None) -> dict[str, Any]:
        if kind not in KINDS:
            raise Invalid("kind", "must be forward_backward, optim_step, sample or save_weights")
        body = _snake(_object(input, "input"))
        if kind == "forward_backward":
            return self.forward_backward(body)
        if kind == "optim_step":
            return self.optim_step(body)
        if kind == "sample":
            return self.sample(body)
        if out_dir is None:
            raise Invalid("name", "the engine has nowhere to write weights")
        return self.save_weights(body, out_dir)

    # -- inputs --------------------------------------------------------------------------

    def _tokens(self, value: Any, field: str, *, least: int = 1) -> list[int]:
        ids = _ints(value, field)
        if not least <= len(ids) <= self.max_positions:
            raise Invalid(field, f"must hold {least} to {self.max_positions} tokens")
        if any(not 0 <= i < self.vocab_size for i in ids):
            raise Invalid(field, "must hold token ids of the base's vocabulary")
        return ids

    def _input_ids(self, value: Any, field: str) -> tuple[list[int], bool]:
        """A ModelInput's ids, and whether they came from text (encoded after the base's
        bos, as its training saw text)."""
        model_input = _object(value, field)
        tokens, text = model_input.get("tokens"), model_input.get("text")
        if bool(tokens) == bool(text):
            raise Invalid(field, "must hold exactly one of tokens and text")
        if tokens:
            return self._tokens(tokens, f"{field}.tokens"), False
        if not isinstance(text, str):
            raise Invalid(f"{field}.text", "must be text")
        ids = ([self.codec.bos] if self.codec.bos is not None else []) + self.codec.ids(text)
        return self._tokens(ids, f"{field}.text"), True

    def _datum(self, value: Any, field: str) -> tuple[list[int], list[int], list[float]]:
        datum = _object(value, field)
        ids, from_text = self._input_ids(datum.get("model_input"), f"{field}.model_input")
        loss_inputs = _object(datum.get("loss_fn_inputs"), f"{field}.loss_fn_inputs")
        raw_targets = loss_inputs.get("target_tokens")
        raw_weights = loss_inputs.get("weights")
        if from_text and not raw_targets and not raw_weights:
            # Text alone: each position predicts the next token.
            if len(ids) < 2:
                raise Invalid(f"{field}.model_input.text", "must encode to 2 tokens or more")
            return ids[:-1], ids[1:], [1.0] * (len(ids) - 1)
        targets = _ints(raw_targets, f"{field}.loss_fn_inputs.target_tokens")
        where = f"{field}.loss_fn_inputs.target_tokens"
        if len(targets) != len(ids):
            raise Invalid(where, "must hold one target per input token")
        if any(not 0 <= t < self.vocab_size for t in targets):
            raise Invalid(where, "must hold token ids of the base's vocabulary")
        where = f"{field}.loss_fn_inputs.weights"
        if raw_weights is None:
            raw_weights = []
        if not isinstance(raw_weights, list):
            raise Invalid(where, "must be a list of numbers")
        weights = [_float(w, where) for w in raw_weights] or [1.0] * len(ids)
        if len(weights) != len(ids):
            raise Invalid(where, "must be empty or hold one weight per input token")
        if any(w < 0 for w in weights):
            raise Invalid(where, "must not be negative")
        return ids, targets, weights

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
        """Accumulate the gradient of the weighted sum of target negative log-probs."""
        loss_fn = body.get("loss_fn") or ""
        if loss_fn not in LOSS_FNS:
            raise Invalid("loss_fn", "must be cross_entropy")
        data = body.get("data")
        if not isinstance(data, list) or not 1 <= len(data) <= MAX_DATA:
            raise Invalid("data", f"must hold 1 to {MAX_DATA} datums")
        # Every datum is checked before any gradient moves.
        parsed = [self._datum(d, f"data[{i}]") for i, d in enumerate(data)]
        logits, mask = self._logits([ids for ids, _, _ in parsed])
        width = logits.shape[1]
        targets = torch.zeros((len(parsed), width), dtype=torch.long)
        weights = torch.zeros((len(parsed), width), dtype=torch.float32)
        for i, (_, t, w) in enumerate(parsed):
            targets[i, : len(t)] = torch.tensor(t)
            weights[i, : len(w)] = torch.tensor(w, dtype=torch.float32)
        targets, weights = targets.to(self.device), weights.to(self.device)
        logprobs = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        loss_sum = -(weights * logprobs * mask).sum()
        loss_sum.backward()
        total, total_weight = loss_sum.item(), weights.sum().item()
        rows = logprobs.detach().cpu().tolist()
        return {
            "loss": total / total_weight if total_weight > 0 else 0.0,
            "loss_fn_outputs": [
                {"logprobs": rows[i][: len(ids)]} for i, (ids, _, _) in enumerate(parsed)
            ],
            "metrics": {
                "loss:sum": total,
                "tokens": float(sum(len(ids) for ids, _, _ in parsed)),
            },
        }

    def optim_step(self, body: dict[str, Any]) -> dict[str, Any]:
        """One AdamW step over the gradients accumulated since the last; then clear them."""
        given = _object(body.get("adam_params"), "adam_params")
        hp = {
            k: _float(given[k], f"adam_params.{k}") if given.get(k) is not None else v
            for k, v in ADAM_DEFAULTS.items()
        }
        if not 0 < hp["learning_rate"] <= 1:
            raise Invalid("adam_params.learning_rate", "must be above 0 and at most 1")
        for beta in ("beta1", "beta2"):
            if not 0 <= hp[beta] < 1:
                raise Invalid(f"adam_params.{beta}", "must be at least 0 and below 1")
        if not hp["eps"] > 0:
            raise Invalid("adam_params.eps", "must be above 0")
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

    def _sampling(self, body: dict[str, Any]) -> dict[str, Any]:
        params = _object(body.get("sampling_params"), "sampling_params")
        num = _int(body.get("num_samples") or 1, "num_samples")
        if not 1 <= num <= MAX_SAMPLES:
            raise Invalid("num_samples", f"must be 1 to {MAX_SAMPLES}")
        max_tokens = _int(params.get("max_tokens") or 0, "sampling_params.max_tokens")
        if not 0 <= max_tokens <= MAX_NEW_TOKENS:
            raise Invalid("sampling_params.max_tokens", f"must be 0 to {MAX_NEW_TOKENS}")
        raw = params.get("temperature")
        temperature = 1.0 if raw is None else _float(raw, "sampling_params.temperature")
        if not 0 <= temperature <= MAX_TEMPERATURE:
            raise Invalid("sampling_params.temperature", f"must be 0 to {MAX_TEMPERATURE:g}")
        raw = params.get("top_p")
        top_p = 1.0 if raw is None else _float(raw, "sampling_params.top_p")
        if not 0 < top_p <= 1:
            raise Invalid("sampling_params.top_p", "must be above 0 and at most 1")
        top_k = _int(params.get("top_k") or 0, "sampling_params.top_k")
        if top_k < 0:
            raise Invalid("sampling_params.top_k", "must not be negative")
        stop = params.get("stop") or []
        if (
            not isinstance(stop, list)
            or len(stop) > MAX_STOPS
            or any(not isinstance(s, str) or not s for s in stop)
        ):
            raise Invalid(
                "sampling_params.stop", f"must hold at most {MAX_STOPS} non-empty strings"
            )
        seed = params.get("seed")
        return {
            "num": num, "max_tokens": max_tokens or DEFAULT_NEW_TOKENS, "temperature": temperature,
            "top_p": top_p, "top_k": top_k, "stop": stop,
            "seed": None if seed is None else _int(seed, "sampling_params.seed"),
        }  # fmt: skip

    def sample(self, body: dict[str, Any]) -> dict[str, Any]:
        """Decode `num_samples` continuations of the prompt from the current weights. The
        draw is seeded (the same seed, weights and prompt decode the same tokens) and never
        touches the gradients being accumulated."""
        prompt, _ = self._input_ids(body.get("prompt"), "prompt")
        p = self._sampling(body)
        seed = p["seed"]
        if seed is None:
            # Unseeded draws still repeat from run to run: the client's seed and its count.
            seed = self.seed * 1_000_003 + self._samples
        self._samples += 1
        generator = torch.Generator(device=self.device).manual_seed(seed % 2**63)
        budget = min(p["max_tokens"], self.max_positions - len(prompt))
        rows = [_Row() for _ in range(p["num"])]
        with torch.no_grad():
            ids = torch.tensor([prompt] * p["num"], dtype=torch.long, device=self.device)
            out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1)
            for _ in range(budget):
                logits = out.logits[:, -1, :].float()
                chosen = self._choose(logits, p, generator)
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
                    elif p["stop"]:
                        self._check_stop(row, p["stop"])
                if all(row.reason for row in rows):
                    break
                out = self.model(
                    input_ids=chosen.unsqueeze(-1), cache=out.cache, use_cache=True,
                    logits_to_keep=1,
                )  # fmt: skip
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
        return {"sequences": sequences}

    @staticmethod
    def _choose(
        logits: torch.Tensor, p: dict[str, Any], generator: torch.Generator
    ) -> torch.Tensor:
        if p["temperature"] == 0:
            return logits.argmax(dim=-1)
        scaled = logits / p["temperature"]
        if p["top_k"] and p["top_k"] < scaled.shape[-1]:
            kth = torch.topk(scaled, p["top_k"], dim=-1).values[:, -1:]
            scaled = scaled.masked_fill(scaled < kth, float("-inf"))
        if p["top_p"] < 1:
            ordered, order = torch.sort(scaled, dim=-1, descending=True)
            probs = torch.softmax(ordered, dim=-1)
            # Keep a token while the tokens likelier than it have not reached p.
            drop = probs.cumsum(dim=-1) - probs >= p["top_p"]
            ordered = ordered.masked_fill(drop, float("-inf"))
            scaled = torch.full_like(scaled, float("-inf")).scatter(-1, order, ordered)
        probs = torch.softmax(scaled, dim=-1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)

    def _check_stop(self, row: _Row, stops: list[str]) -> None:
        """End the row at the first stop string; its tokens keep the longest prefix whose
        text comes before the stop string."""
        text = self.decode(row.tokens)
        hits = [text.index(s) for s in stops if s in text]
        if not hits:
            return
        row.text = text[: min(hits)]
        n = len(row.tokens) - 1
        while n > 0 and not row.text.startswith(self.decode(row.tokens[:n])):
            n -= 1
        del row.tokens[n:], row.logprobs[n:]
        row.reason = "stop"

    def save_weights(self, body: dict[str, Any], out_dir: Path) -> dict[str, Any]:
        """Write the adapter (safetensors and its config) and trainyard.json to `out_dir`."""
        name = body.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            raise Invalid("name", "must be 1 to 64 letters, digits, dots, dashes or underscores")
        out_dir.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(str(out_dir), safe_serialization=True)
        (out_dir / "README.md").unlink(missing_ok=True)
        # The targets are a set inside peft: write them in order, so the bytes repeat.
        config_path = out_dir / "adapter_config.json"
        config = json.loads(config_path.read_text())
        if isinstance(config.get("target_modules"), list):
            config["target_modules"] = sorted(config["target_modules"])
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True))
        meta = {
            "base_model": self.base_model, "step": self.step, "seed": self.seed,
            "adaptation": self.adaptation, "name": name,
        }  # fmt: skip
        (out_dir / "trainyard.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
        return {"name": name, "step": self.step, "dir": str(out_dir)}


class _Row:
    """One sequence being decoded."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.logprobs: list[float] = []
        self.text = ""
        self.reason = ""


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def serve(engine: Engine, work_dir: Path, lines: Any) -> None:
    """Answer each operation line in order until the lines end."""
    for line in lines:
        if not line.strip():
            continue
        try:
            op = json.loads(line)
            seq, kind = int(op["seq"]), str(op["kind"])
            body = op.get("input") or {}
        except (ValueError, KeyError, TypeError):
            log.error("an operation line could not be read; skipping it")
            continue
        _say(engine.apply(seq, kind, body, work_dir / f"weights-{seq}"))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(message)s")
    spec = json.loads(Path(args[0]).read_text())
    threads = os.environ.get("TRAINYARD_ENGINE_THREADS") or os.environ.get("OMP_NUM_THREADS")
    torch.set_num_threads(max(1, int(threads)) if threads else min(2, os.cpu_count() or 1))
    work_dir = Path(spec.get("work_dir") or ".")
    try:
        engine = Engine(
            str(spec["base_model"]), dict(spec.get("adaptation") or {}), int(spec.get("seed") or 0)
        )
    except LoadFailed as exc:
        log.error("client %s: the base could not be loaded (%s)", spec.get("client"), exc.code)
        _say({"failed": exc.code})
        return 1
    except Exception:
        log.exception("client %s: the engine failed to load", spec.get("client"))
        _say({"failed": "engine_failed"})
        return 1
    _say({"ready": True, "vocab_size": engine.vocab_size, "trainable": engine.trainable_count})
    serve(engine, work_dir, sys.stdin)
    return 0


if __name__ == "__main__":
    sys.exit(main())

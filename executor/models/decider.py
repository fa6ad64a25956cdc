"""The built-in decision base `fixture-tiny-decider`: a small model that answers any
question about a state, how its base is built, and how a trained one loads
(`load`: the model and question an output answers). Its trainer is
`executor.trainers.decisions`.

The model encodes text as hashed character trigrams, averaged in an `EmbeddingBag` and
passed through a small residual MLP: `f(text) -> R^d`. An option of a question is the
text `instructions + ": " + label`; its logit is the bilinear readout

    (f(state)ᵀ W + b) · f(option) / temperature

so one head answers every question, including ones it has never seen. A `choice` or a
`score` gets one logit an option (softmax); a `noul` gets ONE logit, the head applied
once to the difference of its two options, `z = (f(s)ᵀ W + b) · (f(pos) − f(neg)) / T`,
answered as `[1 − σ(z), σ(z)]`. Internally a noul's logits are `[0, z]`, whose softmax
is that answer, so every loss and grade reads all three types alike.

The base is built here, not downloaded: pretrained on the train rows of the suites it
knows (`decisions.KNOWN_SUITES`) in float64 on one thread from a fixed seed, then rounded
to a float32 grid of 2^-16, so every machine builds the same bytes (`weights_sha256`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save
from torch import nn
from torch.nn import functional as F

from trainyard.training import decisions
from trainyard.training.catalog import DECIDER_BASE, DeciderArchitecture
from trainyard.training.decisions import Decision, Question

# Bumped whenever the recipe below changes, which changes the base's weights and sha256.
RECIPE = "decider-v1"


# What the recipe builds, as `weights_sha256` reads it; a test holds every machine to it.
BASE_SHA256 = "234390d98d9bb3ed9c8b104cba86aadf0043d1b81eaf97a0deb8d625a8a7760b"


SEED = 0


GRID = 2.0**-16


TEMPERATURE = 1.0  # the temperature a capability is graded and served at


PRETRAIN_STEPS = 80


PRETRAIN_LR = 0.02


# The base learns smoothed targets: its logits stay finite, its answers keep a little
# doubt, and a job can move them (a base certain of everything cannot be hurt or helped).
PRETRAIN_SMOOTHING = 0.05


HEAD = ("head.weight", "head.bias")


@functools.lru_cache(maxsize=1 << 16)
def trigrams(text: str, buckets: int) -> tuple[int, ...]:
    """The text's character trigrams, hashed into buckets (crc32: the same everywhere)."""
    padded = " " + " ".join(text.lower().split()) + " "
    return tuple(zlib.crc32(padded[i : i + 3].encode()) % buckets for i in range(len(padded) - 2))


def option_texts(question: Question) -> list[str]:
    return [f"{question.instructions}: {label}" for label in question.labels]


def bag(texts: Sequence[str], buckets: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`EmbeddingBag` input for texts: the flat trigram ids and each text's offset."""
    ids: list[int] = []
    offsets: list[int] = []
    for text in texts:
        offsets.append(len(ids))
        ids.extend(trigrams(text, buckets))
    return torch.tensor(ids, dtype=torch.long), torch.tensor(offsets, dtype=torch.long)


class Readout(nn.Module):
    """The bilinear head: W (d×d) and b (d); a state's query is f(s)ᵀ W + b."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim, dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        return states @ self.weight + self.bias


class Decider(nn.Module):
    """f(text) = e + fc2(tanh(fc1(e))) with e the mean of the text's trigram embeddings;
    the head reads a state against a question's options."""

    def __init__(self, arch: DeciderArchitecture | None = None) -> None:
        super().__init__()
        self.arch = arch = arch or DeciderArchitecture()
        d, h = arch.dim, arch.hidden
        # The layers' default init draws from the global generator; leave the caller's be
        # (every weight is loaded or set by the recipe anyway).
        with torch.random.fork_rng(devices=[]):
            self.embed = nn.EmbeddingBag(arch.buckets, d, mode="mean")
            self.fc1 = nn.Linear(d, h)
            self.fc2 = nn.Linear(h, d)
        self.head = Readout(d)

    def encode(self, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        e = self.embed(ids, offsets)
        return e + self.fc2(torch.tanh(self.fc1(e)))

    def forward(
        self,
        state_ids: torch.Tensor,
        state_offsets: torch.Tensor,
        option_ids: torch.Tensor,
        option_offsets: torch.Tensor,
        noul: bool = False,
        temperature: float = TEMPERATURE,
    ) -> torch.Tensor:
        """Logits `(states, options)`; a noul's are `[0, z]`."""
        query = self.head(self.encode(state_ids, state_offsets))
        options = self.encode(option_ids, option_offsets)
        if noul:
            z = query @ (options[1] - options[0]) / temperature
            return torch.stack([torch.zeros_like(z), z], dim=1)
        return query @ options.T / temperature


def inputs(
    states: Sequence[str], question: Question, buckets: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    return (*bag(states, buckets), *bag(option_texts(question), buckets))


def logits_of(
    model: nn.Module, states: Sequence[str], question: Question, temperature: float = TEMPERATURE
) -> torch.Tensor:
    """The model's logits for states asked one question (the model may be an engine)."""
    buckets = _arch(model).buckets
    return model(*inputs(states, question, buckets), question.type == "noul", temperature)  # type: ignore[no-any-return]


def _arch(model: nn.Module) -> DeciderArchitecture:
    inner = getattr(model, "module", model)
    arch = inner.arch
    assert isinstance(arch, DeciderArchitecture)
    return arch


def by_question(rows: Sequence[Decision]) -> dict[Question, list[int]]:
    """Row indices by the question they ask, in first-seen order."""
    groups: dict[Question, list[int]] = {}
    for i, row in enumerate(rows):
        groups.setdefault(row.question, []).append(i)
    return groups


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean over rows of −Σ t·log p."""
    return -(target * F.log_softmax(logits, dim=1)).sum(dim=1).mean()


def answers(
    model: nn.Module, rows: Sequence[Decision], temperature: float = TEMPERATURE
) -> list[list[float]]:
    """The model's answers (probabilities, in option order) to rows, in their order.
    Each question's rows are answered in one batch, in their order, so the same rows
    always meet the same arithmetic."""
    out: list[list[float]] = [[] for _ in rows]
    model.eval()
    with torch.no_grad():
        for question, idx in by_question(rows).items():
            probs = F.softmax(
                logits_of(model, [rows[i].state for i in idx], question, temperature), 1
            )
            for i, p in zip(idx, probs.tolist(), strict=True):
                out[i] = p
    return out


def known_rows() -> list[Decision]:
    """The train rows of the suites the base knows."""
    rows: list[Decision] = []
    for name in decisions.KNOWN_SUITES:
        rows += decisions.split(decisions.SUITES[name].rows())[0]
    return rows


def holdout(name: str) -> list[Decision]:
    """A built-in suite's holdout rows."""
    return decisions.split(decisions.SUITES[name].rows())[1]


def _init(model: Decider, generator: torch.Generator) -> None:
    arch = model.arch
    d, h = arch.dim, arch.hidden
    with torch.no_grad():
        model.embed.weight.copy_(
            torch.randn(arch.buckets, d, generator=generator, dtype=torch.float64)
        )
        model.fc1.weight.copy_(torch.randn(h, d, generator=generator, dtype=torch.float64) / d**0.5)
        model.fc2.weight.copy_(
            torch.randn(d, h, generator=generator, dtype=torch.float64) / h**0.5 * 0.5
        )
        nn.init.zeros_(model.fc1.bias)
        nn.init.zeros_(model.fc2.bias)
        model.head.weight.copy_(
            torch.randn(d, d, generator=generator, dtype=torch.float64) * 0.1 / d**0.5
        )
        model.head.bias.zero_()


def _smooth(target: torch.Tensor) -> torch.Tensor:
    return target * (1 - PRETRAIN_SMOOTHING) + PRETRAIN_SMOOTHING / target.size(1)


def _pretrain() -> dict[str, torch.Tensor]:
    """The recipe: full-batch Adam on the known suites' train rows, float64, one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = Decider().double()
        _init(model, torch.Generator().manual_seed(SEED))
        rows = known_rows()
        batches = [
            (
                inputs([rows[i].state for i in idx], q, model.arch.buckets),
                q.type == "noul",
                _smooth(torch.tensor([rows[i].target for i in idx], dtype=torch.float64)),
                len(idx),
            )
            for q, idx in by_question(rows).items()
        ]
        optimizer = torch.optim.Adam(model.parameters(), lr=PRETRAIN_LR, foreach=False)
        for _ in range(PRETRAIN_STEPS):
            optimizer.zero_grad()
            loss = sum(
                cross_entropy(model(*x, noul), t) * n / len(rows) for x, noul, t, n in batches
            )
            loss.backward()  # type: ignore[union-attr]
            optimizer.step()
        return {
            k: (torch.round(v.detach() / GRID) * GRID).float().contiguous()
            for k, v in sorted(model.state_dict().items())
        }
    finally:
        torch.set_num_threads(threads)


@functools.lru_cache(maxsize=1)
def base_state() -> dict[str, torch.Tensor]:
    """The base's weights (built once a process; callers get copies)."""
    return _pretrain()


def build() -> Decider:
    """The base model, identical on every machine."""
    model = Decider()
    model.load_state_dict({k: v.clone() for k, v in base_state().items()})
    return model


def weights_sha256(model: nn.Module) -> str:
    """The sha256 of a model's weights as safetensors bytes (names in order), as the
    fixture LLM's is computed."""
    return state_sha256(model.state_dict())


def state_sha256(state: Mapping[str, torch.Tensor]) -> str:
    return hashlib.sha256(state_bytes(state)).hexdigest()


def state_bytes(state: Mapping[str, torch.Tensor]) -> bytes:
    """Weights as the safetensors bytes their sha256 is taken of (names in order)."""
    return save({k: v.detach().contiguous().cpu() for k, v in sorted(state.items())})


def config_json(arch: DeciderArchitecture | None = None) -> dict[str, Any]:
    arch = arch or DeciderArchitecture()
    return {
        "architecture": "decider",
        "recipe": RECIPE,
        "buckets": arch.buckets,
        "dim": arch.dim,
        "hidden": arch.hidden,
        "trigrams": "crc32 of the lowercased text's character trigrams, padded by a space",
        "option": "instructions + ': ' + label",
    }


def question_json(question: Question) -> dict[str, Any]:
    return {
        "key": question.key,
        "type": question.type,
        "instructions": question.instructions,
        "labels": list(question.labels),
    }


def question_of(doc: Mapping[str, Any]) -> Question:
    return Question(
        str(doc["key"]), str(doc["type"]), str(doc["instructions"]), tuple(doc["labels"])
    )


def write_base(out: Path, revision: str) -> str:
    """The base alone, as `trainyard models export` writes it: `model.safetensors`, whose
    bytes are those `weights_sha256` hashes, and `decider.json` (its config). Returns that
    sha256, the `base_sha256` a capability names."""
    out.mkdir(parents=True, exist_ok=True)
    data = state_bytes(base_state())
    (out / "model.safetensors").write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    doc = {
        "base_model": DECIDER_BASE,
        "revision": revision,
        "base_sha256": digest,
        "config": config_json(),
    }
    (out / "decider.json").write_text(json.dumps(doc, indent=2, sort_keys=True))
    return digest


@dataclasses.dataclass
class Answerer:
    """A loaded output: the model, the question it answers, at the temperature it was
    graded at."""

    model: Decider
    question: Question
    temperature: float

    def answer(self, states: Sequence[str]) -> list[list[float]]:
        rows = [
            Decision(s, self.question, tuple(0.0 for _ in self.question.labels)) for s in states
        ]
        return answers(self.model, rows, self.temperature)


def load(path: Path) -> Answerer:
    """A capability (applied to the base it names, checked by sha256) or a checkpoint."""
    if (path / "capability.json").exists():
        doc = json.loads((path / "capability.json").read_text())
        if doc.get("base_model") != DECIDER_BASE or doc.get("form") != "delta":
            raise ValueError("not a delta capability of the decider base")
        model = build()
        if weights_sha256(model) != doc["base_sha256"]:
            raise ValueError("the base's weights are not the ones the capability was trained on")
        state = model.state_dict()
        for name, d in load_file(str(path / "delta.safetensors")).items():
            state[name] = (state[name] + d).contiguous()
        model.load_state_dict(state)
    else:
        doc = json.loads((path / "decider.json").read_text())
        model = Decider()
        model.load_state_dict(load_file(str(path / "model.safetensors")))
    return Answerer(model, question_of(doc["question"]), float(doc["temperature"]))

"""The built-in decision base `fixture-tiny-decider`: a small model that answers any
question about a state, the math its trainer optimizes and grades by, and its outputs.

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
import math
import random
import zlib
from collections.abc import Iterable, Mapping, Sequence
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
ECE_BINS = 15
HEAD = ("head.weight", "head.bias")


# -- text ----------------------------------------------------------------------------------


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


# -- the model -----------------------------------------------------------------------------


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


# -- the objective -------------------------------------------------------------------------


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean over rows of −Σ t·log p."""
    return -(target * F.log_softmax(logits, dim=1)).sum(dim=1).mean()


def hard_margin(logits: torch.Tensor, gold: torch.Tensor, margin: float = 0.5) -> torch.Tensor:
    """Mean hinge between each row's gold logit and its hardest negative's."""
    picked = logits.gather(1, gold[:, None])[:, 0]
    negatives = logits.masked_fill(F.one_hot(gold, logits.size(1)).bool(), float("-inf"))
    return F.relu(margin - (picked - negatives.max(dim=1).values)).mean()


def pairs(groups: Sequence[str], gold: Sequence[int], same: bool) -> list[tuple[int, int]]:
    """Ordered pairs (a, b), a ≠ b, of rows sharing a non-empty group whose gold labels are
    the same (`same`) or differ."""
    return [
        (a, b)
        for a in range(len(groups))
        for b in range(len(groups))
        if a != b and groups[a] and groups[a] == groups[b] and (gold[a] == gold[b]) == same
    ]


def pairwise_margin(
    logits: torch.Tensor, gold: Sequence[int], groups: Sequence[str], margin: float = 0.5
) -> torch.Tensor:
    """For rows a, b of one group with different gold labels: a must give its gold option
    a log-probability above what b gives it by `margin` (a mean hinge over such pairs).
    Log-probabilities, not logits, so a noul's fixed 0 logit is compared fairly."""
    found = pairs(groups, gold, same=False)
    if not found:
        return logits.sum() * 0.0
    logp = F.log_softmax(logits, dim=1)
    a, b = (torch.tensor(x) for x in zip(*found, strict=True))
    g = torch.tensor(gold)[a]
    return F.relu(margin - (logp[a, g] - logp[b, g])).mean()


def consistency(logits: torch.Tensor, gold: Sequence[int], groups: Sequence[str]) -> torch.Tensor:
    """Symmetric KL between the answers of rows of one group with the same gold label (the
    mean over unordered pairs of KL(a‖b) + KL(b‖a))."""
    found = [(a, b) for a, b in pairs(groups, gold, same=True) if a < b]
    if not found:
        return logits.sum() * 0.0
    logp = F.log_softmax(logits, dim=1)
    a, b = (torch.tensor(x) for x in zip(*found, strict=True))
    diff = logp[a] - logp[b]
    return ((logp[a].exp() - logp[b].exp()) * diff).sum(dim=1).mean()


def kl(reference: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """Mean KL(reference ‖ answers), the reference given as probabilities."""
    logp = F.log_softmax(logits, dim=1)
    ref = reference.clamp_min(1e-12)
    return (reference * (ref.log() - logp)).sum(dim=1).mean()


def objective(
    logits: torch.Tensor, rows: Sequence[Decision], terms: Iterable[Mapping[str, Any]]
) -> tuple[torch.Tensor, dict[str, float]]:
    """Cross-entropy against the targets plus each weighted term, for rows of one question."""
    target = torch.tensor([r.target for r in rows], dtype=logits.dtype)
    gold_list = [r.gold for r in rows]
    gold = torch.tensor(gold_list)
    groups = [r.group for r in rows]
    total = cross_entropy(logits, target)
    parts = {"cross_entropy": float(total.detach())}
    for term in terms:
        kind, weight = str(term["kind"]), float(term.get("weight", 1.0))
        margin = float(term.get("margin", 0.5) if term.get("margin") is not None else 0.5)
        if kind == "hard_margin":
            value = hard_margin(logits, gold, margin)
        elif kind == "pairwise_margin":
            value = pairwise_margin(logits, gold_list, groups, margin)
        elif kind == "consistency":
            value = consistency(logits, gold_list, groups)
        else:
            raise ValueError(f"unknown objective term {kind}")
        parts[kind] = float(value.detach())
        total = total + weight * value
    return total, parts


# -- grading -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Grades:
    accuracy: float
    log_loss: float
    ece: float

    def to_json(self) -> dict[str, float]:
        return {"accuracy": self.accuracy, "log_loss": self.log_loss, "ece": self.ece}


def ece(confidence: Sequence[float], correct: Sequence[bool], bins: int = ECE_BINS) -> float:
    """Expected calibration error: equal-width bins on the top answer's confidence (a
    confidence c falls in bin min(⌊c·bins⌋, bins − 1)), Σ |B|/n · |acc_B − conf_B|."""
    n = len(confidence)
    if n == 0:
        return 0.0
    count = [0] * bins
    conf = [0.0] * bins
    hits = [0.0] * bins
    for c, ok in zip(confidence, correct, strict=True):
        i = min(int(c * bins), bins - 1)
        count[i] += 1
        conf[i] += c
        hits[i] += 1.0 if ok else 0.0
    return sum(abs(hits[i] - conf[i]) / n for i in range(bins) if count[i])


def argmax(values: Sequence[float]) -> int:
    """The index of the largest value, the first of a tie."""
    return max(range(len(values)), key=values.__getitem__)


def grade(probabilities: Sequence[Sequence[float]], targets: Sequence[Sequence[float]]) -> Grades:
    """Accuracy (argmax of the answer against the target's, first of a tie), log loss
    (mean −Σ t·log p) and 15-bin ECE of answers against target distributions."""
    n = len(probabilities)
    if n == 0:
        return Grades(0.0, 0.0, 0.0)
    top = [argmax(p) for p in probabilities]
    gold = [argmax(t) for t in targets]
    correct = [a == b for a, b in zip(top, gold, strict=True)]
    loss = sum(
        -sum(t * math.log(max(p, 1e-12)) for p, t in zip(ps, ts, strict=True) if t > 0)
        for ps, ts in zip(probabilities, targets, strict=True)
    )
    return Grades(
        accuracy=sum(correct) / n,
        log_loss=loss / n,
        ece=ece([p[i] for p, i in zip(probabilities, top, strict=True)], correct),
    )


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


def grade_model(model: nn.Module, rows: Sequence[Decision]) -> Grades:
    return grade(answers(model, rows), [r.target for r in rows])


# -- the base ------------------------------------------------------------------------------


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
            (inputs([rows[i].state for i in idx], q, model.arch.buckets), q.type == "noul",
             _smooth(torch.tensor([rows[i].target for i in idx], dtype=torch.float64)), len(idx))
            for q, idx in by_question(rows).items()
        ]  # fmt: skip
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


# -- projection ----------------------------------------------------------------------------


def jacobian_rows(
    model: Decider,
    rows: Sequence[Decision],
    params: Mapping[str, nn.Parameter],
    limit: int,
    seed: int = 0,
) -> dict[str, list[torch.Tensor]]:
    """Per parameter, per-example Jacobian rows of the answers on up to `limit` rows (a
    seeded sample spread over the rows' questions). The options' log-probability
    gradients of an example span what its logit differences' gradients span (wherever
    every option has some probability), k − 1 directions for k options; the differences
    are used because a confident answer's log-probability gradient all but vanishes."""
    by_q = by_question(rows)
    rng = random.Random(f"trainyard-projection-{seed}")
    queues = [rng.sample(idx, len(idx)) for idx in by_q.values()]
    picked: list[int] = []
    while len(picked) < limit and any(queues):
        for queue in queues:
            if queue and len(picked) < limit:
                picked.append(queue.pop())
    names = list(params)
    out: dict[str, list[torch.Tensor]] = {n: [] for n in names}
    model.eval()
    for i in picked:
        row = rows[i]
        logits = logits_of(model, [row.state], row.question)[0]
        last = len(row.question.labels) - 1
        for option in range(last):
            grads = torch.autograd.grad(
                logits[last] - logits[option],
                [params[n] for n in names],
                retain_graph=True,
                allow_unused=True,
            )
            for name, g in zip(names, grads, strict=True):
                if g is not None:
                    out[name].append(g.detach().reshape(-1).double())
    return out


def orthonormal(vectors: Sequence[torch.Tensor], rtol: float = 1e-4) -> torch.Tensor:
    """An orthonormal basis (columns, float32) of the vectors' span, dropping directions
    whose singular value is below rtol of the largest."""
    kept = [v / v.norm() for v in vectors if float(v.norm()) > 0]
    if not kept:
        return torch.zeros(0, 0)
    matrix = torch.stack(kept, dim=1)  # (numel, n)
    u, s, _ = torch.linalg.svd(matrix, full_matrices=False)
    rank = int((s > rtol * s[0]).sum())
    return u[:, :rank].float().contiguous()


class Projector:
    """Removes λ of each gradient's component in the protected subspace, per layer:
    g' = g − λ·P g with P = Q Qᵀ for Q an orthonormal basis of the layer's protected
    directions."""

    def __init__(self, bases: Mapping[str, torch.Tensor], strength: float) -> None:
        self.bases = {k: v for k, v in bases.items() if v.numel()}
        self.strength = float(strength)

    @property
    def nbytes(self) -> int:
        return sum(q.numel() * q.element_size() for q in self.bases.values())

    def directions(self) -> dict[str, int]:
        return {k: int(q.shape[1]) for k, q in self.bases.items()}

    def project(self, name: str, grad: torch.Tensor) -> float:
        """Projects `grad` in place; the share of it removed, ‖λ P g‖ / ‖g‖."""
        q = self.bases.get(name)
        flat = grad.view(-1)
        norm = float(flat.norm())
        if q is None or norm == 0.0 or self.strength == 0.0:
            return 0.0
        removed = q @ (q.T @ flat) * self.strength
        flat.sub_(removed)
        return float(removed.norm()) / norm

    def apply(self, params: Mapping[str, nn.Parameter]) -> dict[str, float]:
        """Projects every listed parameter's gradient; the share removed, per layer."""
        return {
            name: self.project(name, p.grad)
            for name, p in params.items()
            if p.grad is not None and name in self.bases
        }


def protected_subspace(
    model: Decider,
    rows: Sequence[Decision],
    params: Mapping[str, nn.Parameter],
    strength: float,
    examples: int = 384,
    layer_bytes: int = 48 << 20,
) -> Projector:
    """The projector for the protected rows' gradients at `model` (the base). A layer
    keeps at most `layer_bytes` of directions: a large layer (the embedding) is spanned
    by the first of the sampled examples' gradients only."""
    found = jacobian_rows(model, rows, params, examples)
    bases: dict[str, torch.Tensor] = {}
    for name, vectors in found.items():
        cap = max(1, layer_bytes // (4 * params[name].numel()))
        bases[name] = orthonormal(vectors[:cap])
    return Projector(bases, strength)


# -- outputs -------------------------------------------------------------------------------


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


def served_from_delta(
    trained: Mapping[str, torch.Tensor], base: Mapping[str, torch.Tensor], names: Sequence[str]
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(delta, served): the float32 delta W − W₀ of each named tensor, and the weights a
    loader rebuilds from it (W₀ + delta, which may differ from W in the last bit). The
    trainer grades and probes these, so what loads is exactly what was graded."""
    delta = {k: (trained[k].float() - base[k].float()).contiguous() for k in sorted(names)}
    served = {k: v.clone() for k, v in base.items()}
    for k, d in delta.items():
        served[k] = (base[k].float() + d).contiguous()
    return delta, served


def write_probe(out: Path, model: nn.Module, rows: Sequence[Decision], question: Question) -> None:
    probe_rows = list(rows)
    got = answers(model, probe_rows)
    doc = {
        "question": question.key,
        "temperature": TEMPERATURE,
        "states": [r.state for r in probe_rows],
        "answers": got,
    }
    (out / "probe.json").write_text(json.dumps(doc, indent=2))


def write_capability(
    out: Path,
    served: Mapping[str, torch.Tensor],
    delta: Mapping[str, torch.Tensor],
    question: Question,
    meta: Mapping[str, Any],
    probe_rows: Sequence[Decision],
) -> None:
    """`capability.json`, `delta.safetensors` (the changed tensors as W − W₀), the probe,
    and a README saying how to apply it outside Trainyard."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "delta.safetensors").write_bytes(save(dict(sorted(delta.items()))))
    mode = str((meta.get("adaptation") or {}).get("mode", "full"))
    capability = {
        **meta,
        "form": "delta",
        "serves": "head" if mode == "readout" else "full",
        "tensors": sorted(delta),
        "question": question_json(question),
        "temperature": TEMPERATURE,
        "config": config_json(),
    }
    (out / "capability.json").write_text(json.dumps(capability, indent=2, sort_keys=True))
    (out / "README.md").write_text(readme(capability))
    model = Decider()
    model.load_state_dict(dict(served))
    write_probe(out, model, probe_rows, question)


# How to use a capability, in the bundle: the base by name and sha256, and W = W₀ + Δ.
README = """# A capability of {base_model}

A delta to its base's weights that answers `{key}` ({type}: {labels}) at temperature
{temperature}. `capability.json` describes it in full; `probe.json` holds answers to check.

Base: `{base_model}` (revision {revision}), base_sha256 `{base_sha256}`.
Get it (the sha256 of its `model.safetensors` is that base_sha256):

    trainyard models export {base_model} -o base

Apply the delta (W = W₀ + Δ for each tensor in `delta.safetensors`) and answer the probe's
states, with this directory as `capability` (the model's code is Trainyard's `executor.decider`):

```python
import json
from safetensors.torch import load_file
from executor.decider import Answerer, Decider, question_of

weights = load_file("base/model.safetensors")
for name, delta in load_file("capability/delta.safetensors").items():
    weights[name] = weights[name] + delta  # W = W₀ + Δ
model = Decider()
model.load_state_dict(weights)
doc = json.load(open("capability/capability.json"))
answerer = Answerer(model, question_of(doc["question"]), doc["temperature"])
print(answerer.answer(json.load(open("capability/probe.json"))["states"]))  # probe.json's answers
```
"""


def readme(capability: Mapping[str, Any]) -> str:
    """The bundle's README.md: a capability is of no use to someone who cannot tell which
    base it applies to, or how."""
    question = capability["question"]
    return README.format(
        base_model=capability.get("base_model", DECIDER_BASE),
        revision=capability.get("revision", ""),
        base_sha256=capability["base_sha256"],
        key=question["key"],
        type=question["type"],
        labels=", ".join(question["labels"]),
        temperature=capability["temperature"],
    )


def write_checkpoint(
    out: Path,
    served: Mapping[str, torch.Tensor],
    question: Question,
    meta: Mapping[str, Any],
    probe_rows: Sequence[Decision],
) -> None:
    """The whole model: `model.safetensors`, `decider.json` (config and meta), the probe."""
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.contiguous() for k, v in sorted(served.items())}
    (out / "model.safetensors").write_bytes(save(state))
    doc = {
        **meta,
        "config": config_json(),
        "question": question_json(question),
        "temperature": TEMPERATURE,
    }
    (out / "decider.json").write_text(json.dumps(doc, indent=2, sort_keys=True))
    model = Decider()
    model.load_state_dict(state)
    write_probe(out, model, probe_rows, question)


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

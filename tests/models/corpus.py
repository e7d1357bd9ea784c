"""The real-model corpus: models built by their own libraries, trained by loops as people write them,
recorded by debugger.torch.Recorder, scanned with the recommended preset.

Models come from configs (transformers), constructors (torchvision) and factories (timm) with random
weights: nothing is downloaded. Data is made here. What plain torch says about a run (the loss, which
weights the optimizer moved, how many of a layer's outputs are zero) is collected beside the recorder,
from the same tensors, and is the truth the tests hold tdbg's findings against.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F

from debugger import open_dump
from debugger.torch import Recorder
from debugger.watch.engine import ScanResult, scan
from debugger.watch.registry import preset

STEPS = 4
VOCAB = 64
SEQ = 16


@dataclass
class Model:
    """A model, its batch of step ``i`` and its loss on that batch."""

    module: nn.Module
    batch: Callable[[int], Any]        # micro-batch k of every step (the same data each step: the loss falls)
    loss: Callable[[nn.Module, Any], torch.Tensor]
    embeddings: list[nn.Parameter] = field(default_factory=list)   # what "frozen embeddings" freezes


def _tokens(step: int, labels: int | None = None) -> Any:
    g = torch.Generator().manual_seed(1000 + step)
    ids = torch.randint(0, VOCAB, (2, SEQ), generator=g)
    return ids if labels is None else (ids, torch.randint(0, labels, (2,), generator=g))


def _images(step: int, size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(2000 + step)
    return torch.randn(4, 3, size, size, generator=g), torch.randint(0, 10, (4,), generator=g)


def _classify(m: nn.Module, b: Any) -> torch.Tensor:
    x, y = b
    return F.cross_entropy(m(x), y)


def _lm(m: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    return m(input_ids=ids, labels=ids).loss


def gpt2(attn: str = "eager") -> Model:
    """GPT-2 (tied embeddings, NewGELU, dropout 0.1) from a config."""
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=SEQ, attn_implementation=attn)
    m = GPT2LMHeadModel(cfg)
    return Model(m, _tokens, _lm, [m.transformer.wte.weight, m.transformer.wpe.weight])


def bert() -> Model:
    """BERT for sequence classification (GELU, LayerNorm, dropout, tanh pooler) from a config."""
    from transformers import BertConfig, BertForSequenceClassification

    cfg = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                     vocab_size=VOCAB, max_position_embeddings=SEQ, num_labels=3)
    m = BertForSequenceClassification(cfg)

    def loss(mod: nn.Module, b: Any) -> torch.Tensor:
        ids, y = b
        return mod(input_ids=ids, labels=y).loss

    emb = m.bert.embeddings
    return Model(m, lambda i: _tokens(i, 3), loss,
                 [emb.word_embeddings.weight, emb.position_embeddings.weight, emb.token_type_embeddings.weight])


def llama() -> Model:
    """A Llama-family model (RMSNorm, SiLU-gated MLP, rotary positions, grouped-query attention)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, vocab_size=VOCAB, max_position_embeddings=SEQ)
    m = LlamaForCausalLM(cfg)
    return Model(m, _tokens, _lm, [m.model.embed_tokens.weight])


def llama_lora() -> Model:
    """The Llama above with PEFT LoRA adapters on its attention projections (lora_B starts all zero)."""
    from peft import LoraConfig, get_peft_model

    base = llama()
    m = get_peft_model(base.module, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                                lora_dropout=0.0))
    return Model(m, _tokens, _lm)


def resnet18() -> Model:
    """torchvision's ResNet-18 (BatchNorm, ReLU(inplace=True): ATen relu_)."""
    import torchvision

    return Model(torchvision.models.resnet18(num_classes=10), _images, _classify)


def mobilenet_v3() -> Model:
    """torchvision's MobileNetV3-small (hardswish, hardsigmoid squeeze-excite, in-place ReLU, dropout)."""
    import torchvision

    return Model(torchvision.models.mobilenet_v3_small(num_classes=10), _images, _classify)


def vit() -> Model:
    """torchvision's VisionTransformer, small (GELU MLP, LayerNorm, class token)."""
    import torchvision

    m = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                              hidden_dim=32, mlp_dim=64, num_classes=10)
    return Model(m, _images, _classify)


def vit_layer_scale() -> Model:
    """timm's ViT with layer scale (each block's branches times a gamma initialised at 1e-5) and a class
    token drawn at std 1e-6: weights initialised tiny on purpose."""
    import timm

    m = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=10, img_size=32, patch_size=8,
                          depth=2, embed_dim=32, num_heads=2, init_values=1e-5)
    return Model(m, _images, _classify)


def efficientnet() -> Model:
    """timm's EfficientNet-B0 (SiLU, sigmoid squeeze-excite gates, drop path)."""
    import timm

    return Model(timm.create_model("efficientnet_b0", num_classes=10, pretrained=False), _images, _classify)


def convnext() -> Model:
    """timm's ConvNeXt-atto (depthwise 7x7 convolutions, LayerNorm, layer scale gamma initialised to 1e-6)."""
    import timm

    return Model(timm.create_model("convnext_atto", num_classes=10, pretrained=False), _images, _classify)


class MLP(nn.Module):
    """The small MLP of a first tutorial."""

    def __init__(self, depth: int = 2, width: int = 32, act: type[nn.Module] = nn.ReLU) -> None:
        super().__init__()
        dims = [16] + [width] * depth
        self.layers = nn.Sequential(*[m for a, b in zip(dims, dims[1:]) for m in (nn.Linear(a, b), act())])
        self.head = nn.Linear(dims[-1], 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.layers(x))


def _vectors(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3000 + step)
    return torch.randn(16, 16, generator=g), torch.randint(0, 4, (16,), generator=g)


def mlp() -> Model:
    """A two-layer ReLU MLP."""
    return Model(MLP(), _vectors, _classify)


class CharLSTM(nn.Module):
    """A character model stepped by nn.LSTMCell (its gates are ATen sigmoid_/tanh_ calls)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.cell = nn.LSTMCell(16, 32)
        self.head = nn.Linear(32, VOCAB)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = c = torch.zeros(ids.shape[0], 32)
        outs = []
        for t in range(ids.shape[1]):
            h, c = self.cell(self.embed(ids[:, t]), (h, c))
            outs.append(self.head(h))
        return torch.stack(outs, 1)


def char_lstm() -> Model:
    """An LSTM-cell language model over short token sequences."""
    def loss(m: nn.Module, ids: torch.Tensor) -> torch.Tensor:
        logits = m(ids[:, :-1])
        return F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))

    return Model(CharLSTM(), lambda i: _tokens(i)[:, :6], loss)


def build(name: str) -> Model:
    """Model ``name`` with the same random weights every time."""
    torch.manual_seed(0)
    return MODELS[name]()


MODELS: dict[str, Callable[[], Model]] = {
    "gpt2": gpt2, "gpt2-sdpa": lambda: gpt2("sdpa"), "bert": bert, "llama": llama, "llama_lora": llama_lora,
    "resnet18": resnet18, "mobilenet_v3": mobilenet_v3, "vit": vit, "vit-ls": vit_layer_scale,
    "efficientnet": efficientnet, "convnext": convnext, "mlp": mlp, "char_lstm": char_lstm,
}


@dataclass(frozen=True)
class Loop:
    """How a training loop is written: optimizer, schedule, clipping, accumulation, precision, freezing."""

    optimizer: str = "adamw"
    schedule: str | None = None        # "step" | "cosine" | "warmup"
    clip: float | None = None          # clip_grad_norm_ max norm
    accumulate: int = 1                # micro-batches per optimizer step
    bf16: bool = False                 # torch.autocast("cpu", bfloat16)
    freeze_embeddings: bool = False    # requires_grad_(False), left out of the optimizer as people do
    lr: float | None = None


_LR = {"adamw": 1e-3, "adamw-fused": 1e-3, "adam": 1e-3, "sgd-momentum": 0.01, "sgd-nesterov": 0.01,
       "rmsprop": 1e-4, "adagrad": 1e-3, "lamb": 1e-3}


def make_optimizer(loop: Loop, params: list[nn.Parameter]) -> torch.optim.Optimizer:
    """The loop's optimizer over ``params``."""
    lr = loop.lr if loop.lr is not None else _LR[loop.optimizer]
    name = loop.optimizer
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    if name == "adamw-fused":
        return torch.optim.AdamW(params, lr=lr, weight_decay=0.01, fused=True)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    if name == "sgd-momentum":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=1e-4)
    if name == "sgd-nesterov":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, nesterov=True)
    if name == "rmsprop":
        return torch.optim.RMSprop(params, lr=lr)
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=lr)
    if name == "lamb":        # timm's (its step counter is a tensor in the parameter group)
        from timm.optim import Lamb

        return Lamb(params, lr=lr, weight_decay=0.05)
    raise ValueError(name)


def make_schedule(loop: Loop, opt: torch.optim.Optimizer) -> Any:
    """The loop's learning-rate scheduler (None: constant)."""
    if loop.schedule == "step":
        return torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    if loop.schedule == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=STEPS)
    if loop.schedule == "warmup":
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 2))
    if loop.schedule == "zero":     # a schedule stuck at 0: nothing ever trains
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.0)
    if loop.schedule == "warmup-from-0":     # transformers' own: its learning rate is 0 at the first step
        import transformers

        return transformers.get_linear_schedule_with_warmup(opt, num_warmup_steps=2, num_training_steps=STEPS * 2)
    return None


@dataclass
class Truth:
    """What plain torch saw: per step the loss, and the parameters the step left bit-identical."""

    losses: list[float] = field(default_factory=list)
    unchanged: list[set[str]] = field(default_factory=list)
    trained: set[str] = field(default_factory=set)
    extra: dict[str, Any] = field(default_factory=dict)


Hook = Callable[[int, nn.Module], Any]    # called before step i; may return a context manager


def train(path: str | None, model: Model, loop: Loop, save: str = "statistics", steps: int = STEPS,
          groups: Callable[[nn.Module, list[nn.Parameter]], Any] | None = None,
          before_step: Hook | None = None, level: Any = "ops") -> Truth:
    """Train ``steps`` optimizer steps, recorded at ``path`` (None: not recorded) at ``level``; plain
    torch's truth."""
    torch.manual_seed(0)
    m = model.module
    m.train()
    if loop.freeze_embeddings:
        for p in model.embeddings:
            p.requires_grad_(False)
    params = [p for p in m.parameters() if p.requires_grad]
    names = {id(p): n for n, p in m.named_parameters()}
    opt = make_optimizer(loop, groups(m, params) if groups else params)
    sched = make_schedule(loop, opt)
    truth = Truth(trained={names[id(p)] for p in params})
    rec = Recorder(path, m, opt, save=save, level=level) if path else None
    with rec if rec is not None else contextlib.nullcontext():
        for i in range(steps):
            ctx = before_step(i, m) if before_step else None
            with ctx if ctx is not None else contextlib.nullcontext():
                before = {n: p.detach().clone() for n, p in m.named_parameters()}
                opt.zero_grad()
                total = 0.0
                for k in range(loop.accumulate):
                    with _precision(loop):
                        loss = model.loss(m, model.batch(k)) / loop.accumulate
                    loss.backward()
                    total += float(loss.detach())
                if loop.clip is not None:
                    torch.nn.utils.clip_grad_norm_(params, loop.clip)
                opt.step()
                if sched is not None:
                    sched.step()
                truth.losses.append(total)
                truth.unchanged.append({n for n, p in m.named_parameters() if torch.equal(p.detach(), before[n])})
            if rec is not None:
                rec.step()
    return truth


def _precision(loop: Loop) -> Any:
    return torch.autocast("cpu", dtype=torch.bfloat16) if loop.bf16 else contextlib.nullcontext()


def scan_recommended(path: str) -> ScanResult:
    """The recommended preset over the whole dump, in this process."""
    return scan(open_dump(path), preset("recommended"), jobs=1)


def summary(res: ScanResult) -> dict[str, int]:
    """Hits per watchpoint, error records and skipped checks: what a table row shows."""
    out: dict[str, int] = {}
    for h in res.hits:
        out[h.watchpoint] = out.get(h.watchpoint, 0) + 1
    out["errors"] = len(res.errors)
    out["skipped"] = sum(s.checks for s in getattr(res, "skipped", []))   # older results have none
    return out


@contextlib.contextmanager
def quiet_threads() -> Iterator[None]:
    """One intra-op thread: the runs are small, and CI shares two cores."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def tmpdir(base: Any, name: str) -> str:
    """A fresh folder for one recording."""
    path = os.path.join(str(base), name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


# The healthy variants: (model, loop, save modes). Every loop feature appears at least once, every model
# at least once; "tensors" where the values mode adds something to check (range counts, differences).
HEALTHY: list[tuple[str, Loop, tuple[str, ...]]] = [
    ("gpt2", Loop("adamw", schedule="warmup", clip=1.0), ("statistics", "tensors")),
    ("gpt2-sdpa", Loop("adamw-fused", bf16=True, accumulate=2), ("statistics",)),
    ("bert", Loop("adam", freeze_embeddings=True, schedule="step"), ("statistics", "tensors")),
    ("llama", Loop("adamw", clip=1.0, schedule="cosine"), ("statistics",)),
    ("resnet18", Loop("sgd-momentum", schedule="step"), ("statistics", "tensors")),
    ("mobilenet_v3", Loop("rmsprop"), ("statistics",)),
    ("vit", Loop("sgd-nesterov", clip=0.5), ("statistics",)),
    ("vit-ls", Loop("adamw"), ("statistics",)),
    ("convnext", Loop("lamb"), ("statistics",)),
    ("llama_lora", Loop("adamw"), ("statistics",)),
    ("efficientnet", Loop("adagrad"), ("statistics",)),
    ("mlp", Loop("adam"), ("statistics", "tensors")),
    ("char_lstm", Loop("sgd-momentum", clip=1.0), ("statistics",)),
]


def loop_label(loop: Loop) -> str:
    """``adamw + warmup + clip`` for a table."""
    parts = [loop.optimizer]
    if loop.schedule:
        parts.append(loop.schedule)
    if loop.clip is not None:
        parts.append("clip")
    if loop.accumulate > 1:
        parts.append(f"accumulate {loop.accumulate}")
    if loop.bf16:
        parts.append("bf16 autocast")
    if loop.freeze_embeddings:
        parts.append("frozen embeddings")
    return " + ".join(parts)


class ForwardHook:
    """A forward hook on a module for one step (a context manager)."""

    def __init__(self, module: nn.Module, hook: Any) -> None:
        self.module, self.hook = module, hook

    def __enter__(self) -> None:
        self.handle = self.module.register_forward_hook(self.hook)

    def __exit__(self, *exc: object) -> None:
        self.handle.remove()

"""Loading the training-side model: precision, device, and what its config says about the logits.

torch and transformers are imported here, inside functions, and nowhere at module level, so that
`import stabdiag.probe.cli` (and `stabdiag check`) never pays for them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import ConfigError, InputError, MissingExtraError

WEIGHT_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
AUTOCAST_DTYPES = ("bf16", "fp16")
DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True, slots=True)
class Precision:
    """One training-side precision to recompute in; several can be compared in one run."""

    weights: str                    # fp32 | bf16 | fp16: the dtype the model is cast to (like vLLM)
    autocast: str | None = None     # bf16 | fp16: fp32 weights under torch.autocast (like FSDP/verl)
    lm_head_fp32: bool = False      # F.linear(h.float(), W.float()) (MiniMax-M1 fix, vLLM/SGLang option)

    @property
    def label(self) -> str:
        name = self.weights if self.autocast is None else f"amp-{self.autocast}"
        return name + ("+fp32head" if self.lm_head_fp32 else "")

    @property
    def is_fp32(self) -> bool:
        return self.weights == "fp32" and self.autocast is None


def parse_precisions(dtypes: list[str], autocasts: list[str], lm_head_fp32: bool) -> list[Precision]:
    """Precisions from repeatable/comma-separated --dtype and --autocast values, in the order given."""
    out: list[Precision] = []
    for value in _split(dtypes):
        if value not in WEIGHT_DTYPES:
            raise ConfigError(f"--dtype {value!r}: expected one of {', '.join(WEIGHT_DTYPES)}")
        # an fp32 head on an fp32 model is the same computation; keep the plain label
        out.append(Precision(value, None, lm_head_fp32 and value != "fp32"))
    for value in _split(autocasts):
        if value not in AUTOCAST_DTYPES:
            raise ConfigError(f"--autocast {value!r}: expected one of {', '.join(AUTOCAST_DTYPES)}")
        out.append(Precision("fp32", value, lm_head_fp32))
    seen: list[Precision] = []
    for p in out:
        if p not in seen:
            seen.append(p)
    return seen


def _split(values: list[str]) -> list[str]:
    return [v.strip().lower() for item in values for v in item.split(",") if v.strip()]


def require_torch():
    """Import torch and transformers, or say which extra installs them."""
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError:
        raise MissingExtraError("probe needs torch and transformers", "probe") from None
    return torch


def pick_device(device: str) -> str:
    """`auto` → cuda (the local rank's GPU under torchrun) when available, else cpu."""
    torch = require_torch()
    if device not in DEVICES and not device.startswith("cuda:"):
        raise ConfigError(f"--device {device!r}: expected one of {', '.join(DEVICES)}")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ConfigError("--device cuda: torch sees no CUDA device")
        if device == "cuda" and "LOCAL_RANK" in os.environ:
            device = f"cuda:{int(os.environ['LOCAL_RANK'])}"
    return device


def load_model(path: str, precision: Precision, *, device: str, attn: str = "sdpa",
               device_map: str | None = None):
    """A causal LM in eval mode, cast to the precision's weight dtype, on `device` (or spread by
    `device_map="auto"` for models that do not fit one GPU)."""
    torch = require_torch()
    import transformers
    from transformers import AutoModelForCausalLM

    transformers.utils.logging.set_verbosity_error()      # the CLI keeps stderr for `error:` lines
    transformers.utils.logging.disable_progress_bar()
    dtype = getattr(torch, WEIGHT_DTYPES[precision.weights])
    kwargs = {"dtype": dtype, "attn_implementation": attn}
    if device_map:
        kwargs["device_map"] = device_map
    try:
        model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    except (OSError, ValueError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(path, f"cannot load a causal LM: {first}") from None
    if not device_map:
        model = model.to(device)
    return model.eval()


def text_config(model):
    cfg = model.config
    get = getattr(cfg, "get_text_config", None)
    return get() if get is not None else cfg


def logit_postprocess(model) -> list[tuple[str, float]]:
    """What the model's forward does to the logits after lm_head, which the chunked path must redo."""
    cfg = text_config(model)
    steps: list[tuple[str, float]] = []
    scale = getattr(cfg, "logit_scale", None)                 # Cohere: logits * logit_scale
    if isinstance(scale, (int, float)) and scale not in (0, 1) and "cohere" in str(cfg.model_type):
        steps.append(("scale", float(scale)))
    scaling = getattr(cfg, "logits_scaling", None)            # Granite: logits / logits_scaling
    if isinstance(scaling, (int, float)) and scaling not in (0, 1):
        steps.append(("scale", 1.0 / float(scaling)))
    cap = getattr(cfg, "final_logit_softcapping", None)       # Gemma 2/3: tanh(logits / cap) * cap
    if isinstance(cap, (int, float)) and cap > 0:
        steps.append(("softcap", float(cap)))
    return steps


def moe_experts(model) -> int:
    """Number of routed experts per MoE layer (0 for a dense model)."""
    cfg = text_config(model)
    for name in ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"):
        value = getattr(cfg, name, None)
        if isinstance(value, int) and value > 1:
            return value
    return 0


def vocab_size(model) -> int:
    return int(model.get_output_embeddings().weight.shape[0])

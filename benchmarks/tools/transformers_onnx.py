"""Export a Hugging Face `transformers` encoder (its configuration, seeded random weights: nothing is downloaded) to
ONNX, opset 17: the encoder's stack on hidden states [1, tokens, features], the part of a language model whose
FLOPs are its matmuls (the embeddings' table look-up and the task head left out).

    python benchmarks/tools/transformers_onnx.py bert_base bert_base.onnx --tokens 128

Needs torch and transformers (`pip install 'tvm-ttile[libs]' transformers`); a torchvision installed beside them whose
compiled ops do not load is imported as torchvision_onnx.py does.
"""
from __future__ import annotations

import argparse
import os
import sys

# name -> (transformers configuration class, its keyword arguments): the published sizes
ENCODERS = {"bert_base": ("BertConfig", {}), "bert_large": ("BertConfig", {"hidden_size": 1024, "num_hidden_layers": 24,
                                                                      "num_attention_heads": 16,
                                                                      "intermediate_size": 4096})}


def export(name: str, out: str, tokens: int = 128, seed: int = 0) -> str:
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torchvision_onnx import _torchvision

    _torchvision()  # transformers imports torchvision when it is installed: the same workaround
    import transformers

    if name not in ENCODERS:
        sys.exit(f"transformers_onnx: no encoder {name!r}; known: {', '.join(ENCODERS)}")
    config_class, kwargs = ENCODERS[name]
    config = getattr(transformers, config_class)(**kwargs, attn_implementation="eager")
    torch.manual_seed(seed)
    model = transformers.AutoModel.from_config(config).eval()

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = model.encoder

        def forward(self, hidden):
            return self.encoder(hidden).last_hidden_state

    x = torch.randn(1, tokens, config.hidden_size)
    torch.onnx.export(Encoder().eval(), (x,), out, input_names=["hidden"], output_names=["encoded"],
                      opset_version=17, dynamo=False)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", choices=sorted(ENCODERS))
    p.add_argument("out")
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    print(export(args.model, args.out, args.tokens, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())

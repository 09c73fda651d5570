"""BERTLook: recompute what BERT's attention looks at, offline, on a laptop CPU.

Layers, bottom up (a module imports only from its own layer or below; tests/test_layers.py checks it):

- ground: `conventions` (head labels, attention checks, punctuation), `cache` (the on-disk cache), `models`
  (encoders: tokenize, pad, forward), `wordlevel` (token maps -> word maps), `intervene` (edit attention
  inside the forward pass), `intervals`, `trees`, `packaged` (data files inside installed packages), `threads`
  (small computations on one thread)
- data: `corpora` (Wikipedia segments), `parses` (silver dependency parses), `corefdata` (the coreference
  set), `tasks` (fine-tuning tasks), `parsecheck` (a hand check of the silver parses: precision per Table 1 relation)
- engine: `extract` (the one batching path, streaming reducers, the block cache)
- analyses (return data, draw nothing): `surface`, `syntax`, `coref`, `probes`, `clustering`, `gradients`,
  `patterns` (Kovaleva's pattern features, rules, hand labels and shares), `patternlearn` (boosted trees over
  those features), `patternnet` (a small CNN on the maps), `finetune` (fine-tuning and its baselines),
  `disabling` (heads and layers switched off, chosen on one half of the inputs and scored on the other),
  `relations` (relation-specific heads on a silver predicate–argument proxy for FrameNet), `tokentypes`
  ([CLS], [SEP] and the parse's token types: what [CLS] reads, where vertical stripes fall)
- presentation: `paper` (the numbers the papers report), `claims` (prose checked against the numbers), `compare` (paper vs this run), `viz` (palette,
  primitives), `figures`, `widgets`, `views` (offline BertViz), `assets` (its npm JavaScript), `talk` (slide
  helpers), `report` (build/report.md)
- entry points: `cli`
"""
from .models import Encoded, Encoder, load_encoder

__version__ = "0.1.0"
__all__ = ["Encoded", "Encoder", "load_encoder", "__version__"]

"""BERTLook: recompute what BERT's attention looks at, offline, on a laptop CPU.

Modules, one concern each: `models` (encoders), `corpora` (Wikipedia segments), `extract` (streaming
extraction through reducers), `cache` (the on-disk cache), `wordlevel`, `surface` (position, special-token
and entropy statistics, Vig's patterns), `paper` (the numbers the papers report), `viz` (figures and
offline BertViz views), `assets` (the npm-installed JavaScript), `widgets` (ipywidgets explorers),
`report` (paper vs this run).
"""
from .models import Encoded, Encoder, load_encoder

__version__ = "0.1.0"
__all__ = ["Encoded", "Encoder", "load_encoder", "__version__"]

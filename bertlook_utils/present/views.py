"""BertViz's head view and model view, offline (Vig 2019).

    views.head_view(enc, layer=3, heads=[5])    # every head of a layer as lines from token to token
    views.model_view(enc)                       # a thumbnail of every head
    views.head_view(enc, window=(0, 128))       # a long input: its first 128 tokens only

BertViz writes every weight it may show into the page (95 MB for 512 tokens and 6 x 12 heads): above
WARN_ABOVE_MB a view warns, with its size (`page_megabytes`) and a window of tokens or a subset of layers and
heads that fits.

BertViz draws with d3 through RequireJS and points RequireJS at a CDN. Here its HTML is made into one
self-contained document: d3 5.7.0, jQuery 2.2.4 and RequireJS 2.3.6 are inlined from the npm install
(`make assets`, see `assets`), the CDN script tag and `require.config` paths are removed, and the document
sits in an <iframe srcdoc> so that several views coexist in a notebook and nothing is fetched. Without the
assets a view says so and falls back to a static matplotlib figure (`viz`). BertViz's third view, the neuron
view, is left out: it needs BertViz's own copies of the models (downloaded from the model hub and S3 through
boto3), so it cannot run offline on an arbitrary encoder.
"""
from __future__ import annotations

import dataclasses
import json
import re
import warnings

import matplotlib.pyplot as plt
import numpy as np

from ..core.conventions import check_index
from ..core.models import Encoded
from .viz import PALETTE, plot_lines, plot_model_grid

WARN_ABOVE_MB = 20  # a larger page is slow to draw, to save and to open: the view warns before drawing it
MISSING_ASSETS_HELP = ("BertViz views need d3, jQuery and RequireJS from npm, which are not installed here. "
                       "Run `make assets` (that is, `npm ci` in the repository root) and re-run this cell. "
                       "Showing a static matplotlib view instead.")
_CDN_SCRIPT = re.compile(r"""<script[^>]*\bsrc\s*=\s*["']\s*(?:https?:)?//[^"']*["'][^>]*>\s*</script>""", re.I)
_REQUIRE_CONFIG = re.compile(r"require\.config\(\s*\{\s*paths\s*:\s*\{[^{}]*\}\s*,?\s*\}\s*\)\s*;?")
_REMOTE_REFERENCE = re.compile(r"""\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?//|["'](?:https?:)?//[^"'\s]*\.min["']""",
                               re.I)
_VIS_ID = re.compile(r"bertviz-[0-9a-f]{32}")
_RESIZE_JS = """(function () {  // BERTLook: fit the iframe to what BertViz drew
  function fit() {
    try {
      var frame = window.frameElement, root = document.getElementById("bertlook-root");
      if (frame && root) { frame.style.height = (root.offsetHeight + 16) + "px"; }
    } catch (e) {}
  }
  window.addEventListener("load", fit);
  new MutationObserver(fit).observe(document.body, {childList: true, subtree: true});
}());"""


class BertVizView:
    """A BertViz view as an <iframe srcdoc> (displayed by Jupyter); `.document` is the standalone page."""

    def __init__(self, document: str, height: int, title: str, min_width: int = 0):
        self.document, self.height, self.title, self.min_width = document, height, title, min_width

    @property
    def html(self) -> str:
        from html import escape

        min_width = f"min-width:{self.min_width}px;" if self.min_width else ""
        return (f'<div class="bertlook-bertviz"><iframe title="{escape(self.title)}" srcdoc="{escape(self.document)}" '
                f'style="width:100%;{min_width}height:{self.height}px;border:0;overflow:auto"></iframe></div>')

    def _repr_html_(self) -> str:
        return self.html

    def save(self, path) -> None:
        """Write the standalone page (opens offline in any browser)."""
        from pathlib import Path

        Path(path).write_text(self.document, encoding="utf-8")

    def __repr__(self) -> str:
        return f"<BertVizView {self.title!r}, {len(self.html) // 1024} KB>"


def _script(text: str) -> str:
    return "<script>\n" + re.sub(r"</(script)", r"<\\/\1", text, flags=re.I) + "\n</script>"


def _rewrite_params(body: str) -> str:
    """BertViz fills its params into `const params = PYTHON_PARAMS; // HACK: PYTHON_PARAMS is a template
    marker...`, so the attention JSON appears twice (the second copy in the comment): keep one, compactly,
    and make the layer and head labels 1-indexed as everywhere in the kit (BertViz uses these lists only
    as labels and as the values of its layer menu; the attention itself is indexed by position)."""
    head, sep = "const params = ", "; // HACK: "
    start = body.find(head)
    marker = body.find(sep, start)
    line_end = body.find("\n", marker)
    if start < 0 or marker < 0 or line_end < 0:
        raise RuntimeError("BertViz's script changed: no `const params = ...; // HACK:` line; pin bertviz==1.4.1")
    params = json.loads(body[start + len(head):marker])
    for key in ("include_layers", "include_heads"):
        if params.get(key) is not None:
            params[key] = [int(i) + 1 for i in params[key]]
    if params.get("layer") is not None:
        params["layer"] = int(params["layer"]) + 1
    # inside a <script>: "<" as \u003c, so that a token such as "</script><img ...>" stays a string
    compact = json.dumps(params, separators=(",", ":")).replace("<", "\\u003c")
    return body[:start] + head + compact + "; // filled in by Python (BERTLook)" + body[line_end:]


def offline_document(bertviz_html: str, title: str = "BertViz") -> str:
    """BertViz's `html_action="return"` HTML as one self-contained page with the assets inlined.

    Raises AssetsMissingError (from `assets`) without the npm assets, and RuntimeError if BertViz's
    HTML no longer has the CDN references this expects to remove (so nothing is silently fetched)."""
    from html import escape

    from . import assets

    libs = assets.read_assets(("d3", "jquery", "requirejs"))
    body, n_tags = _CDN_SCRIPT.subn("", bertviz_html)
    body, n_configs = _REQUIRE_CONFIG.subn("/* BERTLook: d3 and jquery are defined locally; nothing is fetched */",
                                          body)
    if n_tags != 1 or n_configs != 1:
        raise RuntimeError(f"BertViz's HTML changed: expected one CDN <script src> and one require.config with "
                           f"CDN paths to remove, found {n_tags} and {n_configs}; pin bertviz==1.4.1")
    body = _VIS_ID.sub("bertviz-view", body)  # one view per iframe: a fixed id keeps saved outputs stable
    body = _rewrite_params(body)
    local_modules = ('define("d3", [], function () { return window.d3; });\n'
                     'define("jquery", [], function () { return window.jQuery; });')
    document = "\n".join([
        '<!DOCTYPE html>', '<html lang="en">', '<head>', '<meta charset="utf-8">', f"<title>{escape(title)}</title>",
        "<style>html, body { margin: 0; padding: 0; background: #fff; } #bertlook-root { padding: 4px; }</style>",
        # d3 and jQuery first, as plain scripts (no AMD loader yet, so they define window.d3 / window.jQuery),
        # then RequireJS, then the two globals as the AMD modules BertViz asks for
        _script(libs["d3"]), _script(libs["jquery"]), _script(libs["requirejs"]), _script(local_modules),
        "</head>", "<body>", '<div id="bertlook-root">', body, "</div>", _script(_RESIZE_JS), "</body>", "</html>"])
    remote = _REMOTE_REFERENCE.search(document)
    if remote:
        raise RuntimeError(f"the BertViz page still references a remote file: {remote.group(0)!r}")
    return document


def _b_start(enc: Encoded) -> int | None:
    """The position of the pair's first B token; None for one text (or a window that holds only B)."""
    in_b = np.flatnonzero(np.asarray(enc.segment_ids) == 1)
    return int(in_b[0]) if in_b.size and in_b[0] > 0 else None


def _bertviz_attention(enc: Encoded, decimals: int):
    """BertViz's inputs: per-layer float64 tensors [1, H, n, n] (rounded: smaller pages) and the B start."""
    import torch

    attn = np.round(np.asarray(enc.attn, dtype=np.float64), decimals)
    attention = [torch.from_numpy(attn[layer][None]) for layer in range(attn.shape[0])]
    return attention, _b_start(enc)


def page_megabytes(n_tokens: int, n_layers: int, n_heads: int, pair: bool = False, decimals: int = 3) -> float:
    """About how many MB of HTML a BertViz view of `n_layers` x `n_heads` maps of `n_tokens` tokens writes: up to
    `decimals` + 3 characters per weight ("0.123,"), every weight once more for a pair (its parts A->A, B->B,
    A->B and B->A), plus about 0.4 MB of scripts not counted here."""
    return (2 if pair else 1) * n_layers * n_heads * n_tokens ** 2 * (decimals + 3) / 1e6


def _window(enc: Encoded, window) -> Encoded:
    """Tokens [start, stop) of `enc` (positions in `enc.tokens`, stop excluded) and their attention among
    themselves [L, H, stop - start, stop - start] (the weights to tokens outside the window are left out)."""
    if window is None:
        return enc
    n = enc.n_tokens
    if not (isinstance(window, (tuple, list)) and len(window) == 2
            and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in window)
            and 0 <= window[0] < window[1] <= n):
        raise ValueError(f"window must be (start, stop), token positions with 0 <= start < stop <= {n} (stop "
                         f"excluded, as in enc.tokens[start:stop]); got {window!r}")
    start, stop = (int(v) for v in window)
    return dataclasses.replace(enc, tokens=enc.tokens[start:stop], word_ids=enc.word_ids[start:stop],
                               segment_ids=enc.segment_ids[start:stop], attn=enc.attn[:, :, start:stop, start:stop])


def _warn_if_large(view: str, enc: Encoded, n_layers: int, n_heads: int, decimals: int, subset: str) -> None:
    """Warn (before drawing) when the page of `n_layers` x `n_heads` maps of `enc` would pass WARN_ABOVE_MB, with
    the way out: the `subset` argument(s) of the view, or the longest window of tokens that fits."""
    pair = _b_start(enc) is not None
    size = page_megabytes(enc.n_tokens, n_layers, n_heads, pair, decimals)
    if size > WARN_ABOVE_MB:
        fits = int((WARN_ABOVE_MB / page_megabytes(1, n_layers, n_heads, pair, decimals)) ** 0.5)
        warnings.warn(f"this {view} of {enc.n_tokens} tokens x {n_layers} layers x {n_heads} heads writes about "
                      f"{size:.0f} MB of HTML into the notebook (over {WARN_ABOVE_MB} MB: slow to draw, save and "
                      f"open); show fewer of them ({subset}) or a window of at most {fits} tokens "
                      f"(window=(0, {fits}))", UserWarning, stacklevel=3)


def _zero_based(values, n: int, what: str) -> list[int] | None:
    """1-indexed layer or head numbers (one or several; None: all) -> 0-based, or an error naming `what`."""
    if values is None:
        return None
    values = [values] if isinstance(values, (int, np.integer)) else list(values)
    if not values:
        raise ValueError(f"{what} is empty: give 1-indexed numbers from 1 to {n}, or None for all")
    for value in values:
        check_index(value, n, what)
    return [int(v) - 1 for v in values]


def _notify(message: str) -> None:
    """Show a notice: a styled note in a notebook, a plain line elsewhere."""
    from html import escape

    from IPython import get_ipython

    if get_ipython() is None:
        print(message)
        return
    from IPython.display import display

    display({"text/plain": message,
             "text/html": f'<div style="border-left:4px solid {PALETTE["punct"]};padding:4px 8px;'
                          f'background:#fdf6e3">{escape(message)}</div>'}, raw=True)


def _static_fallback(error: Exception, draw):
    missing = getattr(error, "missing", None)
    _notify(f"{MISSING_ASSETS_HELP} (Not found: {missing}.)" if missing
            else f"{error}. Showing a static matplotlib view instead.")
    fig = draw()
    plt.close(fig)  # returned and shown once by Jupyter, not a second time by the inline backend
    return fig


def _bertviz():
    try:
        import bertviz
    except ImportError as error:  # installed with --no-deps by `make setup`
        from .assets import AssetsMissingError

        raise AssetsMissingError("bertviz is not installed: run `make setup` "
                                 "(or `pip install --no-deps bertviz==1.4.1`)") from error
    return bertviz


def _offline_view(enc: Encoded, decimals: int, title: str, render, fallback):
    """`render(bertviz, attention, sentence_b_start)` -> BertViz's returned HTML, made offline; or, when the
    assets or bertviz are missing, a note and the static figure `fallback()`."""
    from .assets import AssetsMissingError

    try:
        page = render(_bertviz(), *_bertviz_attention(enc, decimals))
        return offline_document(page.data, title)
    except AssetsMissingError as error:
        return _static_fallback(error, fallback)


def head_view(enc: Encoded, layer: int | None = None, heads=None, decimals: int = 3, include_layers=None,
              window: tuple[int, int] | None = None):
    """BertViz's head view of one input, offline: every head of one layer as lines from each token
    (left) to the tokens it attends to (right), one colour per head; a menu picks the layer and, for a
    pair, the part (A->A, B->B, A->B, B->A). `layer` (default the first shown), `heads` (ticked at the
    start, default all) and `include_layers` (in the menu, default all) are 1-indexed; `window=(start, stop)`
    shows tokens [start, stop) only. Returns a `BertVizView` (an iframe; Jupyter displays it); warns first when
    the page would pass WARN_ABOVE_MB.

    Without the npm assets (`make assets`) it shows a note and returns a static matplotlib Figure
    (`plot_lines` of the layer and the first head asked for). BertViz's neuron view is not offered:
    it needs BertViz's own model copies from the model hub and S3 (boto3), so it cannot run offline."""
    enc = _window(enc, window)
    n_layers, n_heads = enc.attn.shape[:2]
    layer0 = _zero_based(layer, n_layers, "layer")
    heads0 = _zero_based(heads, n_heads, "heads")
    layers0 = _zero_based(include_layers, n_layers, "include_layers")
    if layer0 and layers0 and layer0[0] not in layers0:
        raise ValueError(f"layer {layer} is not in include_layers {include_layers}: add it there, or leave layer out")
    first = 1 + (heads0[0] if heads0 else 0)
    _warn_if_large("head view", enc, len(layers0 or range(n_layers)), n_heads, decimals, "include_layers=[...]")
    document = _offline_view(
        enc, decimals, "BertViz head view",
        lambda bertviz, attention, b_start: bertviz.head_view(
            attention, list(enc.tokens), sentence_b_start=b_start, layer=layer0[0] if layer0 else None,
            heads=heads0, include_layers=layers0, html_action="return"),
        lambda: plot_lines(enc, 1 + (layer0 or layers0 or [0])[0], first, stop=min(enc.n_tokens, 64)).figure)
    if not isinstance(document, str):
        return document  # the static fallback figure
    height = int(40 + 30 + 22.5 * enc.n_tokens + 30)
    return BertVizView(document, height, "BertViz head view")


def model_view(enc: Encoded, include_layers=None, include_heads=None, display_mode: str = "light",
               decimals: int = 3, window: tuple[int, int] | None = None):
    """BertViz's model view of one input, offline: a thumbnail of every head (layers as rows, heads as
    columns, both 1-indexed in `include_layers` / `include_heads`, default all); clicking a thumbnail
    shows it large with its tokens; `window=(start, stop)` shows tokens [start, stop) only. Returns a
    `BertVizView` (an iframe; Jupyter displays it); warns first when the page would pass WARN_ABOVE_MB.

    Without the npm assets (`make assets`) it shows a note and returns a static matplotlib Figure
    (`plot_model_grid`). The neuron view is left out (see `head_view`)."""
    enc = _window(enc, window)
    n_layers, n_heads = enc.attn.shape[:2]
    layers0 = _zero_based(include_layers, n_layers, "include_layers")
    heads0 = _zero_based(include_heads, n_heads, "include_heads")
    _warn_if_large("model view", enc, len(layers0 or range(n_layers)), len(heads0 or range(n_heads)), decimals,
                   "include_layers=[...], include_heads=[...]")
    document = _offline_view(
        enc, decimals, "BertViz model view",
        lambda bertviz, attention, b_start: bertviz.model_view(
            attention, list(enc.tokens), sentence_b_start=b_start, display_mode=display_mode,
            include_layers=layers0, include_heads=heads0, html_action="return"),
        lambda: plot_model_grid(enc))
    if not isinstance(document, str):
        return document  # the static fallback figure
    shown_layers = len(layers0 or range(n_layers))
    thumbnail = enc.n_tokens * 7 * 12 / n_heads + 10  # BertViz sizes thumbnails by the model's head count
    detail = enc.n_tokens * 18 + 30 + 25
    height = int(40 + max(shown_layers * thumbnail + 38, detail) + 30)
    return BertVizView(document, height, "BertViz model view", min_width=990)  # BertViz draws it 970 px wide

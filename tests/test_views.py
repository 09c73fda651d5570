"""BertViz head / model views drawn offline (views.head_view, views.model_view) and the asset finder."""
from __future__ import annotations

import html
import json
import re
import warnings

import numpy as np
import pytest
from matplotlib.figure import Figure

from bertlook_utils import assets, views, viz
from builders import PAIR_TOKENS, make_encoded, random_row_stochastic

REMOTE = re.compile(r"""\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.I)


@pytest.fixture
def pair():
    """[CLS] the cat sat . [SEP] it ran , ! [SEP]: 2 layers x 3 heads of random attention."""
    rng = np.random.default_rng(0)
    return make_encoded(PAIR_TOKENS, random_row_stochastic(rng, (2, 3, len(PAIR_TOKENS), len(PAIR_TOKENS))))


def srcdoc(view) -> str:
    """The page inside the view's iframe, unescaped, checking that the iframe loads nothing by src."""
    markup = view._repr_html_()
    frames = re.findall(r"<iframe\b[^>]*>", markup)
    assert len(frames) == 1
    attributes = re.sub(r'srcdoc="[^"]*"', "", frames[0])
    assert not re.search(r"\ssrc\s*=", attributes), "the iframe must not load a URL"
    found = re.search(r'srcdoc="([^"]*)"', markup)
    assert found, "the iframe carries its page in srcdoc"
    return html.unescape(found.group(1))


def params_of(document: str) -> dict:
    line = re.search(r"const params = (.*?); // filled in by Python", document)
    assert line, "BertViz's params are filled in once"
    return json.loads(line.group(1))


@pytest.mark.parametrize("draw", [views.head_view, views.model_view], ids=["head_view", "model_view"])
def test_view_is_a_self_contained_iframe(pair, draw):
    view = draw(pair)
    document = srcdoc(view)
    assert document == view.document
    assert 'version="5.7.0"' in document  # d3, inlined
    assert "jQuery v2.2.4" in document and "RequireJS 2.3.6" in document
    assert 'define("d3"' in document and 'define("jquery"' in document
    assert not REMOTE.search(document), "nothing may be fetched by src/href"
    assert "cdnjs" not in document and "PYTHON_PARAMS" not in document
    assert "require.config({" not in document  # BertViz's CDN configuration is gone
    assert not re.search(r"""paths\s*:\s*\{[^}]*https?://""", document)
    for token in set(PAIR_TOKENS):
        assert json.dumps(token) in document
    # d3, jQuery, RequireJS, the two local modules, BertViz, the iframe sizer: no script ends early
    assert document.count("</script>") == 6


def test_head_view_params_are_one_indexed_and_once(pair):
    document = views.head_view(pair, layer=2, heads=[1, 3]).document
    params = params_of(document)
    assert params["include_layers"] == [1, 2]
    assert params["layer"] == 2
    assert params["heads"] == [0, 2]  # BertViz's head checkboxes are unlabelled array positions
    names = [d["name"] for d in params["attention"]]
    assert names == ["All", "Sentence A -> Sentence A", "Sentence B -> Sentence B", "Sentence A -> Sentence B",
                     "Sentence B -> Sentence A"]
    assert document.count('"attn":') == 5  # the attention appears once, not again in a comment
    np.testing.assert_allclose(np.array(params["attention"][0]["attn"]), pair.attn, atol=5e-4)
    a_to_b = np.array(params["attention"][3]["attn"])
    np.testing.assert_allclose(a_to_b, pair.attn[:, :, :6, 6:], atol=5e-4)  # sentence B starts at "it"


def test_model_view_labels_are_one_indexed(pair):
    params = params_of(views.model_view(pair, include_layers=[2], include_heads=[2, 3]).document)
    assert params["include_layers"] == [2] and params["include_heads"] == [2, 3]
    assert params["total_heads"] == 3
    assert np.array(params["attention"][0]["attn"]).shape == (1, 2, 11, 11)


def test_single_sentence_has_no_pair_menu():
    tokens = ["[CLS]", "a", "b", "[SEP]"]
    enc = make_encoded(tokens, np.stack([np.eye(4, dtype=np.float32)] * 2)[None])
    document = views.head_view(enc).document
    assert "Sentence A" not in document
    assert [d["name"] for d in params_of(document)["attention"]] == [None]


def test_views_are_deterministic_and_sized(pair):
    first, second = views.head_view(pair), views.head_view(pair)
    assert first._repr_html_() == second._repr_html_()  # saved notebook outputs do not churn
    assert re.search(r"height:\d+px", first._repr_html_())
    assert views.model_view(pair).height > 100


@pytest.mark.parametrize("kwargs", [{"layer": 0}, {"layer": 3}, {"heads": [4]}, {"heads": []}])
def test_bad_layer_or_head_raises(pair, kwargs):
    with pytest.raises(ValueError, match="1-indexed"):
        views.head_view(pair, **kwargs)


@pytest.mark.parametrize("layer, head", [(0, 1), (3, 1), (1, 0), (1, 4), (-1, 2)])
@pytest.mark.parametrize("draw", [viz.plot_head, viz.plot_lines])
def test_static_head_figures_reject_a_head_the_model_lacks(pair, draw, layer, head):
    """2 layers x 3 heads: layer 0 must not silently draw the last layer (index -1), head 4 is not there."""
    with pytest.raises(ValueError, match=r"(layer must be 1-2|head must be 1-3) \(1-indexed"):
        draw(pair, layer, head)
    np.testing.assert_array_equal(viz.head_map(pair, 2, 3), pair.attn[1, 2])


def test_cdn_markers_must_be_found():
    with pytest.raises(RuntimeError, match="BertViz's HTML changed"):
        views.offline_document("<div id='vis'></div><script>requirejs(['d3'], function () {});</script>")


@pytest.mark.parametrize("draw", [views.head_view, views.model_view], ids=["head_view", "model_view"])
def test_missing_assets_fall_back_to_matplotlib(pair, draw, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(assets.ENV_VAR, str(tmp_path))
    result = draw(pair)
    assert isinstance(result, Figure)
    assert result.axes
    message = capsys.readouterr().out
    assert "make assets" in message and "static" in message


def test_asset_finder(tmp_path, monkeypatch):
    monkeypatch.delenv(assets.ENV_VAR, raising=False)
    assert assets.assets_dir() == assets.REPO_ROOT / "node_modules"
    assert "5.7.0" in assets.read_asset("d3")
    assert assets.read_asset("d3") is assets.read_asset("d3")  # read once, cached
    monkeypatch.setenv(assets.ENV_VAR, str(assets.REPO_ROOT))  # a folder holding node_modules also works
    assert assets.assets_available()
    monkeypatch.setenv(assets.ENV_VAR, str(tmp_path))
    assert not assets.assets_available()
    with pytest.raises(assets.AssetsMissingError, match="make assets"):
        assets.read_asset("jquery")
    with pytest.raises(KeyError):
        assets.asset_path("vue")


def test_views_of_a_real_pair(encoder):
    enc = encoder.encode("The cat sat on the mat.", "It was tired.")
    for draw in (views.head_view, views.model_view):
        view = draw(enc)
        document = srcdoc(view)
        assert all(json.dumps(t) in document for t in enc.tokens)
        assert params_of(document)["include_layers"] == list(range(1, encoder.n_layers + 1))
        assert len(view._repr_html_()) < 2_000_000


# -- long inputs: the page's size, a warning above WARN_ABOVE_MB, and the ways out --------------------------------
def random_input(n: int, layers: int = 2, heads: int = 3):
    tokens = ["[CLS]", *(f"w{i}" for i in range(n - 2)), "[SEP]"]
    return make_encoded(tokens, random_row_stochastic(np.random.default_rng(n), (layers, heads, n, n)))


@pytest.mark.parametrize("draw, kwargs, layers, heads", [
    (views.head_view, {}, 2, 3), (views.head_view, {"include_layers": [2]}, 1, 3),
    (views.model_view, {}, 2, 3), (views.model_view, {"include_layers": [1], "include_heads": [2, 3]}, 1, 2)])
def test_page_size_estimate_grows_as_the_page_does(draw, kwargs, layers, heads):
    """Doubling the tokens adds what the estimate says (it bounds each weight's characters from above)."""
    short, long = (len(draw(random_input(n), **kwargs).document) for n in (30, 60))
    estimated = 1e6 * (views.page_megabytes(60, layers, heads) - views.page_megabytes(30, layers, heads))
    assert 0.8 * estimated < long - short <= estimated
    assert views.page_megabytes(60, layers, heads, pair=True) == 2 * views.page_megabytes(60, layers, heads)


def test_a_long_input_warns_with_a_way_out_that_fits(encoder):
    """A real model at 512 tokens passes the limit; one layer of a short enough window, as the warning says, fits."""
    n_layers, n_heads = encoder.n_layers, encoder.n_heads
    assert views.page_megabytes(512, n_layers, n_heads) > views.WARN_ABOVE_MB
    enc = random_input(60)
    limit = views.page_megabytes(enc.n_tokens, 2, 3) / 3  # a 60-token input of 2 x 3 heads is "long" here
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(views, "WARN_ABOVE_MB", limit)
        with pytest.warns(UserWarning, match=r"include_layers=\[\.\.\.\]\) or a window of at most \d+ tokens") as seen:
            views.head_view(enc)
        fits = int(re.search(r"window=\(0, (\d+)\)", str(seen[0].message)).group(1))
        assert views.page_megabytes(fits, 2, 3) <= limit < views.page_megabytes(fits + 1, 2, 3)
        with pytest.warns(UserWarning, match="include_heads"):
            views.model_view(enc)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            views.head_view(enc, window=(0, fits))  # the window the warning gives
            views.model_view(enc, include_layers=[1], include_heads=[1])  # a subset of a sixth of the maps


def test_short_inputs_do_not_warn_and_a_full_window_changes_nothing(pair):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert views.head_view(pair).document == views.head_view(pair, window=(0, pair.n_tokens)).document
        assert views.model_view(pair).document == views.model_view(pair, window=(0, pair.n_tokens)).document


def test_a_window_shows_its_tokens_and_their_attention(pair):
    inside_a = params_of(views.head_view(pair, window=(1, 5)).document)["attention"]
    assert [d["name"] for d in inside_a] == [None]  # one text: no pair menu
    assert inside_a[0]["left_text"] == PAIR_TOKENS[1:5]
    np.testing.assert_allclose(np.array(inside_a[0]["attn"]), pair.attn[:, :, 1:5, 1:5], atol=5e-4)
    across = params_of(views.model_view(pair, window=(3, 9)).document)["attention"]
    assert across[1]["left_text"] == PAIR_TOKENS[3:6] and across[2]["left_text"] == PAIR_TOKENS[6:9]  # A, B


@pytest.mark.parametrize("window", [(5, 5), (-1, 3), (0, 12), (0.0, 3), (3,), "0:3", (True, 4), (0, True)])
def test_a_bad_window_is_refused(pair, window):
    with pytest.raises(ValueError, match=r"window must be \(start, stop\).*0 <= start < stop <= 11"):
        views.head_view(pair, window=window)


def test_head_view_shows_only_the_layers_asked_for(pair):
    params = params_of(views.head_view(pair, include_layers=[2]).document)
    assert params["include_layers"] == [2] and np.array(params["attention"][0]["attn"]).shape[0] == 1
    with pytest.raises(ValueError, match="layer 1 is not in include_layers"):
        views.head_view(pair, layer=1, include_layers=[2])

"""The numbers the two papers report, as data for the "paper vs this run" tables (see shared/PAPERS.md).

Every number and claim of the papers that the kit shows is typed here once; `compare` turns them into
tables. Clark et al. 2019 used BERT-base (12 layers x 12 heads); Kovaleva et al. 2019 bert-base-uncased
fine-tuned on GLUE. Heads are 1-indexed "layer-head" strings, as in the papers.
"""
from __future__ import annotations

import pandas as pd

from ..analyses.coref import System
from ..analyses.probes import Model

CLARK = "Clark et al. 2019"
KOVALEVA = "Kovaleva et al. 2019"
PAPER_MODEL = "BERT-base (12 layers x 12 heads)"

# Clark et al. §3 (surface attention)
SURFACE = {
    "heads_prev_over_half": 4,
    "heads_prev_layers": (2, 4, 7, 8),
    "heads_next_over_half": 5,
    "heads_next_layers": (1, 2, 2, 3, 6),
    "sep_middle_layers": (6, 10),  # "over half" of the attention of layers 6-10 goes to [SEP]
    "sep_middle_share": "over half",
    "cls_middle_share": "small (the sink is [SEP])",
    "sep_sep": "> 90 %",
    "sink_by_depth": ("[CLS]", "[SEP]", '". ,"'),  # what early / middle / deep layers attend to most
    "sep_gradient": "becomes very small from layer 5 on",
    "cls_gradient": "not reported (BERT-base's sink is [SEP])",
}

# Clark et al. §3.3 (entropy, Fig 4)
ENTROPY = {
    "cls_entropy_last_layer": 3.89,  # nats
    "broad_heads": "some, in lower layers",  # putting <= 10 % on any single word
    "highest_entropy": "close to uniform in layer 1",
    "entropy_by_layer": "high in lower layers, lower in the middle",
    # §3.3: entropies from [CLS] alone are "very close" to Fig 4's layer averages, except in the last layer
    "cls_entropy_by_layer": "close to the layer's mean in most layers, high in the last",
}

# Clark et al. Figure 1: example heads and what they do
FIG1_HEADS = {"1-1": "broad attention", "3-1": "next token", "8-7": "[SEP]", "11-6": "periods"}

# Table 1: relation, head, accuracy %, baseline accuracy %, baseline offset, direction of the best head
TABLE1 = pd.DataFrame(
    [("all", "7-6", 34.5, 26.3, 1, "dep->head"), ("prep", "7-4", 66.7, 61.8, -1, "dep->head"),
     ("pobj", "9-6", 76.3, 34.6, -2, "head->dep"), ("det", "8-11", 94.3, 51.7, 1, "dep->head"),
     ("nn", "4-10", 70.4, 70.2, 1, "dep->head"), ("nsubj", "8-2", 58.5, 45.5, 1, "dep->head"),
     ("amod", "4-10", 75.6, 68.3, 1, "dep->head"), ("dobj", "8-10", 86.8, 40.0, -2, "dep->head"),
     ("advmod", "7-6", 48.8, 40.2, 1, "dep->head"), ("aux", "4-10", 81.1, 71.5, 1, "dep->head"),
     ("poss", "7-6", 80.5, 47.7, 1, "dep->head"), ("auxpass", "4-10", 82.5, 40.5, 1, "dep->head"),
     ("ccomp", "8-1", 48.8, 12.4, -2, "dep->head"), ("mark", "8-2", 50.7, 14.5, 2, "dep->head"),
     ("prt", "6-7", 99.1, 91.4, -1, "dep->head")],
    columns=["relation", "head", "accuracy", "baseline", "offset", "direction"])
# Clark et al.'s released Syntax_Analysis.ipynb (github.com/clarkkev/attention-analysis, commit b609cfc) prints the
# same head, offset and numbers as the paper's table for every row but these (accuracy %, baseline %); the paper's
# auxpass accuracy is the released offset baseline. `released_accuracy`, `released_baseline`: the released rows.
TABLE1_RELEASED = {"all": (34.7, 26.7), "auxpass": (94.1, 82.5)}
TABLE1["released_accuracy"], TABLE1["released_baseline"] = zip(*[
    TABLE1_RELEASED.get(r, (a, b)) for r, a, b in zip(TABLE1["relation"], TABLE1["accuracy"], TABLE1["baseline"])])
SD_TO_SPACY = {"nn": "compound"}  # Stanford Dependencies (Clark et al.) -> spaCy's ClearNLP labels


def table1_gains() -> pd.DataFrame:
    """Table 1's gains (points: best head minus best offset) per relation (SD names, the paper's order): `paper`
    (its table), `released` (its released notebook) and `differs`, whether the two disagree."""
    gains = pd.DataFrame({"relation": TABLE1["relation"], "paper": TABLE1["accuracy"] - TABLE1["baseline"],
                          "released": TABLE1["released_accuracy"] - TABLE1["released_baseline"]})
    return gains.assign(differs=(TABLE1[["accuracy", "baseline"]].to_numpy()
                                 != TABLE1[["released_accuracy", "released_baseline"]].to_numpy()).any(axis=1))


# Table 2: coreference antecedent selection accuracy %, head 5-4. The baselines' rows are the kit's baselines
# (`coref.System`, the same names). The neural row is Wiseman et al. (2015)'s system, as cited in Clark et al.'s
# Table 2. How the head's argmax was restricted is not stated (their coreference code was never released).
TABLE2_NEURAL_CITATION = "Wiseman et al. (2015)"
TABLE2_NEURAL = "neural coref, Wiseman et al. 2015 (not comparable)"
COREF_HEAD = "5-4"  # the paper's best coreference head
TABLE2_HEAD = f"BERT head {COREF_HEAD}"
TABLE2 = pd.DataFrame(
    [(System.NEAREST, 27, 29, 29, 19), (System.HEAD_WORD, 52, 47, 67, 40), (System.SIEVE, 69, 70, 77, 60),
     (TABLE2_NEURAL, 83, None, None, None), (TABLE2_HEAD, 65, 64, 73, 58)],
    columns=["system", "all", "pronoun", "proper", "nominal"])

# Table 3: attention probes, UAS % excluding punctuation; `ours`: the row of this run's Table 3 (`probes.Model`)
# that stands for it, where one does (spaCy md's vectors for GloVe)
TABLE3 = pd.DataFrame(
    [("structural probe (UUAS, not comparable)", 80, None), ("right-branching", 26, Model.RIGHT_BRANCHING),
     ("distances + GloVe", 58, Model.DISTANCES), ("random-init attention + GloVe", 30, Model.RANDOM_ATTENTION_VECTORS),
     ("attention only", 61, Model.ATTENTION), ("attention + GloVe", 77, Model.ATTENTION_VECTORS)],
    columns=["model", "uas", "ours"])

# Kovaleva et al. 2019
DARK_SECRETS = {
    "patterns": ("vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous"),
    "classifier_f1": 0.86,
    "labelled_maps": 400,  # about; a CNN, never released
    "heterogeneous_share": (0.32, 0.61),
    "heterogeneous_tasks": ("MRPC", "QQP"),  # where the share is lowest / highest
    "most_changed_layers": "the last two",
    "head_disabling_gain": (0.1, 1.2),  # points
    "head_disabling_tasks": ("STS-B", "MRPC"),
    "finetuned_vs_pretrained_gain": 35.9,  # points, average over tasks, against pre-trained BERT with no task training
    "layer_disabling_gain": 3.2,  # points: disabling layer 1 on RTE
    "layer_disabling_task": "RTE",
    # §4.2: FrameNet, 473 sentences of <= 12 tokens, frame elements <= 3 tokens;
    # 2 of 144 heads above the 99th percentile
    "framenet_sentences": 473,
    "framenet_scores": (0.201, 0.209),
    "framenet_heads_above": 2,
    # §4.4 and §4.5
    "stripes_from": "[CLS] and [SEP] (and punctuation), not nouns, verbs, pronouns, subjects, objects or negation",
    "cls_last_layer": "[SEP] for most tasks, nouns for some (STS-B, QNLI)",
    "special_after_finetuning": "attention to [SEP] and [CLS] shifts between layers",
}

# Vig's BertViz patterns
VIG_PATTERNS = (
    "attention to the next word",
    "attention to the previous word",
    "attention to identical or related words",
    "attention to identical or related words in the other sentence",
    "attention to other words predictive of the word",
    "attention to delimiter tokens",
)

# Clark et al. §6, Figure 6: heads embedded by metric MDS on summed Jensen-Shannon divergences
CLUSTERING = {
    "same_layer": "heads of the same layer often sit close together",
    "behaviour_close": "clear clusters",
    "behaviour_clusters": ("broad", "next token", "previous token", "[CLS]", "[SEP]", "punctuation"),
    "thresholds": "broad: entropy > 3.8 nats; prev/next: > 0.5; [CLS]/[SEP]/punctuation: > 0.6",
}

# Later work taught next to the two papers (notebook 10). Their findings in words, as the papers state them; no
# number of theirs is typed here, because none was checked against the papers themselves (see shared/PAPERS.md).
KOBAYASHI = "Kobayashi et al. 2020"
KOBAYASHI_2021 = "Kobayashi et al. 2021"
BRUNNER = "Brunner et al. 2020"
ABNAR = "Abnar & Zuidema 2020"
MICHEL = "Michel et al. 2019"
BUDHRAJA = "Budhraja et al. 2020"
LATER_WORK = {
    "norms": "[CLS], [SEP] and punctuation get large weights but small norms: BERT pays poor attention to "
             "special tokens",
    "mixing": "with the residual and LayerNorm, token-to-token mixing matters less than the weights suggest; the "
              "residual dominates",
    "identifiability": "for inputs longer than the head dimension the weights are not identifiable; effective "
                       "attention drops the part in the values' left null space",
    "rollout_flow": "rollout and flow correlate better than raw attention with blank-out (leave-one-out) and input "
                    "gradients; raw attention's correlation collapses in upper layers",
    "pruning": "a large percentage of heads can be removed at test time without significantly impacting "
               "performance; some layers can be reduced to one head",
    "random_pruning": "a large fraction of heads can be pruned at random with limited effect",
}

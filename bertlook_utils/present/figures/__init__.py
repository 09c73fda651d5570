"""The papers' figures and the notebooks' other plots, one function each, drawn from analysis results.

One module per paper, each listing its figures by notebook; every figure is also a name here
(`figures.entropy_by_layer`):

    clark     notebooks 02-07: Clark et al. (2019)
    kovaleva  notebooks 08-09: Kovaleva et al. (2019)
    later     notebook 10: the later work (Kobayashi, Brunner, Abnar & Zuidema, Michel)
    recent    notebook 11: from no-op to attention sinks (Gu, Sun, Kovaleva 2021, Xiao, Darcet, Bondarenko)
    causal    notebook 12: head patching (Chen et al.) and the context-mixing scoreboard (Kobayashi, Ferrando,
              Mohebbi)
    vectors   notebook 13: structural probes (Hewitt & Manning) and control tasks (Hewitt & Liang)
"""
from .causal import (  # noqa: F401
    deletion_curves, mixing_agreement, mixing_maps, patching_controls, patching_scan)
from .clark import (  # noqa: F401
    accuracy_by_rank, accuracy_grid, aligned_maps, antecedent_attention, attention_and_gradient, broad_definitions,
    dendrogram, entropy_by_layer, mds_map, permutation_tests, probe_curves, probe_weights, relation_head,
    relation_heads, sink_ablation, sink_gradient_by_head, table1, table2, value_norms, weight_against_accuracy)
from .kovaleva import (  # noqa: F401
    cls_by_type, confusions, disabling_scan, finetuning_loss, held_out_disabling, map_similarity, pattern_examples,
    pattern_features, pattern_gallery, pattern_share_estimates, pattern_shares, relation_scores, special_by_layer,
    stripe_types)
from .later import (  # noqa: F401
    context_mixing, effective_sinks, explanation_correlations, flow_seconds, head_importance, norm_shares,
    null_space_twin, pattern_removal, pruning_curves, rollout_and_flow, weight_against_norm, word_scores)
from .recent import (  # noqa: F401
    key_bias, massive_activations, no_op, position_or_content, registers, sink_interventions, sink_profile,
    toy_variants)
from .vectors import rank_sweep, structural_layers, structural_tree  # noqa: F401

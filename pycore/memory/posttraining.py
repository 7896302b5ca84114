"""Post-training recipes: what one step holds beside plain fine-tuning. DPO (Rafailov et al. 2023) as
huggingface/trl 1.16.0 runs it (trl/trainer/dpo_trainer.py, DPOTrainer):

- the batch counts preference pairs; DataCollatorForPreference stacks the chosen rows, then the rejected rows, so the
  policy's forward runs 2 × batch sequences (pycore.memory.setup.resolve doubles Workload.batch);
- ``_compute_loss`` runs the policy's forward, then, under ``torch.no_grad()``, the reference model's forward on the
  same batch (``self.ref_model``, or for a PEFT policy ``self.model`` inside ``use_adapter(model, None)``: its
  adapters disabled), then the sigmoid loss on the sequences' summed log-probabilities; the Trainer then runs
  backward and the optimizer step. The reference forward is its own moment: the policy's saved activations are alive
  and the reference adds its weights and the tensors of the layer it is computing, none saved;
- the reference model (DPOTrainer.__init__, L908-929): with no ``ref_model`` given, ``create_model_from_path`` loads
  a second copy in the policy's dtype; none for a PEFT policy or with ``precompute_ref_log_probs=True`` (DPOConfig
  default False). It is prepared with ``prepare_deepspeed`` (ZeRO-3 kept, any other stage turned to 0: whole on
  every GPU) or ``prepare_fsdp`` (sharded as the policy) (trl/models/utils.py);
- log-probabilities come from TRL's fused head (``add_fused_lm_head``, trl/trainer/utils.py L1548, added to the
  policy and the reference in DPOTrainer.__init__; called with ``fused_lm_head=True``), which runs
  ``ChunkedLogProbFunction`` (trl/kernels/chunked_logprob.py) and never holds the logits: its forward projects tiles
  of ``mm_buf`` [min(N, 4096) tokens, 32,768 vocabulary columns] in the compute dtype, folds each into seven fp32
  per-token statistics and saves the gathered hidden states (``hidden_states[mask]``, which replaces the plain head's
  saved input), log_z and the entropy; its backward allocates ``mm_buf`` again, the fp32 gradient of the hidden
  states [N, h] and, when the head is trained, an fp32 gradient of the head's weight [V, h], each cast to the
  parameters' dtype before it returns. N is the scored tokens: each row's labels shifted by one, so every token but
  one a row; on a GPU with Triton only the completion's are gathered, so counting the prompt's too is an upper bound
  (its share of these per-token tensors, and of the tile below 4,096 tokens).

Before the fused head (trl_head=full), DPO as huggingface/trl 1.14.2 runs it, the last release before 1.15.0 added
``add_fused_lm_head`` (trl/trainer/dpo_trainer.py, DPOTrainer._compute_loss L1341-1700):

- the policy's forward is the model's own, lm_head included: ``outputs.logits`` [2 × pairs, T, V] (L1366-1370), in
  the compute dtype, fp32 under autocast (accelerate's ``convert_outputs_to_fp32`` around the prepared model's
  forward copies the bf16 logits to fp32); ``selective_log_softmax_and_entropy(outputs.logits[..., :-1, :], ...)``
  (trl/trainer/utils.py L643-681) runs, on CUDA, TRL's Triton kernel (trl/kernels/logprob_entropy.py
  ``_LogProbEntropyFunction``, picked by utils.py L501-532), which returns the log-probs and entropy, saves the
  logits with two fp32 statistics a token (L165-192), and in backward allocates ``grad_logits = empty_like(logits)``
  (L210) beside the saved logits; the slice's backward then makes the gradient of the whole [2 × pairs, T, V];
- the reference's forward under ``torch.no_grad()`` returns its own logits (L1396-1434), scored by the same kernel;
  ``ref_outputs`` is referenced until ``_compute_loss`` returns, so they are alive while the loss's metrics copy the
  chosen rows' completion logits (``chosen_logits[chosen_mask.bool()]``, L1661-1667), the step's last moment before
  backward. TRL 1.13 and earlier (no kernel) save a log_softmax of every row as well: not modelled.

GRPO before the fused head (trl_head=full), as huggingface/trl 1.14.2 runs it (trl/trainer/grpo_trainer.py):
``_get_per_token_logps_and_entropies`` (L1380-1396) calls ``_full_logits_logps`` unless use_liger_kernel (GRPOConfig
default False), which runs ``batch_size`` rows at a time through the model's own forward with ``logits_to_keep =
completion + 1`` (L1562-1564), so its logits are [rows, C + 1, V] (C = max_completion_length), fp32 under autocast as
DPO's; it slices ``[:, :-1, :]`` and ``[:, -logits_to_keep:, :]`` (L1575-1579) into the same Triton kernel
(``selective_log_softmax_and_entropy`` in the update, L1583-1590; ``selective_log_softmax`` for the reference and the
old policy, L1592-1594), which saves the logits for backward and allocates the [rows, C, V] gradient there. The
reference (L2765-2797) and, under vLLM, the old policy (L2706-2721) score the completions under ``torch.no_grad()``
with ``batch_size = per_device_train_batch_size`` (L2567): their forward ends with those logits. ``_compute_loss``
(L3091-3362) keeps no logits itself and copies none for its metrics.

KTO (Ethayarajh et al. 2024) as TRL 1.16.0 runs it (trl/trainer/kto_trainer.py, KTOTrainer, loss_type "kto", KTOConfig's
default) is DPO's pattern with its own rows and one more pass:

- the batch counts unpaired examples, each labelled desirable or undesirable (DataCollatorForUnpairedPreference,
  L161-203): batch rows, not 2 × batch; beside them the KL rows (``KL_input_ids``: each prompt with the previous row's
  completion, ``add_kl_completion_ids`` L1146-1151), as many rows of about as many tokens;
- ``_compute_loss`` (L1370-1439) first runs ``_compute_kl_logps`` (L1337-1368): the policy's forward on the KL rows
  under ``torch.no_grad()`` (L1364-1365), before anything of the step is saved: its own moment, the weights, optimizer
  state and (under autocast) the weights' cached 16-bit copies beside one layer's working tensors or the fused head's;
  then the policy's forward with grad on the batch (L1404); then, under ``torch.no_grad()``, the reference on the KL
  rows and on the batch, one after the other, while the policy's activations are held (L1427-1439), as DPO's
  reference forward; none with ``precompute_ref_log_probs`` (ref_logps and ref_KL_logps come with the batch, L1418-1424),
  though the policy's KL forward still runs;
- the reference model (KTOTrainer.__init__ L918-940): a frozen copy in the policy's dtype, none for a PEFT policy (the
  policy inside ``use_adapter(model, None)``: adapters disabled, L1430-1435) or with precompute_ref_log_probs; the
  policy's fused head asks for log_probs, entropy and mean_logits, the reference's for log_probs (L967-972).
"""

from dataclasses import replace

from pycore.base.expr import Q, maximum, num, rnd, sym
from pycore.base.units import plural
from pycore.memory import parallel
from pycore.memory.activations import eager_working, holds_scores
from pycore.memory.model_states import STATIC, stored_weights
from pycore.memory.pools import Pool, make
from pycore.memory.rollout import OLD_PASS, REFERENCE_PASS, lower_first, old_policy_pass, with_rollout
from pycore.memory.setup import Setup

REFERENCE = "reference forward"
# where each trainer makes its reference model and runs its reference pass (huggingface/trl 1.16.0)
INIT = {"dpo": "DPOTrainer.__init__ L908-929", "grpo": "GRPOTrainer.__init__ (grpo_trainer.py L984-1003, beta > 0)",
        "kto": "KTOTrainer.__init__ (kto_trainer.py L918-940)"}
PASS = {"dpo": "DPOTrainer._compute_loss: the reference runs under torch.no_grad() after the policy's forward",
        "grpo": "GRPOTrainer._generate_and_score_completions (L2711-2736): the reference scores the completions under "
                "torch.no_grad() before the update, a micro-batch of rows at a time, with no activation of the policy "
                "saved",
        "kto": "KTOTrainer._compute_loss (kto_trainer.py L1427-1439): after the policy's forward the reference runs "
               "under torch.no_grad() on the KL rows (_compute_kl_logps), then on the batch, one forward at a time"}
METRICS = "log-prob metrics"  # DPO with trl_head=full: the loss's metrics copy logits, both models' logits alive
FULL_SOURCE = "huggingface/trl 1.14.2 "    # the last release before add_fused_lm_head (TRL 1.15.0)
KL_FORWARD = "KL forward"       # KTO: the policy's no_grad forward on the KL rows, before its forward with grad
SAVED_THROUGH = ("forward end", "backward start")   # a pool live in both is live during the reference forward
TOKEN_TILE = 4096           # trl/kernels/chunked_logprob.py TOKEN_CHUNK_SIZE
VOCAB_TILE = 32768          # trl/trainer/utils.py _CHUNKED_LOGPROB_CHUNK_SIZE
SOURCE = "huggingface/trl 1.16.0 "
HEAD_SOURCE = SOURCE + "trl/kernels/chunked_logprob.py ChunkedLogProbFunction (the fused head add_fused_lm_head adds)"
HEAD_SYMBOLS = "T = tokens; h = hidden size; V = vocabulary; e = bytes of the compute dtype"
SCORED = {"dpo": "N = scored tokens (every token of the 2 × pairs sequences but each one's last); ",
          "grpo": "N = scored tokens (the completions' tokens, batch × max_completion_length); ",
          "kto": "N = scored tokens (every token of the batch's rows but each one's last; the KL rows as many); "}


def head_symbols(setup: Setup) -> str:
    """The head's symbols, N as the recipe scores it."""
    return SCORED[setup.finetune.recipe] + HEAD_SYMBOLS


def has_reference_forward(setup: Setup) -> bool:
    """Whether the step runs a reference forward: a frozen copy, or the policy with its adapters disabled."""
    return setup.finetune.recipe in ("dpo", "grpo", "kto") and setup.finetune.reference in ("copy", "adapters-off")


def scored(setup: Setup, tokens: int) -> int:
    """N: the tokens the head scores: under DPO every token but each row's last (labels[:, 1:]); under GRPO the
    completion's (GRPOTrainer._get_per_token_logps_and_entropies: labels[:, :-logits_to_keep] = -100)."""
    if setup.finetune.recipe == "grpo":
        return max(setup.workload.batch * setup.finetune.completion, 1)
    return max(tokens - setup.workload.batch, 1)


def _statistics(setup: Setup) -> int:
    """fp32 values per scored token of the head's forward: seven running statistics, log_z and the log-prob, and one
    per extra output (DPOTrainer asks for entropy, mean logits and top-1; KTOTrainer for entropy and mean logits,
    kto_trainer.py L967-970; GRPOTrainer for entropy)."""
    return 11 if setup.finetune.recipe in ("dpo", "kto") else 10


def _tile(setup: Setup, tokens: int) -> Q:
    """``mm_buf``: one projection tile, allocated whole even where the vocabulary is narrower."""
    return sym("n", min(scored(setup, tokens), TOKEN_TILE)) * sym("c", VOCAB_TILE) * num(setup.policy.bytes("act"))


def _hidden_bytes(setup: Setup) -> float:
    """Bytes per element of the backbone's last hidden states: the residual stream's, fp32 under autocast."""
    return 4 if setup.policy.autocast else setup.policy.bytes("act")


def _casts(setup: Setup, tokens: int) -> Q:
    """Under autocast the head casts, a tile at a time, its weight's rows and the hidden states to the compute dtype
    (``weight[start:end].to(compute_dtype)``, ``hidden[...].to(compute_dtype)``); nothing to cast otherwise."""
    if not setup.policy.autocast:
        return num(0)
    columns = sym("c", min(setup.arch.output_width, VOCAB_TILE))
    return (columns + sym("n", min(scored(setup, tokens), TOKEN_TILE))) * sym("h", setup.arch.hidden) * num(2)


def full_head(setup: Setup) -> bool:
    """Whether the policy and the reference return their full logits (trl_head=full: TRL 1.14.2 and earlier)."""
    return setup.finetune.recipe in ("dpo", "grpo") and setup.finetune.trl_head == "full"


def logit_tokens(setup: Setup, tokens: int) -> int:
    """T: the positions a full head's forward returns logits for: every token under DPO; under GRPO each row's
    completion and one more (TRL 1.14.2 grpo_trainer.py L1562-1564: logits_to_keep = completion + 1)."""
    if setup.finetune.recipe == "grpo":
        return setup.workload.batch * (setup.finetune.completion + 1)
    return tokens


def _logit_bytes(setup: Setup) -> int:
    """The logits' bytes per element: fp32 under autocast (accelerate's convert_outputs_to_fp32), else the compute
    dtype's."""
    return 4 if setup.policy.autocast else int(setup.policy.bytes("act"))


FULL_SYMBOLS = {"dpo": "T = tokens (2 × pairs sequences); N = scored tokens (every token but each row's last); "
                       "V = vocabulary",
                "grpo": "T = positions with logits, batch × (max_completion_length + 1) (logits_to_keep + 1); N = scored "
                        "tokens, batch × max_completion_length; V = vocabulary"}
# where TRL 1.14.2 takes the policy's logits and hands them to its log-prob kernel
FULL_LOGITS = {"dpo": "trl/trainer/dpo_trainer.py L1366-1370: outputs.logits of the model's own lm_head",
               "grpo": "trl/trainer/grpo_trainer.py L1562-1590: outputs.logits of the model's own lm_head with "
                       "logits_to_keep = completion + 1"}


def full_head_pools(setup: Setup, tokens: int) -> "list[Pool]":
    """TRL 1.14.2's head: the policy's full logits, held from its forward to their gradient, the kernel's per-token
    statistics, the logits' gradient and, under autocast, the bf16 logits before their fp32 copy."""
    T, V = sym("T", logit_tokens(setup, tokens)), sym("V", setup.arch.output_width)
    N = sym("N", scored(setup, tokens))
    el = _logit_bytes(setup)
    name = "fp32" if el == 4 else setup.policy.act
    kernel = FULL_SOURCE + "trl/kernels/logprob_entropy.py _LogProbEntropyFunction"
    symbols = FULL_SYMBOLS[setup.finetune.recipe]
    pools = [make("logits", f"Logits ({name}), saved for backward", T * V * num(el),
                  SAVED_THROUGH, FULL_SOURCE + FULL_LOGITS[setup.finetune.recipe] + " (fp32 under autocast: "
                  "accelerate's convert_outputs_to_fp32), sliced [..., :-1, :] into selective_log_softmax_and_entropy, "
                  "whose kernel saves them (logprob_entropy.py L192)", symbols, group="logits_and_loss"),
             make("log_probs", "Per-token log-probs, entropy and the kernel's two saved statistics (fp32)",
                  N * num(4 * 4), SAVED_THROUGH, kernel + ".forward L165-168: logprobs, entropy, log_z and "
                  "expected_logit, one fp32 value a token each", symbols, group="logits_and_loss"),
             make("loss_gradients", "Gradient of the logits (the kernel's, then the slice's)", N * V * num(el),
                  ("backward start",), kernel + ".backward L210: grad_logits = torch.empty_like(logits) beside the "
                  "saved logits; the slice's backward then fills a gradient of the whole [rows, T, V] as they are "
                  "freed", symbols, group="logits_and_loss")]
    if setup.policy.autocast:
        pools.append(make("logits_autocast", "Logits in bf16 before their fp32 copy", T * V * num(2),
                          ("forward end",), "accelerate 1.15.0 convert_outputs_to_fp32 (Accelerator.prepare_model "
                          "under native amp): .float() of the autocast forward's bf16 logits", symbols,
                          group="logits_and_loss"))
    return pools


def metrics_pools(setup: Setup, tokens: int) -> "list[Pool]":
    """TRL 1.14.2's loss metrics: the chosen rows' completion logits copied by a boolean mask (then their mean), and
    the reference's logits, still referenced until _compute_loss returns."""
    T, V, N = sym("T", tokens), sym("V", setup.arch.output_width), sym("N", scored(setup, tokens))
    el = num(_logit_bytes(setup))
    name = "fp32" if _logit_bytes(setup) == 4 else setup.policy.act
    pools = [make("logit_metrics", "Chosen rows' logits copied for the logged mean", rnd(N * el * V / num(2)),
                  (METRICS,), FULL_SOURCE + "trl/trainer/dpo_trainer.py L1661-1667: chosen_logits[chosen_mask.bool()]"
                  ".mean(-1), the chosen half of the scored tokens (the prompt's too: an upper bound)",
                  FULL_SYMBOLS["dpo"], group="logits_and_loss")]
    if has_reference_forward(setup):
        pools.append(make("reference_logits", f"Reference logits ({name})", T * V * el, (METRICS,),
                          FULL_SOURCE + "trl/trainer/dpo_trainer.py L1396-1434: "
                          "ref_outputs.logits under torch.no_grad(), referenced until _compute_loss returns (in the reference "
                          "forward's own pool while it runs)",
                          FULL_SYMBOLS["dpo"], group="reference_model"))
    return pools


def head_pools(setup: Setup, tokens: int) -> "list[Pool]":
    """The policy's fused head, in place of the logits and cross-entropy pools of plain fine-tuning (or, with
    trl_head=full, TRL 1.14.2's full logits)."""
    if full_head(setup):
        return full_head_pools(setup, tokens)
    arch, policy = setup.arch, setup.policy
    N, h, eh = sym("N", scored(setup, tokens)), sym("h", arch.hidden), _hidden_bytes(setup)
    tile_symbols = "n = tokens per tile, min(N, 4,096); c = vocabulary columns per tile (32,768; fewer with autocast's " \
                   "weight-row copy where the vocabulary is narrower)"
    forward = _tile(setup, tokens) + sym("T", tokens) * h * num(eh) + N * num(4 * _statistics(setup)) + \
        _casts(setup, tokens)
    pools = [make("fused_head_forward", "Fused log-prob head: tile, last hidden states, per-token statistics",
                  rnd(forward), ("forward end",),
                  HEAD_SOURCE + ".forward: mm_buf, the backbone's last_hidden_state, seven fp32 statistics and the "
                  "log-prob, entropy, mean-logit and top-1 outputs of each token; under autocast the tile's weight rows "
                  "and hidden states cast to bf16", tile_symbols + "; " + head_symbols(setup), group="logits_and_loss")]
    # each gradient accumulates in fp32 and is cast to its tensor's dtype (no copy where that is fp32)
    backward = _tile(setup, tokens) + N * h * num(4 + (eh if eh != 4 else 0)) + _casts(setup, tokens)
    what = "mm_buf, the hidden states' gradient in fp32 and cast"
    if not setup.finetune.adapters:
        weight = policy.bytes("weight")
        backward = backward + sym("V", arch.output_width) * h * num(4 + (weight if weight != 4 else 0))
        what += "; the head weight's gradient accumulated in fp32, then cast"
    pools.append(make("fused_head_backward", "Fused log-prob head's backward", rnd(backward), ("backward start",),
                      HEAD_SOURCE + ".backward: " + what, tile_symbols + "; " + head_symbols(setup),
                      group="logits_and_loss"))
    # The gathered hidden states are saved in the residual stream's dtype; pycore.memory.activations counts the final
    # norm's output as the plain head's input, autocast's 16-bit copy of it: under autocast 2 bytes more a token.
    saved = N * num(4 * 4) + (N * h * num(eh - 2) if policy.autocast else num(0))
    pools.append(make("log_probs", "Per-token log-probabilities and statistics (fp32)" +
                      (", the gathered hidden states in fp32" if policy.autocast else ""), rnd(saved),
                      SAVED_THROUGH + ("backward, first layer",),
                      HEAD_SOURCE + ": log_z and entropy saved for backward, the outputs scattered to the batch's shape",
                      head_symbols(setup), group="logits_and_loss"))
    return pools


def _layer_working(setup: Setup, tokens: int) -> Q:
    """Bytes one decoder layer holds while it computes under no_grad: the residual stream, the norm's fp32 working
    copy and the MLP's widest tensors (pycore.memory.activations.per_token's working width)."""
    arch, e, lay = setup.arch, setup.policy.bytes("act"), setup.layout
    width = max(arch.ffn * arch.routed_per_token, arch.q_dim) // lay.tp
    per_token = 3 * e * width + (2 * e + 4) * arch.hidden
    if holds_scores(arch, setup.workload.attention, setup.workload.seq):
        per_token += eager_working(arch, e) * arch.heads // lay.tp * setup.workload.seq
    return sym("w", per_token) * sym("T", tokens)


def reference_pools(setup: Setup, stage: parallel.Stage, tokens: int, moment: str = REFERENCE) -> "list[Pool]":
    """The reference model's weights (a frozen copy) and what its forward holds, under no_grad, in ``moment``."""
    if not has_reference_forward(setup):
        return []
    lay = setup.layout
    sharded3 = lay.zero == 3 and lay.shard_group > 1
    pools = []
    if setup.finetune.reference == "copy":
        weights = stored_weights(setup, stage)
        if sharded3:
            weights = rnd(weights / sym("g", lay.shard_group))
        # prepare_deepspeed keeps a ZeRO-3 config's offload_param (it drops only offload_optimizer)
        offloaded = lay.offload == "params" and sharded3
        pools.append(make("reference_weights", "Reference model weights (" + ("in CPU memory" if offloaded else
                                                                               setup.policy.weight) + ")",
                          weights, () if offloaded else STATIC + (moment,),
                          SOURCE + INIT[setup.finetune.recipe] + ": create_model_from_path in the policy's dtype, frozen; "
                          "prepare_deepspeed keeps ZeRO-3 (and its offload_param), prepare_fsdp shards it as the policy",
                          "S = parameters on this GPU; g = GPUs one shard spans", group="reference_model"))
    head = "its full logits" if full_head(setup) else "the fused head"
    pools.append(make("reference_forward", f"Reference forward under no_grad (one layer, or {head})",
                      no_grad_working(setup, stage, tokens), (moment,), SOURCE + PASS[setup.finetune.recipe] +
                      ", so only the layer it computes holds tensors (its residual stream, norm and MLP), then its "
                      + (FULL_HEAD_END if full_head(setup) else "fused head (mm_buf, the last hidden states and their "
                         "gathered copy)"), WORKING_SYMBOLS +
                      head_symbols(setup), group="reference_model"))
    return pools


FULL_HEAD_END = "logits (" + FULL_SOURCE + "trl_head=full: T × V in the compute dtype, under autocast fp32 beside " \
                "their bf16 original)"
WORKING_SYMBOLS = "w = working bytes per token of one layer; T = tokens per micro-batch; Pl = parameters of the " \
                  "largest layer (gathered under ZeRO-3/FSDP, dequantized under QLoRA); "


def no_grad_working(setup: Setup, stage: parallel.Stage, tokens: int) -> Q:
    """What a forward under no_grad holds at its widest: one layer's working tensors, or the fused head's tile with
    the last hidden states and their gathered copy."""
    working = _layer_working(setup, tokens)
    if setup.quant != "none" and setup.finetune.adapters:
        # bitsandbytes dequantizes one layer's weights to compute in 16 bit, as in the policy's own passes
        working = working + sym("Pl", stage.largest_layer) * 2
    if setup.layout.zero == 3 and setup.layout.shard_group > 1:
        working = working + sym("Pl", stage.largest_layer) * num(setup.policy.bytes("gather"))
    if stage.has_head and full_head(setup):
        # its forward ends with its logits, and under autocast their bf16 original beside the fp32 copy
        logits = sym("T", logit_tokens(setup, tokens)) * sym("V", setup.arch.output_width) * \
            num(_logit_bytes(setup) + (2 if setup.policy.autocast else 0))
        working = maximum(working, logits)
    elif stage.has_head:
        h, eh = sym("h", setup.arch.hidden), num(_hidden_bytes(setup))
        head = _tile(setup, tokens) + (sym("T", tokens) + sym("N", scored(setup, tokens))) * h * eh + _casts(setup, tokens)
        working = maximum(working, head)
    return rnd(working)


def with_reference_moment(pools: "list[Pool]", per_microbatch: "tuple[str, ...]") -> \
        "tuple[list[Pool], tuple[str, ...]]":
    """The reference forward as a moment after the policy's forward: every pool live both at the forward's end and at
    the start of backward (weights, optimizer state, saved activations) is live in it too."""
    return _with_moment(pools, per_microbatch, REFERENCE, "forward end")


def _with_moment(pools: "list[Pool]", per_microbatch: "tuple[str, ...]", moment: str, after: str) -> \
        "tuple[list[Pool], tuple[str, ...]]":
    """``moment`` right after ``after``, with every pool live both at the forward's end and at backward's start."""
    out = [replace(p, moments=p.moments + (moment,)) if all(m in p.moments for m in SAVED_THROUGH) and
           moment not in p.moments else p for p in pools]
    at = per_microbatch.index(after) + 1
    return out, per_microbatch[:at] + (moment,) + per_microbatch[at:]


def dpo_step(setup: Setup, stage: parallel.Stage, pools: "list[Pool]", tokens: int,
             per_microbatch: "tuple[str, ...]") -> "tuple[list[Pool], tuple[str, ...]]":
    """A DPO step's pools named by model (the policy's, the reference's), with the reference forward's pools and
    moment where the step runs one."""
    pools = [replace(p, label="Policy " + lower_first(p.label)) for p in _autocast_copies(setup, stage, pools)]
    after = "forward end"
    if has_reference_forward(setup):
        pools, per_microbatch = with_reference_moment(pools + reference_pools(setup, stage, tokens), per_microbatch)
        after = REFERENCE
    if not (full_head(setup) and stage.has_head):
        return pools, per_microbatch
    # TRL 1.14.2: the loss's metrics copy logits after the reference forward, both models' logits alive
    return _with_moment(pools + metrics_pools(setup, tokens), per_microbatch, METRICS, after)


def kto_step(setup: Setup, stage: parallel.Stage, pools: "list[Pool]", tokens: int,
             per_microbatch: "tuple[str, ...]") -> "tuple[list[Pool], tuple[str, ...]]":
    """A KTO step: DPO's pools and reference moment over the batch's rows, and before the policy's forward the KL
    forward, a no_grad pass of the policy over the KL rows (as many tokens) beside what the whole step holds and, under
    autocast, the weights' 16-bit copies autocast caches from that pass on."""
    pools, per_microbatch = dpo_step(setup, stage, pools, tokens, per_microbatch)
    pools = [replace(p, moments=p.moments + (KL_FORWARD,)) if (all(m in p.moments for m in STATIC) or
             p.key == "autocast_weight_copies" and p.moments and
             not setup.finetune.adapters) and KL_FORWARD not in p.moments else p for p in pools]
    pools.append(make("kl_forward", "Policy KL forward under no_grad (one layer, or the fused head)",
                      no_grad_working(setup, stage, tokens), (KL_FORWARD,), SOURCE + "KTOTrainer._compute_kl_logps "
                      "(kto_trainer.py L1337-1368, called first in _compute_loss L1379): the policy's forward on the KL "
                      "rows under torch.no_grad(), so only the layer it computes holds tensors, then its fused head; the "
                      "KL rows' log-probs (one per row) are all it keeps", WORKING_SYMBOLS + head_symbols(setup)))
    at = per_microbatch.index("forward end")
    return pools, per_microbatch[:at] + (KL_FORWARD,) + per_microbatch[at:]


def preference_step(setup: Setup, stage: parallel.Stage, pools: "list[Pool]", tokens: int,
                    per_microbatch: "tuple[str, ...]") -> "tuple[list[Pool], tuple[str, ...]]":
    """A DPO or a KTO step (kto_step adds the KL forward to DPO's)."""
    step = kto_step if setup.finetune.recipe == "kto" else dpo_step
    return step(setup, stage, pools, tokens, per_microbatch)


def notes(setup: Setup) -> "list[str]":
    """What a KTO estimate assumes, and the batch TRL would refuse."""
    if setup.finetune.recipe != "kto":
        return []
    rows = setup.workload.batch
    out = [f"KTO: batch counts unpaired examples (TRL's per_device_train_batch_size), {plural(rows, 'row')} of "
           f"{setup.workload.seq:,} tokens, and as many KL rows (each prompt with another row's completion) that the "
           "policy, then the reference, score under no_grad; loss_type kto (KTOConfig's default; apo_zero_unpaired "
           "runs no KL rows, so this counts one no_grad pass more than it holds)"]
    if rows < 2:
        out.append("TRL 1.16 refuses this KTO setup: the per-device batch must be > 1 for the KL term "
                   "(KTOTrainer.__init__, kto_trainer.py L844-847); the memory per GPU is estimated all the same")
    return out


def grpo_step(setup: Setup, stage: parallel.Stage, pools: "list[Pool]", tokens: int) -> \
        "tuple[list[Pool], tuple[str, ...]]":
    """A GRPO step's pools named by model, and the moments before its update (pycore.memory.rollout): the rollout,
    then the reference's log-probs where beta > 0, each beside the pools live through the whole step."""
    pools = [replace(p, label="Policy " + lower_first(p.label)) for p in _autocast_copies(setup, stage, pools)]
    pools = pools + reference_pools(setup, stage, tokens, REFERENCE_PASS)
    pools, before = with_rollout(setup, stage, pools)
    if old_policy_pass(setup):
        pools = _with_pass(pools, OLD_PASS) + [make(
            "old_policy_forward", "Old-policy log-probs under no_grad (one layer, or "
            + ("its full logits)" if full_head(setup) else "the fused head)"),
            no_grad_working(setup, stage, tokens), (OLD_PASS,), SOURCE + "GRPOTrainer._generate_and_score_completions "
            "L2642-2657: under vLLM the policy scores the completions under torch.no_grad() for the importance "
            "sampling correction, a micro-batch of rows at a time", WORKING_SYMBOLS + head_symbols(setup))]
        before += (OLD_PASS,)
    if has_reference_forward(setup):
        pools = _with_pass(pools, REFERENCE_PASS)
        before += (REFERENCE_PASS,)
    return pools, before


def _with_pass(pools: "list[Pool]", moment: str) -> "list[Pool]":
    """Every pool live through the whole step is live in a no_grad pass before the update."""
    return [replace(p, moments=p.moments + (moment,)) if all(m in p.moments for m in STATIC) and moment not in p.moments
            else p for p in pools]


def _autocast_copies(setup: Setup, stage: parallel.Stage, pools: "list[Pool]") -> "list[Pool]":
    """Autocast's 16-bit weight copies as a DPO step keeps them: none of the head (the fused head casts its weight a
    tile at a time); under full recompute the layers' copies live in autocast's cache until the forward ends (the
    reference forward runs inside it) and nothing saves them for backward, and a frozen base is never cached. With
    trl_head=full the model's lm_head casts its whole weight and autograd saves that copy until the head's backward,
    outside any checkpointed layer and whether or not the head is trained: its own pool."""
    out = []
    head = sym("V", setup.arch.output_width) * sym("h", setup.arch.hidden) * num(2)
    for p in pools:
        if p.key == "autocast_weight_copies" and setup.layout.zero < 3:
            quantity = p.quantity - (head if stage.has_head else num(0))
            moments = p.moments
            if setup.workload.recompute == "full":
                moments = () if setup.finetune.adapters else ("forward end",) + \
                    ((REFERENCE,) if setup.finetune.recipe in ("dpo", "kto") else ()) + \
                    ((KL_FORWARD,) if setup.finetune.recipe == "kto" else ())
            p = make(p.key, p.label, quantity, moments, p.source + "; the head's apart (TRL's fused head casts its "
                     "weight a tile at a time; TRL 1.14.2's lm_head copy is its own pool)",
                     p.symbols + "; V = vocabulary; h = hidden size", p.group)
            if stage.has_head and full_head(setup):
                out.append(make("head_autocast_copy", "Autocast bf16 copy of the lm_head weight, saved for backward",
                                head, SAVED_THROUGH, "torch.autocast casts the lm_head weight for the model's own head "
                                "(" + FULL_SOURCE + "dpo_trainer.py L1366) and its matmul saves the copy for backward",
                                "V = vocabulary; h = hidden size"))
        out.append(p)
    return out

"""PPO (Schulman et al. 2017) for language models as huggingface/trl 0.25.1's PPOTrainer runs it
(trl/trainer/ppo_trainer.py, PPOTrainer.train L433-765; trl/trainer/utils.py for the helpers it calls). TRL moved it
to ``trl.experimental.ppo`` after 0.25.1 (huggingface/trl#4482) and removed it altogether (huggingface/trl#7020): TRL
1.16 has no PPOTrainer, so 0.25.1 is the one followed here.

Four models, all on every GPU as TRL places them (PPOTrainer.__init__ L313-396): the policy and the value model,
trained together inside ``PolicyAndValueWrapper`` (one ``accelerator.prepare``, one optimizer over both); the
reference, ``create_reference_model``'s frozen copy of a full policy (none for a PEFT policy: its adapters are
disabled, ``null_ref_context``); the reward model, frozen. Under DeepSpeed ``prepare_deepspeed`` (trl/trainer/utils.py
L1068-1123) keeps a ZeRO-3 config for the frozen two (sharded as the policy) and turns any other stage off (whole);
under FSDP or plain data parallelism they are ``.to(device)``, whole on every GPU. The value and the reward model
are the policy's architecture with a one-output score head (``AutoModelForSequenceClassification(num_labels=1)``, as
trl/examples/scripts/ppo/ppo.py loads them from one path): pycore has no input for another.

One update (the estimate's step), its phases as moments:

- rollout: ``batch_generation`` (utils.py L1188-1218) generates ``local_batch_size`` = batch × micro-batches rows,
  ``local_rollout_forward_batch_size`` at a time, ``response_length`` new tokens each, through the unwrapped policy
  (no autocast: in its weights' dtype). ``generate(..., output_scores=True)`` keeps every step's fp32 scores, which
  TRL stacks per chunk and then pads into one [rows, response_length, vocabulary] fp32 tensor, ``logitss``: no ``del``
  names it, so it lives through the whole update and into the next rollout's generation;
- per chunk, under no_grad: the reference's forward with every hidden state and the full logits (``forward``, utils.py
  L1036-1065), then ``selective_log_softmax`` one row at a time; the value model's and the reward model's
  ``get_reward`` (utils.py L986-1033: the backbone with every hidden state, then the score head);
- the PPO epochs (PPOConfig.num_ppo_epochs, 4) over ``num_mini_batches`` mini-batches of micro-batches of ``batch``
  rows: ``forward(model, ...)`` runs the value backbone and the policy (full logits over prompt + response, every
  hidden state returned), the clipped policy and value losses, backward, ``optimizer.step()`` and ``zero_grad()``
  (acting on the last micro-batch of each accumulation only, accelerate's GradientState), then entropy statistics
  under no_grad (``softmax`` of the response's logits). The micro-batch's outputs are deleted only at the end of its
  mini-batch (L696-703), so a later micro-batch of the same mini-batch runs beside the previous one's.

Under bf16=True (OnPolicyConfig's default) accelerate wraps only PolicyAndValueWrapper's forward in autocast: the
update computes in bf16 with its logits returned in fp32 (``convert_outputs_to_fp32``); the rollout and scoring passes
call the inner models and compute in their weights' dtype. Checked against validation/measure_ppo.py.
"""

from dataclasses import replace

from pycore.base.expr import Q, num, sym
from pycore.memory import activations as act
from pycore.memory import parallel, vision_activations
from pycore.memory.accumulation import later
from pycore.memory.model_states import STATIC, model_states, stored_weights
from pycore.memory.pools import Pool, make
from pycore.memory.precision import POLICIES
from pycore.memory.rollout import lower_first
from pycore.memory.serving import kv_cache_bytes, serving
from pycore.memory.setup import Setup
from pycore.model.architecture import Architecture, count_parameters
from pycore.model.catalog import gpus as gpu_catalog

PREFILL, GENERATE, PADDED = "rollout, prefill", "rollout, generate", "rollout, logits padded"
REFERENCE, VALUE, REWARD = "reference log-probs", "value scores", "reward scores"
STATISTICS = "entropy statistics"
LOSS = "losses"             # after the forward: the log-probs, the clipped losses
BEFORE = (PREFILL, GENERATE, PADDED, REFERENCE, VALUE, REWARD)
SCORING = (REFERENCE, VALUE, REWARD)
SOURCE = "huggingface/trl 0.25.1 trl/trainer/ppo_trainer.py "
UTILS = "huggingface/trl 0.25.1 trl/trainer/utils.py "
RENAMED = {"prefill": PREFILL, "decode": GENERATE}
UPDATE = ("forward end", LOSS, "backward start", "backward, first layer", "backward, last layer", "backward end",
          STATISTICS)
ROLLOUT_SYMBOLS = "B = rows rolled out (batch × micro-batches); R = response_length; V = vocabulary"
CHUNK_SYMBOLS = "c = rows per chunk (local_rollout_forward_batch_size); T = prompt + response tokens; L = layers; " \
    "h = hidden size; e = bytes of the weights' dtype"


def rows(setup: Setup) -> int:
    """local_batch_size: the rows one update rolls out, per_device_train_batch_size × gradient_accumulation_steps."""
    return setup.workload.batch * setup.layout.microbatches


def chunks(setup: Setup) -> "tuple[int, int]":
    """(rows of a full chunk, rows of the last chunk): batch_generation and the scoring loop take
    local_rollout_forward_batch_size rows at a time."""
    total, chunk = rows(setup), min(setup.finetune.rollout_chunk, rows(setup))
    return chunk, total - chunk * ((total - 1) // chunk)


def value_setup(setup: Setup, reward: bool = False) -> Setup:
    """The value model (or with ``reward`` the reward model): its backbone (value_model / reward_model, else the
    policy's architecture) as a one-label sequence classifier, in the policy's dtypes; the value model is trained in
    full (PEFT wraps the policy only, L252) and PPOTrainer never turns on its checkpointing."""
    base = (setup.finetune.reward_arch if reward else setup.finetune.value_arch) or setup.arch
    # its score head is a [1, h] matrix of its own: a tied checkpoint's embedding is only looked up (never cast or
    # multiplied by), so it is not among the matrices autocast casts
    arch = replace(base, head="classification", num_labels=1, tied_embeddings=False)
    finetune = replace(setup.finetune, method="full", recipe="sft", reference="none", dora=False)
    return replace(setup, arch=arch, counts=count_parameters(arch), finetune=finetune, quant="none",
                   workload=replace(setup.workload, recompute="none"), weight_bytes=0)


def _value_stage(setup: Setup, stage: parallel.Stage, reward: bool = False) -> parallel.Stage:
    return parallel.stages(value_setup(setup, reward).arch, setup.layout)[stage.index]


def _frozen_sharded(setup: Setup) -> bool:
    """prepare_deepspeed keeps ZeRO-3 for the reference and the reward model; FSDP leaves them whole (L391-396)."""
    lay = setup.layout
    return lay.zero == 3 and lay.shard_group > 1 and lay.fsdp == "none"


def _frozen(setup: Setup, key: str, label: str, weights: Q, source: str) -> Pool:
    if _frozen_sharded(setup):
        weights = weights / sym("g", setup.layout.shard_group)
    return make(key, f"{label} weights ({setup.policy.weight}, frozen)", weights, STATIC, source,
                "S = parameters on this GPU; g = GPUs one ZeRO-3 shard spans", group=key.rpartition("_")[0])


def model_pools(setup: Setup, stage: parallel.Stage) -> "list[Pool]":
    """The value model's weights, gradients and optimizer state (trained with the policy), the reward model's and
    the reference's weights."""
    vsetup, vstage = value_setup(setup), _value_stage(setup, stage)
    states = model_states(vsetup, vstage)
    out = []
    lay = setup.layout
    if setup.ddp_buckets and not lay.zero and lay.dp * lay.cp > 1:
        # accelerate wraps PolicyAndValueWrapper in DDP whole: its buckets copy the value model's gradients too
        out.append(make("value_ddp_buckets", "Value model DDP gradient buckets (a second copy of its gradients)",
                        sym("S", states.trainable) * num(states.grad_bytes), STATIC,
                        "torch DistributedDataParallel, gradient_as_bucket_view=False (its default): "
                        "Reducer::initialize_buckets allocates buckets as large as every gradient",
                        "S = the value model's parameters on this GPU", group="value_model"))
    for p in states.pools:
        moments = p.moments
        if p.key in ("gradients", "embedding_gradient"):
            # made by the value backbone's backward, after the policy's (the policy ran last in the forward)
            moments = tuple(m for m in p.moments if m != "backward, last layer")
            if setup.layout.microbatches > 1:
                moments += tuple(later(m) for m in UPDATE if m != "backward end")
        out.append(replace(p, key="value_" + p.key, label="Value model " + lower_first(p.label),
                           moments=moments, group="value_model"))
    rsetup, rstage = value_setup(setup, reward=True), _value_stage(setup, stage, reward=True)
    out.append(_frozen(setup, "reward_model_weights", "Reward model", stored_weights(rsetup, rstage),
                       SOURCE + "L267, L379-396: the reward model given, frozen (it is never in the optimizer); "
                       "prepare_deepspeed under DeepSpeed, else .to(device)"))
    if setup.finetune.reference == "copy":
        out.append(_frozen(setup, "reference_model_weights", "Reference model", stored_weights(setup, stage),
                           SOURCE + "L260-265: ref_model None and no PEFT: create_reference_model, a frozen deepcopy "
                           "of the policy (trl/models/modeling_base.py L601-629); L387, L395: prepare_deepspeed or "
                           ".to(device)"))
    return out


def _generating(setup: Setup, chunk: int) -> Setup:
    """generate() on one chunk: the unwrapped policy, in its weights' dtype (accelerate's autocast wraps only
    PolicyAndValueWrapper.forward)."""
    work = replace(setup.workload, mode="infer", batch=chunk, seq=setup.finetune.prompt,
                   new_tokens=setup.finetune.completion, engine="hf")
    policy = setup.policy
    policy = POLICIES["fp32"] if policy.weight == "fp32" else replace(policy, act=policy.weight, kv=policy.weight,
                                                                       autocast=False)
    return replace(setup, workload=work, policy=policy)


def _gathered(setup: Setup, stage: parallel.Stage) -> "list[Pool]":
    """Under DeepSpeed ZeRO-3 unwrap_model_for_generation gathers every parameter of PolicyAndValueWrapper (the
    policy's and the value model's) for the whole generate() (PPOConfig.ds3_gather_for_generation default True)."""
    lay = setup.layout
    if not (lay.zero == 3 and lay.shard_group > 1 and lay.fsdp == "none"):
        return []
    whole = stored_weights(setup, stage) + stored_weights(value_setup(setup), _value_stage(setup, stage))
    return [make("rollout_gathered_weights", "Rollout: the policy's and value model's weights gathered (ZeRO-3)",
                 whole * (num(1) - num(1) / sym("g", lay.shard_group)), (PREFILL, GENERATE),
                 "huggingface/trl 0.25.1 trl/models/utils.py unwrap_model_for_generation L339-348: "
                 "deepspeed.zero.GatheredParameters(model.parameters()) around generate(); trl/trainer/ppo_config.py "
                 "L128-134: ds3_gather_for_generation default True", "W = the two models' weights, unsharded; g = GPUs "
                 "one shard spans (this GPU's own shard is counted with the weights)", group="rollout")]


def rollout_pools(setup: Setup) -> "list[Pool]":
    """generate()'s cache and working set for the chunk at the rollout's peak, the fp32 scores every chunk keeps and
    their padded copy, and the previous update's padded scores, still held."""
    full, last = chunks(setup)
    total, n = rows(setup), -(-rows(setup) // full)
    # the peak chunk: the last, or the full one before it when the last is under half a chunk
    chunk, earlier = (full, (n - 2) * full) if n > 1 and 2 * last < full else (last, total - last)
    R, V = sym("R", setup.finetune.completion), sym("V", setup.arch.output_width)
    per_row = R * V * num(4)
    source = UTILS + "batch_generation L1188-1218 and generate L1149-1185: "
    out = [make("previous_rollout_logits", "Previous update's rollout scores (fp32, still held)",
                sym("B", total) * per_row, (PREFILL, GENERATE, PADDED),
                SOURCE + "L513: logitss is rebound only when batch_generation returns; no del names it", ROLLOUT_SYMBOLS,
                group="rollout"),
           make("rollout_scores", "Rollout: this chunk's fp32 scores and their stacked copy",
                sym("c", chunk) * per_row * num(2), (GENERATE,),
                source + "generate(output_scores=True) keeps each step's processed fp32 scores; torch.stack(output."
                "scores, 1) copies them while the output (and its KV cache) is held", ROLLOUT_SYMBOLS + "; c = rows "
                "in the chunk", group="rollout"),
           make("rollout_logits_chunks", "Rollout: every chunk's stacked scores, then padded into one tensor",
                sym("B", total) * per_row, (PADDED,), source + "pad() allocates the [chunks, c, R, V] output while "
                "the list of chunks is held", ROLLOUT_SYMBOLS, group="rollout"),
           make("rollout_logits", "Rollout scores (fp32, held through the update)", sym("B", total) * per_row,
                (PADDED,) + SCORING + STATIC + UPDATE, SOURCE + "L513, L521-527: the padded scores the log-probs are "
                "read from, never deleted", ROLLOUT_SYMBOLS, group="rollout")]
    if earlier:
        out.append(make("rollout_earlier_chunks", "Rollout: earlier chunks' stacked scores", sym("E", earlier) *
                        per_row, (PREFILL, GENERATE), source + "logitss.append per chunk", ROLLOUT_SYMBOLS +
                        "; E = rows of the chunks before", group="rollout"))
    served = serving(_generating(setup, chunk), gpu_catalog()[setup.gpu])["pools"]
    for p in served:
        if p.key != "weights" and vision_activations.served_in_rollout(p):
            out.append(replace(p, key="rollout_" + p.key, label="Rollout: " + lower_first(p.label),
                               moments=tuple(RENAMED[m] for m in p.moments),
                               source=source + f"{chunk:,} rows of the prompt and response_length new tokens; " +
                               p.source, group="rollout"))
    return out


def _hidden(setup: Setup, rows: int) -> Q:
    """Every hidden state a no_grad forward with output_hidden_states=True returns, in the weights' dtype."""
    arch = setup.arch
    return sym("c", rows) * sym("T", setup.workload.seq) * sym("L", arch.layers + 1) * sym("h", arch.hidden) * \
        num(setup.policy.bytes("weight"))


def _working(setup: Setup) -> int:
    """Bytes per token one decoder layer holds while it computes under no_grad, in the weights' dtype: the MLP's
    three widest tensors and the residual stream with the norm's output."""
    arch, e = setup.arch, setup.policy.bytes("weight")
    width = max(arch.ffn * arch.routed_per_token, arch.q_dim)
    return int(e * (3 * width + 2 * arch.hidden))


def scoring_pools(setup: Setup) -> "list[Pool]":
    """What each chunk's no_grad passes hold at their widest: the reference's logits over every token beside all its
    hidden states, its KV cache and one row's log-softmax; the value and the reward model's hidden states and one
    layer's working tensors (their score head's output is [rows, tokens, 1])."""
    arch, e = setup.arch, setup.policy.bytes("weight")
    full, _ = chunks(setup)
    c, T = sym("c", full), sym("T", setup.workload.seq)
    hidden = _hidden(setup, full)
    value, reward = value_setup(setup), value_setup(setup, reward=True)
    cache = c * sym("K", kv_cache_bytes(arch, setup.workload.seq, e, windowed=False))
    row = sym("R", setup.finetune.completion) * sym("V", arch.output_width) * num(4)
    reference = "the reference (the policy with its adapters disabled)" if setup.finetune.reference != "copy" else \
        "the reference"
    symbols = CHUNK_SYMBOLS + " (L + 1 hidden states); K = KV-cache bytes of one row; R = response_length; " \
        "V = vocabulary; w = working bytes per token of one layer"
    return [make("reference_forward", "Reference forward: logits, hidden states and KV cache of a chunk",
                 hidden + c * T * sym("V", arch.output_width) * num(e) + cache + row, (REFERENCE,),
                 SOURCE + f"L530-539: forward({reference}, query_response) under no_grad returns every hidden state "
                 "(output_hidden_states=True), the logits over every token and, with the checkpoint's use_cache, the "
                 "KV cache; " + UTILS + "selective_log_softmax L1506-1538 takes one row at a time", symbols,
                 group="reference_model"),
            make("value_forward", "Value model pass: hidden states of a chunk, one layer's working tensors",
                 _hidden(value, full) + c * T * sym("w", _working(value)), (VALUE,),
                 SOURCE + "L551-555: get_reward(value_model, ...) under no_grad; " + UTILS + "get_reward L986-1033: "
                 "the backbone with output_hidden_states=True, use_cache=False, then the score head", symbols,
                 group="value_model"),
            make("reward_forward", "Reward model pass: hidden states of a chunk, one layer's working tensors",
                 _hidden(reward, full) + c * T * sym("w", _working(reward)), (REWARD,),
                 SOURCE + "L556-558: get_reward(reward_model, ...) under no_grad, as the value model's", symbols,
                 group="reward_model")]


def _logit_bytes(setup: Setup) -> int:
    """The update's logits: fp32 under autocast (accelerate's convert_outputs_to_fp32), else the compute dtype."""
    return 4 if setup.policy.autocast else int(setup.policy.bytes("act"))


def head_pools(setup: Setup, tokens: int) -> "list[Pool]":
    """The update's output side, in place of plain fine-tuning's loss pools: the full logits and every hidden state
    the output keeps until its mini-batch ends, the log-softmax rows saved for backward, the logits' gradient and
    the entropy statistics."""
    arch, work = setup.arch, setup.workload
    b, T = sym("b", work.batch), sym("T", work.seq)
    R, V, el = sym("R", setup.finetune.completion), sym("V", arch.output_width), _logit_bytes(setup)
    full, response = b * T * V, b * R * V
    symbols = "b = rows per micro-batch; T = prompt + response tokens; R = response_length; V = vocabulary; " \
        "L = layers; h = hidden size"
    held = UPDATE + ("optimizer step",)
    pools = [make("update_logits", f"Policy logits over every token ({'fp32' if el == 4 else setup.policy.act})",
                  full * num(el), held, SOURCE + "L643-646: forward(model, ...) returns the policy's logits (in fp32 "
                  "under autocast: accelerate's convert_outputs_to_fp32); the output is deleted at the end of the "
                  "mini-batch (L696-703)", symbols, group="logits_and_loss"),
             make("update_logits_gradient", "Gradient of the logits (the response's rows, then every token)",
                  (full + response) * num(2 * el), ("backward start",), SOURCE + "L646-671: selective_log_softmax's "
                  "per-row gradients gathered into the response's [b, R, V], then the slice and the in-place "
                  "division's [b, T, V], two of each at once (the saved rows are freed by then)", symbols,
                  group="logits_and_loss"),
             make("entropy_statistics", "Entropy statistics: softmax of the response's logits and a product",
                  response * num(2 * el), (STATISTICS,), SOURCE + "L674-679: under no_grad, prob_dist = softmax(logits) "
                  "and prob_dist * logits, after the optimizer step", symbols, group="logits_and_loss")]
    eh = 4 if setup.policy.autocast else setup.policy.bytes("act")
    pools.append(make("update_hidden_states", "Policy hidden states the output keeps after backward",
                      b * T * sym("L", arch.layers + 1) * sym("h", arch.hidden) * num(eh),
                      ("backward, last layer", "backward end", "optimizer step", STATISTICS),
                      SOURCE + "L643: forward() asks for output_hidden_states=True; the output holds them until the "
                      "mini-batch's del", symbols, group="logits_and_loss"))
    if el != 4:
        pools.append(make("saved_log_softmax", "Log-softmax rows saved for backward", response * num(el),
                          (LOSS,), UTILS + "selective_log_softmax L1530-1536: below fp32, log_softmax one row "
                          "at a time, each row's result saved (and freed by its backward, before the logits' "
                          "gradient is whole)", symbols, group="logits_and_loss"))
    if work.recompute != "full":
        pools.append(make("update_kv_cache", "Policy KV cache the output returns (use_cache)",
                          b * sym("K", kv_cache_bytes(arch, work.seq, setup.policy.bytes("act"), windowed=False)), held,
                          "transformers: forward() passes no use_cache, so the checkpoint's use_cache=True builds a "
                          "DynamicCache of every layer's keys and values (off under gradient checkpointing)",
                          symbols + "; K = KV-cache bytes of one row", group="logits_and_loss"))
    if setup.policy.autocast:
        pools.append(make("update_logits_cast", "Policy logits in bf16 before their fp32 copy", full * num(2),
                          ("forward end",), "accelerate convert_outputs_to_fp32: .float() of the autocast output",
                          symbols, group="logits_and_loss"))
    return pools


def value_activation_pools(setup: Setup, stage: parallel.Stage, tokens: int) -> "list[Pool]":
    """The value backbone's saved activations (no checkpointing) and, under autocast, its 16-bit weight copies: it
    runs first in PolicyAndValueWrapper.forward, so its backward comes after the policy's and all of it is held
    through the policy's."""
    vsetup = value_setup(setup)
    per_layer, _, final, _ = act.per_token(vsetup)
    T = sym("T", tokens)
    moments = ("forward end", LOSS, "backward start", "backward, first layer", "backward, last layer")
    pools = [make("value_activations", "Value model activations (saved for backward)",
                  sym("a", per_layer) * sym("L", vsetup.arch.layers) * T + sym("f", final) * T, moments,
                  SOURCE + "L125-128: critic_backbone(**kwargs), then value_model.score, before the policy; the "
                  "activations pycore.memory.activations counts for the backbone", "a = bytes saved per token per layer; "
                  "L = layers; T = tokens per micro-batch; f = final norm bytes per token", group="value_model")]
    if setup.policy.autocast and setup.quant == "none":
        pools.append(make("value_autocast_copies", "Value model autocast 16-bit weight copies",
                          sym("Pm", _value_stage(setup, stage).matrix_params) * num(2), moments,
                          "torch.autocast casts each weight once per forward and autograd keeps the copy",
                          "Pm = the value model's parameters in matrices", group="value_model"))
    return pools


def carried_pools(setup: Setup) -> "list[Pool]":
    """A later micro-batch of the same mini-batch runs beside the previous one's outputs: train() rebinds ``output``
    after the next forward returns and ``prob_dist`` at the next statistics (L643, L678; the del is per mini-batch)."""
    per_minibatch = setup.layout.microbatches // max(setup.finetune.mini_batches, 1)
    if per_minibatch < 2:
        return []
    arch, work, el = setup.arch, setup.workload, _logit_bytes(setup)
    b, T = sym("b", work.batch), sym("T", work.seq)
    V, eh = sym("V", arch.output_width), 4 if setup.policy.autocast else setup.policy.bytes("act")
    outputs = b * T * V * num(el) + b * T * sym("L", arch.layers + 1) * sym("h", arch.hidden) * num(eh)
    if work.recompute != "full":
        outputs = outputs + b * sym("K", kv_cache_bytes(arch, work.seq, setup.policy.bytes("act"), windowed=False))
    symbols = "b = rows per micro-batch; T = prompt + response tokens; R = response_length; V = vocabulary; L = " \
        "layers; h = hidden size; K = KV-cache bytes of one row"
    # measured (validation/measured_ppo.json, the qwen amp-bf16 ga2 case): under autocast they are still held while
    # the next micro-batch's losses are computed; which reference keeps the fp32 copy alive is not traced
    held = (later("forward end"),) + ((later(LOSS),) if setup.policy.autocast else ())
    return [make("previous_outputs", "Previous micro-batch's logits, hidden states and KV cache", outputs, held,
                 SOURCE + "L643: output is rebound when the next forward returns" +
                 ("; under autocast measured held through the next losses" if setup.policy.autocast else ""), symbols,
                 group="logits_and_loss"),
            make("previous_softmax", "Previous micro-batch's prob_dist", b * sym("R", setup.finetune.completion) * V *
                 num(el), tuple(later(m) for m in UPDATE[:-1]) + ("optimizer step",), SOURCE + "L678: prob_dist is "
                 "rebound at the next micro-batch's statistics, after its optimizer step", symbols,
                 group="logits_and_loss")]


def _with_moments(pools: "list[Pool]", moments: "tuple[str, ...]") -> "list[Pool]":
    """Every pool live through the whole step (weights, optimizer state) is live in ``moments`` too."""
    return [replace(p, moments=p.moments + tuple(m for m in moments if m not in p.moments))
            if all(m in p.moments for m in STATIC) else p for p in pools]


def with_ppo(setup: Setup, stage: parallel.Stage, pools: "list[Pool]", tokens: int,
             moments: "tuple[tuple[str, ...], tuple[str, ...]]") -> "tuple[list[Pool], tuple[str, ...], tuple[str, ...]]":
    """Under method=ppo, a PPO update's pools grouped by model (policy, value model, reward model, reference model),
    the moments before the PPO epochs (rollout, then each chunk's scoring passes) and the entropy statistics after
    each micro-batch; any other recipe's ``pools`` and ``moments`` (before the micro-batches, per micro-batch) as
    given."""
    before, per_microbatch = moments
    if setup.finetune.recipe != "ppo":
        return pools, before, per_microbatch
    # the update's full logits, their gradient and statistics replace plain fine-tuning's loss buffers
    pools = [replace(p, label="Policy " + lower_first(p.label)) for p in pools
             if p.group != "logits_and_loss"]
    pools += model_pools(setup, stage) + value_activation_pools(setup, stage, tokens)
    pools = _with_moments(pools, BEFORE + (STATISTICS,))
    # what is held from the forward's end into backward is held while the losses are computed
    pools = [replace(p, moments=p.moments + (LOSS,)) if "forward end" in p.moments and "backward start" in p.moments
             and LOSS not in p.moments else p for p in pools]
    pools += (head_pools(setup, tokens) if stage.has_head else []) + rollout_pools(setup) + _gathered(setup, stage) + \
        scoring_pools(setup) + carried_pools(setup)
    at = per_microbatch.index("forward end") + 1
    return pools, BEFORE, per_microbatch[:at] + (LOSS,) + per_microbatch[at:] + (STATISTICS,)


def _named(arch: "Architecture | None") -> str:
    return f"{arch.name}'s backbone" if arch else "the policy's architecture"


def notes(setup: Setup) -> "list[str]":
    """What a PPO estimate assumes, and the batch TRL would refuse."""
    if setup.finetune.recipe != "ppo":
        return []
    ft, lay = setup.finetune, setup.layout
    out = [f"PPO: batch counts responses (TRL's per_device_train_batch_size); the rollout generates {rows(setup):,} of "
           f"them (batch × micro-batches), {min(ft.rollout_chunk, rows(setup)):,} at a time "
           f"(local_rollout_forward_batch_size), each of seq {ft.prompt:,} + response_length {ft.completion:,} tokens "
           f"(no stop token: every response to the limit); the reward model is {_named(ft.reward_arch)} and the value "
           f"model {_named(ft.value_arch)}, each with a one-output score head"]
    if setup.workload.recompute == "full":
        out.append("PPO with gradient checkpointing: TRL 0.25.1 fails at the rollout with a checkpointed policy "
                   "(PolicyAndValueWrapper has no gradient_checkpointing_disable, huggingface/trl#4954); estimated as "
                   "the fix (#5245) runs it: the policy checkpointed, the value model not")
    if rows(setup) % max(ft.mini_batches, 1):
        out.append(f"TRL 0.25.1 refuses this PPO setup: local_batch_size = batch × micro-batches = {rows(setup):,} must "
                   f"be a multiple of num_mini_batches = {ft.mini_batches:,} (PPOTrainer.__init__ L290-292); the memory "
                   "per GPU is estimated all the same")
    if lay.microbatches % max(ft.mini_batches, 1):
        out.append("num_mini_batches does not divide the micro-batches: accelerate's accumulation steps across "
                   "mini-batches, which the estimate does not follow")
    return out

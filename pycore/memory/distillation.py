"""On-policy distillation (Agarwal et al. 2024, "On-Policy Distillation of Language Models") as huggingface/trl 1.16.0
runs it (trl/trainer/distillation_trainer.py, DistillationTrainer; trl/kernels/chunked_divergence.py):

- The batch is DistillationConfig's ``per_device_train_batch_size`` prompts, one completion each (n=1,
  ``RepeatSampler(mini_repeat_count=1)``, L868-888). The step is fully on-policy: TRL 1.16 has no lmbda, every
  completion is the student's own.
- Rollout (``_generate_single_turn``, L1069-1085): ``unwrapped_model.generate()`` under ``torch.no_grad()`` with
  checkpointing off (``unwrap_model_for_generation``), once every gradient_accumulation_steps micro-batches for all of
  their rows (``_prepare_inputs``, L1773-1783), each of the prompt and ``max_completion_length`` new tokens: GRPO's
  rollout (pycore.memory.rollout), or a vLLM engine under ``use_vllm`` (the same VLLMGeneration, L780-822; no
  old-policy pass). The teacher stays resident through it.
- The update (``_compute_loss``, L1818-1922), per micro-batch: the student's backbone over prompt + completion
  (``_get_last_hidden_state``: the last hidden states, no logits), then the teacher's backbone under ``torch.no_grad()``
  (nothing saved: one layer's tensors at a time), then ``_chunked_divergence_loss`` (L101-213): on a Triton device only
  the completion's positions are gathered (``h_s[valid]``, ``h_t[valid]``), and ``ChunkedDivergenceFunction`` projects
  both heads on two fp32 tiles [min(N, 4,096), 32,768] (``s_buf``, ``t_buf``), folding them into per-token fp32
  statistics: neither model's logits exist whole, and no top-k is kept (the teacher's whole distribution, chunk by
  chunk). It saves both gathered hidden states and three fp32 values per token; its backward allocates the two tiles
  again, the fp32 gradient of the student's hidden states and, for a trained head, of its weight, each cast to its
  tensor's dtype. The student's and the teacher's last hidden states [tokens, hidden] stay referenced until
  ``_compute_loss`` returns.
- Precision: ``compute_loss`` reaches ``_compute_loss`` through ``_forward_redirection`` (L1803), which calls it in
  place of the forward accelerate wraps in autocast: under TRL's default amp-bf16 (an fp32 student, bf16=True) the
  update computes in fp32, and only ``generate()`` (the wrapped forward) autocasts (pycore.memory.setup._with_teacher).
  The teacher is loaded in its checkpoint's dtype (teacher_model_init_kwargs None: ``dtype=None``, which
  transformers 5 reads as "auto") and computes in it; ``prepare_deepspeed`` keeps it whole unless ZeRO-3, and
  accelerate's ``prepare_model`` shards it under FSDP as the student.
"""

from dataclasses import replace

from pycore.base.expr import Q, num, rnd, sym
from pycore.memory import parallel
from pycore.memory.activations import eager_working, holds_scores, pass_kernel
from pycore.memory.model_states import STATIC
from pycore.memory.pools import Pool, make
from pycore.memory.precision import BITS
from pycore.memory.rollout import lower_first, with_rollout
from pycore.memory.setup import Setup
from pycore.model.architecture import Architecture, count_parameters, layer_params

TEACHER = "teacher forward"
DIVERGENCE = "divergence"
TOKEN_TILE = 4096           # trl/kernels/chunked_divergence.py@v1.16.0 L33 TOKEN_CHUNK_SIZE
VOCAB_TILE = 32768          # L34 VOCAB_CHUNK_SIZE
SOURCE = "huggingface/trl 1.16.0 trl/trainer/distillation_trainer.py "
KERNEL = "huggingface/trl 1.16.0 trl/kernels/chunked_divergence.py ChunkedDivergenceFunction"
SYMBOLS = "N = scored tokens (the completions' tokens, batch × max_completion_length); n = tokens per tile, " \
          "min(N, 4,096); c = vocabulary columns per tile (32,768, the buffer allocated whole); h = the student's " \
          "hidden size; ht = the teacher's; e = bytes of the student's compute dtype; et = the teacher's dtype"


def teacher(setup: Setup) -> Architecture:
    """The teacher's architecture (the student's when none was named)."""
    return setup.finetune.teacher or setup.arch


def teacher_bytes(setup: Setup) -> float:
    """Bytes per element of the teacher's weights and activations: its load dtype."""
    return BITS[setup.finetune.teacher_dtype or setup.arch.dtype or "bf16"] / 8


def scored(setup: Setup) -> int:
    """N: the positions the divergence projects, the completion's (``logits_to_keep``; ``h_s[valid]``)."""
    return max(setup.workload.batch * setup.finetune.completion, 1)


def _tile_rows(setup: Setup) -> Q:
    return sym("n", min(scored(setup), TOKEN_TILE))


def _largest_layer(arch: Architecture) -> int:
    return max((layer_params(arch, i) for i in range(arch.layers)), default=0)


def teacher_pools(setup: Setup, tokens: int) -> "list[Pool]":
    """The teacher's weights, live through the whole step, and its forward under no_grad in ``TEACHER``: one layer's
    working tensors at a time (its residual stream, the norm's fp32 copy, the MLP's widest tensors)."""
    arch, lay, et = teacher(setup), setup.layout, teacher_bytes(setup)
    sharded3 = lay.zero == 3 and lay.shard_group > 1
    weights = sym("Pt", count_parameters(arch).total) * num(et)
    if sharded3:
        weights = rnd(weights / sym("g", lay.shard_group))
    name = arch.name if setup.finetune.teacher else "the student's architecture"
    pools = [make("teacher_weights", f"Teacher weights ({name}, {setup.finetune.teacher_dtype or 'bf16'})", weights,
                  STATIC,
                  SOURCE + "__init__ L607-624, L690-706: teacher_model loaded by create_model_from_path with "
                  "teacher_model_init_kwargs (dtype None: the checkpoint's), frozen in eval mode; prepare_deepspeed "
                  "keeps it whole unless ZeRO-3, accelerate's prepare_model shards it under FSDP",
                  "Pt = the teacher's parameters; et = bytes of its dtype; g = GPUs one shard spans",
                  group="teacher_model")]
    width = max(arch.ffn * arch.routed_per_token, arch.q_dim)
    per_token = 3 * et * width + (2 * et + 4) * arch.hidden
    kernel = pass_kernel(arch, setup.workload.attention, setup.workload.math_sm, et, False)      # the teacher's dtype
    if holds_scores(arch, kernel, setup.workload.seq):
        per_token += eager_working(arch, et) * arch.heads * setup.workload.seq
    working = sym("wt", per_token) * sym("T", tokens)
    if sharded3:
        working = working + sym("Plt", _largest_layer(arch)) * num(et)
    pools.append(make("teacher_forward", "Teacher forward under no_grad (one layer)", rnd(working), (TEACHER,),
                      SOURCE + "_compute_loss L1848-1860: the teacher's backbone under torch.no_grad() over the "
                      "micro-batch's prompt + completion, after the student's forward, so only the layer it computes "
                      "holds tensors (its residual stream, the norm's fp32 copy, the MLP's widest tensors)",
                      "wt = the teacher's working bytes per token of one layer; T = tokens per micro-batch; Plt = "
                      "parameters of its largest layer (gathered under ZeRO-3/FSDP)", group="teacher_model"))
    return pools


def divergence_pools(setup: Setup, tokens: int) -> "list[Pool]":
    """_chunked_divergence_loss in place of the logits and cross-entropy of plain fine-tuning: the hidden states it
    holds, its two fp32 tiles and per-token statistics, and its backward's buffers."""
    arch, policy, ht, et = setup.arch, setup.policy, teacher(setup).hidden, teacher_bytes(setup)
    N, h, e = sym("N", scored(setup)), sym("h", arch.hidden), setup.policy.bytes("act")
    tiles = num(2) * _tile_rows(setup) * sym("c", VOCAB_TILE) * num(4)
    pools = [make("teacher_hidden_states", "Teacher's last hidden states", sym("T", tokens) * sym("ht", ht) * num(et),
                  (DIVERGENCE,), SOURCE + "_compute_loss L1851-1874: teacher_hidden_states, the teacher backbone's "
                  "last_hidden_state sliced to the completion (a view of the whole), held until _compute_loss returns",
                  "T = tokens per micro-batch; ht = the teacher's hidden size; et = bytes of its dtype",
                  group="teacher_model"),
             make("divergence_saved", "Divergence: gathered hidden states and per-token statistics (saved)",
                  N * (h * num(e) + sym("ht", ht) * num(et) + num(3 * 4)), (DIVERGENCE, "backward start"),
                  KERNEL + ".forward: ctx.save_for_backward of both models' gathered hidden states (h_s[valid], "
                  "h_t[valid], trl/trainer/distillation_trainer.py L183-185) and fp32 s_log_z, t_log_z and the "
                  "per-token divergence", SYMBOLS, group="logits_and_loss"),
             make("divergence_forward", "Divergence forward: two fp32 tiles and per-token statistics",
                  tiles + N * num(11 * 4), (DIVERGENCE,),
                  KERNEL + ".forward L411-420: s_buf and t_buf, fp32 [min(N, 4,096), 32,768] each, allocated whole; "
                  "nine fp32 running statistics per token, then the log-normalizers, entropy and divergence; both "
                  "heads projected into them tile by tile (torch.mm out_dtype=float32 on CUDA, folded by Triton)",
                  SYMBOLS, group="logits_and_loss")]
    backward = tiles + N * h * num(4 + (e if e != 4 else 0))
    what = "s_buf and t_buf again, the fp32 gradient of the student's hidden states, cast to their dtype"
    if e != 4:
        backward = backward + _tile_rows(setup) * sym("c", VOCAB_TILE) * num(e)
        what += "; each gradient tile cast to the compute dtype (s_tile.to(s_dtype))"
    if not setup.finetune.adapters:
        weight = policy.bytes("weight")
        backward = backward + sym("V", arch.output_width) * h * num(4 + (weight if weight != 4 else 0))
        what += "; the head weight's gradient accumulated in fp32, then cast"
    pools.append(make("divergence_backward", "Divergence backward", rnd(backward), ("backward start",),
                      KERNEL + ".backward L530-589: " + what, SYMBOLS + "; V = vocabulary", group="logits_and_loss"))
    lay = setup.layout
    if lay.zero == 3 and lay.shard_group > 1:
        heads = sym("V", arch.output_width) * (h * num(policy.bytes("weight")) + sym("ht", ht) * num(et))
        pools.append(make("divergence_gathered_heads", "Divergence: both heads' weights gathered (ZeRO-3/FSDP)",
                          rnd(heads), (DIVERGENCE, "backward start"),
                          KERNEL + " forward and backward: maybe_gather_lm_head_ctx gathers each sharded head under "
                          "DeepSpeed ZeRO-3 (trl/trainer/utils.py); under FSDP2 _chunked_divergence_loss takes "
                          "full_tensor() of each (distillation_trainer.py L160-173)",
                          "V = vocabulary; h, ht = the student's and the teacher's hidden sizes; bytes of each model's "
                          "weights", group="logits_and_loss"))
    return pools


def _checkpointed_forward(setup: Setup, tokens: int) -> "list[Pool]":
    """Under full recompute each checkpointed layer's forward runs without saving, so while it computes it holds its
    working tensors beside the layer inputs kept (the MLP's widest: validation/measured_distill.json, the gc cases'
    forward phase); without checkpointing those tensors are among the activations saved."""
    if setup.workload.recompute != "full":
        return []
    arch, e = setup.arch, setup.policy.bytes("act")
    width = max(arch.ffn * arch.routed_per_token, arch.q_dim) // setup.layout.tp
    return [make("checkpointed_forward", "Student forward working tensors (one checkpointed layer)",
                 sym("w", 3 * e * width) * sym("T", tokens), ("forward end",),
                 "torch.utils.checkpoint (use_reentrant=False): a checkpointed layer's forward keeps only its input; "
                 "its MLP's gate, up and activated tensors exist while it computes",
                 "w = 3 × the MLP's width × bytes of the compute dtype; T = tokens per micro-batch")]


def _with_moments(pools: "list[Pool]", per_microbatch: "tuple[str, ...]") -> \
        "tuple[list[Pool], tuple[str, ...]]":
    """The teacher's forward and the divergence as moments between the student's forward and its backward: every
    pool live at both (weights, optimizer state, saved activations, the student's last hidden states) is live in
    them too."""
    added = (TEACHER, DIVERGENCE)
    out = [replace(p, moments=p.moments + tuple(m for m in added if m not in p.moments))
           if "forward end" in p.moments and "backward start" in p.moments else p for p in pools]
    at = per_microbatch.index("forward end") + 1
    return out, per_microbatch[:at] + added + per_microbatch[at:]


def distill_step(setup: Setup, stage: parallel.Stage, pools: "list[Pool]", tokens: int,
                 per_microbatch: "tuple[str, ...]") -> "tuple[list[Pool], tuple[str, ...], tuple[str, ...]]":
    """A distillation step's pools named by model (the student's, the teacher's), its moments before the update
    (the rollout, pycore.memory.rollout, run in the policy generate() runs in) and each micro-batch's."""
    pools = [replace(p, label="Student " + lower_first(p.label)) for p in pools]
    pools = pools + teacher_pools(setup, tokens)
    pools, per_microbatch = _with_moments(pools, per_microbatch)
    pools += divergence_pools(setup, tokens) + _checkpointed_forward(setup, tokens)
    generating = replace(setup, policy=setup.finetune.generate_policy) if setup.finetune.generate_policy else setup
    pools, before = with_rollout(generating, stage, pools)
    return pools, before, per_microbatch


def notes(setup: Setup) -> "list[str]":
    """What a distillation estimate assumes."""
    ft = setup.finetune
    if ft.recipe != "distill":
        return []
    arch = teacher(setup)
    out = [f"Distillation: batch counts prompts, one completion each (TRL's per_device_train_batch_size); the rollout "
           f"generates {setup.workload.batch * setup.layout.microbatches:,} of them at once, each of seq {ft.prompt:,} "
           f"+ max_completion_length {ft.completion:,} tokens, every completion taken to the limit; the teacher is "
           + (arch.name if ft.teacher else "the student's own architecture (teacher=auto)")
           + f", in {ft.teacher_dtype}, {count_parameters(arch).total:,} parameters"]
    if ft.generate_policy is not None:
        out.append("Distillation under autocast: TRL's compute_loss runs through _forward_redirection, which bypasses "
                   "accelerate's autocast wrapper, so the student's update computes in its fp32 weights' dtype; only "
                   "the rollout's generate() autocasts")
    return out

